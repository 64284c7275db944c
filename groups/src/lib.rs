//! Kafka's classic consumer-group protocol as state machines, free of I/O:
//! a group's membership ([`group`], its inputs and answers in
//! [`messages`], its members in [`member`]), the records of
//! `__consumer_offsets` ([`offsets_format`]), a partition's state replayed
//! from them ([`partition_state`]). The engine's log cleaner compacts the
//! topic (keeping offsets). Time comes in as [`ferrite_ids::MonoMs`]; the broker's
//! group coordinator drives them, reads and writes the log, and answers the
//! wire.
//!
//! Depends on: `ferrite-ids` and `ferrite-protocol` (the offsets records use
//! the wire's primitives). It must not depend on the engine, replication,
//! the controller or the broker, nor do any I/O.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod error;
pub mod group;
pub mod member;
pub mod messages;
pub mod offsets_format;
pub mod partition_state;

pub use error::GroupError;
pub use group::GroupConfig;

/// The internal topic holding committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// One `__consumer_offsets` record: its key and its value (`None` for a
/// tombstone).
pub type KeyValue = (Vec<u8>, Option<Vec<u8>>);

/// The offsets topic's settings (Kafka's `offsets.*` names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetsConfig {
    /// `offsets.topic.num.partitions`
    pub partitions: i32,
    /// `offsets.topic.replication.factor`
    pub replication_factor: i16,
    /// `offsets.topic.segment.bytes`
    pub segment_bytes: u64,
    /// `offsets.retention.minutes`, in ms.
    pub retention_ms: u64,
    /// `offset.metadata.max.bytes`
    pub metadata_bytes_max: usize,
    /// `offsets.retention.check.interval.ms`
    pub retention_check_interval_ms: u64,
}

impl Default for OffsetsConfig {
    fn default() -> OffsetsConfig {
        OffsetsConfig {
            partitions: 50,
            replication_factor: 3,
            segment_bytes: 100 << 20,
            retention_ms: 7 * 24 * 3600 * 1000,
            metadata_bytes_max: 4096,
            retention_check_interval_ms: 600_000,
        }
    }
}
