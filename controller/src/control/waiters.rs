//! Requests answered once the partition writes they caused are done: a
//! controlled shutdown, and preferred elections (from the admin znode or an
//! ElectLeaders request).

use std::collections::{BTreeMap, BTreeSet};

use ferrite_ids::TopicPartition;

use super::changes::Change;
use super::{Action, Controller, ElectionOrigin, ElectionResult, ZkChange};
use crate::balance::{self, PartitionLeadership};
use crate::metadata::BrokerId;

pub(super) struct Waiter {
    pub partitions: BTreeSet<TopicPartition>,
    pub kind: WaiterKind,
}

pub(super) enum WaiterKind {
    Shutdown(BrokerId),
    Election {
        origin: ElectionOrigin,
        leaders_before: BTreeMap<TopicPartition, Option<BrokerId>>,
        unknown: Vec<TopicPartition>,
    },
}

impl Controller {
    fn busy(&self, tp: &TopicPartition) -> bool {
        self.pending.contains_key(tp) || self.in_flight.contains_key(tp)
    }

    /// Answers every waiter whose partitions have no change left to make.
    pub(super) fn complete_waiters(&mut self) {
        let waiters = std::mem::take(&mut self.waiters);
        for w in waiters {
            if w.partitions.iter().any(|tp| self.busy(tp)) {
                self.waiters.push(w);
                continue;
            }
            let action = match w.kind {
                WaiterKind::Shutdown(broker) => Action::ShutdownReply {
                    broker,
                    still_leading: self.still_leading(broker),
                },
                WaiterKind::Election {
                    origin: ElectionOrigin::AdminZnode,
                    ..
                } => Action::Zk(ZkChange::PreferredElectionDone),
                WaiterKind::Election {
                    origin: ElectionOrigin::Request(request),
                    leaders_before,
                    unknown,
                } => Action::ElectionReply {
                    request,
                    results: self.election_results(&leaders_before, unknown),
                },
            };
            self.actions.push(action);
        }
    }

    fn election_results(
        &self,
        leaders_before: &BTreeMap<TopicPartition, Option<BrokerId>>,
        unknown: Vec<TopicPartition>,
    ) -> Vec<(TopicPartition, ElectionResult)> {
        let mut out: Vec<(TopicPartition, ElectionResult)> = unknown
            .into_iter()
            .map(|tp| (tp, ElectionResult::UnknownPartition))
            .collect();
        for (tp, before) in leaders_before {
            let preferred = self.replicas(tp).and_then(|r| r.first().copied());
            let now = self.states.get(tp).and_then(|s| s.value.leader);
            let result = match (preferred, now) {
                (Some(p), Some(l)) if p == l && *before == Some(p) => ElectionResult::NotNeeded,
                (Some(p), Some(l)) if p == l => ElectionResult::Elected,
                _ => ElectionResult::NotAvailable,
            };
            out.push((tp.clone(), result));
        }
        out
    }

    /// Elects preferred replicas of `partitions` (`None`: all).
    pub(super) fn on_preferred_election(&mut self, partitions: Option<Vec<TopicPartition>>, origin: ElectionOrigin) {
        let wanted = partitions.unwrap_or_else(|| self.all_partitions());
        let mut leaders_before = BTreeMap::new();
        let mut unknown = Vec::new();
        for tp in wanted {
            if !self.partition_exists(&tp) || self.deleting.contains_key(&tp.topic) {
                unknown.push(tp);
                continue;
            }
            let leader = self.states.get(&tp).and_then(|s| s.value.leader);
            leaders_before.insert(tp.clone(), leader);
            if !self.reassigning.contains_key(&tp) {
                self.want(tp, Change::Preferred);
            }
        }
        self.waiters.push(Waiter {
            partitions: leaders_before.keys().cloned().collect(),
            kind: WaiterKind::Election {
                origin,
                leaders_before,
                unknown,
            },
        });
    }

    /// The periodic leader balance check.
    pub(super) fn on_rebalance_tick(&mut self) {
        let enabled = self.config.auto_rebalance == super::AutoRebalance::Enabled;
        if !enabled || !self.reassigning.is_empty() || !self.deleting.is_empty() {
            return;
        }
        let mut leadership = Vec::new();
        for (tp, state) in &self.states {
            if let Some(&preferred) = self.replicas(tp).and_then(|r| r.first()) {
                leadership.push(PartitionLeadership {
                    key: tp.clone(),
                    preferred,
                    leader: state.value.leader,
                });
            }
        }
        let pct = self.config.imbalance_per_broker_pct;
        for tp in balance::rebalance_candidates(&leadership, pct, &self.eligible()) {
            self.want(tp, Change::Preferred);
        }
    }
}
