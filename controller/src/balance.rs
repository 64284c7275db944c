//! Leader balance (`auto.leader.rebalance.enable`): after failures leaders
//! pile up on the surviving brokers. For every broker, its *imbalance ratio*
//! is the share of the partitions it is preferred replica of (first in the
//! assignment) that another broker leads. A broker whose ratio exceeds
//! `leader.imbalance.per.broker.percentage` gets its preferred leaderships
//! back through preferred replica elections.

use std::collections::{BTreeMap, BTreeSet};

use crate::metadata::BrokerId;

/// What the check needs to know of one partition.
#[derive(Clone, Debug)]
pub struct PartitionLeadership<K> {
    pub key: K,
    pub preferred: BrokerId,
    pub leader: Option<BrokerId>,
}

/// Each preferred broker's imbalance ratio, in percent: partitions it
/// should lead but does not, per hundred it should lead.
pub fn imbalance_pct<K>(partitions: &[PartitionLeadership<K>]) -> BTreeMap<BrokerId, u32> {
    let mut counts: BTreeMap<BrokerId, (u64, u64)> = BTreeMap::new();
    for p in partitions {
        let entry = counts.entry(p.preferred).or_default();
        entry.1 += 1;
        if p.leader != Some(p.preferred) {
            entry.0 += 1;
        }
    }
    counts
        .into_iter()
        .map(|(b, (off, total))| (b, u32::try_from(off * 100 / total).unwrap_or(100)))
        .collect()
}

/// The partitions to hand back to their preferred replica: those of brokers
/// whose imbalance exceeds `threshold_pct` and that are alive (`eligible`).
/// Whether each preferred replica is in its partition's ISR is the
/// election's business.
pub fn rebalance_candidates<K: Clone>(
    partitions: &[PartitionLeadership<K>],
    threshold_pct: u32,
    eligible: &BTreeSet<BrokerId>,
) -> Vec<K> {
    let ratios = imbalance_pct(partitions);
    let over: BTreeSet<BrokerId> = ratios
        .into_iter()
        .filter(|(b, pct)| *pct > threshold_pct && eligible.contains(b))
        .map(|(b, _)| b)
        .collect();
    partitions
        .iter()
        .filter(|p| over.contains(&p.preferred) && p.leader != Some(p.preferred))
        .map(|p| p.key.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(key: u32, preferred: i32, leader: Option<i32>) -> PartitionLeadership<u32> {
        PartitionLeadership {
            key,
            preferred: BrokerId(preferred),
            leader: leader.map(BrokerId),
        }
    }

    #[test]
    fn ratio_counts_partitions_led_elsewhere() {
        let parts = [p(0, 1, Some(1)), p(1, 1, Some(2)), p(2, 1, None), p(3, 2, Some(2))];
        let r = imbalance_pct(&parts);
        assert_eq!(r[&BrokerId(1)], 66);
        assert_eq!(r[&BrokerId(2)], 0);
    }

    #[test]
    fn only_brokers_over_the_threshold_and_alive_are_rebalanced() {
        // Broker 1 lost 1 of 10 (10 %: not over 10), broker 2 lost 2 of 10.
        let mut parts = Vec::new();
        for i in 0..10 {
            parts.push(p(i, 1, Some(if i == 0 { 3 } else { 1 })));
            parts.push(p(100 + i, 2, Some(if i < 2 { 3 } else { 2 })));
        }
        let live: BTreeSet<BrokerId> = [1, 2, 3].map(BrokerId).into();
        assert_eq!(rebalance_candidates(&parts, 10, &live), vec![100, 101]);
        let live: BTreeSet<BrokerId> = [1, 3].map(BrokerId).into();
        assert!(rebalance_candidates(&parts, 10, &live).is_empty());
        assert_eq!(rebalance_candidates(&parts, 0, &[1, 2].map(BrokerId).into()).len(), 3);
    }
}
