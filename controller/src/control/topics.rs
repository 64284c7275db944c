//! Topic lifecycle: new topics and partitions (their states are created by
//! the membership change path), config changes, deletion.

use std::collections::{BTreeMap, BTreeSet};

use ferrite_ids::TopicPartition;

use super::changes::Change;
use super::{Action, Controller, DeleteData, Topic, TopicAssignment, ZkChange};
use crate::election::UncleanElection;
use crate::metadata::BrokerId;

/// A topic's `unclean.leader.election.enable` override, if it has one.
pub(super) fn unclean_override(configs: &BTreeMap<String, String>) -> Option<UncleanElection> {
    configs
        .get("unclean.leader.election.enable")
        .and_then(|v| unclean_value(v))
}

/// An `unclean.leader.election.enable` value (checked case-insensitively,
/// as Kafka reads booleans).
pub(crate) fn unclean_value(v: &str) -> Option<UncleanElection> {
    match v.to_ascii_lowercase().as_str() {
        "true" => Some(UncleanElection::Enabled),
        "false" => Some(UncleanElection::Disabled),
        _ => None,
    }
}

/// Whether every partition has replicas, none twice.
fn well_formed(replicas: &[Vec<BrokerId>]) -> bool {
    replicas.iter().all(|r| {
        let distinct: BTreeSet<&BrokerId> = r.iter().collect();
        !r.is_empty() && distinct.len() == r.len()
    })
}

impl Controller {
    /// New topics get their partitions' states created; known topics with
    /// more partitions get the new ones'.
    pub(super) fn on_topics_changed(&mut self, topics: Vec<TopicAssignment>) {
        for t in topics {
            if self.deleting.contains_key(&t.name) || !well_formed(&t.replicas) {
                tracing::warn!(topic = %t.name, "ignoring a topic being deleted or with a malformed assignment");
                continue;
            }
            let first_new = match self.topics.get_mut(&t.name) {
                None => {
                    let topic = Topic {
                        id: t.id,
                        replicas: t.replicas,
                        unclean: unclean_override(&t.configs),
                    };
                    self.topics.insert(t.name.clone(), topic);
                    0
                }
                Some(known) if known.id != t.id => {
                    tracing::warn!(topic = %t.name, "topic id changed; ignoring the new assignment");
                    continue;
                }
                Some(known) => {
                    let before = known.replicas.len();
                    if t.replicas.len() > before {
                        known.replicas.extend_from_slice(&t.replicas[before..]);
                    }
                    before
                }
            };
            let count = self.topics.get(&t.name).map_or(0, |x| x.replicas.len());
            for p in first_new..count {
                self.want(TopicPartition::new(t.name.clone(), p as i32), Change::Membership);
            }
        }
    }

    /// A topic's configs changed; turning unclean election on elects
    /// leaders for its offline partitions.
    pub(super) fn on_topic_config_changed(&mut self, topic: &str, configs: &BTreeMap<String, String>) {
        let Some(t) = self.topics.get_mut(topic) else { return };
        t.unclean = unclean_override(configs);
        self.retry_offline(topic);
    }

    /// The broker-wide unclean setting changed: turning it on elects
    /// leaders for the offline partitions of topics that do not override it.
    pub(super) fn on_broker_unclean_changed(&mut self, unclean: Option<UncleanElection>) {
        if self.dynamic_unclean == unclean {
            return;
        }
        tracing::info!(?unclean, "dynamic unclean.leader.election.enable changed");
        self.dynamic_unclean = unclean;
        let names: Vec<String> = self.topics.keys().cloned().collect();
        for name in names {
            self.retry_offline(&name);
        }
    }

    /// Has the offline partitions of `topic` elected again.
    fn retry_offline(&mut self, topic: &str) {
        let count = self.topics.get(topic).map_or(0, |t| t.replicas.len());
        for p in 0..count {
            let tp = TopicPartition::new(topic, p as i32);
            if self.states.get(&tp).is_some_and(|s| s.value.leader.is_none()) {
                self.want(tp, Change::Membership);
            }
        }
    }

    /// Starts deleting topics: every replica is told to stop and delete its
    /// data; the znodes go once every replica confirmed. Replicas on brokers
    /// that are down are told when they come back.
    pub(super) fn on_deletions_requested(&mut self, topics: Vec<String>) {
        for name in topics {
            if self.deleting.contains_key(&name) {
                continue;
            }
            let Some(topic) = self.topics.get(&name) else {
                self.actions
                    .push(Action::Zk(ZkChange::DropDeletionRequest { topic: name }));
                continue;
            };
            let mut replicas = BTreeSet::new();
            for (p, rs) in topic.replicas.iter().enumerate() {
                for &b in rs {
                    replicas.insert((b, p as i32));
                }
            }
            tracing::info!(topic = %name, "deleting topic");
            self.pending.retain(|tp, _| tp.topic != name);
            let before = self.reassigning.len();
            self.reassigning.retain(|tp, _| tp.topic != name);
            if self.reassigning.len() != before {
                self.reassignments_changed();
            }
            for &(b, p) in &replicas {
                self.batch
                    .stop_replica(b, TopicPartition::new(name.clone(), p), DeleteData::Delete);
            }
            self.batch.deleted_topic(name.clone());
            self.deleting.insert(name.clone(), replicas);
            self.finish_deletion_if_done(&name);
        }
    }

    pub(super) fn on_stop_replica_done(&mut self, broker: BrokerId, partitions: Vec<TopicPartition>) {
        for tp in partitions {
            if let Some(left) = self.deleting.get_mut(&tp.topic) {
                left.remove(&(broker, tp.partition));
                self.finish_deletion_if_done(&tp.topic);
            }
        }
    }

    fn finish_deletion_if_done(&mut self, name: &str) {
        if !self.deleting.get(name).is_some_and(BTreeSet::is_empty) {
            return;
        }
        tracing::info!(topic = %name, "topic deleted");
        self.deleting.remove(name);
        self.topics.remove(name);
        self.states.retain(|tp, _| tp.topic != name);
        let topic = name.to_string();
        self.actions.push(Action::Zk(ZkChange::DeleteTopic { topic }));
    }
}
