//! Replica assignment for new partitions, as the seed documents describe
//! (Kafka's rack-unaware assignment): brokers sorted by id; partition `p`'s
//! first replica on broker `(p + start) mod n`; the others follow at a shift
//! that grows by one after every `n` partitions, so that replica sets spread
//! and no two replicas of a partition share a broker. The caller draws
//! `start` and `shift` at random (they are parameters so tests can fix them).

use crate::error::{ControllerError, Result};
use crate::metadata::BrokerId;

/// Most partitions one topic may have. Kafka sets no limit; an unbounded
/// count from a request would let one CreateTopics create millions of
/// directories.
pub const TOPIC_PARTITIONS_MAX: i32 = 10_000;

/// Assigns `count` partitions numbered from `first_partition`, each with
/// `replication_factor` replicas, over `brokers`.
pub fn assign(
    topic: &str,
    brokers: &[BrokerId],
    first_partition: i32,
    count: i32,
    replication_factor: i16,
    start: usize,
    shift: usize,
) -> Result<Vec<Vec<BrokerId>>> {
    let mut sorted = brokers.to_vec();
    sorted.sort();
    sorted.dedup();
    let n = sorted.len();
    let rf = usize::try_from(replication_factor).unwrap_or(0);
    if rf == 0 || rf > n {
        return Err(ControllerError::InvalidReplicationFactor {
            topic: topic.to_string(),
            factor: i64::from(replication_factor),
            live: n,
        });
    }
    if count <= 0 {
        return Err(ControllerError::InvalidPartitions {
            topic: topic.to_string(),
            count: i64::from(count),
            reason: "must be positive",
        });
    }
    if i64::from(first_partition) + i64::from(count) > i64::from(TOPIC_PARTITIONS_MAX) {
        return Err(ControllerError::InvalidPartitions {
            topic: topic.to_string(),
            count: i64::from(first_partition) + i64::from(count),
            reason: "more than 10000 partitions",
        });
    }
    let start = start % n;
    let mut shift = shift % n;
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count {
        let p = (first_partition + i) as usize;
        if p > 0 && p % n == 0 {
            shift += 1;
        }
        let first = (p + start) % n;
        let mut replicas = Vec::with_capacity(rf);
        replicas.push(sorted[first]);
        for j in 0..rf - 1 {
            let idx = (first + 1 + (shift + j) % (n - 1)) % n;
            replicas.push(sorted[idx]);
        }
        out.push(replicas);
    }
    Ok(out)
}

/// Where a topic's new partitions go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// `count` partitions of `replication_factor` replicas, spread by
    /// [`assign`].
    Spread { count: i32, replication_factor: i16 },
    /// Each new partition's replicas, as the request listed them (its first
    /// replica is the preferred leader).
    Manual(Vec<Vec<BrokerId>>),
}

/// How a topic of `have` partitions of `rf` replicas grows to `total`:
/// spread, or as `manual` lists the new partitions' replicas (one list a new
/// partition).
pub fn growth(topic: &str, have: i32, total: i32, rf: usize, manual: Option<Vec<Vec<BrokerId>>>) -> Result<Placement> {
    if total <= have {
        return Err(ControllerError::InvalidPartitions {
            topic: topic.to_string(),
            count: i64::from(total),
            reason: "a topic's partition count can only grow",
        });
    }
    match manual {
        None => Ok(Placement::Spread {
            count: total - have,
            replication_factor: i16::try_from(rf).unwrap_or(i16::MAX),
        }),
        Some(lists) if lists.len() as i64 == i64::from(total - have) => Ok(Placement::Manual(lists)),
        Some(lists) => Err(ControllerError::InvalidReplicaAssignment {
            topic: topic.to_string(),
            reason: format!("{} new partitions but {} replica lists", total - have, lists.len()),
        }),
    }
}

/// The replicas of the new partitions numbered from `first_partition`, for a
/// topic whose partitions have `existing_rf` replicas (`None`: a new topic):
/// spread over `brokers` from `start` and `shift`, or listed by hand and
/// checked by Kafka's rules (each list the same length, as long as the
/// existing partitions', no broker twice in one, every broker registered).
pub fn place(
    topic: &str,
    placement: &Placement,
    brokers: &[BrokerId],
    first_partition: i32,
    existing_rf: Option<usize>,
    start_shift: (usize, usize),
) -> Result<Vec<Vec<BrokerId>>> {
    let manual = match placement {
        Placement::Spread {
            count,
            replication_factor,
        } => {
            let (start, shift) = start_shift;
            return assign(
                topic,
                brokers,
                first_partition,
                *count,
                *replication_factor,
                start,
                shift,
            );
        }
        Placement::Manual(lists) => lists,
    };
    let refused = |reason: String| ControllerError::InvalidReplicaAssignment {
        topic: topic.to_string(),
        reason,
    };
    let count = i64::try_from(manual.len()).unwrap_or(i64::MAX);
    if count == 0 || i64::from(first_partition) + count > i64::from(TOPIC_PARTITIONS_MAX) {
        return Err(ControllerError::InvalidPartitions {
            topic: topic.to_string(),
            count: i64::from(first_partition) + count,
            reason: "must be positive and at most 10000",
        });
    }
    let rf = existing_rf.unwrap_or(manual[0].len());
    if rf > brokers.len() {
        // Such a list names a broker twice or an unknown one; refused
        // before it is searched (its length comes off the wire).
        return Err(refused(format!(
            "{rf} replicas a partition, more than the {} registered brokers: one is named twice or unknown",
            brokers.len()
        )));
    }
    for (i, replicas) in manual.iter().enumerate() {
        let p = i64::from(first_partition) + i as i64;
        if replicas.is_empty() {
            return Err(refused(format!("partition {p} has no replica")));
        }
        if replicas.len() != rf {
            return Err(refused(format!(
                "partition {p} has {} replicas where the others have {rf}",
                replicas.len()
            )));
        }
        if let Some(twice) = replicas.iter().enumerate().find(|(j, b)| replicas[..*j].contains(b)) {
            return Err(refused(format!("partition {p} lists broker {} twice", twice.1 .0)));
        }
        if let Some(unknown) = replicas.iter().find(|b| !brokers.contains(b)) {
            return Err(refused(format!(
                "partition {p} lists broker {}, which is not registered",
                unknown.0
            )));
        }
    }
    Ok(manual.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ids(n: i32) -> Vec<BrokerId> {
        (1..=n).map(BrokerId).collect()
    }

    #[test]
    fn twelve_partitions_rf3_on_three_brokers_spread_evenly() {
        for start in 0..3 {
            for shift in 0..3 {
                let a = assign("t", &ids(3), 0, 12, 3, start, shift).unwrap();
                for b in ids(3) {
                    assert_eq!(a.iter().filter(|r| r[0] == b).count(), 4, "leaders of {b:?}");
                    assert_eq!(a.iter().filter(|r| r.contains(&b)).count(), 12);
                }
            }
        }
    }

    #[test]
    fn refuses_more_replicas_than_brokers() {
        assert!(matches!(
            assign("t", &ids(2), 0, 1, 3, 0, 0),
            Err(ControllerError::InvalidReplicationFactor { live: 2, .. })
        ));
        assert!(assign("t", &ids(2), 0, 0, 1, 0, 0).is_err());
        assert!(assign("t", &ids(2), 0, TOPIC_PARTITIONS_MAX + 1, 1, 0, 0).is_err());
        assert!(assign("t", &ids(2), 9_999, 2, 1, 0, 0).is_err());
    }

    fn manual(lists: &[&[i32]]) -> Placement {
        Placement::Manual(
            lists
                .iter()
                .map(|l| l.iter().copied().map(BrokerId).collect())
                .collect(),
        )
    }

    #[test]
    fn a_manual_assignment_is_taken_as_listed() {
        let placed = place("t", &manual(&[&[3, 1], &[1, 2]]), &ids(3), 0, None, (0, 0)).expect("valid");
        assert_eq!(
            placed,
            vec![vec![BrokerId(3), BrokerId(1)], vec![BrokerId(1), BrokerId(2)]]
        );
        let added = place("t", &manual(&[&[2, 3]]), &ids(3), 2, Some(2), (0, 0)).expect("valid");
        assert_eq!(added, vec![vec![BrokerId(2), BrokerId(3)]]);
    }

    #[test]
    fn a_manual_assignment_is_checked_as_kafka_does() {
        let refused = |p: Placement, existing: Option<usize>| {
            matches!(
                place("t", &p, &ids(3), 0, existing, (0, 0)),
                Err(ControllerError::InvalidReplicaAssignment { .. })
            )
        };
        assert!(refused(manual(&[&[1, 1]]), None), "a broker twice");
        assert!(refused(manual(&[&[1, 4]]), None), "an unknown broker");
        assert!(refused(manual(&[&[1, 2], &[3]]), None), "uneven lists");
        assert!(refused(manual(&[&[]]), None), "an empty list");
        assert!(refused(manual(&[&[1]]), Some(2)), "shorter than the topic's partitions");
        assert!(
            place("t", &manual(&[]), &ids(3), 0, None, (0, 0)).is_err(),
            "no partition"
        );
        let long: Vec<i32> = (1..=100_000).collect();
        assert!(
            matches!(
                place("t", &manual(&[&long]), &ids(3), 0, None, (0, 0)),
                Err(ControllerError::InvalidReplicaAssignment { .. })
            ),
            "a list longer than the brokers is refused before it is searched"
        );
    }

    proptest! {
        #[test]
        fn replicas_are_distinct_and_leaders_balanced(n in 1i32..8, rf in 1i16..8, count in 1i32..60, start in 0usize..100, shift in 0usize..100) {
            prop_assume!(i32::from(rf) <= n);
            let a = assign("t", &ids(n), 0, count, rf, start, shift).unwrap();
            prop_assert_eq!(a.len(), count as usize);
            for r in &a {
                let mut s = r.clone();
                s.sort();
                s.dedup();
                prop_assert_eq!(s.len(), rf as usize);
            }
            let leads: Vec<usize> = ids(n).iter().map(|b| a.iter().filter(|r| r[0] == *b).count()).collect();
            let (min, max) = (leads.iter().min().unwrap(), leads.iter().max().unwrap());
            prop_assert!(max - min <= 1, "leaders {:?}", leads);
        }
    }
}
