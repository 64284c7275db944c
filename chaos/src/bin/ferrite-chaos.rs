//! `ferrite-chaos`: runs the fault suite. See the crate's docs and
//! `docs/reliability.md`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ferrite_chaos::fault::Fault;
use ferrite_chaos::runner::{self, RunConfig, RunReport};
use ferrite_chaos::suite::{self, RunResult};

#[derive(Parser)]
#[command(
    name = "ferrite-chaos",
    about = "Ferrite's fault suite: a cluster in a private network namespace, faults, a checked history (needs root)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// One run of one fault; prints its report as JSON and exits 1 if a
    /// record was lost, doubled or misplaced or the replicas differ.
    Run(RunArgs),
    /// Runs every fault (or those named) several times, each run a process
    /// of its own, and writes `report.json` and `report.md` into `--out`;
    /// exits 1 if any run was not safe.
    Suite(SuiteArgs),
}

#[derive(clap::Args)]
struct SuiteArgs {
    /// Runs of each fault; run `i` has seed `--seed + i`.
    #[arg(long, default_value_t = 10)]
    runs: u64,
    /// How long each fault holds, in seconds.
    #[arg(long, default_value_t = 300)]
    seconds: u64,
    #[arg(long, default_value_t = 30)]
    recovery_seconds: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The faults to run (repeatable; default: every one).
    #[arg(long = "fault")]
    faults: Vec<Fault>,
    /// Arguments passed on to every run (`--acks 1`, `--unclean`, …).
    #[arg(last = true)]
    run_args: Vec<String>,
    /// Where the reports go.
    #[arg(long)]
    out: PathBuf,
}

#[derive(clap::Args)]
struct RunArgs {
    /// The fault: none, kill-leader, kill-follower, kill-controller,
    /// pause-leader, isolate-leader-from-followers,
    /// isolate-leader-from-zookeeper, isolate-leader, isolate-follower,
    /// kill-zk-member, lose-isr, lose-zk-quorum, restart-zookeeper,
    /// split-leader-minority, bridge, flap-leader, lossy-leader,
    /// fill-leader-disk, fill-follower-disk, rot-leader, rot-follower,
    /// skew-clocks
    /// (docs/reliability.md says what each does).
    #[arg(long)]
    fault: Fault,
    /// How long the fault holds before it heals, in seconds.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// How long the clients go on after healing, in seconds.
    #[arg(long, default_value_t = 15)]
    recovery_seconds: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The producers' acks (-1: all, 1: the leader's).
    #[arg(long, default_value_t = -1, allow_hyphen_values = true)]
    acks: i16,
    /// The brokers' min.insync.replicas.
    #[arg(long = "min-insync", default_value_t = 2)]
    min_insync: i32,
    /// Sets unclean.leader.election.enable=true.
    #[arg(long)]
    unclean: bool,
    #[arg(long, default_value_t = 3)]
    brokers: usize,
    #[arg(long, default_value_t = 3)]
    partitions: i32,
    #[arg(long, default_value_t = 3)]
    producers: u32,
    /// The `ferrite` binary (default: the one beside this one).
    #[arg(long)]
    ferrite: Option<PathBuf>,
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run(a) => run(a),
        Command::Suite(a) => run_suite(a),
    }
}

fn run(a: RunArgs) -> ExitCode {
    let ferrite = a.ferrite.unwrap_or_else(|| {
        let me = std::env::current_exe().unwrap_or_default();
        me.with_file_name("ferrite")
    });
    let cfg = RunConfig {
        fault: a.fault,
        fault_seconds: a.seconds,
        recovery_seconds: a.recovery_seconds,
        seed: a.seed,
        acks: a.acks,
        min_insync_replicas: a.min_insync,
        unclean_leader_election: a.unclean,
        brokers: a.brokers,
        partitions: a.partitions,
        producers: a.producers,
        ferrite,
    };
    match runner::run(&cfg) {
        Ok(report) => {
            println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
            if report.safe() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("ferrite-chaos: {e}");
            ExitCode::from(2)
        }
    }
}

/// One run as a child process of ours (a network namespace of its own).
fn run_child(fault: Fault, seed: u64, a: &SuiteArgs) -> RunResult {
    let me = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
    let out = std::process::Command::new(me)
        .args(["run", "--fault", fault.name()])
        .args(["--seconds", &a.seconds.to_string()])
        .args(["--recovery-seconds", &a.recovery_seconds.to_string()])
        .args(["--seed", &seed.to_string()])
        .args(&a.run_args)
        .output()
        .map_err(|e| format!("spawn a run: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str::<RunReport>(&stdout).map_err(|_| {
        let stderr = String::from_utf8_lossy(&out.stderr);
        format!("{fault} seed {seed}: {}", stderr.trim())
    })
}

fn run_suite(a: SuiteArgs) -> ExitCode {
    let faults = if a.faults.is_empty() {
        Fault::ALL.to_vec()
    } else {
        a.faults.clone()
    };
    let mut results: Vec<(Fault, RunResult)> = Vec::new();
    for &fault in &faults {
        for i in 0..a.runs {
            let result = run_child(fault, a.seed + i, &a);
            let verdict = match &result {
                Ok(r) if r.safe() => "safe".to_string(),
                Ok(r) => format!("NOT SAFE: {}", r.command),
                Err(e) => format!("error: {e}"),
            };
            eprintln!("ferrite-chaos: {fault} run {} of {}: {verdict}", i + 1, a.runs);
            results.push((fault, result));
        }
    }
    let summaries = suite::summarize(&results);
    let title = format!(
        "ferrite-chaos suite: {} runs of each fault, {} s each, seeds from {}{}",
        a.runs,
        a.seconds,
        a.seed,
        if a.run_args.is_empty() {
            String::new()
        } else {
            format!(", run with {}", a.run_args.join(" "))
        }
    );
    let reports: Vec<_> = results.iter().map(|(f, r)| (f.name(), r.as_ref().ok())).collect();
    let json = serde_json::json!({ "title": title, "summaries": summaries, "runs": reports });
    let write = std::fs::create_dir_all(&a.out)
        .and_then(|_| std::fs::write(a.out.join("report.md"), suite::markdown(&title, &summaries)))
        .and_then(|_| {
            std::fs::write(
                a.out.join("report.json"),
                serde_json::to_string_pretty(&json).unwrap_or_default(),
            )
        });
    if let Err(e) = write {
        eprintln!("ferrite-chaos: writing the reports into {}: {e}", a.out.display());
        return ExitCode::from(2);
    }
    let safe = summaries.iter().all(|s| s.failures.is_empty());
    if safe {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_run_help_names_every_fault() {
        let mut cli = Cli::command();
        let help = cli
            .find_subcommand_mut("run")
            .expect("the run subcommand")
            .render_long_help()
            .to_string();
        for f in Fault::ALL {
            assert!(help.contains(f.name()), "`ferrite-chaos run --help` does not name {f}");
        }
    }
}
