//! What the replica state machine asks its runtime to do ([`Action`]), and
//! the inputs that come back as calls on
//! [`PartitionReplica`](crate::replica::PartitionReplica).

use ferrite_engine::types::{LeaderEpoch, Offset};

use crate::error::ReplicationError;
use crate::ids::{BrokerId, WaiterId, ZkVersion};

/// A partition's state as LeaderAndIsr carries it to a replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderAndIsr {
    /// `None` (Kafka's -1): the partition is offline.
    pub leader: Option<BrokerId>,
    pub leader_epoch: LeaderEpoch,
    pub isr: Vec<BrokerId>,
    /// The assignment, preferred replica first.
    pub replicas: Vec<BrokerId>,
    /// The state znode's version, which the leader's ISR writes are
    /// conditional on.
    pub zk_version: ZkVersion,
}

/// The local log as the runtime reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalLog {
    pub log_start: Offset,
    pub log_end: Offset,
}

/// The partition state znode found by a conditional ISR write that failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundState {
    pub leader: Option<BrokerId>,
    pub leader_epoch: LeaderEpoch,
    pub isr: Vec<BrokerId>,
    pub version: ZkVersion,
}

/// How a [`Action::WriteIsr`] went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IsrWriteOutcome {
    Written {
        version: ZkVersion,
    },
    /// The znode was not at the expected version; `None`: it is gone.
    Conflict {
        found: Option<FoundState>,
    },
}

/// What a leader answers a replica fetch with, besides the records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaFetchGrant {
    pub hw: Offset,
    pub log_start: Offset,
    pub log_end: Offset,
}

/// An acks=all produce after its append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Commit {
    /// Already below the high watermark: answer now.
    Done,
    /// Waits; the answer comes as [`Action::AckDone`] with this id.
    Waiting,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Leader: record in the log's epoch history that `epoch` starts at the
    /// current log end (before anything is appended in it).
    AssignEpoch { epoch: LeaderEpoch },
    /// Leader: write the partition state znode with this ISR, conditional on
    /// `expected`, and announce it under `/isr_change_notification`; answer
    /// with [`PartitionReplica::isr_written`](crate::replica::PartitionReplica::isr_written).
    WriteIsr {
        leader: BrokerId,
        leader_epoch: LeaderEpoch,
        isr: Vec<BrokerId>,
        expected: ZkVersion,
    },
    /// Leader: answer a waiting acks=all produce.
    AckDone {
        id: WaiterId,
        result: Result<(), ReplicationError>,
    },
    /// The high watermark moved (wake long-polling fetches).
    HwChanged { hw: Offset },
    /// Follower: ask `leader` (OffsetForLeaderEpoch) where `epoch` ends in
    /// its log; answer with
    /// [`PartitionReplica::epoch_end_received`](crate::replica::PartitionReplica::epoch_end_received).
    AskEpochEnd {
        leader: BrokerId,
        epoch: LeaderEpoch,
        backoff: Backoff,
    },
    /// Follower: cut the log so that it ends at or below `offset`, dropping
    /// the epochs that start at or after it; answer with
    /// [`PartitionReplica::truncated`](crate::replica::PartitionReplica::truncated).
    Truncate { offset: Offset },
    /// Follower: the leader's log starts above this whole log (retention):
    /// empty it and restart it at `offset`; answer with
    /// [`PartitionReplica::truncated`](crate::replica::PartitionReplica::truncated).
    RestartLog { offset: Offset },
    /// Follower: fetch from `leader`, starting at `offset`.
    StartFetching { leader: BrokerId, offset: Offset },
    /// Stop fetching this partition.
    StopFetching,
    /// Leader: the log is damaged from `offset` (the scrubber fenced the
    /// range); ask the controller to move leadership to another in-sync
    /// replica, as [`PartitionReplica::damaged_while_leading`](crate::replica::PartitionReplica::damaged_while_leading) says.
    Resign { offset: Offset },
}

/// Whether a request is a retry after an error (wait before sending).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backoff {
    None,
    Retry,
}
