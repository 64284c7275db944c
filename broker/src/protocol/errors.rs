//! Kafka error codes, as sent on the wire.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i16)]
pub enum ErrorCode {
    UnknownServerError = -1,
    None = 0,
    OffsetOutOfRange = 1,
    CorruptMessage = 2,
    UnknownTopicOrPartition = 3,
    LeaderNotAvailable = 5,
    NotLeaderOrFollower = 6,
    RequestTimedOut = 7,
    MessageTooLarge = 10,
    InvalidTopicException = 17,
    RecordListTooLarge = 18,
    NotEnoughReplicas = 19,
    NotEnoughReplicasAfterAppend = 20,
    InvalidRequiredAcks = 21,
    InvalidTimestamp = 32,
    UnsupportedVersion = 35,
    TopicAlreadyExists = 36,
    InvalidPartitions = 37,
    InvalidReplicationFactor = 38,
    InvalidReplicaAssignment = 39,
    InvalidConfig = 40,
    InvalidRequest = 42,
    PolicyViolation = 44,
    KafkaStorageError = 56,
    UnsupportedCompressionType = 76,
    InvalidRecord = 87,
    ResourceNotFound = 91,
    UnknownTopicId = 100,
}

impl ErrorCode {
    pub fn code(self) -> i16 {
        self as i16
    }
}
