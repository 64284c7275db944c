//! Kafka's classic consumer-group protocol as state machines, free of I/O:
//! a group's membership ([`group`], its inputs and answers in
//! [`messages`], its members in [`member`]), the records of
//! `__consumer_offsets` ([`offsets_format`]), a partition's state replayed
//! from them ([`partition_state`]) and what compaction keeps of it
//! ([`compaction`]). Time comes in as [`ferrite_ids::MonoMs`]; the broker's
//! group coordinator drives them, reads and writes the log, and answers the
//! wire.
//!
//! Depends on: `ferrite-ids` and `ferrite-protocol` (the offsets records use
//! the wire's primitives). It must not depend on the engine, replication,
//! the controller or the broker, nor do any I/O.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod compaction;
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
