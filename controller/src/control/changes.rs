//! Deciding and writing partition states: why a partition may need a new
//! state ([`Change`]), what that state is, and what happens when the
//! conditional write comes back.

use std::collections::BTreeSet;

use ferrite_ids::TopicPartition;

use super::{Action, Controller, DeleteData, StateWrite, WriteOutcome};
use crate::election;
use crate::metadata::BrokerId;
use crate::partition_state::{PartitionState, Versioned};

/// Why a partition may need a new state. Several may be pending at once;
/// they are applied in this order to the running proposal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Change {
    /// A replica's broker came or went, or the partition is new: create its
    /// state, elect a leader if it has none alive, drop dead brokers from
    /// the ISR.
    Membership,
    /// A replica's broker is shutting down: move leadership off it and take
    /// it out of the ISR.
    ShuttingDown,
    /// A step of a reassignment.
    Reassign,
    /// Give leadership back to the preferred replica.
    Preferred,
    /// The leader found its log damaged: another ISR member leads, and the
    /// damaged replica leaves the ISR until it has fetched the range again.
    Resign,
}

/// A proposed leader and ISR, and whether to write it even if unchanged
/// (to bump the leader epoch).
pub(super) struct Proposal {
    pub leader: Option<BrokerId>,
    pub isr: Vec<BrokerId>,
    pub force: bool,
}

impl Controller {
    /// Records that `tp` may need a new state because of `change`.
    pub(super) fn want(&mut self, tp: TopicPartition, change: Change) {
        if self.partition_exists(&tp) && !self.deleting.contains_key(&tp.topic) {
            self.pending.entry(tp).or_default().insert(change);
        }
    }

    /// Decides and writes the new state of every pending partition that has
    /// no write in flight.
    pub(super) fn issue_writes(&mut self) {
        let ready: Vec<TopicPartition> = self
            .pending
            .keys()
            .filter(|tp| !self.in_flight.contains_key(*tp))
            .cloned()
            .collect();
        let mut writes = Vec::new();
        for tp in ready {
            let changes = self.pending.remove(&tp).unwrap_or_default();
            if let Some(write) = self.decide(&tp, &changes) {
                self.in_flight.insert(tp, (write.state.clone(), changes));
                writes.push(write);
            } else if changes.contains(&Change::Resign) {
                self.resign_not_possible(&tp);
            }
        }
        if !writes.is_empty() {
            self.actions.push(Action::WriteStates(writes));
        }
    }

    fn decide(&self, tp: &TopicPartition, changes: &BTreeSet<Change>) -> Option<StateWrite> {
        if self.deleting.contains_key(&tp.topic) {
            return None;
        }
        let replicas = self.replicas(tp)?.to_vec();
        let eligible = self.eligible();
        let Some(current) = self.states.get(tp) else {
            // A new partition: the first eligible replica leads, the ISR is
            // every eligible replica. With none, it waits for a broker.
            let isr: Vec<BrokerId> = replicas.iter().copied().filter(|b| eligible.contains(b)).collect();
            let leader = *isr.first()?;
            return Some(StateWrite {
                partition: tp.clone(),
                state: PartitionState::initial(Some(leader), isr, self.epoch),
                expected: None,
            });
        };
        let mut proposal = Proposal {
            leader: current.value.leader,
            isr: current.value.isr.clone(),
            force: false,
        };
        for change in changes {
            match change {
                Change::Membership => self.membership(tp, &replicas, &mut proposal),
                Change::ShuttingDown => self.shutting_down_move(&replicas, &mut proposal),
                Change::Reassign => self.reassign_step(tp, &mut proposal),
                Change::Resign => self.resign_move(tp, &replicas, &mut proposal),
                Change::Preferred => {
                    if let Some(p) = election::preferred(&replicas, &proposal.isr, proposal.leader, &eligible) {
                        proposal.leader = Some(p);
                    }
                }
            }
        }
        if proposal.leader.is_some_and(|l| !proposal.isr.contains(&l)) {
            // Only a corrupt state read from ZooKeeper gets here: elect anew.
            self.elect_offline(tp, &replicas, &mut proposal);
        }
        let unchanged = proposal.leader == current.value.leader && proposal.isr == current.value.isr;
        if unchanged && !proposal.force {
            return None;
        }
        Some(StateWrite {
            partition: tp.clone(),
            state: current.value.next(proposal.leader, proposal.isr, self.epoch),
            expected: Some(current.version),
        })
    }

    fn membership(&self, tp: &TopicPartition, replicas: &[BrokerId], proposal: &mut Proposal) {
        match proposal.leader {
            Some(leader) if self.live.contains_key(&leader) => {
                proposal.isr.retain(|b| self.live.contains_key(b));
            }
            _ => self.elect_offline(tp, replicas, proposal),
        }
    }

    fn elect_offline(&self, tp: &TopicPartition, replicas: &[BrokerId], proposal: &mut Proposal) {
        let unclean = self.unclean_for(&tp.topic);
        let outcome = election::offline(replicas, &proposal.isr, &self.eligible(), unclean);
        if outcome.kind == election::OutcomeKind::Unclean {
            tracing::warn!(%tp, leader = ?outcome.leader, isr = ?proposal.isr, "unclean leader election");
            // Counted where the operator looks (the controller's /metrics).
            metrics::counter!("ferrite_unclean_leader_elections_total", "topic" => tp.topic.clone()).increment(1);
        }
        proposal.leader = outcome.leader;
        proposal.isr = outcome.isr;
    }

    fn shutting_down_move(&self, replicas: &[BrokerId], proposal: &mut Proposal) {
        let Some(leader) = proposal.leader else { return };
        if self.shutting_down.contains(&leader) {
            let moved = election::controlled_shutdown(replicas, &proposal.isr, &self.eligible(), &self.shutting_down);
            if let Some((new_leader, isr)) = moved {
                proposal.leader = Some(new_leader);
                proposal.isr = isr;
            }
        } else {
            proposal.isr.retain(|b| !self.shutting_down.contains(b));
        }
    }

    /// Applies the outcome of conditional state writes.
    pub(super) fn on_states_written(&mut self, results: Vec<(TopicPartition, WriteOutcome)>) {
        for (tp, outcome) in results {
            let Some((state, changes)) = self.in_flight.remove(&tp) else {
                tracing::warn!(%tp, "a state write result nobody waits for");
                continue;
            };
            if !self.partition_exists(&tp) || self.deleting.contains_key(&tp.topic) {
                continue;
            }
            match outcome {
                WriteOutcome::Written(version) => {
                    if changes.contains(&Change::Resign) {
                        self.resigning.remove(&tp);
                    }
                    self.states.insert(tp.clone(), Versioned { value: state, version });
                    if changes.contains(&Change::Reassign) {
                        self.reassign_written(&tp);
                    }
                    self.announce(&tp);
                }
                WriteOutcome::Conflict(found) => {
                    tracing::info!(%tp, ?found, "partition state changed under the controller; deciding again");
                    match found {
                        Some(s) => self.states.insert(tp.clone(), s),
                        None => self.states.remove(&tp),
                    };
                    self.pending.entry(tp.clone()).or_default().extend(changes);
                }
            }
            self.check_reassignment(&tp);
        }
    }

    /// Sends `tp`'s new state: LeaderAndIsr to its live replicas (a
    /// StopReplica to those shutting down), UpdateMetadata to every broker.
    pub(super) fn announce(&mut self, tp: &TopicPartition) {
        let replicas = self.replicas(tp).map(<[BrokerId]>::to_vec).unwrap_or_default();
        let leader = self.states.get(tp).and_then(|s| s.value.leader);
        for b in replicas {
            if !self.live.contains_key(&b) {
                continue;
            }
            if self.shutting_down.contains(&b) && leader != Some(b) {
                // Stop its fetching, or the leader would take it back into the ISR.
                self.batch.stop_replica(b, tp.clone(), DeleteData::Keep);
            } else {
                self.batch.leader_and_isr(b, tp.clone());
            }
        }
        self.batch.metadata(tp.clone());
    }

    /// Leaders changed ISRs themselves; keep the newer versions.
    pub(super) fn on_isr_changed(&mut self, states: Vec<(TopicPartition, Versioned<PartitionState>)>) {
        for (tp, state) in states {
            if !self.partition_exists(&tp) || self.deleting.contains_key(&tp.topic) {
                continue;
            }
            let newer = self.states.get(&tp).is_none_or(|s| s.version < state.version);
            if newer {
                self.states.insert(tp.clone(), state);
                self.batch.metadata(tp.clone());
                self.check_reassignment(&tp);
            }
        }
    }
}
