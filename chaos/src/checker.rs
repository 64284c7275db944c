//! Checks a history against the log read back after the faults healed.
//!
//! What it reports (each list empty in a valid run):
//!
//! - **lost**: an acknowledged produce whose value is not in the final log;
//! - **duplicated**: a value that stands at two offsets of the final log
//!   (the workload writes each value once, through an idempotent producer);
//! - **inconsistent**: one offset seen holding two different values (across
//!   reads and the final log), an acknowledged offset holding another value,
//!   or a read whose offsets do not increase;
//! - **commits backwards**: a group's acknowledged commit for a partition
//!   below an earlier acknowledged one that completed before it started;
//! - **commits lost** ([`lost_commits`]): a partition whose committed
//!   offset, fetched after healing, is below the highest acknowledged
//!   commit (a commit that ended unknown may have raised it: that is
//!   allowed).
//!
//! A produce that ended `Unknown` may or may not be in the log: neither is
//! an anomaly. One that ended `Fail` must not be: it is reported as
//! **failed but present** (the broker said it wrote nothing).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::history::{History, OpKind, Outcome};

/// Every record of each partition, read from offset 0 after healing.
pub type FinalLog = BTreeMap<i32, Vec<(i64, u64)>>;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lost {
    pub partition: i32,
    pub value: u64,
    pub acked_offset: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Duplicated {
    pub value: u64,
    /// Every (partition, offset) the value stands at.
    pub places: Vec<(i32, i64)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inconsistent {
    pub partition: i32,
    pub offset: i64,
    pub what: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitLost {
    pub group: String,
    pub partition: i32,
    pub acknowledged: i64,
    /// What OffsetFetch returned after healing (`None`: nothing).
    pub fetched: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitBackwards {
    pub group: String,
    pub partition: i32,
    pub earlier: i64,
    pub later: i64,
}

/// What the checker found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anomalies {
    pub lost: Vec<Lost>,
    pub duplicated: Vec<Duplicated>,
    pub inconsistent: Vec<Inconsistent>,
    pub failed_but_present: Vec<u64>,
    pub commits_backwards: Vec<CommitBackwards>,
    #[serde(default)]
    pub commits_lost: Vec<CommitLost>,
}

impl Anomalies {
    pub fn is_valid(&self) -> bool {
        self.lost.is_empty()
            && self.duplicated.is_empty()
            && self.inconsistent.is_empty()
            && self.failed_but_present.is_empty()
            && self.commits_backwards.is_empty()
            && self.commits_lost.is_empty()
    }
}

/// Checks `history` against `final_log`.
pub fn check(history: &History, final_log: &FinalLog) -> Anomalies {
    let mut a = Anomalies::default();
    let places = check_final_log(final_log, &mut a);
    check_produces(history, &places, &mut a);
    check_reads(history, final_log, &mut a);
    check_commits(history, &mut a);
    a
}

/// Where each value stands in the final log; reports duplicates and
/// offsets that do not increase.
fn check_final_log(final_log: &FinalLog, a: &mut Anomalies) -> HashMap<u64, Vec<(i32, i64)>> {
    let mut places: HashMap<u64, Vec<(i32, i64)>> = HashMap::new();
    for (&partition, records) in final_log {
        for pair in records.windows(2) {
            if pair[1].0 <= pair[0].0 {
                a.inconsistent.push(Inconsistent {
                    partition,
                    offset: pair[1].0,
                    what: format!("final read: offset {} after {}", pair[1].0, pair[0].0),
                });
            }
        }
        for &(offset, value) in records {
            places.entry(value).or_default().push((partition, offset));
        }
    }
    let mut dups: Vec<Duplicated> = places
        .iter()
        .filter(|(_, p)| p.len() > 1)
        .map(|(&value, p)| Duplicated {
            value,
            places: p.clone(),
        })
        .collect();
    dups.sort_by_key(|d| d.value);
    a.duplicated = dups;
    places
}

fn check_produces(history: &History, places: &HashMap<u64, Vec<(i32, i64)>>, a: &mut Anomalies) {
    let mut acked_at: HashMap<(i32, i64), u64> = HashMap::new();
    for op in &history.ops {
        if let (OpKind::Produce { partition, value }, Outcome::Ok { offset: Some(o) }) = (&op.kind, &op.outcome) {
            let first = *acked_at.entry((*partition, *o)).or_insert(*value);
            if first != *value {
                a.inconsistent.push(Inconsistent {
                    partition: *partition,
                    offset: *o,
                    what: format!("values {first} and {value} both acknowledged at this offset"),
                });
            }
        }
    }
    for op in &history.ops {
        let OpKind::Produce { partition, value } = op.kind else {
            continue;
        };
        let found = places.get(&value);
        match &op.outcome {
            Outcome::Ok { offset } => match found {
                None => a.lost.push(Lost {
                    partition,
                    value,
                    acked_offset: *offset,
                }),
                Some(p) => {
                    if let Some(o) = offset {
                        if !p.contains(&(partition, *o)) {
                            a.inconsistent.push(Inconsistent {
                                partition,
                                offset: *o,
                                what: format!("value {value} acknowledged at this offset stands at {p:?}"),
                            });
                        }
                    }
                }
            },
            Outcome::Fail { .. } => {
                if found.is_some() {
                    a.failed_but_present.push(value);
                }
            }
            Outcome::Unknown { .. } => {}
        }
    }
}

fn check_reads(history: &History, final_log: &FinalLog, a: &mut Anomalies) {
    let mut seen: HashMap<(i32, i64), u64> = HashMap::new();
    for (&partition, records) in final_log {
        for &(offset, value) in records {
            seen.insert((partition, offset), value);
        }
    }
    for op in &history.ops {
        let OpKind::Read { partition, records } = &op.kind else {
            continue;
        };
        for pair in records.windows(2) {
            if pair[1].0 <= pair[0].0 {
                a.inconsistent.push(Inconsistent {
                    partition: *partition,
                    offset: pair[1].0,
                    what: format!("client {}: read offset {} after {}", op.client, pair[1].0, pair[0].0),
                });
            }
        }
        for &(offset, value) in records {
            let known = *seen.entry((*partition, offset)).or_insert(value);
            if known != value {
                a.inconsistent.push(Inconsistent {
                    partition: *partition,
                    offset,
                    what: format!("client {} read value {value}, elsewhere {known}", op.client),
                });
            }
        }
    }
}

/// A group's partition.
pub type GroupPartition = (String, i32);

/// The partitions whose committed offset after healing (`fetched`, by
/// group) is below the highest acknowledged commit of the history.
pub fn lost_commits(history: &History, fetched: &BTreeMap<GroupPartition, i64>) -> Vec<CommitLost> {
    let mut highest: BTreeMap<GroupPartition, i64> = BTreeMap::new();
    for op in history.ops.iter().filter(|o| o.is_ok()) {
        if let OpKind::Commit {
            group,
            partition,
            offset,
        } = &op.kind
        {
            let h = highest.entry((group.clone(), *partition)).or_insert(*offset);
            *h = (*h).max(*offset);
        }
    }
    highest
        .into_iter()
        .filter(|(gp, acked)| fetched.get(gp).is_none_or(|f| f < acked))
        .map(|(gp, acknowledged)| CommitLost {
            fetched: fetched.get(&gp).copied(),
            group: gp.0,
            partition: gp.1,
            acknowledged,
        })
        .collect()
}

fn check_commits(history: &History, a: &mut Anomalies) {
    // Per group and partition: acknowledged commits as (invoked,
    // completed, offset).
    let mut commits: BTreeMap<GroupPartition, Vec<(u64, u64, i64)>> = BTreeMap::new();
    for op in history.ops.iter().filter(|o| o.is_ok()) {
        if let OpKind::Commit {
            group,
            partition,
            offset,
        } = &op.kind
        {
            commits
                .entry((group.clone(), *partition))
                .or_default()
                .push((op.invoked_ms, op.completed_ms, *offset));
        }
    }
    for ((group, partition), list) in commits {
        // A later commit is one invoked after an earlier one completed.
        let mut best_completed: Vec<(u64, i64)> = list.iter().map(|&(_, c, o)| (c, o)).collect();
        best_completed.sort_unstable();
        for &(invoked, _, offset) in &list {
            let earlier = best_completed
                .iter()
                .take_while(|(c, _)| *c < invoked)
                .map(|(_, o)| *o)
                .max();
            if let Some(e) = earlier.filter(|e| offset < *e) {
                a.commits_backwards.push(CommitBackwards {
                    group: group.clone(),
                    partition,
                    earlier: e,
                    later: offset,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Op;

    fn op(client: u32, kind: OpKind, t: (u64, u64), outcome: Outcome) -> Op {
        Op {
            client,
            kind,
            invoked_ms: t.0,
            completed_ms: t.1,
            outcome,
        }
    }

    fn produce(value: u64, outcome: Outcome) -> Op {
        op(1, OpKind::Produce { partition: 0, value }, (value, value + 1), outcome)
    }

    fn ok(offset: i64) -> Outcome {
        Outcome::Ok { offset: Some(offset) }
    }

    fn unknown() -> Outcome {
        Outcome::Unknown {
            error: "timeout".into(),
        }
    }

    fn history(ops: Vec<Op>) -> History {
        History { ops }
    }

    fn log(records: &[(i64, u64)]) -> FinalLog {
        BTreeMap::from([(0, records.to_vec())])
    }

    #[test]
    fn a_clean_run_is_valid() {
        let h = history(vec![produce(10, ok(0)), produce(11, ok(1)), produce(12, unknown())]);
        let a = check(&h, &log(&[(0, 10), (1, 11)]));
        assert!(a.is_valid(), "{a:?}");
    }

    #[test]
    fn an_acknowledged_value_missing_from_the_log_is_lost() {
        let h = history(vec![produce(10, ok(0)), produce(11, ok(1))]);
        let a = check(&h, &log(&[(0, 10)]));
        assert_eq!(
            a.lost,
            vec![Lost {
                partition: 0,
                value: 11,
                acked_offset: Some(1)
            }]
        );
        assert!(!a.is_valid());
    }

    #[test]
    fn an_unknown_produce_may_be_there_or_not() {
        let h = history(vec![produce(10, unknown()), produce(11, unknown())]);
        assert!(check(&h, &log(&[(0, 11)])).is_valid());
    }

    #[test]
    fn a_failed_produce_found_in_the_log_is_reported() {
        let h = history(vec![produce(
            10,
            Outcome::Fail {
                error: "NOT_LEADER".into(),
            },
        )]);
        assert_eq!(check(&h, &log(&[(0, 10)])).failed_but_present, vec![10]);
    }

    #[test]
    fn a_value_at_two_offsets_is_duplicated() {
        let h = history(vec![produce(10, ok(0))]);
        let a = check(&h, &log(&[(0, 10), (1, 10)]));
        assert_eq!(a.duplicated.len(), 1);
        assert_eq!(a.duplicated[0].places, vec![(0, 0), (0, 1)]);
    }

    #[test]
    fn an_acknowledged_offset_holding_another_value_is_inconsistent() {
        let h = history(vec![produce(10, ok(0)), produce(11, ok(0))]);
        let a = check(&h, &log(&[(0, 11), (1, 10)]));
        assert_eq!(a.inconsistent.len(), 2, "{a:?}");
        assert!(a.lost.is_empty());
    }

    #[test]
    fn a_read_that_saw_another_value_at_an_offset_is_inconsistent() {
        let read = OpKind::Read {
            partition: 0,
            records: vec![(0, 10), (1, 99)],
        };
        let h = history(vec![produce(10, ok(0)), op(2, read, (5, 6), ok(0))]);
        let a = check(&h, &log(&[(0, 10), (1, 11)]));
        assert_eq!(a.inconsistent.len(), 1, "{a:?}");
        assert_eq!(a.inconsistent[0].offset, 1);
    }

    #[test]
    fn a_read_going_backwards_is_inconsistent() {
        let read = OpKind::Read {
            partition: 0,
            records: vec![(1, 11), (0, 10)],
        };
        let h = history(vec![op(2, read, (5, 6), ok(0))]);
        assert_eq!(check(&h, &log(&[(0, 10), (1, 11)])).inconsistent.len(), 1);
    }

    #[test]
    fn a_committed_offset_below_an_acknowledged_commit_is_lost() {
        let commit = |offset, outcome| op(3, commit_kind("g", offset), (0, 1), outcome);
        let at = |offset| BTreeMap::from([(("g".to_string(), 0), offset)]);
        let h = history(vec![commit(5, ok(0)), commit(9, unknown())]);
        assert!(lost_commits(&h, &at(5)).is_empty());
        assert!(lost_commits(&h, &at(9)).is_empty(), "the unknown commit landed");
        let lost = lost_commits(&h, &at(4));
        assert_eq!(
            lost,
            vec![CommitLost {
                group: "g".into(),
                partition: 0,
                acknowledged: 5,
                fetched: Some(4)
            }]
        );
        assert_eq!(lost_commits(&h, &BTreeMap::new())[0].fetched, None);
        let other_group = BTreeMap::from([(("h".to_string(), 0), 9)]);
        assert_eq!(
            lost_commits(&h, &other_group).len(),
            1,
            "another group's commit does not count"
        );
    }

    #[test]
    fn a_commit_below_an_earlier_one_goes_backwards() {
        let commit = |offset, t| op(3, commit_kind("g", offset), t, ok(0));
        let fine = history(vec![commit(5, (0, 1)), commit(3, (1, 4)), commit(7, (2, 3))]);
        // The commit of 3 was invoked before the commit of 5 completed? No:
        // 5 completed at 1, 3 was invoked at 1 (not after): concurrent.
        assert!(check(&fine, &FinalLog::new()).is_valid());
        let bad = history(vec![commit(5, (0, 1)), commit(3, (2, 4))]);
        assert_eq!(
            check(&bad, &FinalLog::new()).commits_backwards,
            vec![CommitBackwards {
                group: "g".into(),
                partition: 0,
                earlier: 5,
                later: 3
            }]
        );
        let two_groups = history(vec![commit(5, (0, 1)), op(4, commit_kind("h", 3), (2, 4), ok(0))]);
        assert!(
            check(&two_groups, &FinalLog::new()).is_valid(),
            "each group commits its own offsets"
        );
    }

    fn commit_kind(group: &str, offset: i64) -> OpKind {
        OpKind::Commit {
            group: group.into(),
            partition: 0,
            offset,
        }
    }
}
