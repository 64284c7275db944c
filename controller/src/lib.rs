//! Cluster metadata and the controller.
//!
//! Built so far: the metadata model ([`metadata`]), Kafka's topic-name rules
//! and replica assignment ([`topic`], [`assignment`]), and the embedded
//! single-node metadata store that `ferrite standalone` uses
//! ([`embedded`]). Controller election, the partition and replica state
//! machines, leader balance and the ZooKeeper store are the subject of the
//! controller issue.

pub mod assignment;
pub mod embedded;
pub mod error;
pub mod metadata;
pub mod topic;
pub mod topic_config;

pub use error::{ControllerError, Result};
pub use metadata::{BrokerId, BrokerMeta, ClusterMeta, PartitionMeta, TopicMeta};
