//! The thin runtime of one partition's replica on its shard: runs the
//! [`PartitionReplica`] state machine against the partition's engine log,
//! and hands what needs the network or ZooKeeper to the broker through
//! [`ReplicaLinks`].
//!
//! Shard-local (`Rc`, `RefCell`): every method runs on the shard that owns
//! the log. Log actions (epoch assignment, truncation, restart) are awaited
//! one at a time, in the order the state machine gave them, behind
//! `action_turn`; the state machine is never borrowed across an await.
//!
//! A follower's appends and every decision about where its log ends
//! (LeaderAndIsr, an epoch-end answer, an out-of-range answer, a stop) take
//! turns behind `log_turn`: an append of fetched records that began before
//! the leader changed finishes before the truncation point is chosen, so a
//! record of the old leader's that the new one lacks cannot land after the
//! truncation that should have cut it (and be counted as replicated).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use ferrite_engine::notify::Notify;
use ferrite_engine::types::{LeaderEpoch, Offset, TopicPartition};
use ferrite_engine::{AppendInfo, AppendMode, PartitionLog};
use futures::channel::oneshot;
use glommio::sync::Semaphore;

use crate::action::{Action, Backoff, Commit, IsrWriteOutcome, LeaderAndIsr, LocalLog, ReplicaFetchGrant};
use crate::config::ReplicaConfig;
use crate::error::{ReplicaOpError, ReplicationError};
use crate::ids::{BrokerId, MonoMs, WaiterId, ZkVersion};
use crate::leader::Acks;
use crate::replica::{PartitionReplica, RoleKind};

/// A conditional ISR write for the broker to make (and announce).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IsrWrite {
    pub leader: BrokerId,
    pub leader_epoch: LeaderEpoch,
    pub isr: Vec<BrokerId>,
    pub expected: ZkVersion,
}

/// What the replica needs from the rest of the broker. Each call only
/// starts the work; its outcome comes back through the matching
/// [`LocalReplica`] method.
pub trait ReplicaLinks {
    /// Answer with [`LocalReplica::isr_written`].
    fn write_isr(&self, tp: &TopicPartition, write: IsrWrite);
    /// Answer with [`LocalReplica::epoch_end_received`].
    fn ask_epoch_end(&self, tp: &TopicPartition, leader: BrokerId, epoch: LeaderEpoch, backoff: Backoff);
    /// Fetch from `leader` from `offset`, feeding
    /// [`LocalReplica::append_fetched`].
    fn start_fetching(&self, tp: &TopicPartition, leader: BrokerId, offset: Offset);
    fn stop_fetching(&self, tp: &TopicPartition);
    /// Ask the controller to move leadership of `tp` away from this broker
    /// (its log is damaged from `offset`), as leader in `leader_epoch`.
    fn resign(&self, tp: &TopicPartition, leader_epoch: LeaderEpoch, offset: Offset);
}

pub struct LocalReplica {
    log: Rc<PartitionLog>,
    state: RefCell<PartitionReplica>,
    links: Rc<dyn ReplicaLinks>,
    waiting: RefCell<BTreeMap<WaiterId, oneshot::Sender<Result<(), ReplicationError>>>>,
    next_waiter: Cell<u64>,
    hw_changed: Notify,
    action_turn: Semaphore,
    /// Taken before `action_turn` when both are.
    log_turn: Semaphore,
}

fn local_log(log: &PartitionLog) -> LocalLog {
    LocalLog {
        log_start: log.log_start_offset(),
        log_end: log.log_end_offset(),
    }
}

impl LocalReplica {
    /// `hw`: the last high watermark known (a checkpoint), or the log start.
    pub fn new(
        log: Rc<PartitionLog>,
        local: BrokerId,
        config: ReplicaConfig,
        hw: Offset,
        links: Rc<dyn ReplicaLinks>,
    ) -> Self {
        let tp = log.topic_partition().clone();
        let state = PartitionReplica::new(tp, local, config, local_log(&log), hw);
        log.set_retention_limit(Some(state.hw()));
        LocalReplica {
            log,
            state: RefCell::new(state),
            links,
            waiting: RefCell::new(BTreeMap::new()),
            next_waiter: Cell::new(0),
            hw_changed: Notify::new(),
            action_turn: Semaphore::new(1),
            log_turn: Semaphore::new(1),
        }
    }

    pub fn log(&self) -> &Rc<PartitionLog> {
        &self.log
    }

    pub fn hw(&self) -> Offset {
        self.state.borrow().hw()
    }

    pub fn role(&self) -> RoleKind {
        self.state.borrow().role()
    }

    pub fn leader_epoch(&self) -> LeaderEpoch {
        self.state.borrow().leader_epoch()
    }

    pub fn isr(&self) -> Option<Vec<BrokerId>> {
        self.state.borrow().isr()
    }

    /// Checks a request's `current_leader_epoch` against this replica's.
    pub fn check_request_epoch(&self, request: Option<LeaderEpoch>) -> Result<(), ReplicationError> {
        self.state.borrow().check_request_epoch(request)
    }

    /// Bumped whenever the HW moves, and after LeaderAndIsr or a stop (the
    /// role may have changed): long-polling consumer fetches wait on it.
    pub fn hw_changed(&self) -> &Notify {
        &self.hw_changed
    }

    pub async fn leader_and_isr(&self, state: &LeaderAndIsr, now: MonoMs) -> Result<(), ReplicaOpError> {
        let _turn = self.log_turn.acquire_permit(1).await;
        if let Some(offset) = self.damage_to_cut(state) {
            let end = self.log.truncate_to(offset).await?;
            tracing::warn!(tp = %self.log.topic_partition(), end = end.0, "cut the damaged range: fetching it again");
        }
        let log = local_log(&self.log);
        self.state
            .borrow_mut()
            .leader_and_isr(state, log, self.log.as_ref(), now)?;
        let result = self.run_actions().await;
        // Long-polling fetches look again: they may no longer be served here.
        self.hw_changed.notify_all();
        result
    }

    /// Where to cut a damaged log on `state`: at the damage, when `state`
    /// is a newer epoch that leaves this replica out of the ISR and the
    /// leadership. Only then may the cut go below the high watermark (see
    /// `PartitionReplica::damaged_while_following`).
    fn damage_to_cut(&self, state: &LeaderAndIsr) -> Option<Offset> {
        let damage = self.log.damage()?;
        let s = self.state.borrow();
        let newer = state.leader_epoch > s.leader_epoch();
        let out = state.leader != Some(s.local) && !state.isr.contains(&s.local);
        (newer && out).then_some(damage.offset)
    }

    pub async fn stop(&self) -> Result<(), ReplicaOpError> {
        let _turn = self.log_turn.acquire_permit(1).await;
        self.state.borrow_mut().stop();
        let result = self.run_actions().await;
        self.hw_changed.notify_all();
        result
    }

    /// A producer's record set: checked, appended in the current epoch, and
    /// — with acks=all — answered once committed (or failed), waiting at
    /// most until `deadline`.
    pub async fn produce(&self, records: BytesMut, acks: Acks, deadline: MonoMs) -> Result<AppendInfo, ReplicaOpError> {
        self.append_as_leader(records, acks, deadline, |epoch| AppendMode::Leader { epoch })
            .await
    }

    /// What a coordinator writes for a producer — transaction markers, or
    /// a TxnOffsetCommit's transactional batch — appended in the current
    /// epoch ([`AppendMode::Coordinator`]: fenced by producer epoch, not
    /// sequence) and answered once committed (acks=all), as Kafka writes
    /// them.
    pub async fn write_markers(&self, records: BytesMut, deadline: MonoMs) -> Result<AppendInfo, ReplicaOpError> {
        self.append_as_leader(records, Acks::All, deadline, |epoch| AppendMode::Coordinator { epoch })
            .await
    }

    async fn append_as_leader(
        &self,
        records: BytesMut,
        acks: Acks,
        deadline: MonoMs,
        mode: impl Fn(LeaderEpoch) -> AppendMode,
    ) -> Result<AppendInfo, ReplicaOpError> {
        let epoch = {
            let s = self.state.borrow();
            s.check_produce(acks)?;
            s.leader_epoch()
        };
        let info = self.log.append(records, mode(epoch)).await?;
        self.state.borrow_mut().appended(local_log(&self.log));
        if acks != Acks::All {
            self.run_actions().await?;
            return Ok(info);
        }
        let id = WaiterId(self.next_waiter.get());
        self.next_waiter.set(id.0 + 1);
        let commit = self.state.borrow_mut().await_commit(id, info.last_offset, deadline);
        let receiver = match commit {
            Ok(Commit::Waiting) => {
                let (tx, rx) = oneshot::channel();
                self.waiting.borrow_mut().insert(id, tx);
                Some(rx)
            }
            Ok(Commit::Done) => None,
            Err(e) => {
                self.run_actions().await?;
                return Err(e.into());
            }
        };
        self.run_actions().await?;
        if let Some(rx) = receiver {
            let tp = self.log.topic_partition().clone();
            rx.await
                .unwrap_or(Err(ReplicationError::NotLeader { tp, op: "await acks" }))?;
        }
        Ok(info)
    }

    /// Takes new settings (a topic's `min.insync.replicas` changed, say).
    pub async fn set_config(&self, config: ReplicaConfig) -> Result<(), ReplicaOpError> {
        self.state.borrow_mut().set_config(config);
        self.run_actions().await
    }

    /// A follower fetches from `fetch_offset`; the records it gets are read
    /// by the caller, up to the log end (followers read past the HW).
    pub async fn replica_fetch(
        &self,
        follower: BrokerId,
        fetch_offset: Offset,
        current_epoch: Option<LeaderEpoch>,
        now: MonoMs,
    ) -> Result<ReplicaFetchGrant, ReplicaOpError> {
        self.state.borrow_mut().appended(local_log(&self.log));
        let grant = self.state.borrow_mut().replica_fetch(
            follower,
            fetch_offset,
            current_epoch,
            self.log.reserved_end_offset(),
            now,
        );
        self.run_actions().await?;
        Ok(grant?)
    }

    /// OffsetForLeaderEpoch from a follower.
    pub fn answer_epoch_end(
        &self,
        current_epoch: Option<LeaderEpoch>,
        requested: LeaderEpoch,
    ) -> Result<Option<(LeaderEpoch, Offset)>, ReplicationError> {
        self.state.borrow().answer_epoch_end(
            current_epoch,
            requested,
            self.log.as_ref(),
            self.log.reserved_end_offset(),
        )
    }

    /// `asked_in`: this replica's leader epoch when the question was sent
    /// (the request's current leader epoch).
    pub async fn epoch_end_received(
        &self,
        asked: LeaderEpoch,
        asked_in: LeaderEpoch,
        answer: Result<Option<(LeaderEpoch, Offset)>, ReplicationError>,
    ) -> Result<(), ReplicaOpError> {
        let _turn = self.log_turn.acquire_permit(1).await;
        self.state
            .borrow_mut()
            .epoch_end_received(asked, asked_in, answer, self.log.as_ref());
        self.run_actions().await
    }

    /// Records fetched from the leader (empty: nothing new), its HW and its
    /// log start, by a fetch sent in leader epoch `fetched_in`. Like Kafka's
    /// followers, a follower follows the leader's log start: its own moves
    /// up to it and its segments wholly below it go (what the leader's
    /// retention or DeleteRecords removed). A range the scrubber
    /// fenced is cut away here, to be fetched again (see
    /// `PartitionReplica::damage_found`).
    pub async fn append_fetched(
        &self,
        records: Bytes,
        leader_hw: Offset,
        leader_log_start: Offset,
        fetched_in: LeaderEpoch,
    ) -> Result<(), ReplicaOpError> {
        let _turn = self.log_turn.acquire_permit(1).await;
        // Records fetched before a truncation round began, or from a leader
        // of an earlier epoch, are not taken.
        let current = {
            let s = self.state.borrow();
            s.is_fetching() && s.leader_epoch() == fetched_in
        };
        if !current {
            return Ok(());
        }
        if !records.is_empty() {
            self.log.append_replica(records).await?;
        }
        self.log.follow_log_start(leader_log_start).await?;
        self.state.borrow_mut().fetched(local_log(&self.log), leader_hw);
        if let Some(damage) = self.log.damage() {
            self.state.borrow_mut().damaged_while_following(damage.offset);
        }
        self.run_actions().await
    }

    /// The leader (of epoch `fetched_in`) answered OFFSET_OUT_OF_RANGE.
    pub async fn fetch_out_of_range(
        &self,
        leader_log_start: Offset,
        leader_log_end: Offset,
        fetched_in: LeaderEpoch,
    ) -> Result<(), ReplicaOpError> {
        let _turn = self.log_turn.acquire_permit(1).await;
        if self.state.borrow().leader_epoch() != fetched_in {
            return Ok(());
        }
        self.state
            .borrow_mut()
            .fetch_out_of_range(leader_log_start, leader_log_end, self.log.as_ref());
        self.run_actions().await
    }

    pub async fn isr_written(&self, leader_epoch: LeaderEpoch, outcome: IsrWriteOutcome) -> Result<(), ReplicaOpError> {
        self.state.borrow_mut().isr_written(leader_epoch, outcome);
        self.run_actions().await
    }

    pub async fn tick(&self, now: MonoMs) -> Result<(), ReplicaOpError> {
        // A leader whose log is damaged (the scrubber fenced a range) or
        // unusable (a write or fsync failed: a full disk, a failing device)
        // hands leadership over.
        let damaged = if self.log.is_damaged() {
            self.log.damage().map(|d| d.offset)
        } else if self.log.is_poisoned() {
            Some(self.log.log_end_offset())
        } else {
            None
        };
        let acted = {
            let mut state = self.state.borrow_mut();
            state.tick(now);
            if let Some(offset) = damaged {
                state.damaged_while_leading(offset, now);
            }
            state.has_actions()
        };
        // Almost every tick finds nothing to do; actions another event left
        // are carried out by that event's own `run_actions`.
        if !acted {
            return Ok(());
        }
        self.run_actions().await
    }

    /// Carries out the actions the state machine produced, one at a time;
    /// log actions may produce more.
    async fn run_actions(&self) -> Result<(), ReplicaOpError> {
        let _turn = self.action_turn.acquire_permit(1).await;
        loop {
            let actions = self.state.borrow_mut().take_actions();
            if actions.is_empty() {
                return Ok(());
            }
            for action in actions {
                self.carry_out(action).await?;
            }
        }
    }

    async fn carry_out(&self, action: Action) -> Result<(), ReplicaOpError> {
        let tp = self.log.topic_partition();
        match action {
            Action::AssignEpoch { epoch } => self.log.assign_leader_epoch(epoch).await?,
            Action::WriteIsr {
                leader,
                leader_epoch,
                isr,
                expected,
            } => self.links.write_isr(
                tp,
                IsrWrite {
                    leader,
                    leader_epoch,
                    isr,
                    expected,
                },
            ),
            Action::AckDone { id, result } => {
                if let Some(tx) = self.waiting.borrow_mut().remove(&id) {
                    // The producer may have gone; nothing to tell then.
                    let _ = tx.send(result);
                }
            }
            Action::HwChanged { hw } => {
                self.log.set_retention_limit(Some(hw));
                self.hw_changed.notify_all();
            }
            Action::AskEpochEnd { leader, epoch, backoff } => self.links.ask_epoch_end(tp, leader, epoch, backoff),
            Action::Truncate { offset } => {
                self.log.truncate_to(offset).await?;
                self.state
                    .borrow_mut()
                    .truncated(local_log(&self.log), self.log.as_ref());
            }
            Action::RestartLog { offset } => {
                self.log.restart_at(offset).await?;
                self.state
                    .borrow_mut()
                    .truncated(local_log(&self.log), self.log.as_ref());
            }
            Action::StartFetching { leader, offset } => self.links.start_fetching(tp, leader, offset),
            Action::StopFetching => self.links.stop_fetching(tp),
            Action::Resign { offset } => self.links.resign(tp, self.leader_epoch(), offset),
        }
        Ok(())
    }
}
