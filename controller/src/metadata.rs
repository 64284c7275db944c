//! The cluster's metadata: brokers, topics, partitions, their replicas,
//! leaders and ISRs, and topic config overrides. Plain data, `Send`, shared
//! between shards as immutable snapshots.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use ferrite_ids::BrokerId;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerMeta {
    pub id: BrokerId,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionMeta {
    pub partition: i32,
    /// The assignment: the first replica is the preferred leader.
    pub replicas: Vec<BrokerId>,
    /// -1 (`None`) when offline.
    pub leader: Option<BrokerId>,
    pub leader_epoch: i32,
    pub isr: Vec<BrokerId>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMeta {
    pub name: String,
    /// The topic id (a random UUID), as Kafka 2.8+ clients expect.
    pub id: [u8; 16],
    pub partitions: Vec<PartitionMeta>,
    /// Topic-level config overrides (Kafka names).
    pub configs: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMeta {
    /// Bumped by every change, so that shards receiving snapshots out of
    /// order keep the newest.
    #[serde(default)]
    pub version: u64,
    pub cluster_id: String,
    pub controller: BrokerId,
    pub brokers: Vec<BrokerMeta>,
    pub topics: BTreeMap<String, TopicMeta>,
    /// Dynamic broker configs (per broker and the cluster's default; see
    /// [`broker_config`](crate::broker_config)).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub broker_configs: crate::broker_config::BrokerConfigs,
    /// SCRAM credentials by user, then by mechanism name, in Kafka's
    /// stored form (`salt=…,stored_key=…,server_key=…,iterations=…`; see
    /// `ferrite-security`'s `credential.rs`). Kept by a standalone broker;
    /// a cluster keeps them in ZooKeeper (not built yet).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scram_credentials: BTreeMap<String, BTreeMap<String, String>>,
    /// ACLs (standalone; a cluster keeps them in ZooKeeper, not built yet),
    /// kept sorted and without repeats.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acls: Vec<AclEntry>,
}

/// One ACL, by Kafka's codes (see `ferrite-security`'s `acl.rs`): a
/// resource pattern and who may, or may not, do what on it from where.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct AclEntry {
    pub resource_type: i8,
    pub name: String,
    pub pattern_type: i8,
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission: i8,
}

impl TopicMeta {
    /// Partition `p` (partitions are numbered densely from 0 and kept in order).
    pub fn partition(&self, p: i32) -> Option<&PartitionMeta> {
        let found = usize::try_from(p).ok().and_then(|i| self.partitions.get(i));
        found.filter(|x| x.partition == p)
    }
}

impl ClusterMeta {
    pub fn topic(&self, name: &str) -> Option<&TopicMeta> {
        self.topics.get(name)
    }

    pub fn broker(&self, id: BrokerId) -> Option<&BrokerMeta> {
        self.brokers.iter().find(|b| b.id == id)
    }
}
