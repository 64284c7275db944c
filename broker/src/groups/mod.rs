//! The group coordinator (Kafka's classic consumer-group protocol):
//! membership state machines per group ([`group`], its inputs and
//! answers in [`messages`]), the records of
//! `__consumer_offsets` ([`offsets_format`]), a partition's replayed state
//! ([`partition_state`]), the per-shard driver that loads and writes them
//! ([`coordinator`]) and its operations per API ([`ops`]).

pub mod compaction;
pub mod coordinator;
pub mod error;
pub mod group;
pub mod member;
pub mod messages;
pub mod offsets_format;
pub mod ops;
pub mod partition_state;

pub use coordinator::{partition_for, GroupCoordinator, OffsetsConfig};
pub use error::GroupError;
pub use group::GroupConfig;

/// The internal topic holding committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
