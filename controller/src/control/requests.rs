//! Collects the controller → broker requests one event causes and turns
//! them into one request per broker and kind (Kafka's
//! ControllerBrokerRequestBatch): LeaderAndIsr first, then UpdateMetadata,
//! then StopReplica. States are read when the batch is sent, so each
//! request carries the newest.

use std::collections::{BTreeMap, BTreeSet};

use ferrite_ids::TopicPartition;

use super::{Action, Controller, ControllerRequest, DeleteData, PartitionInfo};
use crate::metadata::{BrokerId, BrokerMeta};

#[derive(Default)]
pub(super) struct RequestBatch {
    leader_and_isr: BTreeMap<BrokerId, BTreeSet<TopicPartition>>,
    metadata: BTreeSet<TopicPartition>,
    deleted_topics: BTreeSet<String>,
    brokers_changed: bool,
    full_metadata: BTreeSet<BrokerId>,
    stop_replica: BTreeMap<(BrokerId, DeleteData), BTreeSet<TopicPartition>>,
}

impl RequestBatch {
    pub fn leader_and_isr(&mut self, broker: BrokerId, tp: TopicPartition) {
        self.leader_and_isr.entry(broker).or_default().insert(tp);
    }

    pub fn metadata(&mut self, tp: TopicPartition) {
        self.metadata.insert(tp);
    }

    pub fn deleted_topic(&mut self, topic: String) {
        self.deleted_topics.insert(topic);
    }

    pub fn brokers_changed(&mut self) {
        self.brokers_changed = true;
    }

    /// `broker` gets every partition's state in its next UpdateMetadata.
    pub fn full_metadata_to(&mut self, broker: BrokerId) {
        self.full_metadata.insert(broker);
    }

    pub fn stop_replica(&mut self, broker: BrokerId, tp: TopicPartition, delete: DeleteData) {
        self.stop_replica.entry((broker, delete)).or_default().insert(tp);
    }

    /// The requests, addressed to live brokers only.
    pub fn into_actions(self, c: &Controller) -> Vec<Action> {
        let mut out = Vec::new();
        let send = |to: BrokerId, request: ControllerRequest| Action::Send {
            to,
            controller_epoch: c.epoch,
            request,
        };
        for (broker, tps) in &self.leader_and_isr {
            if !c.live.contains_key(broker) {
                continue;
            }
            let partitions: Vec<PartitionInfo> = tps.iter().filter_map(|tp| c.partition_info(tp)).collect();
            if partitions.is_empty() {
                continue;
            }
            let leader_ids: BTreeSet<BrokerId> = partitions.iter().filter_map(|p| p.leader).collect();
            let leaders: Vec<BrokerMeta> = leader_ids
                .iter()
                .filter_map(|b| c.live.get(b))
                .map(|l| l.meta.clone())
                .collect();
            out.push(send(*broker, ControllerRequest::LeaderAndIsr { partitions, leaders }));
        }
        let brokers: Vec<BrokerMeta> = c.live.values().map(|l| l.meta.clone()).collect();
        let changed: Vec<PartitionInfo> = self.metadata.iter().filter_map(|tp| c.partition_info(tp)).collect();
        let deleted: Vec<String> = self.deleted_topics.iter().cloned().collect();
        let anything = self.brokers_changed || !changed.is_empty() || !deleted.is_empty();
        for &broker in c.live.keys() {
            let partitions = if self.full_metadata.contains(&broker) {
                c.all_partitions()
                    .iter()
                    .filter_map(|tp| c.partition_info(tp))
                    .collect()
            } else if anything {
                changed.clone()
            } else {
                continue;
            };
            let request = ControllerRequest::UpdateMetadata {
                brokers: brokers.clone(),
                partitions,
                deleted_topics: deleted.clone(),
            };
            out.push(send(broker, request));
        }
        for ((broker, delete), tps) in self.stop_replica {
            if c.live.contains_key(&broker) {
                let partitions = tps.into_iter().collect();
                out.push(send(broker, ControllerRequest::StopReplica { partitions, delete }));
            }
        }
        out
    }
}

impl Controller {
    /// `tp` as requests carry it; `None` without a state or while deleting.
    pub(super) fn partition_info(&self, tp: &TopicPartition) -> Option<PartitionInfo> {
        if self.deleting.contains_key(&tp.topic) {
            return None;
        }
        let topic = self.topics.get(&tp.topic)?;
        let state = self.states.get(tp)?;
        Some(PartitionInfo {
            partition: tp.clone(),
            topic_id: topic.id,
            leader: state.value.leader,
            leader_epoch: state.value.leader_epoch,
            isr: state.value.isr.clone(),
            replicas: self.replicas(tp)?.to_vec(),
            zk_version: state.version,
        })
    }

    /// Turns the requests collected during an event into actions.
    pub(super) fn flush_requests(&mut self) {
        let batch = std::mem::take(&mut self.batch);
        let requests = batch.into_actions(self);
        self.actions.extend(requests);
    }
}
