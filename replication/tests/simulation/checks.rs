//! The invariants checked after every step.

use ferrite_engine::types::Offset;
use ferrite_replication::BrokerId;

use super::{Broker, World, BROKERS};

impl World {
    pub(super) fn check_acked_in(&self, id: BrokerId, who: &str) {
        let b = &self.brokers[BROKERS.iter().position(|x| *x == id).unwrap_or(0)];
        for (offset, value) in &self.acked {
            let found = b.log.records.get(offset.0 as usize).map(|r| r.value);
            assert_eq!(
                found,
                Some(*value),
                "{who} {id} lacks the acknowledged record {value} at offset {offset} (its log ends at {})",
                b.log.end()
            );
        }
    }

    pub(super) fn check(&self) {
        // Below its HW, every replica's log agrees with every other's below
        // theirs.
        let with_hw: Vec<(&Broker, Offset)> = self
            .brokers
            .iter()
            .filter_map(|b| b.replica.as_ref().map(|r| (b, r.hw())))
            .collect();
        for (b, hw) in &with_hw {
            assert!(*hw <= b.log.end(), "broker {} has hw {hw} above its log end", b.id);
        }
        for (a, ha) in &with_hw {
            for (b, hb) in &with_hw {
                let n = ha.min(hb).0 as usize;
                assert!(
                    a.log.records[..n] == b.log.records[..n],
                    "brokers {} and {} disagree below offset {n}",
                    a.id,
                    b.id
                );
            }
        }
        // The leader ZooKeeper names holds every acknowledged record.
        if let Some(l) = self.zk.leader {
            self.check_acked_in(l, "the leader");
        }
    }
}
