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
