//! The client side of consumer groups: the consumer embedded protocol (the
//! bytes of JoinGroup metadata and SyncGroup assignments), the range,
//! round-robin and sticky partition assignors, and the producer
//! partitioner compatible with the Java client (murmur2 of the key).

pub mod assignor;
pub mod consumer_protocol;
pub mod partitioner;
pub mod range;
pub mod round_robin;
pub mod sticky;
mod wire;
