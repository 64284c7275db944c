//! The engine's identifiers and quantities: the workspace's newtypes
//! (`ferrite-ids`), re-exported where the engine's users have always found
//! them.

pub use ferrite_ids::{LeaderEpoch, Offset, ProducerId, ShardId, TimestampMs, TopicPartition};
