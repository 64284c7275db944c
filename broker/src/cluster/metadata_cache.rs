//! The metadata a clustered broker serves, merged from the controller's
//! UpdateMetadata requests: every request names all live brokers and the
//! partitions whose state changed (and the topics deleted).

use std::collections::BTreeMap;

use ferrite_controller::control::PartitionInfo;
use ferrite_controller::{BrokerId, BrokerMeta, ClusterMeta, PartitionMeta, TopicMeta};
use ferrite_engine::TopicPartition;

/// One UpdateMetadata, as the broker received it.
#[derive(Clone, Debug)]
pub struct MetadataUpdate {
    pub controller: BrokerId,
    pub brokers: Vec<BrokerMeta>,
    pub partitions: Vec<PartitionInfo>,
    pub deleted_topics: Vec<String>,
}

#[derive(Debug)]
pub struct MetaCache {
    cluster_id: String,
    controller: BrokerId,
    brokers: Vec<BrokerMeta>,
    partitions: BTreeMap<TopicPartition, PartitionInfo>,
    version: u64,
}

impl Default for MetaCache {
    fn default() -> Self {
        MetaCache {
            cluster_id: String::new(),
            controller: BrokerId(-1),
            brokers: Vec::new(),
            partitions: BTreeMap::new(),
            version: 0,
        }
    }
}

impl MetaCache {
    pub fn set_cluster_id(&mut self, id: &str) {
        self.cluster_id = id.to_string();
    }

    /// Applies one update; returns the whole metadata as it now stands.
    pub fn apply(&mut self, update: MetadataUpdate) -> ClusterMeta {
        self.controller = update.controller;
        self.brokers = update.brokers;
        self.brokers.sort_by_key(|b| b.id);
        for p in update.partitions {
            self.partitions.insert(p.partition.clone(), p);
        }
        self.partitions
            .retain(|tp, _| !update.deleted_topics.contains(&tp.topic));
        self.version += 1;
        self.snapshot()
    }

    fn snapshot(&self) -> ClusterMeta {
        let mut topics: BTreeMap<String, TopicMeta> = BTreeMap::new();
        for (tp, p) in &self.partitions {
            let t = topics.entry(tp.topic.clone()).or_insert_with(|| TopicMeta {
                name: tp.topic.clone(),
                id: p.topic_id,
                partitions: Vec::new(),
                configs: BTreeMap::new(),
            });
            t.partitions.push(PartitionMeta {
                partition: tp.partition,
                replicas: p.replicas.clone(),
                leader: p.leader,
                leader_epoch: p.leader_epoch.0,
                isr: p.isr.clone(),
            });
        }
        // Partitions are numbered densely from 0; a topic whose partitions
        // have not all arrived yet shows only its dense prefix.
        for t in topics.values_mut() {
            let dense = t
                .partitions
                .iter()
                .enumerate()
                .take_while(|(i, p)| p.partition == *i as i32)
                .count();
            t.partitions.truncate(dense);
        }
        topics.retain(|_, t| !t.partitions.is_empty());
        ClusterMeta {
            version: self.version,
            cluster_id: self.cluster_id.clone(),
            controller: self.controller,
            brokers: self.brokers.clone(),
            topics,
            // Filled from ZooKeeper by the shards (`fill_topic_configs`).
            broker_configs: Default::default(),
            scram_credentials: Default::default(),
            acls: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_controller::partition_state::ZkVersion;
    use ferrite_engine::LeaderEpoch;

    fn info(topic: &str, p: i32, leader: i32, epoch: i32) -> PartitionInfo {
        PartitionInfo {
            partition: TopicPartition::new(topic, p),
            topic_id: [1; 16],
            leader: Some(BrokerId(leader)),
            leader_epoch: LeaderEpoch(epoch),
            isr: vec![BrokerId(leader)],
            replicas: vec![BrokerId(leader)],
            zk_version: ZkVersion(0),
        }
    }

    #[test]
    fn updates_merge_and_deletions_remove() {
        let mut c = MetaCache::default();
        let m = c.apply(MetadataUpdate {
            controller: BrokerId(1),
            brokers: vec![],
            partitions: vec![info("a", 0, 1, 0), info("a", 1, 2, 0), info("b", 0, 1, 0)],
            deleted_topics: vec![],
        });
        assert_eq!(m.topics["a"].partitions.len(), 2);
        let m = c.apply(MetadataUpdate {
            controller: BrokerId(2),
            brokers: vec![],
            partitions: vec![info("a", 1, 3, 1)],
            deleted_topics: vec!["b".into()],
        });
        assert_eq!(m.controller, BrokerId(2));
        assert_eq!(m.topics["a"].partitions[1].leader, Some(BrokerId(3)));
        assert_eq!(m.topics["a"].partitions[0].leader, Some(BrokerId(1)));
        assert!(!m.topics.contains_key("b"));
        assert!(m.version > 1);
        // A gap (partition 1 missing) hides what follows it.
        let m = c.apply(MetadataUpdate {
            controller: BrokerId(2),
            brokers: vec![],
            partitions: vec![info("c", 0, 1, 0), info("c", 2, 1, 0)],
            deleted_topics: vec![],
        });
        assert_eq!(m.topics["c"].partitions.len(), 1);
    }
}
