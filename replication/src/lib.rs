//! Partition replica state: leader and follower roles, the ISR, log end
//! offsets and the high watermark, leader epochs, and produce requests
//! waiting for acks — as a state machine without I/O (events in, actions
//! out), so that the same code runs on a broker's shard and under a seeded
//! simulation.
//!
//! - [`replica`]: [`PartitionReplica`], one partition's replica on one broker;
//!   its leader side ([`leader`]) and follower side ([`follower`]).
//! - [`isr`]: the ISR with at most one change in flight.
//! - [`acks`]: acks=all produce requests waiting for the high watermark.
//! - [`truncation`]: where a follower cuts its log before fetching
//!   (KIP-101/KIP-279).
//! - [`offsets`]: `log_start ≤ hw ≤ leo`, asserted in one setter.
//! - [`action`]: the actions out and the inputs that come back.
//!
//! Depends on: `ferrite-ids` and `ferrite-engine` (the log it drives, in
//! [`local`]). Must not do I/O outside [`local`] (no clock, socket or
//! ZooKeeper), and must not know of the controller or the broker.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod acks;
pub mod action;
pub mod config;
pub mod error;
pub mod follower;
pub mod ids;
pub mod isr;
pub mod leader;
pub mod local;
pub mod offsets;
pub mod replica;
pub mod truncation;

pub use action::{Action, Backoff, Commit, FoundState, IsrWriteOutcome, LeaderAndIsr, LocalLog, ReplicaFetchGrant};
pub use config::ReplicaConfig;
pub use error::{ReplicaOpError, ReplicationError, Result};
pub use ids::{BrokerId, MonoMs, WaiterId, ZkVersion};
pub use leader::Acks;
pub use local::{IsrWrite, LocalReplica, ReplicaLinks};
pub use replica::{PartitionReplica, RoleKind};
pub use truncation::EpochHistory;
