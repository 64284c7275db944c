//! The controller's error type; the broker maps it to Kafka error codes.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("topic {topic} already exists")]
    TopicExists { topic: String },
    #[error("topic {topic} does not exist")]
    UnknownTopic { topic: String },
    #[error("invalid topic name {topic:?}: {reason}")]
    InvalidTopic { topic: String, reason: &'static str },
    #[error("invalid partition count {count} for {topic}: {reason}")]
    InvalidPartitions {
        topic: String,
        count: i64,
        reason: &'static str,
    },
    #[error("replica assignment of {topic}: {reason}")]
    InvalidReplicaAssignment { topic: String, reason: String },
    #[error("replication factor {factor} for {topic}: {live} live broker(s)")]
    InvalidReplicationFactor { topic: String, factor: i64, live: usize },
    #[error("invalid config {key}={value}: {reason}")]
    InvalidConfig { key: String, value: String, reason: String },
    /// A broker setting read at start only (a dynamic change names it).
    #[error("cannot update {key} dynamically: set it in server.properties and restart the broker")]
    NotDynamic { key: String },
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    BadFile { path: PathBuf, reason: String },
    #[error("ZooKeeper {op} {path}: {source}")]
    Zk {
        op: &'static str,
        path: String,
        #[source]
        source: zookeeper_client::Error,
    },
    #[error("znode {path}: {reason}")]
    BadZnode { path: String, reason: String },
    #[error("another broker became controller (the controller epoch moved on)")]
    NotController,
    /// The cluster cannot act now (no ZooKeeper session yet, or no
    /// controller): retriable.
    #[error("cluster unavailable: {reason}")]
    Unavailable { reason: String },
}

pub type Result<T, E = ControllerError> = std::result::Result<T, E>;
