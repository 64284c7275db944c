//! The controller as a state machine without I/O: [`Controller::handle`]
//! takes an [`Event`] and returns the [`Action`]s to carry out, so that it
//! runs the same under the ZooKeeper driver and under a deterministic test
//! harness.
//!
//! Partition state changes go through one path. An event records *why* a
//! partition may need a new state (a [`Change`]) in `pending`; after the
//! event, every pending partition that has no write in flight gets its new
//! state decided from the current cache and written conditionally on the
//! znode version the controller last saw. Only once a write succeeds are
//! LeaderAndIsr and UpdateMetadata sent; a write that meets a newer version
//! (a leader changed the ISR meanwhile) takes the version found and decides
//! again. A write that meets a newer controller epoch fails as a whole in the
//! driver, which then stops using this controller.

mod changes;
mod damage;
mod event;
mod membership;
mod reassign;
mod requests;
mod topics;
mod waiters;

use std::collections::{BTreeMap, BTreeSet};

use ferrite_ids::TopicPartition;

pub use event::*;
pub(crate) use topics::unclean_value;

use crate::election::UncleanElection;
use crate::metadata::{BrokerId, BrokerMeta};
use crate::partition_state::{ControllerEpoch, PartitionState, Versioned};
use changes::Change;
use reassign::Reassignment;
use requests::RequestBatch;
use waiters::Waiter;

/// The broker settings the controller acts on.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// `unclean.leader.election.enable` (topics may override it).
    pub unclean_election: UncleanElection,
    /// `auto.leader.rebalance.enable`.
    pub auto_rebalance: AutoRebalance,
    /// `leader.imbalance.per.broker.percentage`.
    pub imbalance_per_broker_pct: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoRebalance {
    Enabled,
    Disabled,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            unclean_election: UncleanElection::Disabled,
            auto_rebalance: AutoRebalance::Enabled,
            imbalance_per_broker_pct: 10,
        }
    }
}

#[derive(Clone, Debug)]
struct Topic {
    id: [u8; 16],
    /// `replicas[p]`; during a reassignment, the union of old and new.
    replicas: Vec<Vec<BrokerId>>,
    /// The topic's `unclean.leader.election.enable`, when overridden.
    unclean: Option<UncleanElection>,
}

/// The controller's view of the cluster and the work it has under way.
pub struct Controller {
    config: ControllerConfig,
    /// The dynamic broker `unclean.leader.election.enable`, over the
    /// start-up value in `config`.
    dynamic_unclean: Option<UncleanElection>,
    epoch: ControllerEpoch,
    cluster_id: String,
    live: BTreeMap<BrokerId, LiveBroker>,
    /// Topics whose assignment changed during this event.
    dirty_assignments: BTreeSet<String>,
    shutting_down: BTreeSet<BrokerId>,
    topics: BTreeMap<String, Topic>,
    states: BTreeMap<TopicPartition, Versioned<PartitionState>>,
    /// Partitions that may need a new state, and why.
    pending: BTreeMap<TopicPartition, BTreeSet<Change>>,
    /// Partitions with a state write out, and the changes it carries out.
    in_flight: BTreeMap<TopicPartition, (PartitionState, BTreeSet<Change>)>,
    /// Topics being deleted → replicas that have not confirmed deletion.
    deleting: BTreeMap<String, BTreeSet<(BrokerId, i32)>>,
    reassigning: BTreeMap<TopicPartition, Reassignment>,
    /// Leaders that found their log damaged and asked to hand leadership
    /// over, until the state write that does it (see `damage`).
    resigning: BTreeMap<TopicPartition, BrokerId>,
    waiters: Vec<Waiter>,
    batch: RequestBatch,
    actions: Vec<Action>,
}

impl Controller {
    pub fn new(config: ControllerConfig) -> Controller {
        Controller {
            config,
            dynamic_unclean: None,
            epoch: ControllerEpoch::NONE,
            cluster_id: String::new(),
            live: BTreeMap::new(),
            dirty_assignments: BTreeSet::new(),
            shutting_down: BTreeSet::new(),
            topics: BTreeMap::new(),
            states: BTreeMap::new(),
            pending: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            deleting: BTreeMap::new(),
            reassigning: BTreeMap::new(),
            resigning: BTreeMap::new(),
            waiters: Vec::new(),
            batch: RequestBatch::default(),
            actions: Vec::new(),
        }
    }

    pub fn epoch(&self) -> ControllerEpoch {
        self.epoch
    }

    /// The state the controller last saw for `tp`.
    pub fn state(&self, tp: &TopicPartition) -> Option<&Versioned<PartitionState>> {
        self.states.get(tp)
    }

    /// `tp`'s replicas (during a reassignment, old and new together).
    pub fn replicas(&self, tp: &TopicPartition) -> Option<&[BrokerId]> {
        let topic = self.topics.get(&tp.topic)?;
        let idx = usize::try_from(tp.partition).ok()?;
        topic.replicas.get(idx).map(Vec::as_slice)
    }

    pub fn live_brokers(&self) -> impl Iterator<Item = &BrokerMeta> {
        self.live.values().map(|l| &l.meta)
    }

    /// Whether any election, write, deletion or reassignment is under way.
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty()
            && self.in_flight.is_empty()
            && self.deleting.is_empty()
            && self.reassigning.is_empty()
            && self.waiters.is_empty()
    }

    /// Handles one event and returns what to do about it, in order.
    pub fn handle(&mut self, event: Event) -> Vec<Action> {
        if !matches!(event, Event::Elected { .. }) {
            assert!(self.epoch != ControllerEpoch::NONE, "event before election: {event:?}");
        }
        match event {
            Event::Elected { epoch, snapshot } => self.on_elected(epoch, snapshot),
            Event::BrokersChanged { live } => self.on_brokers_changed(live),
            Event::TopicsChanged { topics } => self.on_topics_changed(topics),
            Event::TopicConfigChanged { topic, configs } => self.on_topic_config_changed(&topic, &configs),
            Event::BrokerUncleanChanged { unclean } => self.on_broker_unclean_changed(unclean),
            Event::DeletionsRequested { topics } => self.on_deletions_requested(topics),
            Event::StopReplicaDone { broker, partitions } => self.on_stop_replica_done(broker, partitions),
            Event::IsrChanged { states } => self.on_isr_changed(states),
            Event::ReplicasDamaged { replicas } => self.on_replicas_damaged(replicas),
            Event::StatesWritten { results } => self.on_states_written(results),
            Event::PreferredElection { partitions, origin } => self.on_preferred_election(partitions, origin),
            Event::ControlledShutdown { broker } => self.on_controlled_shutdown(broker),
            Event::ReassignmentRequested { moves } => self.on_reassignment_requested(moves),
            Event::RebalanceTick => self.on_rebalance_tick(),
        }
        self.issue_writes();
        self.complete_waiters();
        self.flush_assignments();
        self.flush_requests();
        std::mem::take(&mut self.actions)
    }

    fn on_elected(&mut self, epoch: ControllerEpoch, snapshot: ClusterSnapshot) {
        assert!(epoch > self.epoch, "elected with epoch {epoch} after {}", self.epoch);
        *self = Controller::new(self.config.clone());
        self.epoch = epoch;
        self.dynamic_unclean = snapshot.broker_unclean;
        self.cluster_id = snapshot.cluster_id;
        self.live = snapshot.brokers.into_iter().map(|b| (b.meta.id, b)).collect();
        for t in snapshot.topics {
            let unclean = topics::unclean_override(&t.configs);
            let topic = Topic {
                id: t.id,
                replicas: t.replicas,
                unclean,
            };
            self.topics.insert(t.name, topic);
        }
        for (tp, state) in snapshot.states {
            if self.partition_exists(&tp) {
                self.states.insert(tp, state);
            }
        }
        // Tell everyone the whole state, then repair what the previous
        // controller left undone.
        let live: Vec<BrokerId> = self.live.keys().copied().collect();
        for &b in &live {
            self.batch.full_metadata_to(b);
            self.send_all_replicas_of(b);
        }
        for tp in self.all_partitions() {
            self.want(tp, Change::Membership);
        }
        self.on_deletions_requested(snapshot.deletions);
        self.on_reassignment_requested(snapshot.reassignments);
        if let Some(parts) = snapshot.preferred_election {
            self.on_preferred_election(Some(parts), ElectionOrigin::AdminZnode);
        }
    }

    fn flush_assignments(&mut self) {
        for name in std::mem::take(&mut self.dirty_assignments) {
            if let Some(t) = self.topics.get(&name) {
                let change = ZkChange::SetAssignment {
                    topic: name,
                    id: t.id,
                    replicas: t.replicas.clone(),
                };
                self.actions.push(Action::Zk(change));
            }
        }
    }

    fn partition_exists(&self, tp: &TopicPartition) -> bool {
        self.replicas(tp).is_some()
    }

    fn all_partitions(&self) -> Vec<TopicPartition> {
        let mut out = Vec::new();
        for (name, t) in &self.topics {
            for p in 0..t.replicas.len() {
                out.push(TopicPartition::new(name.clone(), p as i32));
            }
        }
        out
    }

    /// Brokers that may lead or join an ISR: alive and not shutting down.
    fn eligible(&self) -> BTreeSet<BrokerId> {
        self.live
            .keys()
            .copied()
            .filter(|b| !self.shutting_down.contains(b))
            .collect()
    }

    fn unclean_for(&self, topic: &str) -> UncleanElection {
        let overridden = self.topics.get(topic).and_then(|t| t.unclean);
        overridden
            .or(self.dynamic_unclean)
            .unwrap_or(self.config.unclean_election)
    }

    /// Sends `broker` a LeaderAndIsr for every partition it holds a replica of.
    fn send_all_replicas_of(&mut self, broker: BrokerId) {
        for tp in self.all_partitions() {
            let holds = self.replicas(&tp).is_some_and(|r| r.contains(&broker));
            if holds && self.states.contains_key(&tp) && !self.deleting.contains_key(&tp.topic) {
                self.batch.leader_and_isr(broker, tp);
            }
        }
    }
}
