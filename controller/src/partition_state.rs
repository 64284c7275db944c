//! A partition's leadership state as the controller keeps it: the leader,
//! its epoch, the ISR and the controller epoch that wrote it — the content of
//! Kafka's `/brokers/topics/<topic>/partitions/<p>/state` znode — together
//! with the znode version the state was read or written at, so that every
//! write can be conditional on nobody having changed it since.

use ferrite_ids::LeaderEpoch;

use crate::metadata::BrokerId;

pub use ferrite_ids::{ControllerEpoch, ZkVersion};

/// Leader, leader epoch and ISR of one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionState {
    /// `None` (Kafka's -1) while the partition is offline.
    pub leader: Option<BrokerId>,
    pub leader_epoch: LeaderEpoch,
    /// In assignment order is not required; kept as written.
    pub isr: Vec<BrokerId>,
    /// The epoch of the controller that last wrote this state.
    pub controller_epoch: ControllerEpoch,
}

impl PartitionState {
    /// The state a new partition starts with.
    pub fn initial(leader: Option<BrokerId>, isr: Vec<BrokerId>, controller_epoch: ControllerEpoch) -> PartitionState {
        PartitionState {
            leader,
            leader_epoch: LeaderEpoch(0),
            isr,
            controller_epoch,
        }
    }

    /// The successor state with `leader` and `isr`: the leader epoch goes up
    /// by one, as it does for every change the controller makes, so that
    /// replicas can tell the new state from the old.
    pub fn next(
        &self,
        leader: Option<BrokerId>,
        isr: Vec<BrokerId>,
        controller_epoch: ControllerEpoch,
    ) -> PartitionState {
        assert!(self.leader_epoch.0 < i32::MAX, "leader epoch overflow");
        if let Some(l) = leader {
            assert!(isr.contains(&l), "leader {l:?} outside the ISR {isr:?}");
        }
        PartitionState {
            leader,
            leader_epoch: LeaderEpoch(self.leader_epoch.0 + 1),
            isr,
            controller_epoch,
        }
    }
}

/// A value together with the znode version it was read or written at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned<T> {
    pub value: T,
    pub version: ZkVersion,
}
