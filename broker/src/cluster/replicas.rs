//! One shard's replicas: a [`LocalReplica`] for each partition the shard
//! owns and LeaderAndIsr made it a replica of, and what they ask of the rest
//! of the broker — ISR writes (through the cluster thread), epoch queries
//! and fetching (through the shard's [`Fetchers`]).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::Duration;

use ferrite_controller::control::PartitionInfo;
use ferrite_controller::partition_state::{ControllerEpoch, PartitionState};
use ferrite_engine::log_manager::LogManager;
use ferrite_engine::{LeaderEpoch, Offset, TopicPartition};
use ferrite_replication::{
    Backoff, BrokerId, IsrWrite, LeaderAndIsr, LocalReplica, ReplicaConfig, ReplicaLinks, ReplicaOpError, RoleKind,
};

use super::fetcher::Fetchers;
use super::{ClusterRequest, ClusterShared};
use crate::config_live::LiveConfig;
use crate::handlers::FollowerViews;

/// How long to wait before retrying an ISR write ZooKeeper could not take.
const ISR_WRITE_RETRY_MS: u64 = 500;

pub struct ShardReplicas {
    pub cluster: Arc<ClusterShared>,
    /// By hash: every fetch looks up each partition it names, thousands
    /// for a follower (a tree compared topic names a dozen times each).
    replicas: RefCell<HashMap<TopicPartition, Rc<LocalReplica>>>,
    /// The controller epoch of each partition's last LeaderAndIsr: a
    /// leader's ISR writes carry it.
    controller_epochs: RefCell<BTreeMap<TopicPartition, ControllerEpoch>>,
    pub fetchers: Rc<Fetchers>,
    pub stopped: Cell<bool>,
    /// Moves whenever a replica is added or removed: what remembers
    /// replicas by position (a follower's view, `handlers/follower_view.rs`)
    /// starts over.
    changes: Cell<u64>,
    /// Partitions whose log a LeaderAndIsr could not create here (open
    /// files, disk space, permissions), and why; until a later one
    /// succeeds or the partition is stopped. A broker creating a topic asks
    /// for them (ListOffsets from the debugging replica id, `list_offsets.rs`).
    not_created: RefCell<BTreeMap<TopicPartition, String>>,
    me: Weak<ShardReplicas>,
}

/// The [`ReplicaLinks`] of every replica on the shard.
struct Links(Weak<ShardReplicas>);

impl ReplicaLinks for Links {
    fn write_isr(&self, tp: &TopicPartition, write: IsrWrite) {
        let Some(owner) = self.0.upgrade() else { return };
        let tp = tp.clone();
        glommio::spawn_local(async move { owner.write_isr(tp, write).await }).detach();
    }

    fn ask_epoch_end(&self, tp: &TopicPartition, leader: BrokerId, epoch: LeaderEpoch, backoff: Backoff) {
        if let Some(owner) = self.0.upgrade() {
            owner.fetchers.ask_epoch_end(tp, leader, epoch, backoff);
        }
    }

    fn start_fetching(&self, tp: &TopicPartition, leader: BrokerId, _offset: Offset) {
        if let Some(owner) = self.0.upgrade() {
            owner.fetchers.fetch(tp, leader);
        }
    }

    fn stop_fetching(&self, tp: &TopicPartition) {
        if let Some(owner) = self.0.upgrade() {
            owner.fetchers.remove(tp);
        }
    }

    fn resign(&self, tp: &TopicPartition, leader_epoch: LeaderEpoch, offset: Offset) {
        let Some(owner) = self.0.upgrade() else { return };
        let tp = tp.clone();
        glommio::spawn_local(async move { owner.report_damage(tp, leader_epoch, offset).await }).detach();
    }
}

impl ShardReplicas {
    pub fn new(cluster: Arc<ClusterShared>) -> Rc<ShardReplicas> {
        Rc::new_cyclic(|me: &Weak<ShardReplicas>| ShardReplicas {
            fetchers: Fetchers::new(cluster.clone(), me.clone()),
            cluster,
            replicas: RefCell::new(HashMap::new()),
            controller_epochs: RefCell::new(BTreeMap::new()),
            stopped: Cell::new(false),
            changes: Cell::new(0),
            not_created: RefCell::new(BTreeMap::new()),
            me: me.clone(),
        })
    }

    /// Why `tp`'s log could not be created here, if it could not.
    pub fn not_created(&self, tp: &TopicPartition) -> Option<String> {
        self.not_created.borrow().get(tp).cloned()
    }

    /// How many times a replica was added or removed.
    pub fn changes(&self) -> u64 {
        self.changes.get()
    }

    pub fn get(&self, tp: &TopicPartition) -> Option<Rc<LocalReplica>> {
        self.replicas.borrow().get(tp).cloned()
    }

    /// The replicas this shard leads now.
    pub fn leaders(&self) -> Vec<Rc<LocalReplica>> {
        self.replicas
            .borrow()
            .values()
            .filter(|r| r.role() == RoleKind::Leader)
            .cloned()
            .collect()
    }

    pub fn all(&self) -> Vec<Rc<LocalReplica>> {
        self.replicas.borrow().values().cloned().collect()
    }

    /// A replica's config: the topic's `min.insync.replicas`, else the
    /// broker's in force (`broker_min_isr`).
    pub fn replica_config(&self, configs: &BTreeMap<String, String>, broker_min_isr: usize) -> ReplicaConfig {
        let min_isr = configs
            .get("min.insync.replicas")
            .and_then(|v| v.parse().ok())
            .unwrap_or(broker_min_isr);
        ReplicaConfig {
            min_insync_replicas: min_isr,
            replica_lag_time_max_ms: self.cluster.config.replica_lag_time_max_ms,
            ..ReplicaConfig::default()
        }
    }

    /// Applies one partition of a LeaderAndIsr on the shard that owns it:
    /// opens (or creates) the log, then hands the state to the replica.
    pub async fn leader_and_isr(
        &self,
        logs: &LogManager,
        live: &LiveConfig,
        info: &PartitionInfo,
        controller_epoch: ControllerEpoch,
    ) -> Result<(), ReplicaOpError> {
        let tp = info.partition.clone();
        let replica = match self.get(&tp) {
            Some(r) => r,
            None => {
                let name = tp.topic.clone();
                let configs = self
                    .cluster
                    .ask(|reply| ClusterRequest::TopicConfig { name, reply })
                    .await
                    .and_then(|r| r.ok())
                    .unwrap_or_default();
                let log_config = live.topic_log_config(&tp.topic, &configs);
                let log = match logs.get(&tp) {
                    // Opened at start, before the topic's configs were known.
                    Some(log) => {
                        if log.config() != log_config {
                            log.set_config(log_config);
                        }
                        log
                    }
                    None => match logs.get_or_create(&tp, log_config).await {
                        Ok(log) => log,
                        // A StopReplica deleted it meanwhile: nothing failed.
                        Err(e @ ferrite_engine::EngineError::DeletedWhileCreated { .. }) => return Err(e.into()),
                        Err(e) => {
                            crate::metrics::partition_not_created();
                            self.not_created.borrow_mut().insert(tp.clone(), e.to_string());
                            return Err(e.into());
                        }
                    },
                };
                self.not_created.borrow_mut().remove(&tp);
                let links: Rc<dyn ReplicaLinks> = Rc::new(Links(self.me.clone()));
                let start = log.log_start_offset();
                let r = Rc::new(LocalReplica::new(
                    log,
                    self.cluster.local.id,
                    self.replica_config(&configs, live.min_insync_replicas()),
                    start,
                    links,
                ));
                self.replicas.borrow_mut().insert(tp.clone(), r.clone());
                self.changes.set(self.changes.get() + 1);
                r
            }
        };
        self.controller_epochs.borrow_mut().insert(tp.clone(), controller_epoch);
        let state = LeaderAndIsr {
            leader: info.leader,
            leader_epoch: info.leader_epoch,
            isr: info.isr.clone(),
            replicas: info.replicas.clone(),
            zk_version: info.zk_version,
        };
        replica.leader_and_isr(&state, self.cluster.now()).await
    }

    /// StopReplica for one partition; with `delete`, its log goes too.
    /// `follower_views` forget what they remember of the replica first.
    pub async fn stop_replica(
        &self,
        logs: &LogManager,
        follower_views: &FollowerViews,
        tp: &TopicPartition,
        delete: bool,
    ) -> Result<(), ReplicaOpError> {
        let replica = self.replicas.borrow_mut().remove(tp);
        self.not_created.borrow_mut().remove(tp);
        self.changes.set(self.changes.get() + 1);
        // A follower view remembers replicas: none may keep this one open.
        follower_views.drop_stale(self.changes());
        self.controller_epochs.borrow_mut().remove(tp);
        self.fetchers.remove(tp);
        if let Some(r) = replica {
            r.stop().await?;
        }
        if !delete {
            return Ok(());
        }
        // Also removes what a creation that failed may have left on disk;
        // a removal that fails (no descriptor left, the limit that failed
        // the creation) is tried again by the log manager.
        logs.delete(tp).await?;
        Ok(())
    }

    async fn write_isr(&self, tp: TopicPartition, write: IsrWrite) {
        loop {
            let Some(replica) = self.get(&tp) else { return };
            if replica.leader_epoch() != write.leader_epoch || self.stopped.get() {
                return;
            }
            let state = PartitionState {
                leader: Some(write.leader),
                leader_epoch: write.leader_epoch,
                isr: write.isr.clone(),
                controller_epoch: self.controller_epochs.borrow().get(&tp).copied().unwrap_or_default(),
            };
            let (t, expected) = (tp.clone(), write.expected);
            let outcome = self
                .cluster
                .ask(move |reply| ClusterRequest::WriteIsr {
                    tp: t,
                    state,
                    expected,
                    reply,
                })
                .await;
            match outcome {
                None => return,
                Some(Ok(outcome)) => {
                    tracing::info!(%tp, isr = ?write.isr, ?outcome, "ISR write");
                    if let Err(e) = replica.isr_written(write.leader_epoch, outcome).await {
                        tracing::error!(%tp, error = %e, "after an ISR write");
                    }
                    return;
                }
                Some(Err(e)) => {
                    tracing::warn!(%tp, error = %e, "ISR write failed; retrying");
                    glommio::timer::sleep(Duration::from_millis(ISR_WRITE_RETRY_MS)).await;
                }
            }
        }
    }

    /// Tells the controller that this replica's log of `tp` is damaged from
    /// `offset` (to take it out of the ISR, and leadership off it),
    /// retrying while the replica is still in `leader_epoch`.
    async fn report_damage(&self, tp: TopicPartition, leader_epoch: LeaderEpoch, offset: Offset) {
        tracing::error!(%tp, offset = offset.0, "this replica's log is damaged: asking the controller to take it out of the ISR");
        loop {
            let current = self.get(&tp).is_some_and(|r| r.leader_epoch() == leader_epoch);
            if !current || self.stopped.get() {
                return;
            }
            let t = tp.clone();
            match self
                .cluster
                .ask(move |reply| ClusterRequest::ReportDamage { tp: t, reply })
                .await
            {
                None | Some(Ok(())) => return,
                Some(Err(e)) => {
                    tracing::warn!(%tp, error = %e, "damage notice not written; retrying");
                    glommio::timer::sleep(Duration::from_millis(ISR_WRITE_RETRY_MS)).await;
                }
            }
        }
    }

    /// Ticks every replica (ISR shrink checks, acks timeouts) until the
    /// shard stops.
    pub async fn run_ticks(self: Rc<Self>) {
        let every = (self.cluster.config.replica_lag_time_max_ms / 4).clamp(10, 1_000);
        while !self.stopped.get() {
            glommio::timer::sleep(Duration::from_millis(every)).await;
            let now = self.cluster.now();
            // Only a leader's tick does anything (acks=all deadlines, ISR
            // shrinking); at 10,000 replicas, ticking all of them was a
            // sixth of an idle broker's time.
            for r in self.leaders() {
                if let Err(e) = r.tick(now).await {
                    tracing::error!(tp = %r.log().topic_partition(), error = %e, "replica tick");
                }
            }
        }
    }
}
