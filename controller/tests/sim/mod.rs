//! A deterministic harness for the controller state machine: an in-memory
//! ZooKeeper (partition state znodes with versions, assignments, admin
//! znodes) and fake brokers that apply controller requests as a broker would
//! (rejecting stale controller and leader epochs) and, as leaders, add
//! caught-up replicas back to the ISR with conditional writes of their own.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use ferrite_controller::assignment::assign;
use ferrite_controller::control::*;
use ferrite_controller::election::UncleanElection;
use ferrite_controller::metadata::{BrokerId, BrokerMeta};
use ferrite_controller::partition_state::{ControllerEpoch, PartitionState, Versioned, ZkVersion};
use ferrite_ids::{LeaderEpoch, TopicPartition};

pub fn tp(topic: &str, p: i32) -> TopicPartition {
    TopicPartition::new(topic, p)
}

pub fn ids(v: &[i32]) -> Vec<BrokerId> {
    v.iter().map(|&i| BrokerId(i)).collect()
}

/// What a fake broker knows.
#[derive(Default, Debug)]
pub struct FakeBroker {
    pub controller_epoch: ControllerEpoch,
    /// Partitions this broker replicates, as the last LeaderAndIsr said.
    pub replicas: BTreeMap<TopicPartition, PartitionInfo>,
    /// The metadata cache UpdateMetadata keeps.
    pub metadata: BTreeMap<TopicPartition, PartitionInfo>,
    pub brokers: Vec<BrokerMeta>,
    pub deleted: BTreeSet<TopicPartition>,
    pub stale_rejected: u64,
}

impl FakeBroker {
    pub fn apply(&mut self, id: BrokerId, epoch: ControllerEpoch, request: &ControllerRequest) -> Vec<TopicPartition> {
        if epoch < self.controller_epoch {
            self.stale_rejected += 1;
            return Vec::new();
        }
        self.controller_epoch = epoch;
        match request {
            ControllerRequest::LeaderAndIsr { partitions, .. } => {
                for p in partitions {
                    assert!(
                        p.replicas.contains(&id),
                        "LeaderAndIsr for {} to non-replica {id:?}",
                        p.partition
                    );
                    let newer = self
                        .replicas
                        .get(&p.partition)
                        .is_none_or(|old| old.leader_epoch <= p.leader_epoch);
                    if newer {
                        self.replicas.insert(p.partition.clone(), p.clone());
                    }
                }
                Vec::new()
            }
            ControllerRequest::UpdateMetadata {
                brokers,
                partitions,
                deleted_topics,
            } => {
                self.brokers = brokers.clone();
                for p in partitions {
                    self.metadata.insert(p.partition.clone(), p.clone());
                }
                self.metadata.retain(|tp, _| !deleted_topics.contains(&tp.topic));
                Vec::new()
            }
            ControllerRequest::StopReplica { partitions, delete } => {
                for tp in partitions {
                    self.replicas.remove(tp);
                    if *delete == DeleteData::Delete {
                        self.deleted.insert(tp.clone());
                    }
                }
                if *delete == DeleteData::Delete {
                    partitions.clone()
                } else {
                    Vec::new()
                }
            }
        }
    }
}

/// The in-memory ZooKeeper.
#[derive(Default, Debug)]
pub struct FakeZk {
    pub states: BTreeMap<TopicPartition, Versioned<PartitionState>>,
    pub topics: BTreeMap<String, TopicAssignment>,
    pub deletions: BTreeSet<String>,
    pub reassignments: Vec<(TopicPartition, Vec<BrokerId>)>,
    pub preferred: Option<Vec<TopicPartition>>,
    pub controller_epoch: ControllerEpoch,
    /// Every leader change: (partition, old ISR, new leader).
    pub leader_changes: Vec<(TopicPartition, Vec<BrokerId>, Option<BrokerId>)>,
}

impl FakeZk {
    /// A conditional write of a state znode, as the driver performs it.
    pub fn write(&mut self, w: &StateWrite) -> WriteOutcome {
        let current = self.states.get(&w.partition);
        let ok = match (current, w.expected) {
            (None, None) => true,
            (Some(c), Some(v)) => c.version == v,
            _ => false,
        };
        if !ok {
            return WriteOutcome::Conflict(current.cloned());
        }
        let version = current.map_or(ZkVersion(0), |c| ZkVersion(c.version.0 + 1));
        if let Some(c) = current {
            assert!(
                w.state.leader_epoch > c.value.leader_epoch,
                "leader epoch must grow: {w:?} over {c:?}"
            );
            if w.state.leader != c.value.leader {
                self.leader_changes
                    .push((w.partition.clone(), c.value.isr.clone(), w.state.leader));
            }
        }
        let state = Versioned {
            value: w.state.clone(),
            version,
        };
        self.states.insert(w.partition.clone(), state);
        WriteOutcome::Written(version)
    }

    fn apply(&mut self, change: &ZkChange) {
        match change {
            ZkChange::SetAssignment { topic, replicas, .. } => {
                if let Some(t) = self.topics.get_mut(topic) {
                    t.replicas = replicas.clone();
                }
            }
            ZkChange::DeleteTopic { topic } => {
                self.topics.remove(topic);
                self.states.retain(|tp, _| &tp.topic != topic);
                self.deletions.remove(topic);
            }
            ZkChange::DropDeletionRequest { topic } => {
                self.deletions.remove(topic);
            }
            ZkChange::ReassignmentsLeft { moves } => self.reassignments = moves.clone(),
            ZkChange::PreferredElectionDone => self.preferred = None,
        }
    }
}

pub struct Cluster {
    pub controller: Controller,
    pub controller_id: BrokerId,
    pub zk: FakeZk,
    pub brokers: BTreeMap<BrokerId, FakeBroker>,
    pub live: BTreeMap<BrokerId, i64>,
    registrations: i64,
    pub queue: VecDeque<Event>,
    pub shutdown_replies: Vec<(BrokerId, Vec<TopicPartition>)>,
    pub election_replies: Vec<(u64, Vec<(TopicPartition, ElectionResult)>)>,
    /// Leaders add live, caught-up replicas back to the ISR (by default).
    pub leaders_expand_isr: bool,
    pub actions_seen: u64,
    pub config: ControllerConfig,
}

pub fn meta(id: BrokerId) -> BrokerMeta {
    BrokerMeta {
        id,
        host: "127.0.0.1".into(),
        port: 9000 + id.0 as u16,
        rack: None,
    }
}

impl Cluster {
    /// `n` brokers, the first of them controller.
    pub fn new(n: i32, config: ControllerConfig) -> Cluster {
        let mut c = Cluster {
            controller: Controller::new(config.clone()),
            controller_id: BrokerId(1),
            zk: FakeZk::default(),
            brokers: BTreeMap::new(),
            live: BTreeMap::new(),
            registrations: 0,
            queue: VecDeque::new(),
            shutdown_replies: Vec::new(),
            election_replies: Vec::new(),
            leaders_expand_isr: true,
            actions_seen: 0,
            config,
        };
        for i in 1..=n {
            c.register(BrokerId(i));
        }
        c.elect(BrokerId(1));
        c
    }

    fn register(&mut self, id: BrokerId) {
        self.registrations += 1;
        self.live.insert(id, self.registrations);
        self.brokers.insert(id, FakeBroker::default());
    }

    pub fn live_brokers(&self) -> Vec<LiveBroker> {
        self.live
            .iter()
            .map(|(&id, &epoch)| LiveBroker {
                meta: meta(id),
                epoch: BrokerEpoch(epoch),
            })
            .collect()
    }

    pub fn snapshot(&self) -> ClusterSnapshot {
        ClusterSnapshot {
            cluster_id: "sim".into(),
            brokers: self.live_brokers(),
            topics: self.zk.topics.values().cloned().collect(),
            states: self.zk.states.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            deletions: self.zk.deletions.iter().cloned().collect(),
            reassignments: self.zk.reassignments.clone(),
            preferred_election: self.zk.preferred.clone(),
            broker_unclean: None,
        }
    }

    /// `id` becomes controller with the next epoch, reading everything from
    /// the fake ZooKeeper.
    pub fn elect(&mut self, id: BrokerId) {
        assert!(self.live.contains_key(&id));
        self.zk.controller_epoch = self.zk.controller_epoch.next();
        self.controller_id = id;
        self.controller = Controller::new(self.config.clone());
        self.queue.clear();
        let epoch = self.zk.controller_epoch;
        let snapshot = self.snapshot();
        self.run(Event::Elected { epoch, snapshot });
    }

    /// Handles `event` and everything it causes, until quiet.
    pub fn run(&mut self, event: Event) {
        self.queue.push_back(event);
        let mut steps = 0;
        while let Some(e) = self.queue.pop_front() {
            steps += 1;
            assert!(steps < 10_000, "no quiescence");
            let actions = self.controller.handle(e);
            for a in actions {
                self.actions_seen += 1;
                self.carry_out(a);
            }
            if self.queue.is_empty() && self.leaders_expand_isr {
                self.expand_isrs();
            }
        }
    }

    fn carry_out(&mut self, action: Action) {
        match action {
            Action::WriteStates(writes) => {
                let results = writes.iter().map(|w| (w.partition.clone(), self.zk.write(w))).collect();
                self.queue.push_back(Event::StatesWritten { results });
            }
            Action::Zk(change) => self.zk.apply(&change),
            Action::Send {
                to,
                controller_epoch,
                request,
            } => {
                if !self.live.contains_key(&to) {
                    // Died before the controller heard: the send fails.
                    return;
                }
                let broker = self.brokers.get_mut(&to).expect("known broker");
                let deleted = broker.apply(to, controller_epoch, &request);
                if !deleted.is_empty() {
                    self.queue.push_back(Event::StopReplicaDone {
                        broker: to,
                        partitions: deleted,
                    });
                }
            }
            Action::ShutdownReply { broker, still_leading } => self.shutdown_replies.push((broker, still_leading)),
            Action::ElectionReply { request, results } => self.election_replies.push((request, results)),
        }
    }

    /// Every live leader adds its live replicas back to the ISR with a
    /// conditional write at the version it learnt, and announces the change.
    pub fn expand_isrs(&mut self) {
        let mut changed = Vec::new();
        for (&b, broker) in &self.brokers {
            if !self.live.contains_key(&b) {
                continue;
            }
            for (tp, info) in &broker.replicas {
                if info.leader != Some(b) {
                    continue;
                }
                let Some(current) = self.zk.states.get(tp) else {
                    continue;
                };
                if current.version != info.zk_version {
                    continue;
                }
                let missing: Vec<BrokerId> = info
                    .replicas
                    .iter()
                    .copied()
                    .filter(|r| self.live.contains_key(r) && !current.value.isr.contains(r))
                    .filter(|r| self.brokers[r].replicas.contains_key(tp))
                    .collect();
                if missing.is_empty() {
                    continue;
                }
                let mut state = current.value.clone();
                state.isr.extend(missing);
                changed.push((tp.clone(), b, state));
            }
        }
        let mut announced = Vec::new();
        for (tp, leader, state) in changed {
            let v = ZkVersion(self.zk.states[&tp].version.0 + 1);
            let versioned = Versioned {
                value: state,
                version: v,
            };
            self.zk.states.insert(tp.clone(), versioned.clone());
            if let Some(info) = self.brokers.get_mut(&leader).and_then(|b| b.replicas.get_mut(&tp)) {
                info.zk_version = v;
                info.isr = versioned.value.isr.clone();
            }
            announced.push((tp, versioned));
        }
        if !announced.is_empty() {
            self.queue.push_back(Event::IsrChanged { states: announced });
        }
    }

    /// Creates a topic the way an admin request does: the assignment
    /// written to ZooKeeper, then the controller notified.
    pub fn create_topic(&mut self, name: &str, partitions: i32, rf: i16, start: usize) {
        let live: Vec<BrokerId> = self.live.keys().copied().collect();
        let replicas = assign(name, &live, 0, partitions, rf, start, 0).expect("assignment");
        let t = TopicAssignment {
            name: name.into(),
            id: [7; 16],
            replicas,
            configs: BTreeMap::new(),
        };
        self.zk.topics.insert(name.into(), t.clone());
        self.run(Event::TopicsChanged { topics: vec![t] });
    }

    pub fn kill(&mut self, id: BrokerId) {
        self.live.remove(&id);
        self.brokers.insert(id, FakeBroker::default());
        if id == self.controller_id {
            let next = *self.live.keys().next().expect("a live broker");
            self.elect(next);
        } else {
            let live = self.live_brokers();
            self.run(Event::BrokersChanged { live });
        }
    }

    pub fn restart(&mut self, id: BrokerId) {
        self.register(id);
        let live = self.live_brokers();
        self.run(Event::BrokersChanged { live });
    }

    pub fn state(&self, topic: &str, p: i32) -> &PartitionState {
        &self.zk.states[&tp(topic, p)].value
    }

    pub fn leaders_per_broker(&self, topic: &str) -> BTreeMap<BrokerId, usize> {
        let mut out = BTreeMap::new();
        for (k, s) in &self.zk.states {
            if k.topic == topic {
                if let Some(l) = s.value.leader {
                    *out.entry(l).or_default() += 1;
                }
            }
        }
        out
    }

    /// The invariants that hold whenever the cluster is quiet.
    pub fn check_invariants(&self) {
        for (k, s) in &self.zk.states {
            if self.zk.deletions.contains(&k.topic) {
                continue;
            }
            let replicas = &self.zk.topics[&k.topic].replicas[k.partition as usize];
            let st = &s.value;
            assert!(
                st.isr.iter().all(|b| replicas.contains(b)),
                "{k}: ISR {:?} outside {replicas:?}",
                st.isr
            );
            if let Some(l) = st.leader {
                assert!(st.isr.contains(&l), "{k}: leader {l:?} outside ISR {:?}", st.isr);
                assert!(self.live.contains_key(&l), "{k}: leader {l:?} is dead");
                let dead: Vec<_> = st.isr.iter().filter(|b| !self.live.contains_key(b)).collect();
                assert!(dead.is_empty(), "{k}: dead brokers {dead:?} left in the ISR");
            } else {
                let electable = st.isr.iter().any(|b| self.live.contains_key(b));
                assert!(!electable, "{k}: offline although ISR {:?} has a live member", st.isr);
            }
            for (&b, broker) in &self.brokers {
                if !self.live.contains_key(&b) {
                    continue;
                }
                let cached = broker.metadata.get(k).map(|i| (i.leader, i.leader_epoch, &i.isr));
                let want = Some((st.leader, st.leader_epoch, &st.isr));
                assert_eq!(cached, want, "{k}: broker {b:?}'s metadata is stale");
                if replicas.contains(&b) {
                    let known = broker.replicas.get(k).map(|i| i.leader_epoch);
                    assert_eq!(known, Some(st.leader_epoch), "{k}: replica {b:?} missed a LeaderAndIsr");
                }
            }
        }
        if self.config.unclean_election == UncleanElection::Enabled {
            return;
        }
        for (k, old_isr, leader) in &self.zk.leader_changes {
            if let Some(l) = leader {
                assert!(
                    old_isr.contains(l),
                    "{k}: unclean election of {l:?} from ISR {old_isr:?}"
                );
            }
        }
    }

    pub fn leader_epoch(&self, topic: &str, p: i32) -> LeaderEpoch {
        self.state(topic, p).leader_epoch
    }
}
