//! Replicas whose log is damaged leave the ISR before they heal.
//!
//! A broker's scrubber that finds a damaged range in a replica's log fences
//! the range and announces the damage under `/replica_damage_notification`.
//! Healing means cutting the log at the damage and fetching the range
//! again, which takes the replica below the high watermark: it must not be
//! in the ISR then, or an election could pick a replica that lacks
//! acknowledged records. So the controller takes the damaged replica out of
//! the ISR in a new leader epoch — moving leadership to another in-sync
//! replica first if it led, as a controlled shutdown does for one partition
//! — and the LeaderAndIsr that says so is what lets the replica cut its log
//! (`LocalReplica::leader_and_isr`); it rejoins the ISR when caught up. With
//! no other in-sync replica to lead, nothing moves: the range stays fenced.

use std::collections::BTreeSet;

use ferrite_ids::TopicPartition;

use super::changes::{Change, Proposal};
use super::Controller;
use crate::election;
use crate::metadata::BrokerId;

impl Controller {
    pub(super) fn on_replicas_damaged(&mut self, replicas: Vec<(BrokerId, TopicPartition)>) {
        for (broker, tp) in replicas {
            let holds = self.replicas(&tp).is_some_and(|r| r.contains(&broker));
            if !holds || !self.states.contains_key(&tp) {
                continue;
            }
            tracing::warn!(%tp, %broker, "a replica's log is damaged: taking it out of the ISR");
            self.resigning.insert(tp.clone(), broker);
            self.want(tp, Change::Resign);
        }
    }

    /// The part of a proposal that takes a damaged replica out of the ISR
    /// (and leadership off it). Written in a new epoch even when the ISR
    /// already lacks it, so that it gets a LeaderAndIsr saying so. A leader
    /// with no other in-sync replica to hand over to stays as it is, and so
    /// does a partition without a leader.
    pub(super) fn resign_move(&self, tp: &TopicPartition, replicas: &[BrokerId], proposal: &mut Proposal) {
        let Some(&damaged) = self.resigning.get(tp) else { return };
        if proposal.leader == Some(damaged) {
            let leaving = BTreeSet::from([damaged]);
            let moved = election::controlled_shutdown(replicas, &proposal.isr, &self.eligible(), &leaving);
            if let Some((leader, isr)) = moved {
                proposal.leader = Some(leader);
                proposal.isr = isr;
                proposal.force = true;
            }
            return;
        }
        // Without a leader the ISR names who may lead when one returns:
        // it is never emptied, and a replica is not taken out of it then.
        if proposal.leader.is_none() {
            return;
        }
        proposal.isr.retain(|b| *b != damaged);
        proposal.force = true;
    }

    /// No write came of a resignation: a leader no other replica may
    /// relieve.
    pub(super) fn resign_not_possible(&mut self, tp: &TopicPartition) {
        if let Some(broker) = self.resigning.remove(tp) {
            tracing::warn!(%tp, %broker, "no other in-sync replica can lead; the damaged range stays fenced");
        }
    }
}
