//! The ISR as a leader sees it: the set last written to the partition state
//! znode, plus at most one change in flight (Kafka's `PendingExpandIsr` /
//! `PendingShrinkIsr`). While a change is in flight no other is proposed,
//! and the high watermark is computed over the *maximal* ISR — the committed
//! set plus a replica being added — so that it never counts on a set that
//! ZooKeeper has not accepted.

use std::collections::BTreeSet;

use crate::ids::BrokerId;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IsrState {
    Committed {
        isr: BTreeSet<BrokerId>,
    },
    PendingExpand {
        committed: BTreeSet<BrokerId>,
        adding: BrokerId,
    },
    PendingShrink {
        committed: BTreeSet<BrokerId>,
        removing: BTreeSet<BrokerId>,
    },
}

impl IsrState {
    pub fn committed(&self) -> &BTreeSet<BrokerId> {
        match self {
            IsrState::Committed { isr } => isr,
            IsrState::PendingExpand { committed, .. } | IsrState::PendingShrink { committed, .. } => committed,
        }
    }

    /// The committed ISR plus a replica being added: the set the high
    /// watermark waits for.
    pub fn maximal(&self) -> BTreeSet<BrokerId> {
        let mut set = self.committed().clone();
        if let IsrState::PendingExpand { adding, .. } = self {
            set.insert(*adding);
        }
        set
    }

    /// The ISR being written, if a change is in flight.
    pub fn proposed(&self) -> Option<BTreeSet<BrokerId>> {
        match self {
            IsrState::Committed { .. } => None,
            IsrState::PendingExpand { .. } => Some(self.maximal()),
            IsrState::PendingShrink { committed, removing } => Some(committed.difference(removing).copied().collect()),
        }
    }

    pub fn is_pending(&self) -> bool {
        !matches!(self, IsrState::Committed { .. })
    }

    /// Starts adding `broker`; asserts nothing else is in flight.
    pub fn expand(&mut self, broker: BrokerId) {
        assert!(!self.is_pending(), "an ISR change is already in flight");
        assert!(!self.committed().contains(&broker), "{broker} is already in the ISR");
        *self = IsrState::PendingExpand {
            committed: self.committed().clone(),
            adding: broker,
        };
    }

    /// Starts removing `removing`; asserts nothing else is in flight and the
    /// result keeps at least one replica.
    pub fn shrink(&mut self, removing: BTreeSet<BrokerId>) {
        assert!(!self.is_pending(), "an ISR change is already in flight");
        assert!(!removing.is_empty(), "an ISR shrink removes someone");
        assert!(
            removing.is_subset(self.committed()),
            "removing replicas outside the ISR"
        );
        assert!(
            removing.len() < self.committed().len(),
            "an ISR shrink keeps the leader"
        );
        *self = IsrState::PendingShrink {
            committed: self.committed().clone(),
            removing,
        };
    }

    /// The change in flight was written.
    pub fn commit(&mut self) {
        let proposed = self.proposed();
        assert!(proposed.is_some(), "no ISR change in flight to commit");
        *self = IsrState::Committed {
            isr: proposed.unwrap_or_default(),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[i32]) -> BTreeSet<BrokerId> {
        ids.iter().map(|&i| BrokerId(i)).collect()
    }

    #[test]
    fn the_maximal_isr_includes_a_pending_addition_but_a_shrink_only_after_commit() {
        let mut isr = IsrState::Committed { isr: set(&[1, 2]) };
        isr.expand(BrokerId(3));
        assert_eq!(isr.committed(), &set(&[1, 2]));
        assert_eq!(isr.maximal(), set(&[1, 2, 3]));
        isr.commit();
        assert_eq!(isr.committed(), &set(&[1, 2, 3]));
        isr.shrink(set(&[2]));
        assert_eq!(isr.maximal(), set(&[1, 2, 3]));
        assert_eq!(isr.proposed(), Some(set(&[1, 3])));
        isr.commit();
        assert_eq!(isr, IsrState::Committed { isr: set(&[1, 3]) });
    }

    #[test]
    #[should_panic(expected = "already in flight")]
    fn one_change_at_a_time() {
        let mut isr = IsrState::Committed { isr: set(&[1, 2]) };
        isr.shrink(set(&[2]));
        isr.expand(BrokerId(3));
    }
}
