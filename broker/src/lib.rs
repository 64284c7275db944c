//! The broker: listeners on the shards, the Kafka wire protocol, request
//! routing and API handlers, the cluster runtime, the group and producer
//! coordinators, configuration, metrics and the `ferrite` CLI.
//!
//! Depends on: every crate below it (`ferrite-ids`, `ferrite-protocol`,
//! `ferrite-client`, `ferrite-engine`, `ferrite-replication`, `ferrite-controller`). Only the benchmarks depend
//! on it.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod cluster;
pub mod config;
pub mod config_defs;
pub mod config_live;
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
