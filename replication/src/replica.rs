//! One partition's replica on one broker: its role (leader, follower, or a
//! deposed leader waiting to hear who leads), its leader epoch, its offsets
//! and — on the leader — the ISR, the followers' progress and the produce
//! requests waiting for acks.
//!
//! A state machine without I/O: the runtime calls one method per event (a
//! LeaderAndIsr, an append, a replica fetch, a fetch response, an ISR write
//! outcome, the clock), then takes the [`Action`]s it produced with
//! [`PartitionReplica::take_actions`] and carries them out in order. Time is
//! passed in; nothing here reads a clock or touches a file or socket.
//!
//! The leader's side lives in `leader.rs`, the follower's in `follower.rs`.

use std::collections::BTreeMap;

use ferrite_engine::types::{LeaderEpoch, Offset, TopicPartition};

use crate::acks::AckWaiters;
use crate::action::{Action, LeaderAndIsr, LocalLog};
use crate::config::ReplicaConfig;
use crate::error::{ReplicationError, Result};
use crate::ids::{BrokerId, MonoMs, ZkVersion};
use crate::isr::IsrState;
use crate::offsets::ReplicaOffsets;
use crate::truncation::EpochHistory;

/// What the leader knows of one follower.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FollowerProgress {
    /// The follower's log end, from its last fetch offset; `None` until it
    /// has fetched in this leadership.
    pub leo: Option<Offset>,
    /// The last time it was caught up to the leader's log end.
    pub last_caught_up: MonoMs,
    /// When it last fetched, and the leader's log end at that moment.
    pub last_fetch: MonoMs,
    pub leader_leo_at_last_fetch: Offset,
}

#[derive(Debug)]
pub(crate) struct LeaderState {
    pub isr: IsrState,
    pub followers: BTreeMap<BrokerId, FollowerProgress>,
    pub waiters: AckWaiters,
    /// The log end when this epoch began: a follower must reach it to rejoin.
    pub epoch_start: Offset,
    /// When this leader last asked to hand leadership over because its log
    /// is damaged ([`Action::Resign`]).
    pub resign_asked: Option<MonoMs>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FollowerPhase {
    /// Waiting for the leader's end offset of `asked`.
    AwaitingEpochEnd {
        asked: LeaderEpoch,
    },
    /// Waiting for the runtime to cut the log; then fetch or ask again.
    Truncating {
        then: crate::truncation::AfterTruncation,
    },
    Fetching,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FollowerState {
    /// `None`: the partition is offline; nothing to fetch from.
    pub leader: Option<BrokerId>,
    pub phase: FollowerPhase,
}

#[derive(Debug)]
pub(crate) enum Role {
    /// No LeaderAndIsr yet, or stopped.
    Unassigned,
    Leader(LeaderState),
    Follower(FollowerState),
    /// Was leader, and a conditional ISR write found that someone else wrote
    /// the state: it acknowledges nothing until LeaderAndIsr says who leads.
    Deposed,
}

/// The role, as callers see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoleKind {
    Unassigned,
    Leader,
    Follower,
    Deposed,
}

pub struct PartitionReplica {
    pub(crate) tp: TopicPartition,
    pub(crate) local: BrokerId,
    pub(crate) config: ReplicaConfig,
    pub(crate) epoch: LeaderEpoch,
    pub(crate) zk_version: ZkVersion,
    pub(crate) replicas: Vec<BrokerId>,
    pub(crate) offsets: ReplicaOffsets,
    pub(crate) role: Role,
    pub(crate) actions: Vec<Action>,
    /// The leader epoch in which this follower last reported its log
    /// damaged (it reports once per epoch).
    pub(crate) damage_reported_in: Option<LeaderEpoch>,
}

impl PartitionReplica {
    /// A replica of `tp` on broker `local`, before any LeaderAndIsr. `hw` is
    /// what the broker last knew (a checkpoint), clamped into the log.
    pub fn new(tp: TopicPartition, local: BrokerId, config: ReplicaConfig, log: LocalLog, hw: Offset) -> Self {
        let hw = hw.max(log.log_start).min(log.log_end);
        PartitionReplica {
            tp,
            local,
            config,
            epoch: LeaderEpoch::NONE,
            zk_version: ZkVersion::default(),
            replicas: Vec::new(),
            offsets: ReplicaOffsets::new(log.log_start, hw, log.log_end),
            role: Role::Unassigned,
            actions: Vec::new(),
            damage_reported_in: None,
        }
    }

    pub fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }

    pub fn leader_epoch(&self) -> LeaderEpoch {
        self.epoch
    }

    pub fn hw(&self) -> Offset {
        self.offsets.hw()
    }

    pub fn log_end(&self) -> Offset {
        self.offsets.leo()
    }

    pub fn role(&self) -> RoleKind {
        match self.role {
            Role::Unassigned => RoleKind::Unassigned,
            Role::Leader(_) => RoleKind::Leader,
            Role::Follower(_) => RoleKind::Follower,
            Role::Deposed => RoleKind::Deposed,
        }
    }

    /// The leader this replica follows, when following one.
    pub fn following(&self) -> Option<BrokerId> {
        match &self.role {
            Role::Follower(f) => f.leader,
            _ => None,
        }
    }

    /// A follower past its truncation, fetching from its leader.
    pub fn is_fetching(&self) -> bool {
        matches!(
            self.role,
            Role::Follower(FollowerState {
                leader: Some(_),
                phase: FollowerPhase::Fetching,
            })
        )
    }

    /// The committed ISR, on the leader.
    pub fn isr(&self) -> Option<Vec<BrokerId>> {
        match &self.role {
            Role::Leader(l) => Some(l.isr.committed().iter().copied().collect()),
            _ => None,
        }
    }

    pub fn set_config(&mut self, config: ReplicaConfig) {
        self.config = config;
        self.maybe_advance_hw();
    }

    /// The actions produced since the last call, in the order to carry out.
    pub fn take_actions(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.actions)
    }

    /// Whether actions are waiting to be taken.
    pub fn has_actions(&self) -> bool {
        !self.actions.is_empty()
    }

    /// `min.insync.replicas`, capped at the replication factor.
    pub(crate) fn effective_min_isr(&self) -> usize {
        self.config.min_insync_replicas.clamp(1, self.replicas.len().max(1))
    }

    /// Applies a LeaderAndIsr. Only a newer leader epoch is taken, except by
    /// a replica that has none yet (a restarted broker); the same epoch again
    /// is ignored (a new controller resends what everyone has).
    pub fn leader_and_isr(
        &mut self,
        state: &LeaderAndIsr,
        log: LocalLog,
        history: &dyn EpochHistory,
        now: MonoMs,
    ) -> Result<()> {
        let fresh = matches!(self.role, Role::Unassigned);
        if !fresh && state.leader_epoch <= self.epoch {
            return Err(ReplicationError::StaleLeaderEpoch {
                tp: self.tp.clone(),
                request: state.leader_epoch,
                current: self.epoch,
            });
        }
        self.epoch = state.leader_epoch;
        self.zk_version = state.zk_version;
        self.replicas = state.replicas.clone();
        self.sync_log(log);
        if state.leader == Some(self.local) {
            self.become_leader(state, now);
        } else {
            self.become_follower(state.leader, history);
        }
        Ok(())
    }

    /// StopReplica: leaves every role; waiting produces fail.
    pub fn stop(&mut self) {
        self.fail_waiters(|tp| ReplicationError::NotLeader { tp, op: "stop replica" });
        if matches!(self.role, Role::Follower(_)) {
            self.actions.push(Action::StopFetching);
        }
        self.role = Role::Unassigned;
    }

    /// Retention moved the local log start up.
    pub fn log_start_moved(&mut self, log_start: Offset) {
        self.offsets.set_log_start(log_start);
    }

    /// Checks a request's `current_leader_epoch` (Fetch, OffsetForLeaderEpoch):
    /// an older one is fenced, a newer one unknown yet. `None` (-1): unchecked.
    pub fn check_request_epoch(&self, request: Option<LeaderEpoch>) -> Result<()> {
        let Some(request) = request.filter(|e| *e != LeaderEpoch::NONE) else {
            return Ok(());
        };
        if request < self.epoch {
            return Err(ReplicationError::FencedLeaderEpoch {
                tp: self.tp.clone(),
                request,
                current: self.epoch,
            });
        }
        if request > self.epoch {
            return Err(ReplicationError::UnknownLeaderEpoch {
                tp: self.tp.clone(),
                request,
                current: self.epoch,
            });
        }
        Ok(())
    }

    /// Takes the runtime's log offsets as the truth.
    pub(crate) fn sync_log(&mut self, log: LocalLog) {
        self.offsets.set_leo(log.log_end);
        if log.log_start > self.offsets.log_start() {
            self.offsets.set_log_start(log.log_start);
        }
    }

    /// Fails every waiting produce with the error `make` builds.
    pub(crate) fn fail_waiters(&mut self, make: impl Fn(TopicPartition) -> ReplicationError) {
        if let Role::Leader(l) = &mut self.role {
            for id in l.waiters.drain() {
                self.actions.push(Action::AckDone {
                    id,
                    result: Err(make(self.tp.clone())),
                });
            }
        }
    }
}
