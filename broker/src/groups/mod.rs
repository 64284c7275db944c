//! The group coordinator (Kafka's classic consumer-group protocol): the
//! per-shard driver that loads `__consumer_offsets` partitions and writes
//! their records ([`coordinator`]) and its operations per API ([`ops`]).
//! The state machines it drives are in `ferrite-groups`.

pub mod coordinator;
pub mod ops;

pub use coordinator::{partition_for, GroupCoordinator, OffsetsConfig};
pub use ferrite_groups::{GroupConfig, GroupError, KeyValue, OFFSETS_TOPIC};
