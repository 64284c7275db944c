//! The leader's side of a replica: taking produce requests, tracking each
//! follower's log end from its fetches, growing and shrinking the ISR, moving
//! the high watermark, and answering acks=all requests when it passes them.

use std::collections::BTreeSet;

use ferrite_engine::types::{LeaderEpoch, Offset};

use crate::acks::AckWaiters;
use crate::action::{Action, Commit, IsrWriteOutcome, LeaderAndIsr, LocalLog, ReplicaFetchGrant};
use crate::error::{ReplicationError, Result};
use crate::ids::{BrokerId, MonoMs, WaiterId};

/// How long a damaged leader waits before asking again to hand leadership
/// over ([`PartitionReplica::damaged_while_leading`]).
pub const RESIGN_RETRY_MS: u64 = 30_000;
use crate::isr::IsrState;
use crate::replica::{FollowerProgress, LeaderState, PartitionReplica, Role};
use crate::truncation::EpochHistory;

/// A produce request's `acks`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acks {
    /// 0: no answer at all.
    None,
    /// 1: after the leader's own append.
    Leader,
    /// -1 (all): after every ISR member has the records.
    All,
}

impl PartitionReplica {
    pub(crate) fn become_leader(&mut self, state: &LeaderAndIsr, now: MonoMs) {
        let isr: BTreeSet<BrokerId> = state.isr.iter().copied().collect();
        assert!(isr.contains(&self.local), "a leader outside its own ISR");
        if matches!(self.role, Role::Follower(_)) {
            self.actions.push(Action::StopFetching);
        }
        let leo = self.offsets.leo();
        let fresh = |in_isr: bool| FollowerProgress {
            leo: None,
            last_caught_up: if in_isr { now } else { MonoMs(0) },
            last_fetch: now,
            leader_leo_at_last_fetch: leo,
        };
        let followers = self
            .replicas
            .iter()
            .copied()
            .filter(|b| *b != self.local)
            .map(|b| {
                // A leader that stays leader keeps what it knows of its
                // followers (and its waiting produces).
                let known = match &self.role {
                    Role::Leader(l) => l.followers.get(&b).copied(),
                    _ => None,
                };
                (b, known.unwrap_or_else(|| fresh(isr.contains(&b))))
            })
            .collect();
        let waiters = match std::mem::replace(&mut self.role, Role::Unassigned) {
            Role::Leader(l) => l.waiters,
            _ => AckWaiters::new(self.config.waiters_max),
        };
        self.role = Role::Leader(LeaderState {
            isr: IsrState::Committed { isr },
            followers,
            waiters,
            epoch_start: leo,
            resign_asked: None,
        });
        self.actions.push(Action::AssignEpoch { epoch: self.epoch });
        self.maybe_advance_hw();
    }

    fn leader_state(&mut self, op: &'static str) -> Result<&mut LeaderState> {
        match &mut self.role {
            Role::Leader(l) => Ok(l),
            _ => Err(ReplicationError::NotLeader {
                tp: self.tp.clone(),
                op,
            }),
        }
    }

    /// May a produce with these acks be appended now?
    pub fn check_produce(&self, acks: Acks) -> Result<()> {
        let Role::Leader(l) = &self.role else {
            return Err(ReplicationError::NotLeader {
                tp: self.tp.clone(),
                op: "produce",
            });
        };
        let isr = l.isr.committed().len();
        let min_isr = self.effective_min_isr();
        if acks == Acks::All && isr < min_isr {
            return Err(ReplicationError::NotEnoughReplicas {
                tp: self.tp.clone(),
                isr,
                min_isr,
            });
        }
        Ok(())
    }

    /// The leader's own append completed; the log now ends at `log.log_end`.
    pub fn appended(&mut self, log: LocalLog) {
        self.sync_log(log);
        self.maybe_advance_hw();
    }

    /// An acks=all produce whose records end at `last_offset` was appended:
    /// is it committed, or does it wait (until `deadline`)?
    pub fn await_commit(&mut self, id: WaiterId, last_offset: Offset, deadline: MonoMs) -> Result<Commit> {
        let min_isr = self.effective_min_isr();
        let hw = self.offsets.hw();
        let tp = self.tp.clone();
        let l = self.leader_state("await acks")?;
        let isr = l.isr.committed().len();
        if isr < min_isr {
            return Err(ReplicationError::NotEnoughReplicasAfterAppend { tp, isr, min_isr });
        }
        let required_hw = last_offset.plus(1);
        if hw >= required_hw {
            return Ok(Commit::Done);
        }
        if l.waiters.is_full() {
            return Err(ReplicationError::TooManyWaiting {
                tp,
                waiting: l.waiters.len(),
            });
        }
        l.waiters.add(id, required_hw, deadline);
        Ok(Commit::Waiting)
    }

    /// A follower fetches from `fetch_offset`: it holds everything below.
    /// `readable_end` (at or above the LEO) is where the leader's appends
    /// end, written or not: a follower may have read batches the leader is
    /// still writing, so its fetch offset may pass the leader's LEO.
    pub fn replica_fetch(
        &mut self,
        follower: BrokerId,
        fetch_offset: Offset,
        current_epoch: Option<LeaderEpoch>,
        readable_end: Offset,
        now: MonoMs,
    ) -> Result<ReplicaFetchGrant> {
        self.leader_state("replica fetch")?;
        self.check_request_epoch(current_epoch)?;
        if follower == self.local || !self.replicas.contains(&follower) {
            return Err(ReplicationError::NotAReplica {
                tp: self.tp.clone(),
                broker: follower,
            });
        }
        let (log_start, leo) = (self.offsets.log_start(), self.offsets.leo());
        if fetch_offset < log_start || fetch_offset > leo.max(readable_end) {
            return Err(ReplicationError::OffsetOutOfRange {
                tp: self.tp.clone(),
                offset: fetch_offset,
                log_start,
                log_end: leo,
            });
        }
        let l = self.leader_state("replica fetch")?;
        if let Some(p) = l.followers.get_mut(&follower) {
            note_fetch(p, fetch_offset, leo, now);
        }
        self.maybe_expand_isr(follower);
        self.maybe_advance_hw();
        Ok(ReplicaFetchGrant {
            hw: self.offsets.hw(),
            log_start,
            log_end: leo,
        })
    }

    /// OffsetForLeaderEpoch from a follower: where `requested` ends here.
    ///
    /// The latest epoch ends at `appended_end`: where this leader's appends
    /// end, written or not. Followers fetch appends whose write is still
    /// under way; an answer at the written end would have a restarted
    /// follower cut records it holds, while this leader may still count
    /// them as replicated from the follower's earlier fetches (the
    /// simulation's seed 1935 lost an acknowledged record that way).
    pub fn answer_epoch_end(
        &self,
        current_epoch: Option<LeaderEpoch>,
        requested: LeaderEpoch,
        history: &dyn EpochHistory,
        appended_end: Offset,
    ) -> Result<Option<(LeaderEpoch, Offset)>> {
        if !matches!(self.role, Role::Leader(_)) {
            return Err(ReplicationError::NotLeader {
                tp: self.tp.clone(),
                op: "offset for leader epoch",
            });
        }
        self.check_request_epoch(current_epoch)?;
        Ok(history.end_offset_for(requested, self.offsets.leo().max(appended_end)))
    }

    /// Time passed: waiting produces time out, lagging followers leave the
    /// ISR.
    pub fn tick(&mut self, now: MonoMs) {
        let Role::Leader(l) = &mut self.role else { return };
        for (id, required_hw) in l.waiters.expired(now) {
            self.actions.push(Action::AckDone {
                id,
                result: Err(ReplicationError::TimedOut {
                    tp: self.tp.clone(),
                    offset: Offset(required_hw.0 - 1),
                }),
            });
        }
        self.maybe_shrink_isr(now);
    }

    /// The scrubber found this leader's log damaged from `offset` (the range
    /// is fenced: consumers and followers are refused it), or the log
    /// refuses writes since one failed (`offset`: its end). Asks the
    /// controller to move leadership to another in-sync replica, which a
    /// damaged log then follows and heals from (an unusable one waits for
    /// the broker's restart); again every [`RESIGN_RETRY_MS`] while it still
    /// leads (the notice may have been lost, or no other replica was in
    /// sync yet).
    pub fn damaged_while_leading(&mut self, offset: Offset, now: MonoMs) {
        let Role::Leader(l) = &mut self.role else { return };
        if l.resign_asked
            .is_some_and(|at| now.0 < at.0.saturating_add(RESIGN_RETRY_MS))
        {
            return;
        }
        l.resign_asked = Some(now);
        self.actions.push(Action::Resign { offset });
    }

    /// The outcome of the [`Action::WriteIsr`] made in `leader_epoch`.
    pub fn isr_written(&mut self, leader_epoch: LeaderEpoch, outcome: IsrWriteOutcome) {
        let local = self.local;
        let epoch = self.epoch;
        let Role::Leader(l) = &mut self.role else { return };
        if leader_epoch != epoch || !l.isr.is_pending() {
            return;
        }
        match outcome {
            IsrWriteOutcome::Written { version } => {
                l.isr.commit();
                self.zk_version = version;
                let isr = l.isr.committed().len();
                let min_isr = self.effective_min_isr();
                if isr < min_isr {
                    self.fail_waiters(|tp| ReplicationError::NotEnoughReplicasAfterAppend { tp, isr, min_isr });
                }
                self.maybe_advance_hw();
            }
            IsrWriteOutcome::Conflict { found: Some(f) } if f.leader == Some(local) && f.leader_epoch == epoch => {
                // Someone rewrote the ISR without a new epoch: take theirs.
                l.isr = IsrState::Committed {
                    isr: f.isr.iter().copied().collect(),
                };
                self.zk_version = f.version;
                self.maybe_advance_hw();
            }
            IsrWriteOutcome::Conflict { .. } => {
                // Another leader (or controller) wrote the state: this one is
                // stale and must not acknowledge anything more.
                self.fail_waiters(|tp| ReplicationError::NotLeader { tp, op: "isr write" });
                self.role = Role::Deposed;
            }
        }
    }

    fn maybe_expand_isr(&mut self, follower: BrokerId) {
        let hw = self.offsets.hw();
        let Role::Leader(l) = &mut self.role else { return };
        if l.isr.is_pending() || l.isr.committed().contains(&follower) {
            return;
        }
        let Some(leo) = l.followers.get(&follower).and_then(|p| p.leo) else {
            return;
        };
        if leo < hw || leo < l.epoch_start {
            return;
        }
        l.isr.expand(follower);
        self.write_proposed_isr();
    }

    fn maybe_shrink_isr(&mut self, now: MonoMs) {
        let leo = self.offsets.leo();
        let lag_max = self.config.replica_lag_time_max_ms;
        let leader = self.local;
        let Role::Leader(l) = &mut self.role else { return };
        if l.isr.is_pending() {
            return;
        }
        let lagging: BTreeSet<BrokerId> = l
            .isr
            .committed()
            .iter()
            .copied()
            .filter(|b| *b != leader)
            .filter(|b| match l.followers.get(b) {
                Some(p) => p.leo != Some(leo) && now.since(p.last_caught_up) > lag_max,
                None => true,
            })
            .collect();
        if lagging.is_empty() {
            return;
        }
        l.isr.shrink(lagging);
        self.write_proposed_isr();
    }

    /// Asks for the ISR change just proposed to be written, conditional on
    /// the state znode version this leader knows.
    fn write_proposed_isr(&mut self) {
        let Role::Leader(l) = &self.role else { return };
        let isr = l.isr.proposed().unwrap_or_default().into_iter().collect();
        self.actions.push(Action::WriteIsr {
            leader: self.local,
            leader_epoch: self.epoch,
            isr,
            expected: self.zk_version,
        });
    }

    /// HW = the smallest log end over the maximal ISR, moved only up, and
    /// only while the committed ISR is at least `min.insync.replicas`.
    pub(crate) fn maybe_advance_hw(&mut self) {
        let min_isr = self.effective_min_isr();
        let local = self.local;
        let Role::Leader(l) = &mut self.role else { return };
        if l.isr.committed().len() < min_isr {
            return;
        }
        let mut hw = self.offsets.leo();
        for b in l.isr.maximal() {
            if b == local {
                continue;
            }
            match l.followers.get(&b).and_then(|p| p.leo) {
                Some(leo) => hw = hw.min(leo),
                None => return,
            }
        }
        if hw <= self.offsets.hw() {
            return;
        }
        self.offsets.set_hw_clamped(hw);
        let hw = self.offsets.hw();
        let done = l.waiters.committed_by(hw);
        self.actions.push(Action::HwChanged { hw });
        for id in done {
            self.actions.push(Action::AckDone { id, result: Ok(()) });
        }
    }
}

/// Kafka's catch-up rule: a fetch at the leader's current end catches the
/// follower up now; a fetch at the end the leader had at the previous fetch
/// caught it up as of that previous fetch.
fn note_fetch(p: &mut FollowerProgress, fetch_offset: Offset, leader_leo: Offset, now: MonoMs) {
    if fetch_offset >= leader_leo {
        p.last_caught_up = p.last_caught_up.max(now);
    } else if fetch_offset >= p.leader_leo_at_last_fetch {
        p.last_caught_up = p.last_caught_up.max(p.last_fetch);
    }
    p.leo = Some(fetch_offset);
    p.last_fetch = now;
    p.leader_leo_at_last_fetch = leader_leo;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ReplicaConfig;
    use crate::ids::ZkVersion;
    use crate::replica::PartitionReplica;
    use crate::truncation::EpochHistory;
    use ferrite_engine::types::TopicPartition;

    /// A log written in epoch 1 only.
    struct OneEpoch;

    impl EpochHistory for OneEpoch {
        fn latest_epoch(&self) -> Option<LeaderEpoch> {
            Some(LeaderEpoch(1))
        }

        fn end_offset_for(&self, requested: LeaderEpoch, log_end: Offset) -> Option<(LeaderEpoch, Offset)> {
            (requested == LeaderEpoch(1)).then_some((requested, log_end))
        }
    }

    /// The simulation's seed 1935: a follower that fetched appends still
    /// being written, then restarted and asked where the epoch ends, was
    /// told the written end and cut them, while the leader counted them as
    /// replicated by it and acknowledged them.
    #[test]
    fn the_latest_epoch_ends_where_the_appends_end_written_or_not() {
        let written = LocalLog {
            log_start: Offset(0),
            log_end: Offset(13),
        };
        let mut r = PartitionReplica::new(
            TopicPartition::new("t", 0),
            BrokerId(1),
            ReplicaConfig::default(),
            written,
            Offset(0),
        );
        let state = LeaderAndIsr {
            leader: Some(BrokerId(1)),
            leader_epoch: LeaderEpoch(1),
            isr: vec![BrokerId(1), BrokerId(2)],
            replicas: vec![BrokerId(1), BrokerId(2)],
            zk_version: ZkVersion(1),
        };
        r.leader_and_isr(&state, written, &OneEpoch, MonoMs(0)).expect("leads");
        let answer =
            |appended: i64| r.answer_epoch_end(Some(LeaderEpoch(1)), LeaderEpoch(1), &OneEpoch, Offset(appended));
        assert_eq!(answer(15).expect("answer"), Some((LeaderEpoch(1), Offset(15))));
        assert_eq!(
            answer(13).expect("answer"),
            Some((LeaderEpoch(1), Offset(13))),
            "nothing in flight: the written end"
        );
    }
}
