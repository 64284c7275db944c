//! The server: listeners on the shards, request routing and the API
//! handlers, the cluster runtime (ZooKeeper thread, replicas, follower
//! fetchers), the group and transaction coordinators' drivers and producer ids, dynamic
//! configuration, metrics, and the `ferrite` binary that runs it (and the
//! administration commands of `ferrite-cli`).
//!
//! Depends on: every crate below it (`ferrite-ids`, `ferrite-protocol`,
//! `ferrite-client`, `ferrite-groups`, `ferrite-transactions`, `ferrite-config`, `ferrite-cli`,
//! `ferrite-transport`, `ferrite-engine`, `ferrite-replication`,
//! `ferrite-controller`). Only the benchmarks and the fuzz targets depend
//! on it.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod clock_watch;
pub mod cluster;
pub mod config_live;
pub mod coordinator_log;
pub mod data_dir_lock;
pub mod error_map;
pub mod groups;
pub mod handlers;
pub mod log_levels;
pub mod metrics;
pub mod net;
pub mod open_files;
pub mod partition_gauges;
pub mod producer_ids;
pub mod server;
pub mod shard;
pub mod shard_groups;
pub mod transactions;
