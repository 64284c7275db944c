//! Cluster metadata and the controller.
//!
//! - [`metadata`], [`topic`], [`topic_config`], [`assignment`]: the metadata
//!   model, Kafka's topic-name rules, topic configs, replica assignment.
//! - [`embedded`]: the single-node metadata store `ferrite standalone` uses.
//! - [`partition_state`], [`election`], [`balance`]: partition leadership
//!   state, the leader election algorithms, leader imbalance.
//! - [`control`]: the controller as a state machine without I/O (events in,
//!   actions out): membership, topic lifecycle, elections, controlled
//!   shutdown, preferred elections and leader balance, reassignment.
//! - [`zk`]: the ZooKeeper store in Kafka's znode layout; [`driver`]: the
//!   session, controller election, and [`control`] run against ZooKeeper.
//!
//! Depends on: `ferrite-ids`, and `ferrite-engine` for [`topic_config`]'s
//! log settings only. Must not use replication or the broker, and keeps
//! [`control`] free of I/O.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod assignment;
pub mod balance;
pub mod broker_config;
pub mod control;
pub mod driver;
pub mod election;
pub mod embedded;
pub mod error;
pub mod metadata;
pub mod partition_state;
pub mod producer_ids;
pub mod topic;
pub mod topic_config;
pub mod topic_config_defs;
pub mod zk;

pub use error::{ControllerError, Result};
pub use metadata::{BrokerId, BrokerMeta, ClusterMeta, PartitionMeta, TopicMeta};
