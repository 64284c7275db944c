//! Brokers coming and going, and controlled shutdown.

use std::collections::{BTreeMap, BTreeSet};

use ferrite_ids::TopicPartition;

use super::changes::Change;
use super::waiters::{Waiter, WaiterKind};
use super::{Action, Controller, DeleteData, LiveBroker};
use crate::metadata::BrokerId;

impl Controller {
    /// `/brokers/ids` changed. A broker whose registration epoch changed
    /// restarted unnoticed: it counts as gone and back.
    pub(super) fn on_brokers_changed(&mut self, live: Vec<LiveBroker>) {
        let new: BTreeMap<BrokerId, LiveBroker> = live.into_iter().map(|b| (b.meta.id, b)).collect();
        let gone: BTreeSet<BrokerId> = self
            .live
            .iter()
            .filter(|(id, old)| new.get(id).is_none_or(|n| n.epoch != old.epoch))
            .map(|(id, _)| *id)
            .collect();
        let came: BTreeSet<BrokerId> = new
            .iter()
            .filter(|(id, n)| self.live.get(id).is_none_or(|old| old.epoch != n.epoch))
            .map(|(id, _)| *id)
            .collect();
        let endpoints_changed = new
            .iter()
            .any(|(id, n)| self.live.get(id).is_some_and(|o| o.meta != n.meta));
        if gone.is_empty() && came.is_empty() && !endpoints_changed {
            return;
        }
        tracing::info!(?gone, ?came, "brokers changed");
        self.live = new;
        for b in &gone {
            self.shutting_down.remove(b);
        }
        self.batch.brokers_changed();
        for &b in &came {
            self.batch.full_metadata_to(b);
            self.send_all_replicas_of(b);
            self.resend_deletions_to(b);
        }
        let touched: BTreeSet<BrokerId> = gone.union(&came).copied().collect();
        for tp in self.all_partitions() {
            let affected = self
                .replicas(&tp)
                .is_some_and(|r| r.iter().any(|b| touched.contains(b)));
            if affected {
                self.want(tp.clone(), Change::Membership);
                self.check_reassignment(&tp);
            }
        }
    }

    fn resend_deletions_to(&mut self, broker: BrokerId) {
        for (topic, replicas) in &self.deleting {
            for &(b, p) in replicas {
                if b == broker {
                    let tp = TopicPartition::new(topic.clone(), p);
                    self.batch.stop_replica(broker, tp, DeleteData::Delete);
                }
            }
        }
    }

    /// A broker wants to stop: move its leaderships to other ISR members and
    /// take it out of every ISR; answer once the writes are done.
    pub(super) fn on_controlled_shutdown(&mut self, broker: BrokerId) {
        if !self.live.contains_key(&broker) {
            let reply = Action::ShutdownReply {
                broker,
                still_leading: Vec::new(),
            };
            self.actions.push(reply);
            return;
        }
        self.shutting_down.insert(broker);
        let mut partitions = BTreeSet::new();
        for tp in self.all_partitions() {
            if self.replicas(&tp).is_some_and(|r| r.contains(&broker)) {
                self.want(tp.clone(), Change::ShuttingDown);
                partitions.insert(tp);
            }
        }
        self.waiters.push(Waiter {
            partitions,
            kind: WaiterKind::Shutdown(broker),
        });
    }

    /// The partitions `broker` leads that another replica could lead
    /// (single-replica partitions cannot move).
    pub(super) fn still_leading(&self, broker: BrokerId) -> Vec<TopicPartition> {
        self.states
            .iter()
            .filter(|(tp, s)| s.value.leader == Some(broker) && self.replicas(tp).is_some_and(|r| r.len() > 1))
            .map(|(tp, _)| tp.clone())
            .collect()
    }
}
