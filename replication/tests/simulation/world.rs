//! A seeded simulation of one partition with three replicas: the real
//! [`PartitionReplica`] state machine on each broker, driven over a simulated
//! network (delays, reordering, lost connections), a simulated ZooKeeper
//! (the partition state znode with conditional writes) and a controller
//! that elects cleanly from the ISR, as ours does. A leader's appends are
//! written some steps later (the engine's group write) and followers may
//! read them before that. Brokers crash (kill -9: the written log survives,
//! the unwritten tail and the state do not), restart, and get cut off (their
//! ZooKeeper session expires while they keep running and keep taking
//! produce requests from clients that can still reach them): from
//! ZooKeeper and the other brokers, or from ZooKeeper alone (the other
//! brokers still reach them). Two brokers also get cut from each other
//! alone, with ZooKeeper none the wiser.
//!
//! After every step it checks the invariants of the replication issue; a
//! failure panics with the seed, so that `FERRITE_SIM_SEED=<seed>` replays it.

#[path = "checks.rs"]
mod checks;
#[path = "controller.rs"]
mod controller;
#[path = "faults.rs"]
mod faults;
#[path = "model.rs"]
pub mod model;
#[path = "produce.rs"]
mod produce;

use std::collections::BTreeMap;

use ferrite_engine::types::{LeaderEpoch, Offset, TopicPartition};
pub use ferrite_replication::BrokerId;
use ferrite_replication::{
    Action, IsrWriteOutcome, LeaderAndIsr, LocalLog, MonoMs, PartitionReplica, ReplicaConfig, ReplicationError,
    RoleKind, WaiterId, ZkVersion,
};
use model::{ModelLog, Rec, Rng, ZkState};

pub const BROKERS: [BrokerId; 3] = [BrokerId(1), BrokerId(2), BrokerId(3)];
const LAG_TIME_MAX_MS: u64 = 500;
const REQUEST_TIMEOUT_MS: u64 = 2_000;
const FETCH_RECORDS_MAX: usize = 5;
const RETRY_BACKOFF_MS: u64 = 100;

#[derive(Clone, Debug)]
pub struct SimConfig {
    pub min_insync_replicas: usize,
    pub steps: usize,
    /// The negative control: count acks=1 answers as acknowledged too, as
    /// the checker would see a producer that trusts them.
    pub acks_one_must_survive: bool,
    /// Share of produce requests sent with acks=all, in percent.
    pub acks_all_percent: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Up {
    Running,
    Crashed,
    /// Cut off from ZooKeeper and the other brokers until this time;
    /// clients still reach it.
    Isolated {
        until: u64,
    },
    /// Cut off from ZooKeeper alone until this time (its session expires);
    /// the other brokers and clients still reach it.
    ZkCut {
        until: u64,
    },
}

struct Broker {
    id: BrokerId,
    up: Up,
    incarnation: u64,
    log: ModelLog,
    replica: Option<PartitionReplica>,
    fetching_from: Option<BrokerId>,
    fetch_in_flight: bool,
    /// Waiting acks=all produces: id → (offset, value).
    waiting: BTreeMap<WaiterId, (Offset, u64)>,
    /// acks=1 answers (counted only by the negative control) waiting for
    /// the leader's write: (offset, value).
    leader_acks: Vec<(Offset, u64)>,
}

#[derive(Clone, Debug)]
enum Msg {
    LeaderAndIsr(ZkState),
    FetchReq {
        follower: BrokerId,
        offset: Offset,
        epoch: LeaderEpoch,
    },
    FetchResp {
        leader: BrokerId,
        offset: Offset,
        epoch: LeaderEpoch,
        result: Result<(Vec<Rec>, Offset), ReplicationError>,
    },
    EpochReq {
        follower: BrokerId,
        asked: LeaderEpoch,
        current: LeaderEpoch,
    },
    EpochResp {
        asked: LeaderEpoch,
        /// The follower's leader epoch when it asked.
        asked_in: LeaderEpoch,
        result: Result<Option<(LeaderEpoch, Offset)>, ReplicationError>,
    },
    IsrWrite {
        leader: BrokerId,
        leader_epoch: LeaderEpoch,
        isr: Vec<BrokerId>,
        expected: ZkVersion,
    },
    IsrResp {
        leader_epoch: LeaderEpoch,
        outcome: IsrWriteOutcome,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dest {
    Broker(BrokerId),
    Zk,
}

struct Envelope {
    from: BrokerId,
    to: Dest,
    /// The recipient's incarnation when sent: a restart drops it.
    to_incarnation: u64,
    deliver_at: u64,
    msg: Msg,
}

pub struct World {
    cfg: SimConfig,
    rng: Rng,
    now: u64,
    brokers: Vec<Broker>,
    zk: ZkState,
    net: Vec<Envelope>,
    next_value: u64,
    /// Records whose producer was told they are safe: offset → value.
    acked: BTreeMap<Offset, u64>,
    producer_leader: Option<BrokerId>,
    /// Two brokers cut from each other (only) until a time.
    pair_cut: Option<(BrokerId, BrokerId, u64)>,
    /// `FERRITE_SIM_TRACE` is set: print what happens, step by step.
    trace: bool,
    pub stats: Stats,
}

#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub acked_all: u64,
    pub elections: u64,
    pub crashes: u64,
    pub isolations: u64,
    /// ZooKeeper sessions lost by a broker that other brokers still reach.
    pub zk_cuts: u64,
    /// Two brokers cut from each other alone.
    pub pair_cuts: u64,
    pub truncations: u64,
    pub not_enough_replicas: u64,
    /// Fetch responses that carried records the leader had not written yet.
    pub read_ahead: u64,
}

fn tp() -> TopicPartition {
    TopicPartition::new("sim", 0)
}

impl World {
    pub fn new(seed: u64, cfg: SimConfig) -> World {
        let brokers = BROKERS
            .iter()
            .map(|&id| Broker {
                id,
                up: Up::Running,
                incarnation: 0,
                log: ModelLog::default(),
                replica: None,
                fetching_from: None,
                fetch_in_flight: false,
                waiting: BTreeMap::new(),
                leader_acks: Vec::new(),
            })
            .collect();
        let mut w = World {
            cfg,
            rng: Rng::new(seed),
            now: 0,
            brokers,
            zk: ZkState {
                leader: Some(BROKERS[0]),
                epoch: LeaderEpoch(0),
                isr: BROKERS.to_vec(),
                version: ZkVersion(0),
            },
            net: Vec::new(),
            next_value: 1,
            acked: BTreeMap::new(),
            producer_leader: Some(BROKERS[0]),
            pair_cut: None,
            trace: std::env::var_os("FERRITE_SIM_TRACE").is_some(),
            stats: Stats::default(),
        };
        for b in BROKERS {
            w.start_replica(b);
            w.send_leader_and_isr(b);
        }
        w
    }

    fn broker(&mut self, id: BrokerId) -> &mut Broker {
        let i = BROKERS.iter().position(|b| *b == id).unwrap_or_else(|| unreachable!());
        &mut self.brokers[i]
    }

    fn registered(&self, id: BrokerId) -> bool {
        self.brokers.iter().any(|b| b.id == id && b.up == Up::Running)
    }

    fn config(&self) -> ReplicaConfig {
        ReplicaConfig {
            min_insync_replicas: self.cfg.min_insync_replicas,
            replica_lag_time_max_ms: LAG_TIME_MAX_MS,
            waiters_max: 1024,
        }
    }

    fn start_replica(&mut self, id: BrokerId) {
        self.note(|| format!("{id} starts its replica"));
        let config = self.config();
        let b = self.broker(id);
        let log = LocalLog {
            log_start: Offset(0),
            log_end: b.log.end(),
        };
        // The HW checkpoint is not modelled: a restarted replica starts
        // from the log start, the most pessimistic checkpoint there is.
        b.replica = Some(PartitionReplica::new(tp(), id, config, log, Offset(0)));
        b.fetching_from = None;
        b.fetch_in_flight = false;
        b.waiting.clear();
    }

    // ---- the network -------------------------------------------------

    fn send(&mut self, from: BrokerId, to: Dest, msg: Msg, extra_delay: u64) {
        let to_incarnation = match to {
            Dest::Broker(id) => self.broker(id).incarnation,
            Dest::Zk => 0,
        };
        let deliver_at = self.now + 1 + self.rng.below(30) + extra_delay;
        self.net.push(Envelope {
            from,
            to,
            to_incarnation,
            deliver_at,
            msg,
        });
    }

    /// Prints `what` with the time, when tracing.
    pub(super) fn note(&self, what: impl FnOnce() -> String) {
        if self.trace {
            println!("t={:>6} {}", self.now, what());
        }
    }

    /// Until when `id`'s traffic to `to` is held by a cut.
    fn held_until(&self, id: BrokerId, to: Dest) -> Option<u64> {
        self.brokers.iter().find(|b| b.id == id).and_then(|b| match (b.up, to) {
            (Up::Isolated { until }, _) | (Up::ZkCut { until }, Dest::Zk) => Some(until),
            _ => None,
        })
    }

    /// Until when the cut between two brokers holds their traffic.
    fn pair_cut_until(&self, a: BrokerId, b: BrokerId) -> Option<u64> {
        let (x, y, until) = self.pair_cut?;
        let between = (a == x && b == y) || (a == y && b == x);
        (between && self.now < until).then_some(until)
    }

    fn deliver_one(&mut self) -> bool {
        let due: Vec<usize> = (0..self.net.len())
            .filter(|&i| self.net[i].deliver_at <= self.now)
            .collect();
        if due.is_empty() {
            return false;
        }
        let i = due[self.rng.below(due.len() as u64) as usize];
        let env = self.net.swap_remove(i);
        // A cut-off broker's traffic waits for the cut to heal.
        let held = [
            self.held_until(env.from, env.to),
            match env.to {
                Dest::Broker(b) => self.held_until(b, Dest::Broker(env.from)),
                Dest::Zk => None,
            },
            match env.to {
                Dest::Broker(b) => self.pair_cut_until(env.from, b),
                Dest::Zk => None,
            },
        ]
        .into_iter()
        .flatten()
        .max();
        if let Some(until) = held {
            let mut env = env;
            env.deliver_at = until + 1;
            self.net.push(env);
            return true;
        }
        match env.to {
            Dest::Zk => self.zk_receive(env.from, env.msg),
            Dest::Broker(to) => {
                let b = self.broker(to);
                if b.up == Up::Crashed || b.incarnation != env.to_incarnation {
                    return true;
                }
                self.broker_receive(to, env.from, env.msg);
            }
        }
        true
    }

    // ---- brokers -------------------------------------------------------

    fn broker_receive(&mut self, to: BrokerId, from: BrokerId, msg: Msg) {
        let now = MonoMs(self.now);
        match msg {
            Msg::LeaderAndIsr(state) => {
                self.note(|| format!("{to} gets LeaderAndIsr {state:?}"));
                // A role change waits for the appends before it (the
                // engine's drain of reserved bytes).
                self.writes_complete(to);
                let b = self.broker(to);
                let log = local(&b.log);
                let Some(r) = b.replica.as_mut() else { return };
                let _ = r.leader_and_isr(
                    &LeaderAndIsr {
                        leader: state.leader,
                        leader_epoch: state.epoch,
                        isr: state.isr.clone(),
                        replicas: BROKERS.to_vec(),
                        zk_version: state.version,
                    },
                    log,
                    &b.log,
                    now,
                );
            }
            Msg::FetchReq {
                follower,
                offset,
                epoch,
            } => {
                let b = self.broker(to);
                let Some(r) = b.replica.as_mut() else { return };
                // Followers read the leader's appends whether written yet or
                // not (the engine serves them from its cache).
                let appended = b.log.appended_end();
                let written = b.log.written;
                let result = r
                    .replica_fetch(follower, offset, Some(epoch), appended, now)
                    .map(|grant| {
                        let from = offset.0 as usize;
                        let to = (from + FETCH_RECORDS_MAX).min(b.log.records.len());
                        (b.log.records[from..to].to_vec(), grant.hw, to > written)
                    });
                if matches!(result, Ok((_, _, true))) {
                    self.stats.read_ahead += 1;
                }
                let result = result.map(|(records, hw, _)| (records, hw));
                let msg = Msg::FetchResp {
                    leader: to,
                    offset,
                    epoch,
                    result,
                };
                self.send(to, Dest::Broker(follower), msg, 0);
            }
            Msg::FetchResp {
                leader,
                offset,
                epoch,
                result,
            } => self.fetch_response(to, leader, offset, epoch, result),
            Msg::EpochReq {
                follower,
                asked,
                current,
            } => {
                let b = self.broker(to);
                let Some(r) = b.replica.as_ref() else { return };
                let result = r.answer_epoch_end(Some(current), asked, &b.log, b.log.appended_end());
                let leo = b.log.end();
                self.note(|| {
                    format!("{to} answers {follower}'s epoch {asked} (asked in {current}): {result:?}, its end {leo}")
                });
                let resp = Msg::EpochResp {
                    asked,
                    asked_in: current,
                    result,
                };
                self.send(to, Dest::Broker(follower), resp, 0);
            }
            Msg::EpochResp {
                asked,
                asked_in,
                result,
            } => {
                self.note(|| format!("{to} gets the end of epoch {asked}: {result:?}"));
                let b = self.broker(to);
                let Some(r) = b.replica.as_mut() else { return };
                r.epoch_end_received(asked, asked_in, result, &b.log);
            }
            Msg::IsrResp { leader_epoch, outcome } => {
                let b = self.broker(to);
                let Some(r) = b.replica.as_mut() else { return };
                r.isr_written(leader_epoch, outcome);
            }
            Msg::IsrWrite { .. } => unreachable!("ISR writes go to ZooKeeper"),
        }
        let _ = from;
        self.run_actions(to);
    }

    fn fetch_response(
        &mut self,
        to: BrokerId,
        leader: BrokerId,
        offset: Offset,
        epoch: LeaderEpoch,
        result: Result<(Vec<Rec>, Offset), ReplicationError>,
    ) {
        let b = self.broker(to);
        b.fetch_in_flight = false;
        let Some(r) = b.replica.as_mut() else { return };
        // A response to an older request (another leader, epoch or offset)
        // is dropped, as the fetcher drops responses for partitions it no
        // longer fetches at that position.
        if b.fetching_from != Some(leader) || r.leader_epoch() != epoch || b.log.end() != offset {
            return;
        }
        match result {
            Ok((records, hw)) => {
                let n = records.len();
                for rec in records {
                    b.log.append_written(rec);
                }
                r.fetched(local(&b.log), hw);
                let (end, own_hw) = (b.log.end(), r.hw());
                self.note(|| {
                    format!("{to} fetched {n} from {leader} at {offset}: end {end}, leader hw {hw}, hw {own_hw}")
                });
            }
            Err(ReplicationError::OffsetOutOfRange { log_start, log_end, .. }) => {
                r.fetch_out_of_range(log_start, log_end, &b.log);
            }
            Err(_) => {}
        }
        self.run_actions(to);
    }

    fn run_actions(&mut self, id: BrokerId) {
        loop {
            let b = self.broker(id);
            let Some(r) = b.replica.as_mut() else { return };
            let actions = r.take_actions();
            if actions.is_empty() {
                return;
            }
            for a in actions {
                self.carry_out(id, a);
            }
        }
    }

    fn carry_out(&mut self, id: BrokerId, action: Action) {
        match action {
            Action::AssignEpoch { epoch } => {
                let b = self.broker(id);
                let end = b.log.end();
                b.log.assign(epoch, end);
            }
            Action::WriteIsr {
                leader,
                leader_epoch,
                isr,
                expected,
            } => {
                let msg = Msg::IsrWrite {
                    leader,
                    leader_epoch,
                    isr,
                    expected,
                };
                self.send(id, Dest::Zk, msg, 0);
            }
            Action::AckDone { id: waiter, result } => {
                let b = self.broker(id);
                let entry = b.waiting.remove(&waiter);
                assert!(entry.is_some(), "an answer for a produce nobody waits for");
                if let (Some((offset, value)), Ok(())) = (entry, result) {
                    self.ack(offset, value);
                }
            }
            Action::HwChanged { .. } => {}
            Action::AskEpochEnd { leader, epoch, backoff } => {
                let current = self
                    .broker(id)
                    .replica
                    .as_ref()
                    .map_or(LeaderEpoch::NONE, |r| r.leader_epoch());
                let delay = match backoff {
                    ferrite_replication::Backoff::None => 0,
                    ferrite_replication::Backoff::Retry => RETRY_BACKOFF_MS,
                };
                let msg = Msg::EpochReq {
                    follower: id,
                    asked: epoch,
                    current,
                };
                self.send(id, Dest::Broker(leader), msg, delay);
            }
            Action::Truncate { offset } => {
                self.stats.truncations += 1;
                let b = self.broker(id);
                b.log.truncate(offset);
                let log = local(&b.log);
                self.note(|| format!("{id} truncates to {offset}: end {}", log.log_end));
                let b = self.broker(id);
                if let Some(r) = b.replica.as_mut() {
                    r.truncated(log, &b.log);
                }
            }
            Action::RestartLog { offset } => {
                unreachable!("no retention in this simulation, so no restart at {offset}")
            }
            Action::Resign { offset } => {
                unreachable!("no damaged logs in this simulation, so no resignation at {offset}")
            }
            Action::StartFetching { leader, .. } => {
                let b = self.broker(id);
                b.fetching_from = Some(leader);
                b.fetch_in_flight = false;
            }
            Action::StopFetching => {
                let b = self.broker(id);
                b.fetching_from = None;
                b.fetch_in_flight = false;
            }
        }
    }

    // ---- what time does -----------------------------------------------

    /// A broker's pending writes complete: its log end moves over them,
    /// which may move the HW, and acks=1 answers go out.
    fn writes_complete(&mut self, id: BrokerId) {
        let b = self.broker(id);
        if b.up == Up::Crashed || !b.log.complete_writes() {
            return;
        }
        if let Some(r) = b.replica.as_mut() {
            r.appended(local(&b.log));
        }
        let answers = std::mem::take(&mut b.leader_acks);
        self.run_actions(id);
        for (offset, value) in answers {
            self.ack(offset, value);
        }
    }

    fn send_fetch(&mut self, id: BrokerId) {
        let b = self.broker(id);
        if b.up == Up::Crashed || b.fetch_in_flight {
            return;
        }
        let (Some(leader), Some(r)) = (b.fetching_from, b.replica.as_ref()) else {
            return;
        };
        let msg = Msg::FetchReq {
            follower: id,
            offset: b.log.end(),
            epoch: r.leader_epoch(),
        };
        b.fetch_in_flight = true;
        self.send(id, Dest::Broker(leader), msg, 0);
    }

    fn tick_all(&mut self) {
        for id in BROKERS {
            let now = MonoMs(self.now);
            let b = self.broker(id);
            if b.up == Up::Crashed {
                continue;
            }
            if let Some(r) = b.replica.as_mut() {
                r.tick(now);
            }
            self.run_actions(id);
        }
    }

    fn advance(&mut self, ms: u64) {
        self.now += ms;
        for i in 0..self.brokers.len() {
            if let Up::Isolated { until } | Up::ZkCut { until } = self.brokers[i].up {
                if until <= self.now {
                    self.brokers[i].up = Up::Running;
                    let id = self.brokers[i].id;
                    self.controller_broker_back(id);
                }
            }
        }
    }

    /// One random step.
    pub fn step(&mut self) {
        match self.rng.below(100) {
            0..=4 => {
                let id = BROKERS[self.rng.below(3) as usize];
                self.writes_complete(id);
            }
            5..=29 => {
                if !self.deliver_one() {
                    let ms = 1 + self.rng.below(20);
                    self.advance(ms);
                }
            }
            30..=44 => {
                let ms = 1 + self.rng.below(50);
                self.advance(ms);
            }
            45..=59 => self.produce(),
            60..=84 => {
                let id = BROKERS[self.rng.below(3) as usize];
                self.send_fetch(id);
            }
            85..=93 => self.tick_all(),
            94..=95 => self.crash(),
            96..=97 => self.restart(),
            98 => self.isolate(),
            _ => {
                if self.rng.chance(50) {
                    self.cut_zk();
                } else {
                    self.cut_pair();
                }
            }
        }
        self.check();
    }

    /// Heals every fault, then lets replication settle without new load.
    pub fn settle(&mut self) {
        while self.brokers.iter().any(|b| b.up == Up::Crashed) {
            self.restart();
        }
        for _ in 0..20_000 {
            if self.brokers.iter().all(|b| b.up == Up::Running) && self.converged() {
                return;
            }
            for id in BROKERS {
                self.writes_complete(id);
                self.send_fetch(id);
            }
            while self.deliver_one() {}
            self.advance(10);
            self.tick_all();
            self.check();
        }
        panic!(
            "the partition did not converge: zk {:?}, logs {:?}",
            self.zk,
            self.lens()
        );
    }

    fn lens(&self) -> Vec<(BrokerId, i64, Option<RoleKind>)> {
        self.brokers
            .iter()
            .map(|b| (b.id, b.log.end().0, b.replica.as_ref().map(|r| r.role())))
            .collect()
    }

    fn converged(&self) -> bool {
        let Some(leader) = self.zk.leader else { return false };
        let l = &self.brokers[BROKERS.iter().position(|b| *b == leader).unwrap_or(0)];
        let Some(lr) = l.replica.as_ref() else { return false };
        lr.role() == RoleKind::Leader
            && lr.isr().map(|i| i.len()) == Some(3)
            && lr.hw() == l.log.end()
            && self.brokers.iter().all(|b| b.log.records == l.log.records)
    }

    pub fn finish(&mut self) {
        self.stats.acked_all = self.acked.len() as u64;
        for b in BROKERS {
            self.check_acked_in(b, "after settling, broker");
        }
    }
}

fn local(log: &ModelLog) -> LocalLog {
    LocalLog {
        log_start: Offset(0),
        log_end: log.end(),
    }
}

/// Runs one seed; `Err` carries the panic message.
pub fn run_seed(seed: u64, cfg: &SimConfig) -> Result<Stats, String> {
    let cfg = cfg.clone();
    let outcome = std::panic::catch_unwind(move || {
        let mut w = World::new(seed, cfg.clone());
        for _ in 0..cfg.steps {
            w.step();
        }
        w.settle();
        w.finish();
        w.stats.clone()
    });
    outcome.map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    })
}
