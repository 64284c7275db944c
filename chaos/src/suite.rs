//! A suite: several runs of each fault, summed up per fault into
//! `report.json` and `report.md`, with the command that repeats every run
//! that was not safe.

use serde::{Deserialize, Serialize};

use crate::fault::Fault;
use crate::runner::RunReport;

/// One run's result: its report, or why it could not run.
pub type RunResult = Result<RunReport, String>;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultSummary {
    pub fault: String,
    pub runs: usize,
    /// Runs that ended without a report (the cluster did not start, …).
    pub errors: usize,
    pub operations: usize,
    pub acked: usize,
    pub lost: usize,
    pub duplicated: usize,
    pub inconsistent: usize,
    pub divergent: usize,
    /// Acknowledged commits above the committed offset fetched at the end.
    pub commits_lost: usize,
    /// The fewest ok produces any producer had while the fault held.
    pub ok_during_fault_min: Option<usize>,
    /// The longest time from healing to every producer served again.
    pub recovery_ms_max: Option<u64>,
    /// The commands that repeat the runs that were not safe, and the errors.
    pub failures: Vec<String>,
}

/// Sums the runs of each fault, in the order the faults first appear.
pub fn summarize(results: &[(Fault, RunResult)]) -> Vec<FaultSummary> {
    let mut out: Vec<FaultSummary> = Vec::new();
    for (fault, result) in results {
        let name = fault.name().to_string();
        if !out.iter().any(|s| s.fault == name) {
            out.push(FaultSummary {
                fault: name.clone(),
                ..FaultSummary::default()
            });
        }
        let Some(s) = out.iter_mut().find(|s| s.fault == name) else {
            continue;
        };
        s.runs += 1;
        match result {
            Err(e) => {
                s.errors += 1;
                s.failures.push(format!("error: {e}"));
            }
            Ok(r) => add(s, r),
        }
    }
    out
}

fn add(s: &mut FaultSummary, r: &RunReport) {
    s.operations += r.operations;
    s.acked += r.acked;
    s.lost += r.anomalies.lost.len();
    s.duplicated += r.anomalies.duplicated.len();
    s.inconsistent += r.anomalies.inconsistent.len() + r.anomalies.failed_but_present.len();
    s.divergent += r.divergent.len() + r.unreadable.len() + usize::from(r.unreadable_commits);
    s.commits_lost += r.anomalies.commits_lost.len();
    if let Some(min) = r.ok_during_fault.values().min() {
        s.ok_during_fault_min = Some(s.ok_during_fault_min.map_or(*min, |m| m.min(*min)));
    }
    if let Some(ms) = r.recovery_ms {
        s.recovery_ms_max = Some(s.recovery_ms_max.map_or(ms, |m| m.max(ms)));
    }
    if !r.safe() {
        s.failures.push(r.command.clone());
    }
}

/// The summaries as a Markdown table, then the failures.
pub fn markdown(title: &str, summaries: &[FaultSummary]) -> String {
    let mut md = format!("# {title}\n\n");
    md.push_str("| fault | runs | errors | operations | acked | lost | duplicated | inconsistent | divergent | commits lost | fewest ok during the fault | longest recovery |\n");
    md.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    for s in summaries {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            s.fault,
            s.runs,
            s.errors,
            s.operations,
            s.acked,
            s.lost,
            s.duplicated,
            s.inconsistent,
            s.divergent,
            s.commits_lost,
            opt(s.ok_during_fault_min.map(|v| v.to_string())),
            opt(s.recovery_ms_max.map(|v| format!("{v} ms"))),
        ));
    }
    let failures: Vec<&String> = summaries.iter().flat_map(|s| &s.failures).collect();
    if failures.is_empty() {
        md.push_str("\nEvery run was safe.\n");
    } else {
        md.push_str("\n## Runs that were not safe, and errors\n\n");
        for f in failures {
            md.push_str(&format!("- `{f}`\n"));
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_and_failures_are_counted_per_fault() {
        let results = vec![
            (Fault::KillLeader, Err("no cluster".to_string())),
            (Fault::None, Err("x".to_string())),
            (Fault::KillLeader, Err("again".to_string())),
        ];
        let s = summarize(&results);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].fault.as_str(), s[0].runs, s[0].errors), ("kill-leader", 2, 2));
        let md = markdown("t", &s);
        assert!(md.contains("| kill-leader | 2 | 2 |"), "{md}");
        assert!(md.contains("- `error: no cluster`"), "{md}");
    }
}
