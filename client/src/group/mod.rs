//! The client side of consumer groups (the consumer embedded protocol, the
//! bytes of JoinGroup metadata and SyncGroup assignments, is in
//! `ferrite_protocol::consumer_protocol`): the range,
//! round-robin and sticky partition assignors, the producer partitioner
//! compatible with the Java client (murmur2 of the key), and a blocking
//! group member ([`member::GroupMember`]) over a coordinator client.

pub mod assignor;
pub mod coordinator_client;
pub mod member;
pub mod member_error;
pub mod partitioner;
pub mod range;
pub mod round_robin;
pub mod sticky;
