//! The controller's ZooKeeper watches. ZooKeeper watches fire once; each
//! is set again, with a fresh read, when it fires, and the read turns into
//! a state machine [`Event`].

use std::collections::{BTreeMap, BTreeSet};

use ferrite_ids::TopicPartition;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::FutureExt;
use zookeeper_client::{EventType, OneshotWatcher, WatchedEvent};

use crate::broker_config::BrokerEntity;
use crate::control::{unclean_value, ElectionOrigin, Event};
use crate::election::UncleanElection;
use crate::error::{ControllerError, Result};
use crate::metadata::BrokerId;
use crate::zk::{json, paths, ZkStore};

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Watch {
    Brokers,
    Topics,
    Deletions,
    IsrChanges,
    DamageNotices,
    Reassignments,
    PreferredElection,
    Controller,
    Topic(String),
    TopicConfig(String),
    /// `/config/brokers/<default>` or this broker's `/config/brokers/<id>`.
    BrokerConfig(BrokerEntity),
}

/// What a fired watch means for the controller.
pub(super) enum Fired {
    Events(Vec<Event>),
    /// `/controller` is gone or someone else's: stop controlling.
    Deposed,
    /// The session ended.
    SessionLost,
}

pub(super) struct Watches {
    store: ZkStore,
    me: BrokerId,
    pending: FuturesUnordered<BoxFuture<'static, (Watch, WatchedEvent)>>,
    topics: BTreeSet<String>,
}

impl Watches {
    pub fn new(store: ZkStore, me: BrokerId) -> Watches {
        Watches {
            store,
            me,
            pending: FuturesUnordered::new(),
            topics: BTreeSet::new(),
        }
    }

    fn arm(&mut self, watch: Watch, w: OneshotWatcher) {
        self.pending.push(async move { (watch, w.changed().await) }.boxed());
    }

    /// Sets every watch (reading what each covers); the events are dropped
    /// here since the snapshot read next covers the same ground.
    pub async fn set_all(&mut self) -> Result<Fired> {
        for w in [
            Watch::Controller,
            Watch::Brokers,
            Watch::Topics,
            Watch::Deletions,
            Watch::IsrChanges,
            Watch::DamageNotices,
            Watch::Reassignments,
            Watch::PreferredElection,
        ] {
            if let Fired::Deposed = self.read_and_arm(w).await? {
                return Ok(Fired::Deposed);
            }
        }
        // Not in the snapshot: its event is kept, for after the election.
        let mut events = Vec::new();
        for entity in [BrokerEntity::Default, BrokerEntity::Broker(self.me)] {
            if let Fired::Events(e) = self.read_and_arm(Watch::BrokerConfig(entity)).await? {
                events = e;
            }
        }
        Ok(Fired::Events(events))
    }

    /// Waits for the next watch to fire. Cancel-safe (a `select!` branch):
    /// nothing is lost if the wait is dropped.
    pub async fn fired(&mut self) -> (Watch, WatchedEvent) {
        match futures::StreamExt::next(&mut self.pending).await {
            Some(fired) => fired,
            None => futures::future::pending().await,
        }
    }

    /// Reads what a fired watch covers and sets it again. Not cancel-safe:
    /// run it to completion, outside any `select!`.
    pub async fn handle(&mut self, watch: Watch, event: WatchedEvent) -> Result<Fired> {
        if event.event_type == EventType::Session {
            return Ok(Fired::SessionLost);
        }
        self.read_and_arm(watch).await
    }

    async fn read_and_arm(&mut self, watch: Watch) -> Result<Fired> {
        let store = self.store.clone();
        let event = match &watch {
            Watch::Controller => {
                let (data, w) = store.watch_data(paths::CONTROLLER).await?;
                let me = data.and_then(|d| json::decode_controller(&d).ok()) == Some(self.me);
                if !me {
                    return Ok(Fired::Deposed);
                }
                self.arm(watch, w);
                None
            }
            Watch::Brokers => {
                let (ids, w) = store.watch_children(paths::BROKER_IDS).await?;
                self.arm(watch, w);
                let live = store.brokers(&ids).await?;
                Some(Event::BrokersChanged { live })
            }
            Watch::Topics => {
                let (names, w) = store.watch_children(paths::TOPICS).await?;
                self.arm(watch, w);
                return self.new_topics(names).await;
            }
            Watch::Topic(name) => {
                let (data, w) = store.watch_data(&paths::topic(name)).await?;
                if data.is_none() {
                    self.topics.remove(name);
                    return Ok(Fired::Events(Vec::new()));
                }
                self.arm(watch.clone(), w);
                let topic = store.topic(name).await?;
                topic.map(|(t, _)| Event::TopicsChanged { topics: vec![t] })
            }
            Watch::TopicConfig(name) => {
                let (_, w) = store.watch_data(&paths::topic_config(name)).await?;
                if !self.topics.contains(name) {
                    return Ok(Fired::Events(Vec::new()));
                }
                self.arm(watch.clone(), w);
                let configs = store.topic_config(name).await?;
                Some(Event::TopicConfigChanged {
                    topic: name.clone(),
                    configs,
                })
            }
            Watch::BrokerConfig(entity) => {
                let (_, w) = store.watch_data(&paths::broker_config(&entity.name())).await?;
                self.arm(watch.clone(), w);
                let unclean = broker_unclean(&store, self.me).await?;
                Some(Event::BrokerUncleanChanged { unclean })
            }
            Watch::Deletions => {
                let (topics, w) = store.watch_children(paths::DELETE_TOPICS).await?;
                self.arm(watch, w);
                Some(Event::DeletionsRequested { topics })
            }
            Watch::IsrChanges => {
                let (children, w) = store.watch_children(paths::ISR_CHANGES).await?;
                self.arm(watch, w);
                return self.isr_changes(&children).await;
            }
            Watch::DamageNotices => {
                let (children, w) = store.watch_children(paths::DAMAGE_NOTICES).await?;
                self.arm(watch, w);
                let replicas = store.take_damage_notices(&children).await?;
                (!replicas.is_empty()).then_some(Event::ReplicasDamaged { replicas })
            }
            Watch::Reassignments => {
                let (data, w) = store.watch_data(paths::REASSIGN).await?;
                self.arm(watch, w);
                match data {
                    Some(d) => json::decode_reassignment(&d)
                        .map(|moves| Event::ReassignmentRequested { moves })
                        .map_err(|reason| tracing::warn!(%reason, "unreadable reassignment request"))
                        .ok(),
                    None => None,
                }
            }
            Watch::PreferredElection => {
                let (data, w) = store.watch_data(paths::PREFERRED).await?;
                self.arm(watch, w);
                data.and_then(|d| json::decode_partition_list(&d).ok())
                    .map(|parts| Event::PreferredElection {
                        partitions: Some(parts),
                        origin: ElectionOrigin::AdminZnode,
                    })
            }
        };
        Ok(Fired::Events(event.into_iter().collect()))
    }

    async fn new_topics(&mut self, names: Vec<String>) -> Result<Fired> {
        let mut topics = Vec::new();
        for name in names {
            if self.topics.contains(&name) {
                continue;
            }
            self.topics.insert(name.clone());
            let (_, w) = self.store.watch_data(&paths::topic(&name)).await?;
            self.arm(Watch::Topic(name.clone()), w);
            let (_, w) = self.store.watch_data(&paths::topic_config(&name)).await?;
            self.arm(Watch::TopicConfig(name.clone()), w);
            if let Some((t, _)) = self.store.topic(&name).await? {
                topics.push(t);
            }
        }
        let events = if topics.is_empty() {
            Vec::new()
        } else {
            vec![Event::TopicsChanged { topics }]
        };
        Ok(Fired::Events(events))
    }

    async fn isr_changes(&mut self, children: &[String]) -> Result<Fired> {
        let parts: Vec<TopicPartition> = self.store.take_isr_changes(children).await?;
        let mut states = Vec::new();
        for tp in parts {
            if let Some(s) = self.store.partition_state(&tp).await? {
                states.push((tp, s));
            }
        }
        let events = if states.is_empty() {
            Vec::new()
        } else {
            vec![Event::IsrChanged { states }]
        };
        Ok(Fired::Events(events))
    }
}

/// The controller broker's dynamic `unclean.leader.election.enable`: its
/// own value, else the cluster's default.
async fn broker_unclean(store: &ZkStore, me: BrokerId) -> Result<Option<UncleanElection>> {
    let own = readable(store.broker_config(BrokerEntity::Broker(me)).await)?;
    let default = readable(store.broker_config(BrokerEntity::Default).await)?;
    let key = "unclean.leader.election.enable";
    let value = own.get(key).or_else(|| default.get(key));
    Ok(value.and_then(|v| unclean_value(v)))
}

/// An entity's dynamic configs; an unreadable znode counts as empty (and
/// is logged), so that it cannot keep a broker from controlling.
fn readable(read: Result<BTreeMap<String, String>>) -> Result<BTreeMap<String, String>> {
    match read {
        Err(ControllerError::BadZnode { path, reason }) => {
            tracing::warn!(%path, %reason, "unreadable dynamic broker config, ignored");
            Ok(BTreeMap::new())
        }
        other => other,
    }
}
