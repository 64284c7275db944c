//! The broker's per-shard service: the shard's partition logs, its copy of
//! the cluster metadata, and (on shard 0) the embedded metadata store.
//!
//! Metadata changes go to shard 0, which owns the store; the store returns
//! the new metadata, and shard 0 sends it to every shard (itself included),
//! each of which creates, reconfigures or deletes the logs it owns. Only
//! once every shard has applied it is the change answered. Each shard then
//! serves Metadata requests from its own immutable snapshot.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use ferrite_controller::assignment::Placement;
use ferrite_controller::embedded::{ConfigOp, EmbeddedStore};
use ferrite_controller::{BrokerId, ClusterMeta, ControllerError, TopicMeta};
use ferrite_engine::log_manager::{shard_for, LogManager};
use ferrite_engine::notify::Notify;
use ferrite_engine::shard::{ShardHandle, ShardService};
use ferrite_engine::{EngineError, LogConfig, PartitionLog, ShardId, TopicPartition};

use crate::cluster::replicas::ShardReplicas;
use crate::cluster::ClusterShared;
use crate::config_live::LiveConfig;
use crate::groups::GroupCoordinator;
use crate::producer_ids::ProducerIds;
use crate::transactions::TxnCoordinator;
use ferrite_config::BrokerConfig;

/// What to do with local logs the metadata no longer names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stale {
    Delete,
    Keep,
}

/// A metadata change, carried out by shard 0 on the store.
#[derive(Clone, Debug)]
pub enum AdminOp {
    CreateTopic {
        name: String,
        placement: Placement,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    },
    DeleteTopic {
        name: String,
    },
    CreatePartitions {
        name: String,
        total: i32,
        /// The new partitions' replicas, when the request lists them.
        assignment: Option<Vec<Vec<BrokerId>>>,
        validate_only: bool,
    },
    AlterConfigs {
        name: String,
        ops: Vec<ConfigOp>,
        validate_only: bool,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error(transparent)]
    Controller(#[from] ControllerError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Some of a new topic's partitions could not be created here (open
    /// files, disk space, permissions): the topic was removed again.
    #[error("{count} partition(s) of {topic} could not be created, so the topic was not created: {tp}: {reason}")]
    PartitionsNotCreated {
        topic: String,
        count: usize,
        tp: TopicPartition,
        reason: String,
    },
    /// Some of the partitions added to a topic could not be created; what
    /// is done with them follows from `kept`.
    #[error("{count} of the partition(s) added to {topic} could not be created ({tp}: {reason}); {kept}")]
    PartitionsNotAdded {
        topic: String,
        count: usize,
        kept: Kept,
        tp: TopicPartition,
        reason: String,
    },
}

/// What became of partitions added to a topic when some of them could not
/// be created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// All were taken back: the topic keeps the partitions it had.
    Had(usize),
    /// They stay listed (a cluster never shrinks a topic); the replica
    /// broker that failed does not serve them.
    Listed,
}

impl std::fmt::Display for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Kept::Had(n) => write!(f, "all were taken back and the topic keeps its {n}"),
            Kept::Listed => write!(f, "they stay listed and that broker does not serve them"),
        }
    }
}

/// How long a clustered broker holds a client's request, at most, waiting
/// for the controller's first metadata ([`BrokerShard::first_metadata`]).
pub const FIRST_METADATA_WAIT_MS_MAX: u64 = 10_000;

pub struct BrokerShard {
    pub id: ShardId,
    pub config: Arc<BrokerConfig>,
    pub logs: Rc<LogManager>,
    pub handle: ShardHandle<BrokerShard>,
    meta: RefCell<Arc<ClusterMeta>>,
    /// Notified at each metadata installation.
    meta_changed: Notify,
    /// When the shard started (clients wait for the first metadata until
    /// [`FIRST_METADATA_WAIT_MS_MAX`] after it).
    started: std::time::Instant,
    /// Set once the first metadata's wait ran out (said once in the log).
    unfenced_without_metadata: Cell<bool>,
    store: Option<RefCell<EmbeddedStore>>,
    /// Set when the broker is stopping: listeners close, connections finish
    /// their in-flight requests and close.
    pub stopping: Cell<bool>,
    pub stop_signal: Notify,
    /// Long-polling fetches of other shards waiting on partitions of this
    /// one (`handlers::fetch_wait`), by id: notified to end such a wait
    /// early once its fetch is done.
    pub(crate) remote_waits: RefCell<BTreeMap<u64, Rc<Notify>>>,
    /// The last id this shard gave a wait of its own on another shard.
    pub(crate) remote_wait_seq: Cell<u64>,
    connections: Cell<usize>,
    connections_changed: Notify,
    /// One metadata installation at a time on this shard.
    install_lock: glommio::sync::Semaphore,
    /// In a cluster: the replicas of this shard's partitions (`None` for
    /// `ferrite standalone`, whose logs are served directly).
    pub replicas: Option<Rc<ShardReplicas>>,
    /// The incremental fetch sessions opened through this shard.
    pub fetch_sessions: crate::handlers::FetchSessions,
    /// What this shard last answered each follower fetch layout.
    pub follower_views: crate::handlers::FollowerViews,
    /// The groups of this shard's `__consumer_offsets` partitions.
    pub groups: GroupCoordinator,
    /// Producer ids this shard hands out (InitProducerId).
    pub producer_ids: ProducerIds,
    /// The transactional ids of this shard's `__transaction_state` partitions.
    pub transactions: TxnCoordinator,
    /// KIP-890's verifications running for this shard's partitions.
    pub txn_verifications: crate::transactions::verify::Verifications,
    /// Produce responses answered (for `ferrite.fault.produce.drop.response.every`).
    #[cfg(feature = "fault-injection")]
    produce_answers: Cell<u64>,
    /// On shard 0 of a standalone broker: one admin change at a time, from
    /// the store through every shard's logs to its undo, so that an undo
    /// takes back only what its own change made.
    admin_turn: glommio::sync::Semaphore,
    /// The settings in force: `config` with the dynamic broker configs over it.
    live: RefCell<Rc<LiveConfig>>,
    /// The authorizer made from the metadata's ACLs, and the metadata it
    /// was made from: made again when that changes.
    authorizer: RefCell<Option<(Arc<ClusterMeta>, Rc<ferrite_security::acl::Authorizer>)>>,
}

impl BrokerShard {
    pub fn new(
        id: ShardId,
        config: Arc<BrokerConfig>,
        logs: Rc<LogManager>,
        handle: ShardHandle<BrokerShard>,
        meta: Arc<ClusterMeta>,
        store: Option<EmbeddedStore>,
        replicas: Option<Rc<ShardReplicas>>,
    ) -> BrokerShard {
        let shards = handle.shard_count().max(1);
        let fetch_session_slots = config.fetch_session_slots.div_ceil(shards);
        BrokerShard {
            id,
            groups: GroupCoordinator::new(config.groups.clone(), config.offsets.clone()),
            producer_ids: ProducerIds::default(),
            transactions: TxnCoordinator::new(config.transactions.clone()),
            txn_verifications: Default::default(),
            #[cfg(feature = "fault-injection")]
            produce_answers: Cell::new(0),
            admin_turn: glommio::sync::Semaphore::new(1),
            live: RefCell::new(Rc::new(LiveConfig::compose(&config, meta.broker_configs.clone()))),
            authorizer: RefCell::new(None),
            config,
            logs,
            handle,
            meta: RefCell::new(meta),
            meta_changed: Notify::new(),
            started: std::time::Instant::now(),
            unfenced_without_metadata: Cell::new(false),
            store: store.map(RefCell::new),
            stopping: Cell::new(false),
            stop_signal: Notify::new(),
            remote_waits: RefCell::new(BTreeMap::new()),
            remote_wait_seq: Cell::new(0),
            connections: Cell::new(0),
            connections_changed: Notify::new(),
            install_lock: glommio::sync::Semaphore::new(1),
            replicas,
            fetch_sessions: crate::handlers::FetchSessions::new(id, fetch_session_slots),
            follower_views: crate::handlers::FollowerViews::default(),
        }
    }

    /// The cluster this broker belongs to, if any.
    pub fn cluster(&self) -> Option<&Arc<ClusterShared>> {
        self.replicas.as_ref().map(|r| &r.cluster)
    }

    pub fn shard_count(&self) -> usize {
        self.handle.shard_count()
    }

    /// The authorizer, when `authorizer.class.name` asks for ACLs.
    pub fn authorizer(&self) -> Option<Rc<ferrite_security::acl::Authorizer>> {
        if !self.config.authorizer.enabled {
            return None;
        }
        let meta = self.meta();
        let mut cached = self.authorizer.borrow_mut();
        if let Some((m, a)) = cached.as_ref() {
            if Arc::ptr_eq(m, &meta) {
                return Some(a.clone());
            }
        }
        let a = Rc::new(crate::handlers::access::authorizer(&self.config.authorizer, &meta.acls));
        *cached = Some((meta, a.clone()));
        Some(a)
    }

    pub fn meta(&self) -> Arc<ClusterMeta> {
        self.meta.borrow().clone()
    }

    /// In a cluster, waits until the controller's first metadata is here
    /// (at most until [`FIRST_METADATA_WAIT_MS_MAX`] after the shard
    /// started); standalone, returns at once.
    /// Until then the broker knows no controller, no other broker and no
    /// topic: Kafka's brokers are fenced until caught up, and a client
    /// answered sooner would take that for the cluster.
    pub async fn first_metadata(&self) {
        if self.replicas.is_none() {
            return;
        }
        let deadline = self.started + std::time::Duration::from_millis(FIRST_METADATA_WAIT_MS_MAX);
        loop {
            let seen = self.meta_changed.generation();
            if self.meta.borrow().version > 0 {
                return;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                if !self.unfenced_without_metadata.replace(true) {
                    tracing::warn!(
                        waited_ms = FIRST_METADATA_WAIT_MS_MAX,
                        "no metadata from the controller yet: answering with this broker alone"
                    );
                }
                return;
            }
            futures_lite::future::or(self.meta_changed.changed_since(seen), glommio::timer::sleep(left)).await;
        }
    }

    pub fn owner(&self, tp: &TopicPartition) -> ShardId {
        shard_for(tp, self.shard_count())
    }

    pub fn broker_id(&self) -> BrokerId {
        BrokerId(self.config.broker_id)
    }

    /// The log config of a topic: broker defaults in force plus its overrides.
    pub fn topic_log_config(&self, topic: &TopicMeta) -> LogConfig {
        self.live().topic_log_config(&topic.name, &topic.configs)
    }

    /// The settings in force (see `config_live`).
    pub fn live(&self) -> Rc<LiveConfig> {
        self.live.borrow().clone()
    }

    pub(crate) fn set_live(&self, live: Rc<LiveConfig>) {
        *self.live.borrow_mut() = live;
    }

    /// Runs `f` on the embedded store (shard 0 of a standalone broker).
    pub(crate) fn with_store<T>(
        &self,
        f: impl FnOnce(&mut EmbeddedStore) -> Result<T, ControllerError>,
    ) -> Result<T, ControllerError> {
        let store = self.store.as_ref().ok_or_else(|| ControllerError::Unavailable {
            reason: "the embedded store is on shard 0".into(),
        })?;
        let mut store = store.borrow_mut();
        f(&mut store)
    }

    /// In a cluster: takes the topic configs the cluster thread read into
    /// this shard's metadata (as served), and into the logs and replicas it
    /// has (as enforced).
    pub async fn apply_topic_configs(&self) {
        let (Some(replicas), Some(cluster)) = (&self.replicas, self.cluster()) else {
            return;
        };
        let Ok(_one_at_a_time) = self.install_lock.acquire_permit(1).await else {
            return;
        };
        let mut meta = (*self.meta()).clone();
        cluster.fill_topic_configs(&mut meta);
        let live = self.refresh_live(&meta.broker_configs);
        *self.meta.borrow_mut() = Arc::new(meta.clone());
        self.meta_changed.notify_all();
        for r in replicas.all() {
            let tp = r.log().topic_partition().clone();
            // Not read yet (a topic just created): its replica has the
            // configs it was created with.
            let Some(configs) = cluster.topic_configs(&tp.topic) else {
                continue;
            };
            let config = live.topic_log_config(&tp.topic, &configs);
            if r.log().config() != config {
                r.log().set_config(config);
            }
            if let Err(e) = r
                .set_config(replicas.replica_config(&configs, live.min_insync_replicas()))
                .await
            {
                tracing::warn!(%tp, error = %e, "applying a topic's config to its replica");
            }
        }
    }

    /// Applies the topic configs each time the cluster thread says they
    /// changed, until the broker stops.
    pub async fn follow_topic_configs(self: Rc<Self>, changed: async_channel::Receiver<()>) {
        while changed.recv().await.is_ok() {
            if self.stopping.get() {
                return;
            }
            self.apply_topic_configs().await;
        }
    }

    /// Installs new metadata: creates the logs this shard owns and leads,
    /// updates their configs, and — for changes made while running, not at
    /// start (a lost metadata file must not delete data) — deletes the logs
    /// whose partition is gone. Returns the partitions whose log could not
    /// be created, and why.
    pub async fn apply_metadata(&self, meta: Arc<ClusterMeta>, stale: Stale) -> Result<NotCreated, EngineError> {
        let _one_at_a_time = self.install_lock.acquire_permit(1).await.map_err(|e| EngineError::Io {
            op: "wait for metadata install",
            path: "metadata".into(),
            source: e.into(),
        })?;
        if stale == Stale::Delete && meta.version < self.meta.borrow().version {
            // A newer snapshot (which includes this change) is installed.
            return Ok(Vec::new());
        }
        if self.replicas.is_some() {
            // In a cluster, LeaderAndIsr and StopReplica create and delete
            // logs; the metadata is only served.
            if meta.version >= self.meta.borrow().version {
                // Under the install lock, so that a config change applied
                // meanwhile is not undone by an older snapshot's configs.
                let mut meta = (*meta).clone();
                if let Some(cluster) = self.cluster() {
                    cluster.fill_topic_configs(&mut meta);
                }
                self.refresh_live(&meta.broker_configs);
                *self.meta.borrow_mut() = Arc::new(meta);
                self.meta_changed.notify_all();
            }
            return Ok(Vec::new());
        }
        self.refresh_live(&meta.broker_configs);
        *self.meta.borrow_mut() = meta.clone();
        self.meta_changed.notify_all();
        let me = self.broker_id();
        let mut wanted = std::collections::BTreeSet::new();
        let mut not_created = Vec::new();
        let mut to_open = Vec::new();
        for t in meta.topics.values() {
            let config = self.topic_log_config(t);
            for p in &t.partitions {
                let tp = TopicPartition::new(t.name.clone(), p.partition);
                if self.owner(&tp) != self.id || !p.replicas.contains(&me) {
                    continue;
                }
                wanted.insert(tp.clone());
                to_open.push((tp, config.clone()));
            }
        }
        let configs: BTreeMap<TopicPartition, LogConfig> = to_open.iter().cloned().collect();
        for (tp, opened) in self.logs.get_or_create_many(to_open).await {
            match opened {
                Ok(log) => {
                    let config = &configs[&tp];
                    if log.config() != *config {
                        log.set_config(config.clone());
                    }
                }
                Err(e) => {
                    tracing::error!(tp = %tp, error = %e, "partition not served");
                    crate::metrics::partition_not_created();
                    not_created.push((tp, e.to_string()));
                }
            }
        }
        let known: Vec<TopicPartition> = self
            .logs
            .partitions()
            .into_iter()
            .chain(self.logs.offline().into_iter().map(|(tp, _)| tp))
            .collect();
        for tp in known {
            if wanted.contains(&tp) {
                continue;
            }
            match stale {
                Stale::Delete => {
                    tracing::info!(tp = %tp, "deleting partition no longer in the metadata");
                    self.logs.delete(&tp).await?;
                }
                Stale::Keep => {
                    tracing::warn!(tp = %tp, "partition on disk is not in the metadata; left alone and not served")
                }
            }
        }
        Ok(not_created)
    }

    /// Runs `f` on shard `owner`: directly when that is this shard, else by
    /// message to it.
    pub async fn run_on<R, F, Fut>(self: &Rc<Self>, owner: ShardId, f: F) -> Result<R, EngineError>
    where
        R: Send + 'static,
        F: FnOnce(Rc<BrokerShard>) -> Fut + Send + 'static,
        Fut: Future<Output = R> + 'static,
    {
        if owner == self.id {
            return Ok(f(self.clone()).await);
        }
        crate::metrics::cross_shard_call();
        self.handle.submit(owner, f).await
    }

    /// The log of a partition this shard owns.
    pub fn local_log(&self, tp: &TopicPartition) -> Option<Rc<PartitionLog>> {
        self.logs.get(tp)
    }

    /// [`Self::local_log`] for a client's request: KAFKA_STORAGE_ERROR for a
    /// partition whose log could not be opened, UNKNOWN_TOPIC_OR_PARTITION
    /// for one this shard does not have.
    pub fn served_log(&self, tp: &TopicPartition) -> Result<Rc<PartitionLog>, ferrite_protocol::errors::ErrorCode> {
        self.logs.served(tp).map_err(|e| crate::error_map::engine(&e))
    }

    /// Carries out `op` on shard 0's store and installs the result on every
    /// shard before returning. A topic created, or partitions added, whose
    /// logs could not all be created (open files, disk space, permissions)
    /// are taken back whole and the answer says why.
    pub async fn admin(self: &Rc<Self>, op: AdminOp) -> Result<TopicMeta, AdminError> {
        if self.replicas.is_some() {
            return self.cluster_admin(op).await;
        }
        self.run_on(ShardId(0), move |zero: Rc<BrokerShard>| async move {
            let _turn = zero.admin_turn.acquire_permit(1).await.map_err(|e| {
                AdminError::Controller(ControllerError::Unavailable {
                    reason: format!("admin changes stopped: {e}"),
                })
            })?;
            zero.admin_in_turn(op).await
        })
        .await?
    }

    /// [`Self::admin`] on shard 0, holding the admin turn.
    async fn admin_in_turn(self: &Rc<Self>, op: AdminOp) -> Result<TopicMeta, AdminError> {
        let applied = self.admin_on_zero(op).await?;
        let topic = applied.topic;
        let Some(meta) = applied.meta else { return Ok(topic) };
        let not_created = broadcast(&self.handle, meta).await?;
        // Only this change's partitions: another topic's partition held
        // offline fails every installation, and is not this change's doing.
        let from = match applied.change {
            Change::Grown { from } => from,
            Change::Created | Change::Other => 0,
        };
        let ours: NotCreated = not_created
            .into_iter()
            .filter(|(tp, _)| tp.topic == topic.name && tp.partition as usize >= from)
            .collect();
        let Some((tp, reason)) = ours.first() else {
            return Ok(topic);
        };
        let (tp, reason, count) = (tp.clone(), reason.clone(), ours.len());
        match applied.change {
            Change::Created => {
                tracing::warn!(topic = %topic.name, failed = count, "removing a topic whose partitions could not all be created");
                self.undo_creation(&topic).await?;
                Err(AdminError::PartitionsNotCreated {
                    topic: topic.name,
                    count,
                    tp,
                    reason,
                })
            }
            Change::Grown { from } => {
                tracing::warn!(topic = %topic.name, failed = count, "removing the partitions that could not all be added");
                self.undo_growth(&topic, from).await?;
                Err(AdminError::PartitionsNotAdded {
                    topic: topic.name,
                    count,
                    kept: Kept::Had(from),
                    tp,
                    reason,
                })
            }
            // Other changes create no log.
            Change::Other => Ok(topic),
        }
    }

    /// Undoes the creation of `topic`, all of it: every shard first closes
    /// the partitions it created (freeing the descriptors that the rest
    /// needs, when they ran out), then the store forgets the topic, then
    /// each partition's directory goes.
    async fn undo_creation(self: &Rc<Self>, topic: &TopicMeta) -> Result<(), AdminError> {
        let tps = partitions_of(topic, 0);
        self.close_everywhere(&tps).await?;
        Box::pin(self.admin_in_turn(AdminOp::DeleteTopic {
            name: topic.name.clone(),
        }))
        .await?;
        self.remove_leftovers(tps).await
    }

    /// Undoes growing `topic` from `kept` partitions, in the order
    /// [`Self::undo_creation`] follows: close the new logs, shrink the
    /// store's topic back, install that everywhere, remove the directories.
    async fn undo_growth(self: &Rc<Self>, topic: &TopicMeta, kept: usize) -> Result<(), AdminError> {
        let tps = partitions_of(topic, kept);
        self.close_everywhere(&tps).await?;
        let meta = self.remove_added_partitions_on_zero(&topic.name, kept)?;
        broadcast(&self.handle, meta).await?;
        self.remove_leftovers(tps).await
    }

    fn remove_added_partitions_on_zero(&self, name: &str, kept: usize) -> Result<Arc<ClusterMeta>, ControllerError> {
        let store = self.store.as_ref();
        assert!(store.is_some(), "admin operations run on shard 0");
        let mut store = store.map(|s| s.borrow_mut()).unwrap_or_else(|| unreachable!());
        store.remove_added_partitions(name, kept)?;
        Ok(Arc::new(store.meta().clone()))
    }

    /// Closes each of `tps` on the shard that owns it.
    async fn close_everywhere(self: &Rc<Self>, tps: &[TopicPartition]) -> Result<(), AdminError> {
        for tp in tps {
            let tp = tp.clone();
            self.handle
                .submit(
                    self.owner(&tp),
                    move |s: Rc<BrokerShard>| async move { s.logs.close(&tp) },
                )
                .await?;
        }
        Ok(())
    }

    /// Removes what each of `tps` left on disk, on the shard that owns it.
    async fn remove_leftovers(self: &Rc<Self>, tps: Vec<TopicPartition>) -> Result<(), AdminError> {
        for tp in tps {
            self.handle
                .submit(self.owner(&tp), move |s: Rc<BrokerShard>| async move {
                    s.logs.remove_leftover(&tp).await
                })
                .await??;
        }
        Ok(())
    }

    async fn admin_on_zero(&self, op: AdminOp) -> Result<Applied, ControllerError> {
        let store = self.store.as_ref();
        assert!(store.is_some(), "admin operations run on shard 0");
        let mut store = store.map(|s| s.borrow_mut()).unwrap_or_else(|| unreachable!());
        let (topic, changed, change) = match op {
            AdminOp::CreateTopic {
                name,
                placement,
                configs,
                validate_only,
            } => (
                store.create_topic(&name, &placement, configs, validate_only)?,
                !validate_only,
                Change::Created,
            ),
            AdminOp::DeleteTopic { name } => (store.delete_topic(&name)?, true, Change::Other),
            AdminOp::CreatePartitions {
                name,
                total,
                assignment,
                validate_only,
            } => {
                let from = store.meta().topic(&name).map_or(0, |t| t.partitions.len());
                (
                    store.create_partitions(&name, total, assignment, validate_only)?,
                    !validate_only,
                    Change::Grown { from },
                )
            }
            AdminOp::AlterConfigs {
                name,
                ops,
                validate_only,
            } => (
                store.alter_configs(&name, &ops, validate_only)?,
                !validate_only,
                Change::Other,
            ),
        };
        Ok(Applied {
            topic,
            meta: changed.then(|| Arc::new(store.meta().clone())),
            change,
        })
    }

    /// Reserves the next block of producer ids in the embedded store
    /// (shard 0 of a standalone broker).
    pub fn allocate_producer_ids(&self) -> Result<ferrite_controller::producer_ids::ProducerIdBlock, ControllerError> {
        let store = self.store.as_ref().ok_or_else(|| ControllerError::Unavailable {
            reason: "producer ids are reserved on shard 0".into(),
        })?;
        store.borrow_mut().allocate_producer_ids()
    }

    /// Fault injection for tests (`ferrite.fault.produce.drop.response.every`
    /// = N): whether this produce's answer is the N-th, to be dropped by
    /// closing the connection after the append. Built only with the
    /// `fault-injection` feature.
    #[cfg(feature = "fault-injection")]
    pub fn drop_this_produce_answer(&self) -> bool {
        let every = self.config.fault_drop_produce_response_every;
        if every == 0 {
            return false;
        }
        let n = self.produce_answers.get() + 1;
        self.produce_answers.set(n);
        n % every == 0
    }

    /// Stops listeners and tells connections to finish.
    pub fn begin_stop(&self) {
        self.stopping.set(true);
        if let Some(r) = &self.replicas {
            r.stopped.set(true);
        }
        self.stop_signal.notify_all();
    }

    pub fn connection_opened(&self) {
        self.connections.set(self.connections.get() + 1);
        crate::metrics::connection_opened(self.id);
    }

    pub fn connection_closed(&self) {
        crate::metrics::connection_closed(self.id);
        self.connections.set(self.connections.get() - 1);
        self.connections_changed.notify_all();
    }

    pub fn connection_count(&self) -> usize {
        self.connections.get()
    }

    /// Waits (at most `limit`) until every connection has answered its
    /// in-flight requests and closed.
    pub async fn drain_connections(&self, limit: std::time::Duration) {
        let deadline = std::time::Instant::now() + limit;
        while self.connections.get() > 0 {
            let seen = self.connections_changed.generation();
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                tracing::warn!(open = self.connections.get(), "connections still open at shutdown");
                return;
            }
            futures_lite::future::or(
                self.connections_changed.changed_since(seen),
                glommio::timer::sleep(left),
            )
            .await;
        }
    }
}

/// Has every shard apply the topic configs the cluster knows now.
pub async fn apply_topic_configs_everywhere(handle: &ShardHandle<BrokerShard>) -> Result<(), EngineError> {
    for s in 0..handle.shard_count() {
        handle
            .submit(ShardId(s), |shard: Rc<BrokerShard>| async move {
                shard.apply_topic_configs().await
            })
            .await?;
    }
    Ok(())
}

/// What an admin operation did to the embedded store.
struct Applied {
    topic: TopicMeta,
    /// The store's new metadata, when it changed.
    meta: Option<Arc<ClusterMeta>>,
    change: Change,
}

/// Which logs an admin operation asked for, to take back if they could
/// not all be created.
enum Change {
    Created,
    /// Partitions added to a topic that had `from`.
    Grown {
        from: usize,
    },
    Other,
}

/// The partitions of `topic` numbered `from` and up.
fn partitions_of(topic: &TopicMeta, from: usize) -> Vec<TopicPartition> {
    topic
        .partitions
        .iter()
        .filter(|p| p.partition as usize >= from)
        .map(|p| TopicPartition::new(topic.name.clone(), p.partition))
        .collect()
}

/// Partitions whose log could not be created, and why.
pub type NotCreated = Vec<(TopicPartition, String)>;

/// Sends `meta` to every shard and waits until each has applied it;
/// returns the partitions no shard could create.
pub async fn broadcast(handle: &ShardHandle<BrokerShard>, meta: Arc<ClusterMeta>) -> Result<NotCreated, EngineError> {
    let mut pending = Vec::new();
    for s in 0..handle.shard_count() {
        let meta = meta.clone();
        let h = handle.clone();
        pending.push(glommio::spawn_local(async move {
            h.submit(ShardId(s), move |shard: Rc<BrokerShard>| async move {
                shard.apply_metadata(meta, Stale::Delete).await
            })
            .await
        }));
    }
    let mut not_created = Vec::new();
    for p in pending {
        not_created.extend(p.await??);
    }
    Ok(not_created)
}

impl ShardService for BrokerShard {
    fn shutdown(self: Rc<Self>) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(async move {
            self.begin_stop();
            self.drain_connections(std::time::Duration::from_secs(10)).await;
            LogManager::shutdown(&self.logs).await;
        })
    }
}
