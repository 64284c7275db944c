//! Replication's one error type. The broker maps each variant to its Kafka
//! error code at the protocol edge (named beside each variant).

use ferrite_engine::types::{LeaderEpoch, Offset, TopicPartition};

use crate::ids::BrokerId;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplicationError {
    /// NOT_LEADER_OR_FOLLOWER: this broker does not lead the partition (or
    /// was deposed), so the client should refresh its metadata.
    #[error("{tp}: not the leader (op {op})")]
    NotLeader { tp: TopicPartition, op: &'static str },
    /// NOT_ENOUGH_REPLICAS: acks=all with an ISR smaller than
    /// `min.insync.replicas`; nothing was appended.
    #[error("{tp}: ISR has {isr} replica(s), min.insync.replicas is {min_isr}")]
    NotEnoughReplicas {
        tp: TopicPartition,
        isr: usize,
        min_isr: usize,
    },
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND: appended, but the ISR shrank below
    /// `min.insync.replicas` before the records were committed.
    #[error("{tp}: ISR shrank to {isr} below min.insync.replicas {min_isr} after the append")]
    NotEnoughReplicasAfterAppend {
        tp: TopicPartition,
        isr: usize,
        min_isr: usize,
    },
    /// REQUEST_TIMED_OUT: the high watermark did not pass the records in time.
    #[error("{tp}: offset {offset} not committed within the request timeout")]
    TimedOut { tp: TopicPartition, offset: Offset },
    /// FENCED_LEADER_EPOCH: the request carries an older leader epoch.
    #[error("{tp}: request epoch {request} is older than the current epoch {current}")]
    FencedLeaderEpoch {
        tp: TopicPartition,
        request: LeaderEpoch,
        current: LeaderEpoch,
    },
    /// UNKNOWN_LEADER_EPOCH: the request carries a newer leader epoch than
    /// this broker has heard of yet.
    #[error("{tp}: request epoch {request} is newer than the current epoch {current}")]
    UnknownLeaderEpoch {
        tp: TopicPartition,
        request: LeaderEpoch,
        current: LeaderEpoch,
    },
    /// NOT_LEADER_OR_FOLLOWER (Kafka answers a fetch from a broker outside
    /// the assignment this way): the fetching broker is not a replica.
    #[error("{tp}: broker {broker} is not a replica")]
    NotAReplica { tp: TopicPartition, broker: BrokerId },
    /// OFFSET_OUT_OF_RANGE: a replica fetch outside the leader's log.
    #[error("{tp}: fetch offset {offset} outside [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        tp: TopicPartition,
        offset: Offset,
        log_start: Offset,
        log_end: Offset,
    },
    /// STALE_CONTROLLER_EPOCH (what Kafka answers a LeaderAndIsr whose leader
    /// epoch is not newer): the state is older than what the replica has.
    #[error("{tp}: LeaderAndIsr epoch {request} is not newer than {current}")]
    StaleLeaderEpoch {
        tp: TopicPartition,
        request: LeaderEpoch,
        current: LeaderEpoch,
    },
    /// REQUEST_TIMED_OUT, at once: more produce requests already wait for
    /// acks on this partition than `waiters_max`; the client backs off.
    #[error("{tp}: {waiting} produce requests already wait for acks")]
    TooManyWaiting { tp: TopicPartition, waiting: usize },
}

pub type Result<T> = std::result::Result<T, ReplicationError>;

/// What an operation of [`LocalReplica`](crate::local::LocalReplica) fails
/// with: a refusal of replication's, or the engine's own error (a bad batch
/// keeps its CORRUPT_MESSAGE / MESSAGE_TOO_LARGE meaning at the edge).
#[derive(Debug, thiserror::Error)]
pub enum ReplicaOpError {
    #[error(transparent)]
    Replication(#[from] ReplicationError),
    #[error(transparent)]
    Log(#[from] ferrite_engine::EngineError),
}
