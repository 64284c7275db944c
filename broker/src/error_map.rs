//! Engine, replication and controller errors as Kafka error codes — the only place they
//! are mapped.

use ferrite_controller::ControllerError;
use ferrite_engine::producer_state::SequenceError;
use ferrite_engine::{BatchError, EngineError};
use ferrite_replication::{ReplicaOpError, ReplicationError};

use crate::groups::GroupError;
use crate::shard::AdminError;
use ferrite_protocol::errors::ErrorCode;

pub fn engine(e: &EngineError) -> ErrorCode {
    match e {
        EngineError::Batch { source, .. } => match source {
            BatchError::TooLarge { .. } => ErrorCode::MessageTooLarge,
            BatchError::BadCrc { .. } | BatchError::Truncated { .. } | BatchError::LengthTooSmall { .. } => {
                ErrorCode::CorruptMessage
            }
            BatchError::BadMagic { .. } | BatchError::Invalid { .. } => ErrorCode::InvalidRecord,
        },
        EngineError::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
        EngineError::Sequence { source, .. } => match source {
            SequenceError::OutOfOrder { .. } => ErrorCode::OutOfOrderSequenceNumber,
            SequenceError::StaleEpoch { .. } => ErrorCode::InvalidProducerEpoch,
            SequenceError::CoordinatorFenced { .. } => ErrorCode::TransactionCoordinatorFenced,
        },
        EngineError::UnknownPartition { .. } | EngineError::DeletedWhileCreated { .. } => {
            ErrorCode::UnknownTopicOrPartition
        }
        EngineError::NonContiguousAppend { .. } => ErrorCode::InvalidRequest,
        EngineError::Poisoned { .. }
        | EngineError::Io { .. }
        | EngineError::CorruptBelowRecoveryPoint { .. }
        | EngineError::BadFile { .. }
        | EngineError::BadLeaderEpochFile { .. }
        | EngineError::PartitionOffline { .. }
        | EngineError::Damaged { .. } => ErrorCode::KafkaStorageError,
        EngineError::InvalidConfig { .. } => ErrorCode::InvalidConfig,
        // Retriable: the client refreshes its metadata and tries again.
        EngineError::ShardGone { .. } => ErrorCode::NotLeaderOrFollower,
        // A read that met the cleaner's swap (retried inside the engine;
        // here only if another path met it): the client asks again.
        EngineError::SegmentReplaced { .. } => ErrorCode::RequestTimedOut,
        EngineError::PartitionExists { .. } => ErrorCode::UnknownServerError,
    }
}

pub fn controller(e: &ControllerError) -> ErrorCode {
    match e {
        ControllerError::TopicExists { .. } => ErrorCode::TopicAlreadyExists,
        ControllerError::UnknownTopic { .. } => ErrorCode::UnknownTopicOrPartition,
        ControllerError::InvalidTopic { .. } => ErrorCode::InvalidTopicException,
        ControllerError::InvalidPartitions { .. } => ErrorCode::InvalidPartitions,
        ControllerError::InvalidReplicationFactor { .. } => ErrorCode::InvalidReplicationFactor,
        ControllerError::InvalidReplicaAssignment { .. } => ErrorCode::InvalidReplicaAssignment,
        ControllerError::InvalidConfig { .. } => ErrorCode::InvalidConfig,
        // Kafka: "Cannot update these configs dynamically", an invalid request.
        ControllerError::NotDynamic { .. } => ErrorCode::InvalidRequest,
        ControllerError::Io { .. } | ControllerError::BadFile { .. } => ErrorCode::KafkaStorageError,
        // ZooKeeper unreachable or a znode unreadable: the request may work later.
        ControllerError::Zk { .. } | ControllerError::BadZnode { .. } | ControllerError::Unavailable { .. } => {
            ErrorCode::RequestTimedOut
        }
        ControllerError::NotController => ErrorCode::NotController,
    }
}

pub fn admin(e: &AdminError) -> ErrorCode {
    match e {
        AdminError::Controller(c) => controller(c),
        AdminError::Engine(e) => engine(e),
        AdminError::PartitionsNotCreated { .. } | AdminError::PartitionsNotAdded { .. } => ErrorCode::KafkaStorageError,
    }
}

pub fn replication(e: &ReplicationError) -> ErrorCode {
    match e {
        ReplicationError::NotLeader { .. } | ReplicationError::NotAReplica { .. } => ErrorCode::NotLeaderOrFollower,
        ReplicationError::NotEnoughReplicas { .. } => ErrorCode::NotEnoughReplicas,
        ReplicationError::NotEnoughReplicasAfterAppend { .. } => ErrorCode::NotEnoughReplicasAfterAppend,
        ReplicationError::TimedOut { .. } | ReplicationError::TooManyWaiting { .. } => ErrorCode::RequestTimedOut,
        ReplicationError::FencedLeaderEpoch { .. } => ErrorCode::FencedLeaderEpoch,
        ReplicationError::UnknownLeaderEpoch { .. } => ErrorCode::UnknownLeaderEpoch,
        ReplicationError::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
        ReplicationError::StaleLeaderEpoch { .. } => ErrorCode::StaleControllerEpoch,
    }
}

pub fn replica_op(e: &ReplicaOpError) -> ErrorCode {
    match e {
        ReplicaOpError::Replication(r) => replication(r),
        ReplicaOpError::Log(l) => engine(l),
    }
}

pub fn group(e: GroupError) -> ErrorCode {
    match e {
        GroupError::InvalidGroupId => ErrorCode::InvalidGroupId,
        GroupError::InvalidSessionTimeout => ErrorCode::InvalidSessionTimeout,
        GroupError::UnknownMemberId => ErrorCode::UnknownMemberId,
        GroupError::IllegalGeneration => ErrorCode::IllegalGeneration,
        GroupError::RebalanceInProgress => ErrorCode::RebalanceInProgress,
        GroupError::MemberIdRequired => ErrorCode::MemberIdRequired,
        GroupError::InconsistentGroupProtocol => ErrorCode::InconsistentGroupProtocol,
        GroupError::FencedInstanceId => ErrorCode::FencedInstanceId,
        GroupError::GroupMaxSizeReached => ErrorCode::GroupMaxSizeReached,
        GroupError::NonEmptyGroup => ErrorCode::NonEmptyGroup,
        GroupError::GroupIdNotFound => ErrorCode::GroupIdNotFound,
        GroupError::CoordinatorNotAvailable => ErrorCode::CoordinatorNotAvailable,
        GroupError::CoordinatorLoadInProgress => ErrorCode::CoordinatorLoadInProgress,
        GroupError::NotCoordinator => ErrorCode::NotCoordinator,
        GroupError::OffsetMetadataTooLarge => ErrorCode::OffsetMetadataTooLarge,
        GroupError::UnknownTopicOrPartition => ErrorCode::UnknownTopicOrPartition,
        GroupError::GroupSubscribedToTopic => ErrorCode::GroupSubscribedToTopic,
        GroupError::GroupAuthorizationFailed => ErrorCode::GroupAuthorizationFailed,
        GroupError::TopicAuthorizationFailed => ErrorCode::TopicAuthorizationFailed,
        GroupError::InvalidProducerEpoch => ErrorCode::InvalidProducerEpoch,
    }
}

/// A transaction coordinator's refusal; `version_fenced_from` is the first
/// version of the API that knows PRODUCER_FENCED (older ones hear
/// INVALID_PRODUCER_EPOCH, as Kafka answers them).
pub fn txn(e: ferrite_transactions::TxnError, version: i16, version_fenced_from: i16) -> ErrorCode {
    use ferrite_transactions::TxnError as T;
    match e {
        T::InvalidTransactionalId => ErrorCode::InvalidRequest,
        T::InvalidTransactionTimeout => ErrorCode::InvalidTransactionTimeout,
        T::InvalidProducerIdMapping => ErrorCode::InvalidProducerIdMapping,
        T::ProducerFenced if version < version_fenced_from => ErrorCode::InvalidProducerEpoch,
        T::ProducerFenced => ErrorCode::ProducerFenced,
        T::ConcurrentTransactions => ErrorCode::ConcurrentTransactions,
        T::InvalidTxnState => ErrorCode::InvalidTxnState,
        T::TransactionalIdNotFound => ErrorCode::TransactionalIdNotFound,
        T::CoordinatorNotAvailable => ErrorCode::CoordinatorNotAvailable,
        T::CoordinatorLoadInProgress => ErrorCode::CoordinatorLoadInProgress,
        T::NotCoordinator => ErrorCode::NotCoordinator,
        T::TransactionalIdAuthorizationFailed => ErrorCode::TransactionalIdAuthorizationFailed,
        T::TooManyPartitions => ErrorCode::InvalidRequest,
    }
}
