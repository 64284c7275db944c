//! Why a group operation was refused. Mapped to Kafka error codes in
//! `error_map` only, at the protocol edge.

/// A group request's refusal, named after the Kafka error it becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("the group id is empty")]
    InvalidGroupId,
    #[error("the session timeout is outside group.min/max.session.timeout.ms")]
    InvalidSessionTimeout,
    #[error("the member is not in the group")]
    UnknownMemberId,
    #[error("the member's generation is not the group's")]
    IllegalGeneration,
    #[error("the group is rebalancing: join again")]
    RebalanceInProgress,
    #[error("a member id was assigned: join again with it")]
    MemberIdRequired,
    #[error("the member's protocols have none in common with the group's")]
    InconsistentGroupProtocol,
    #[error("another member holds this group.instance.id")]
    FencedInstanceId,
    #[error("the group is at group.max.size members")]
    GroupMaxSizeReached,
    #[error("the group still has members")]
    NonEmptyGroup,
    #[error("the group does not exist")]
    GroupIdNotFound,
    #[error("the group's coordinator is not available")]
    CoordinatorNotAvailable,
    #[error("the group's offsets are still loading")]
    CoordinatorLoadInProgress,
    #[error("this broker is not the group's coordinator")]
    NotCoordinator,
    #[error("the committed metadata is longer than offset.metadata.max.bytes")]
    OffsetMetadataTooLarge,
    #[error("the topic or partition does not exist")]
    UnknownTopicOrPartition,
    #[error("the partition still has an active consumer in the group")]
    GroupSubscribedToTopic,
    #[error("not authorized for the group")]
    GroupAuthorizationFailed,
    #[error("not authorized for the topic")]
    TopicAuthorizationFailed,
    #[error("a newer instance of the transactional producer has fenced this one")]
    InvalidProducerEpoch,
}
