//! The follower's side of a replica: on becoming follower, find where its
//! log and the leader's agree (OffsetForLeaderEpoch, see `truncation.rs`),
//! cut there, then fetch; take the leader's high watermark from each fetch
//! response.

use ferrite_engine::types::{LeaderEpoch, Offset};

use crate::action::{Action, Backoff, LocalLog};
use crate::error::ReplicationError;
use crate::ids::BrokerId;
use crate::replica::{FollowerPhase, FollowerState, PartitionReplica, Role};
use crate::truncation::{self, AfterTruncation, EpochHistory};

impl PartitionReplica {
    pub(crate) fn become_follower(&mut self, leader: Option<BrokerId>, history: &dyn EpochHistory) {
        self.fail_waiters(|tp| ReplicationError::NotLeader {
            tp,
            op: "become follower",
        });
        if matches!(self.role, Role::Follower(_)) {
            self.actions.push(Action::StopFetching);
        }
        self.role = Role::Follower(FollowerState {
            leader,
            phase: FollowerPhase::Fetching,
        });
        if let Some(leader) = leader {
            self.start_truncation(leader, history, Backoff::None);
        }
    }

    /// The leader this replica fetches from, when it is a follower in the
    /// fetching phase.
    fn fetching_from(&self) -> Option<BrokerId> {
        match self.role {
            Role::Follower(FollowerState {
                leader: Some(leader),
                phase: FollowerPhase::Fetching,
            }) => Some(leader),
            _ => None,
        }
    }

    fn set_phase(&mut self, phase: FollowerPhase) {
        if let Role::Follower(f) = &mut self.role {
            f.phase = phase;
        }
    }

    fn start_truncation(&mut self, leader: BrokerId, history: &dyn EpochHistory, backoff: Backoff) {
        match history.latest_epoch() {
            Some(epoch) => {
                self.set_phase(FollowerPhase::AwaitingEpochEnd { asked: epoch });
                self.actions.push(Action::AskEpochEnd { leader, epoch, backoff });
            }
            // Nothing here was written under any epoch: fall back to the HW.
            None => self.truncate_then(leader, self.offsets.hw(), AfterTruncation::Fetch),
        }
    }

    fn truncate_then(&mut self, leader: BrokerId, offset: Offset, then: AfterTruncation) {
        // AskAgain always goes through the log, even at its end: the cut
        // also drops the epochs that start there.
        if offset < self.offsets.leo() || then == AfterTruncation::AskAgain {
            self.set_phase(FollowerPhase::Truncating { then });
            self.actions.push(Action::Truncate { offset });
        } else {
            self.start_fetching(leader);
        }
    }

    fn start_fetching(&mut self, leader: BrokerId) {
        self.set_phase(FollowerPhase::Fetching);
        self.actions.push(Action::StartFetching {
            leader,
            offset: self.offsets.leo(),
        });
    }

    /// The leader's answer to the [`Action::AskEpochEnd`] for `asked`,
    /// sent while this replica's leader epoch was `asked_in`. An answer to a
    /// question put in an older epoch is dropped: it came from an earlier
    /// leader (or the same one before it led again), and the LeaderAndIsr
    /// that moved the epoch on asked again.
    pub fn epoch_end_received(
        &mut self,
        asked: LeaderEpoch,
        asked_in: LeaderEpoch,
        answer: Result<Option<(LeaderEpoch, Offset)>, ReplicationError>,
        history: &dyn EpochHistory,
    ) {
        let Role::Follower(FollowerState {
            leader: Some(leader),
            phase: FollowerPhase::AwaitingEpochEnd { asked: waiting_for },
        }) = self.role
        else {
            return;
        };
        if waiting_for != asked || asked_in != self.epoch {
            return;
        }
        match answer {
            Err(_) => self.actions.push(Action::AskEpochEnd {
                leader,
                epoch: asked,
                backoff: Backoff::Retry,
            }),
            Ok(answer) => {
                let t = truncation::decide(history, self.offsets.leo(), self.offsets.hw(), answer);
                self.truncate_then(leader, t.offset, t.next);
            }
        }
    }

    /// The runtime carried out an [`Action::Truncate`]; the log is `log`.
    pub fn truncated(&mut self, log: LocalLog, history: &dyn EpochHistory) {
        if log.log_start <= self.offsets.log_start() {
            self.offsets.set_leo(log.log_end);
        } else {
            // A restart at the leader's log start moves both ends up.
            self.offsets = crate::offsets::ReplicaOffsets::new(log.log_start, log.log_start, log.log_end);
        }
        let Role::Follower(FollowerState {
            leader: Some(leader),
            phase: FollowerPhase::Truncating { then },
        }) = self.role
        else {
            return;
        };
        match then {
            AfterTruncation::Fetch => self.start_fetching(leader),
            AfterTruncation::AskAgain => self.start_truncation(leader, history, Backoff::None),
        }
    }

    /// A fetch response was appended; the leader's HW came with it.
    pub fn fetched(&mut self, log: LocalLog, leader_hw: Offset) {
        if !matches!(
            self.role,
            Role::Follower(FollowerState {
                phase: FollowerPhase::Fetching,
                ..
            })
        ) {
            return;
        }
        self.sync_log(log);
        let before = self.offsets.hw();
        self.offsets.set_hw_clamped(leader_hw);
        if self.offsets.hw() != before {
            self.actions.push(Action::HwChanged { hw: self.offsets.hw() });
        }
    }

    /// The scrubber found this replica's log damaged from `offset` (the
    /// range is fenced: not served). Healing cuts the log there, most often
    /// below the HW, which an ISR member must never do: a follower asks the
    /// controller ([`Action::Resign`], once per leader epoch) to take it out
    /// of the ISR in a new epoch, and cuts when that LeaderAndIsr comes
    /// (`LocalReplica::leader_and_isr`). (A leader: `damaged_while_leading`.)
    pub fn damaged_while_following(&mut self, offset: Offset) {
        if !matches!(self.role, Role::Follower(_)) || self.damage_reported_in == Some(self.epoch) {
            return;
        }
        self.damage_reported_in = Some(self.epoch);
        self.actions.push(Action::Resign { offset });
    }

    /// The leader answered a fetch with OFFSET_OUT_OF_RANGE: its log is now
    /// `[leader_log_start, leader_log_end)`.
    pub fn fetch_out_of_range(&mut self, leader_log_start: Offset, leader_log_end: Offset, history: &dyn EpochHistory) {
        let Some(leader) = self.fetching_from() else { return };
        if self.offsets.leo() < leader_log_start {
            // Retention on the leader passed everything this log has: start
            // over at the leader's log start.
            self.set_phase(FollowerPhase::Truncating {
                then: AfterTruncation::Fetch,
            });
            self.actions.push(Action::RestartLog {
                offset: leader_log_start,
            });
        } else if self.offsets.leo() > leader_log_end {
            self.start_truncation(leader, history, Backoff::Retry);
        } else {
            self.actions.push(Action::StartFetching {
                leader,
                offset: self.offsets.leo(),
            });
        }
    }
}
