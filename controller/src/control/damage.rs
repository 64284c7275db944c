//! Leaders whose log is damaged hand leadership over.
//!
//! A broker's scrubber that finds a damaged range in a log it leads fences
//! the range (consumers are refused it) and announces the damage under
//! `/replica_damage_notification`. The controller then moves leadership to
//! another in-sync replica and takes the damaged one out of the ISR, as a
//! controlled shutdown does for one partition: the damaged replica becomes
//! a follower of a healthy log, cuts its own at the damage, fetches the
//! range again and rejoins the ISR when caught up. With no other in-sync
//! replica that may lead, nothing moves: the range stays fenced.

use std::collections::BTreeSet;

use ferrite_ids::TopicPartition;

use super::changes::{Change, Proposal};
use super::Controller;
use crate::election;
use crate::metadata::BrokerId;

impl Controller {
    pub(super) fn on_replicas_damaged(&mut self, replicas: Vec<(BrokerId, TopicPartition)>) {
        for (broker, tp) in replicas {
            let leads = self.states.get(&tp).is_some_and(|s| s.value.leader == Some(broker));
            if !leads {
                // A follower heals by itself; a leader that has already
                // moved is a follower by now.
                continue;
            }
            tracing::warn!(%tp, %broker, "the leader's log is damaged: moving leadership");
            self.resigning.insert(tp.clone(), broker);
            self.want(tp, Change::Resign);
        }
    }

    /// The part of a proposal that takes leadership off a damaged leader.
    pub(super) fn resign_move(&self, tp: &TopicPartition, replicas: &[BrokerId], proposal: &mut Proposal) {
        let Some(&damaged) = self.resigning.get(tp) else { return };
        if proposal.leader != Some(damaged) {
            return;
        }
        let leaving = BTreeSet::from([damaged]);
        if let Some((leader, isr)) = election::controlled_shutdown(replicas, &proposal.isr, &self.eligible(), &leaving)
        {
            proposal.leader = Some(leader);
            proposal.isr = isr;
        }
    }

    /// No write came of a resignation: no other replica may lead.
    pub(super) fn resign_not_possible(&mut self, tp: &TopicPartition) {
        if let Some(broker) = self.resigning.remove(tp) {
            tracing::warn!(%tp, %broker, "no other in-sync replica can lead; the damaged range stays fenced");
        }
    }
}
