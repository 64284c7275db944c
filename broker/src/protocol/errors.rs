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
    BrokerNotAvailable = 8,
    ReplicaNotAvailable = 9,
    StaleControllerEpoch = 11,
    MessageTooLarge = 10,
    InvalidTopicException = 17,
    RecordListTooLarge = 18,
    NotEnoughReplicas = 19,
    NotEnoughReplicasAfterAppend = 20,
    InvalidRequiredAcks = 21,
    ClusterAuthorizationFailed = 31,
    InvalidTimestamp = 32,
    UnsupportedVersion = 35,
    TopicAlreadyExists = 36,
    InvalidPartitions = 37,
    InvalidReplicationFactor = 38,
    InvalidReplicaAssignment = 39,
    InvalidConfig = 40,
    NotController = 41,
    InvalidRequest = 42,
    PolicyViolation = 44,
    KafkaStorageError = 56,
    FencedLeaderEpoch = 74,
    UnknownLeaderEpoch = 75,
    UnsupportedCompressionType = 76,
    ElectionNotNeeded = 84,
    InvalidRecord = 87,
    ResourceNotFound = 91,
    UnknownTopicId = 100,
}

impl ErrorCode {
    pub fn code(self) -> i16 {
        self as i16
    }
}

/// The Kafka name of an error code, for messages.
pub fn name(code: i16) -> &'static str {
    match code {
        -1 => "UNKNOWN_SERVER_ERROR",
        0 => "NONE",
        1 => "OFFSET_OUT_OF_RANGE",
        2 => "CORRUPT_MESSAGE",
        3 => "UNKNOWN_TOPIC_OR_PARTITION",
        5 => "LEADER_NOT_AVAILABLE",
        6 => "NOT_LEADER_OR_FOLLOWER",
        7 => "REQUEST_TIMED_OUT",
        8 => "BROKER_NOT_AVAILABLE",
        9 => "REPLICA_NOT_AVAILABLE",
        10 => "MESSAGE_TOO_LARGE",
        11 => "STALE_CONTROLLER_EPOCH",
        17 => "INVALID_TOPIC_EXCEPTION",
        19 => "NOT_ENOUGH_REPLICAS",
        20 => "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        21 => "INVALID_REQUIRED_ACKS",
        35 => "UNSUPPORTED_VERSION",
        36 => "TOPIC_ALREADY_EXISTS",
        37 => "INVALID_PARTITIONS",
        38 => "INVALID_REPLICATION_FACTOR",
        39 => "INVALID_REPLICA_ASSIGNMENT",
        40 => "INVALID_CONFIG",
        41 => "NOT_CONTROLLER",
        42 => "INVALID_REQUEST",
        31 => "CLUSTER_AUTHORIZATION_FAILED",
        56 => "KAFKA_STORAGE_ERROR",
        74 => "FENCED_LEADER_EPOCH",
        75 => "UNKNOWN_LEADER_EPOCH",
        84 => "ELECTION_NOT_NEEDED",
        87 => "INVALID_RECORD",
        100 => "UNKNOWN_TOPIC_ID",
        _ => "ERROR",
    }
}
