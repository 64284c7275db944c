//! A broker in a ZooKeeper cluster (`zookeeper.connect` set).
//!
//! - [`zk_thread`]: the cluster thread, with its own tokio runtime: the
//!   controller driver (session, registration, controller election and, on
//!   the controller, the controller state machine), the broker's own
//!   ZooKeeper work (topic admin, leaders' ISR writes), and the
//!   [`courier`] that delivers the controller's requests to the brokers.
//! - [`metadata_cache`]: the cluster metadata every broker serves, merged from
//!   the controller's UpdateMetadata requests.
//! - [`replicas`]: per shard, the replicas of the partitions it owns
//!   (`ferrite_replication::LocalReplica`), and what they ask of the network;
//!   [`fetcher`]: the follower fetchers, one per leader broker and shard.
//!
//! Shards reach the cluster thread only through [`ClusterShared`] (`Send`):
//! a bounded request channel and a few atomics and mutex-guarded maps.

pub mod admin;
pub mod config_changes;
pub mod controller_wire;
pub mod courier;
pub mod created_check;
pub mod fetcher;
pub mod metadata_cache;
pub mod replicas;
pub mod zk_thread;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ferrite_controller::assignment::Placement;
use ferrite_controller::broker_config::{BrokerConfigs, BrokerEntity};
use ferrite_controller::embedded::ConfigOp;
use ferrite_controller::partition_state::{ControllerEpoch, PartitionState};
use ferrite_controller::{BrokerId, BrokerMeta, ClusterMeta, ControllerError, TopicMeta};
use ferrite_engine::TopicPartition;
use ferrite_replication::{IsrWriteOutcome, MonoMs, ZkVersion};
use tokio::sync::{mpsc, oneshot};

use ferrite_config::{BrokerConfig, ClusterConfig};
use metadata_cache::MetaCache;

/// Requests the cluster thread may have waiting.
pub const REQUESTS_QUEUED_MAX: usize = 1024;

/// What shards ask the cluster thread to do in ZooKeeper.
#[derive(Debug)]
pub enum ClusterRequest {
    /// A leader's conditional ISR write, announced on success.
    WriteIsr {
        tp: TopicPartition,
        state: PartitionState,
        expected: ZkVersion,
        reply: oneshot::Sender<Result<IsrWriteOutcome, String>>,
    },
    /// A leader's log is damaged: ask the controller to move leadership
    /// away (`/replica_damage_notification`).
    ReportDamage {
        tp: TopicPartition,
        reply: oneshot::Sender<Result<(), String>>,
    },
    CreateTopic {
        name: String,
        placement: Placement,
        configs: BTreeMap<String, String>,
        validate_only: bool,
        reply: oneshot::Sender<Result<TopicMeta, ControllerError>>,
    },
    DeleteTopic {
        name: String,
        reply: oneshot::Sender<Result<(), ControllerError>>,
    },
    CreatePartitions {
        name: String,
        total: i32,
        assignment: Option<Vec<Vec<BrokerId>>>,
        validate_only: bool,
        reply: oneshot::Sender<Result<(), ControllerError>>,
    },
    SetTopicConfig {
        name: String,
        configs: BTreeMap<String, String>,
        reply: oneshot::Sender<Result<(), ControllerError>>,
    },
    /// Changes one entity's dynamic broker configs (all or nothing) and
    /// announces the change; answers the entity's configs after it.
    AlterBrokerConfigs {
        entity: BrokerEntity,
        ops: Vec<ConfigOp>,
        validate_only: bool,
        reply: oneshot::Sender<Result<BTreeMap<String, String>, ControllerError>>,
    },
    /// A topic's config overrides (for the log a LeaderAndIsr creates).
    TopicConfig {
        name: String,
        reply: oneshot::Sender<Result<BTreeMap<String, String>, ControllerError>>,
    },
    /// Whether each replica of a new topic got its log
    /// (`created_check.rs`): the first that did not, if any.
    ReplicasCreated {
        topic: String,
        replicas: Vec<(i32, Vec<BrokerId>)>,
        reply: oneshot::Sender<Option<created_check::NotCreated>>,
    },
    /// Preferred replica election (`None`: every partition).
    ElectPreferred {
        partitions: Option<Vec<TopicPartition>>,
        reply: oneshot::Sender<Result<(), ControllerError>>,
    },
    /// On the controller: another broker's ControlledShutdown.
    ShutdownOf {
        broker: BrokerId,
        reply: oneshot::Sender<Result<Vec<TopicPartition>, ()>>,
    },
    /// The next block of producer ids (`/latest_producer_id_block`).
    AllocateProducerIds {
        reply: oneshot::Sender<Result<ferrite_controller::producer_ids::ProducerIdBlock, ControllerError>>,
    },
    /// Controlled shutdown: move this broker's leaderships away; answers
    /// with the partitions it still leads.
    ControlledShutdown {
        reply: oneshot::Sender<Result<Vec<TopicPartition>, String>>,
    },
}

/// A change to the topic configs a broker knows.
/// Dynamic broker configs read from ZooKeeper.
pub enum BrokerConfigsRead {
    One(BrokerEntity, BTreeMap<String, String>),
    All(BrokerConfigs),
}

pub enum TopicConfigs {
    One(String, BTreeMap<String, String>),
    All(BTreeMap<String, BTreeMap<String, String>>),
}

/// The broker-wide cluster state that shards share.
pub struct ClusterShared {
    pub local: BrokerMeta,
    pub config: ClusterConfig,
    requests: mpsc::Sender<ClusterRequest>,
    /// The newest controller epoch seen in a controller request.
    controller_epoch: AtomicI32,
    is_controller: AtomicBool,
    /// The controller named by the last UpdateMetadata (-1: none yet).
    controller: AtomicI32,
    /// This broker's registration (czxid of `/brokers/ids/<id>`).
    broker_epoch: AtomicI64,
    metadata: Mutex<MetaCache>,
    /// Every topic's config overrides, as ZooKeeper has them (followed
    /// through `/config/changes`, see `config_changes.rs`).
    topic_configs: Mutex<BTreeMap<String, BTreeMap<String, String>>>,
    /// One per shard: told (coalesced) when a topic's configs changed.
    config_listeners: Mutex<Vec<async_channel::Sender<()>>>,
    /// The dynamic broker configs (`/config/brokers/*`), followed like the
    /// topic configs.
    broker_configs: Mutex<BrokerConfigs>,
    /// Brokers' endpoints, from UpdateMetadata and LeaderAndIsr.
    endpoints: Mutex<BTreeMap<BrokerId, BrokerMeta>>,
    origin: Instant,
}

impl ClusterShared {
    pub fn new(config: &BrokerConfig, local: BrokerMeta, requests: mpsc::Sender<ClusterRequest>) -> ClusterShared {
        ClusterShared {
            local,
            config: config.cluster.clone(),
            requests,
            controller_epoch: AtomicI32::new(0),
            is_controller: AtomicBool::new(false),
            controller: AtomicI32::new(-1),
            broker_epoch: AtomicI64::new(-1),
            metadata: Mutex::new(MetaCache::default()),
            topic_configs: Mutex::new(BTreeMap::new()),
            config_listeners: Mutex::new(Vec::new()),
            broker_configs: Mutex::new(BrokerConfigs::new()),
            endpoints: Mutex::new(BTreeMap::new()),
            origin: Instant::now(),
        }
    }

    /// Monotonic time for the replica state machines.
    pub fn now(&self) -> MonoMs {
        MonoMs(self.origin.elapsed().as_millis() as u64)
    }

    /// Sends a request to the cluster thread and waits for its answer;
    /// `None` when the cluster thread is gone.
    pub async fn ask<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> ClusterRequest) -> Option<T> {
        let (tx, rx) = oneshot::channel();
        self.requests.send(make(tx)).await.ok()?;
        rx.await.ok()
    }

    /// Takes a controller request's epoch: `false` (STALE_CONTROLLER_EPOCH)
    /// when an epoch newer than it was seen already.
    pub fn accept_controller_epoch(&self, epoch: ControllerEpoch) -> bool {
        let seen = self.controller_epoch.fetch_max(epoch.0, Ordering::SeqCst);
        epoch.0 >= seen
    }

    pub fn controller_epoch(&self) -> ControllerEpoch {
        ControllerEpoch(self.controller_epoch.load(Ordering::SeqCst))
    }

    pub fn set_controller(&self, is: bool) {
        self.is_controller.store(is, Ordering::SeqCst);
    }

    pub fn is_controller(&self) -> bool {
        self.is_controller.load(Ordering::SeqCst)
    }

    /// Merges an UpdateMetadata into the cache; returns the snapshot to
    /// install on every shard.
    pub fn merge_metadata(&self, update: metadata_cache::MetadataUpdate) -> Arc<ClusterMeta> {
        self.controller.store(update.controller.0, Ordering::SeqCst);
        self.note_endpoints(&update.brokers);
        {
            let mut configs = self.topic_configs.lock().unwrap_or_else(|p| p.into_inner());
            for gone in &update.deleted_topics {
                configs.remove(gone);
            }
        }
        let mut m = self.metadata.lock().unwrap_or_else(|p| p.into_inner());
        Arc::new(m.apply(update))
    }

    /// Puts the config overrides of every topic whose configs were read
    /// into `meta` (a topic not read yet keeps what `meta` has).
    pub fn fill_topic_configs(&self, meta: &mut ClusterMeta) {
        let configs = self.topic_configs.lock().unwrap_or_else(|p| p.into_inner());
        for (name, t) in meta.topics.iter_mut() {
            if let Some(c) = configs.get(name) {
                t.configs = c.clone();
            }
        }
        meta.broker_configs = self.broker_configs.lock().unwrap_or_else(|p| p.into_inner()).clone();
    }

    /// Dynamic broker configs were read: one entity's (`Some`), or every
    /// entity's at a session's start; tells every shard.
    pub fn set_broker_configs(&self, changed: BrokerConfigsRead) {
        {
            let mut configs = self.broker_configs.lock().unwrap_or_else(|p| p.into_inner());
            match changed {
                BrokerConfigsRead::One(entity, c) if c.is_empty() => {
                    configs.remove(&entity);
                }
                BrokerConfigsRead::One(entity, c) => {
                    configs.insert(entity, c);
                }
                BrokerConfigsRead::All(all) => *configs = all,
            }
        }
        self.tell_config_listeners();
    }

    fn tell_config_listeners(&self) {
        for l in self.config_listeners.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            // Full: a change is already waiting to be applied, which reads
            // the newest configs.
            let _ = l.try_send(());
        }
    }

    /// The config overrides of `topic`, if they were read.
    pub fn topic_configs(&self, topic: &str) -> Option<BTreeMap<String, String>> {
        self.topic_configs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(topic)
            .cloned()
    }

    /// A topic's config overrides were read (or every topic's, at a
    /// session's start); tells every shard. A topic without overrides keeps
    /// an empty entry: its configs are known.
    pub fn set_topic_configs(&self, changed: TopicConfigs) {
        {
            let mut configs = self.topic_configs.lock().unwrap_or_else(|p| p.into_inner());
            match changed {
                TopicConfigs::One(name, c) => {
                    configs.insert(name, c);
                }
                TopicConfigs::All(all) => *configs = all,
            }
        }
        self.tell_config_listeners();
    }

    /// What a shard listens on for config changes.
    pub fn listen_topic_configs(&self) -> async_channel::Receiver<()> {
        let (tx, rx) = async_channel::bounded(1);
        // Told at once: what was read before the shard listened (at the
        // session's start, while the shards were still opening their logs)
        // is applied too.
        let _ = tx.try_send(());
        self.config_listeners.lock().unwrap_or_else(|p| p.into_inner()).push(tx);
        rx
    }

    pub fn current_controller(&self) -> Option<BrokerId> {
        let c = self.controller.load(Ordering::SeqCst);
        (c >= 0).then_some(BrokerId(c))
    }

    pub fn set_broker_epoch(&self, epoch: i64) {
        self.broker_epoch.store(epoch, Ordering::SeqCst);
    }

    pub fn broker_epoch(&self) -> i64 {
        self.broker_epoch.load(Ordering::SeqCst)
    }

    pub fn set_cluster_id(&self, id: &str) {
        self.metadata
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .set_cluster_id(id);
    }

    pub fn note_endpoints(&self, brokers: &[BrokerMeta]) {
        let mut e = self.endpoints.lock().unwrap_or_else(|p| p.into_inner());
        for b in brokers {
            e.insert(b.id, b.clone());
        }
    }

    /// Every broker's endpoint known.
    pub fn endpoints(&self) -> BTreeMap<BrokerId, BrokerMeta> {
        self.endpoints.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn endpoint(&self, id: BrokerId) -> Option<BrokerMeta> {
        self.endpoints
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .cloned()
    }
}
