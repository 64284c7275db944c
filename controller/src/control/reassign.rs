//! Partition reassignment, in the steps the seed documents give: the
//! assignment becomes old ∪ new replicas and the leader epoch is bumped so
//! that every replica learns it; once every new replica is in the ISR,
//! leadership moves into the new set (if it is not there already) and the ISR
//! loses the old replicas, in one state write; then the assignment becomes
//! the new set, the old replicas are told to stop and delete, and the move
//! leaves `/admin/reassign_partitions`.

use ferrite_ids::TopicPartition;

use super::changes::{Change, Proposal};
use super::{Action, Controller, DeleteData, ZkChange};
use crate::election;
use crate::metadata::BrokerId;

pub(super) struct Reassignment {
    target: Vec<BrokerId>,
    phase: Phase,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The union assignment is written; bump the leader epoch.
    Starting,
    /// Waiting for the new replicas to join the ISR.
    CatchingUp,
    /// Move leadership and shrink the ISR to the new set.
    Finishing,
}

impl Controller {
    pub(super) fn on_reassignment_requested(&mut self, moves: Vec<(TopicPartition, Vec<BrokerId>)>) {
        let mut dropped = false;
        for (tp, target) in moves {
            let valid = !target.is_empty() && !target.iter().enumerate().any(|(i, b)| target[..i].contains(b));
            let exists = self.partition_exists(&tp) && !self.deleting.contains_key(&tp.topic);
            if !valid || !exists {
                tracing::warn!(%tp, ?target, "dropping an invalid reassignment");
                dropped = true;
                continue;
            }
            if self.reassigning.get(&tp).is_some_and(|r| r.target == target) {
                continue;
            }
            let current = self.replicas(&tp).map(<[BrokerId]>::to_vec).unwrap_or_default();
            if current == target && !self.reassigning.contains_key(&tp) {
                dropped = true;
                continue;
            }
            let mut union = target.clone();
            union.extend(current.iter().copied().filter(|b| !target.contains(b)));
            tracing::info!(%tp, ?current, ?target, "reassigning");
            self.set_replicas(&tp, union);
            self.reassigning.insert(
                tp.clone(),
                Reassignment {
                    target,
                    phase: Phase::Starting,
                },
            );
            self.want(tp, Change::Reassign);
        }
        if dropped {
            self.reassignments_changed();
        }
    }

    fn set_replicas(&mut self, tp: &TopicPartition, replicas: Vec<BrokerId>) {
        let idx = usize::try_from(tp.partition).ok();
        let slot = self
            .topics
            .get_mut(&tp.topic)
            .and_then(|t| idx.and_then(|i| t.replicas.get_mut(i)));
        if let Some(slot) = slot {
            *slot = replicas;
            self.dirty_assignments.insert(tp.topic.clone());
        }
    }

    /// Rewrites `/admin/reassign_partitions` with the moves under way.
    pub(super) fn reassignments_changed(&mut self) {
        let moves = self
            .reassigning
            .iter()
            .map(|(tp, r)| (tp.clone(), r.target.clone()))
            .collect();
        self.actions.push(Action::Zk(ZkChange::ReassignmentsLeft { moves }));
    }

    /// The state change a reassignment step wants.
    pub(super) fn reassign_step(&self, tp: &TopicPartition, proposal: &mut Proposal) {
        let Some(r) = self.reassigning.get(tp) else { return };
        match r.phase {
            Phase::Starting => proposal.force = true,
            Phase::CatchingUp => {}
            Phase::Finishing => {
                let leader = election::reassigned(&r.target, &proposal.isr, proposal.leader, &self.eligible());
                if let Some(leader) = leader {
                    proposal.leader = Some(leader);
                    proposal.isr.retain(|b| r.target.contains(b));
                    proposal.force = true;
                }
            }
        }
    }

    /// A state write carrying a reassignment step succeeded.
    pub(super) fn reassign_written(&mut self, tp: &TopicPartition) {
        let Some(r) = self.reassigning.get_mut(tp) else { return };
        match r.phase {
            Phase::Starting => r.phase = Phase::CatchingUp,
            Phase::CatchingUp => {}
            Phase::Finishing => {
                let leader = self.states.get(tp).and_then(|s| s.value.leader);
                if !leader.is_some_and(|l| r.target.contains(&l)) {
                    return;
                }
                let target = r.target.clone();
                let old = self.replicas(tp).map(<[BrokerId]>::to_vec).unwrap_or_default();
                for b in old.into_iter().filter(|b| !target.contains(b)) {
                    self.batch.stop_replica(b, tp.clone(), DeleteData::Delete);
                }
                tracing::info!(%tp, ?target, "reassignment done");
                self.set_replicas(tp, target);
                self.reassigning.remove(tp);
                self.reassignments_changed();
            }
        }
    }

    /// Moves a catching-up reassignment on once its new replicas are all in
    /// the ISR; retries a finishing one that found nobody to lead.
    pub(super) fn check_reassignment(&mut self, tp: &TopicPartition) {
        let isr = self.states.get(tp).map(|s| s.value.isr.clone()).unwrap_or_default();
        let Some(r) = self.reassigning.get_mut(tp) else { return };
        match r.phase {
            Phase::CatchingUp if r.target.iter().all(|b| isr.contains(b)) => {
                r.phase = Phase::Finishing;
                self.want(tp.clone(), Change::Reassign);
            }
            Phase::Finishing => self.want(tp.clone(), Change::Reassign),
            _ => {}
        }
    }
}
