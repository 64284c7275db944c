//! One run: a private network, a cluster, a workload, one fault started and
//! healed, the history checked, the replicas compared.
//!
//! Timeline: the cluster comes up and the topic (RF = every broker) gets
//! full ISRs; the clients start; after a warm-up the fault starts, holds
//! for the fault time, and heals; the clients go on through a recovery
//! window, then stop; once every ISR is full again, every partition is read
//! from offset 0 and every replica's segment files are compared.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferrite_client::codec;
use ferrite_client::Connection;
use ferrite_testkit::rng::Rng;
use serde::{Deserialize, Serialize};

use crate::checker::{self, Anomalies, FinalLog};
use crate::cluster::{self, Cluster};
use crate::error::ChaosError;
use crate::fault::{Action, Fault, Node, Roles};
use crate::history::{History, OpKind, Outcome};
use crate::members;
use crate::net::{self, Firewall};
use crate::producer;
use crate::replicas;
use crate::workload::{self, Shared, TOPIC};

const CREATE_TOPICS_KEY: i16 = 19;
/// How long the cluster may take to have every ISR full again.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(90);

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunConfig {
    pub fault: Fault,
    /// How long the fault holds before it heals.
    pub fault_seconds: u64,
    /// How long the clients go on after healing.
    pub recovery_seconds: u64,
    pub seed: u64,
    pub acks: i16,
    pub min_insync_replicas: i32,
    pub unclean_leader_election: bool,
    pub brokers: usize,
    pub partitions: i32,
    pub producers: u32,
    /// The `ferrite` binary the brokers run.
    pub ferrite: PathBuf,
}

impl RunConfig {
    /// The command line that repeats this run.
    pub fn command(&self) -> String {
        format!(
            "ferrite-chaos run --fault {} --seconds {} --recovery-seconds {} --seed {} --acks {} --min-insync {} \
             --brokers {} --partitions {} --producers {}{}",
            self.fault,
            self.fault_seconds,
            self.recovery_seconds,
            self.seed,
            self.acks,
            self.min_insync_replicas,
            self.brokers,
            self.partitions,
            self.producers,
            if self.unclean_leader_election { " --unclean" } else { "" }
        )
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunReport {
    pub config: RunConfig,
    pub command: String,
    pub operations: usize,
    pub acked: usize,
    pub failed: usize,
    pub unknown: usize,
    pub anomalies: Anomalies,
    /// Partitions whose replicas differ below the high watermark.
    pub divergent: Vec<String>,
    /// Partitions that could not be read back at the end.
    pub unreadable: Vec<i32>,
    /// A group's committed offsets could not be fetched at the end.
    #[serde(default)]
    pub unreadable_commits: bool,
    /// What each member of the group with members did.
    #[serde(default)]
    pub members: BTreeMap<u32, members::MemberSummary>,
    /// Ok produces per producer while the fault held.
    pub ok_during_fault: BTreeMap<u32, usize>,
    /// From healing to every producer's first acknowledged produce.
    pub recovery_ms: Option<u64>,
    pub fault_started_ms: u64,
    pub healed_ms: u64,
}

impl RunReport {
    /// No record lost, doubled or out of place, and replicas identical.
    pub fn safe(&self) -> bool {
        self.anomalies.is_valid() && self.divergent.is_empty() && self.unreadable.is_empty() && !self.unreadable_commits
    }
}

/// Runs `cfg` in a network namespace of its own (entered here).
pub fn run(cfg: &RunConfig) -> Result<RunReport, ChaosError> {
    net::enter_private_namespace()?;
    crate::disk::enter_private_mounts()?;
    let mut extra = vec![
        format!("min.insync.replicas={}", cfg.min_insync_replicas),
        format!("unclean.leader.election.enable={}", cfg.unclean_leader_election),
        "auto.leader.rebalance.enable=false".to_string(),
    ];
    extra.push(format!("default.replication.factor={}", cfg.brokers));
    // Before any node starts: a connection is stamped by its first packet,
    // so one opened before the rules would never be cut.
    let firewall = Firewall::install(&cluster::node_numbers(cfg.brokers))?;
    let mut cluster = Cluster::start(&cfg.ferrite, cfg.brokers, &extra, cfg.fault.needs())?;
    create_topic(&cluster, cfg)?;
    let shared = Shared {
        started: Instant::now(),
        history: Arc::new(Mutex::new(History::default())),
        stop: Arc::new(AtomicBool::new(false)),
        bootstrap: cluster.bootstrap(),
        partitions: cfg.partitions,
    };
    wait_settled(&shared, cfg.brokers)?;
    let mut threads = Vec::new();
    for client in 1..=cfg.producers {
        for partition in 0..cfg.partitions {
            let s = shared.clone();
            let acks = cfg.acks;
            threads.push(std::thread::spawn(move || {
                producer::produce_loop(s, client, partition, acks)
            }));
        }
    }
    let s = shared.clone();
    threads.push(std::thread::spawn(move || workload::read_loop(s, 0)));
    for i in 0..members::MEMBERS {
        let s = shared.clone();
        threads.push(std::thread::spawn(move || {
            members::member_loop(s, members::MEMBER_CLIENT_FIRST + i)
        }));
    }
    let mut rng = Rng::new(cfg.seed);
    std::thread::sleep(Duration::from_millis(3_000 + rng.below(3_000)));
    let roles = roles(&shared, cfg.brokers)?;
    let plan = cfg.fault.plan(&roles);
    let fault_started_ms = shared.now_ms();
    execute(&mut cluster, &firewall, &plan.start)?;
    std::thread::sleep(Duration::from_secs(cfg.fault_seconds));
    let healed_ms = shared.now_ms();
    execute(&mut cluster, &firewall, &plan.heal)?;
    std::thread::sleep(Duration::from_secs(cfg.recovery_seconds));
    shared.stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let settled = wait_settled(&shared, cfg.brokers);
    let finals = workload::read_all(&shared, Duration::from_secs(30));
    let mut final_log = FinalLog::new();
    let mut unreadable = Vec::new();
    for (p, records) in finals {
        match records {
            Some(r) => {
                final_log.insert(p, r);
            }
            None => unreadable.push(p),
        }
    }
    unreadable.sort_unstable();
    let divergent = if settled.is_ok() {
        replicas::divergent(&cluster, cfg.partitions, &final_log)
    } else {
        vec!["the ISRs did not fill up again: replicas not compared".to_string()]
    };
    let commits = final_commits(&shared);
    let history = shared.history.lock().map(|h| h.clone()).unwrap_or_default();
    clocks_stepped(&cluster, &plan.start)?;
    drop(cluster);
    let times = (fault_started_ms, healed_ms);
    let mut report = report(cfg, &history, &final_log, divergent, unreadable, times);
    match commits {
        Some(c) => report.anomalies.commits_lost = checker::lost_commits(&history, &c),
        None => report.unreadable_commits = true,
    }
    Ok(report)
}

fn report(
    cfg: &RunConfig,
    history: &History,
    final_log: &FinalLog,
    divergent: Vec<String>,
    unreadable: Vec<i32>,
    (fault_started_ms, healed_ms): (u64, u64),
) -> RunReport {
    let produces = || history.ops.iter().filter(|o| matches!(o.kind, OpKind::Produce { .. }));
    let count = |f: fn(&Outcome) -> bool| produces().filter(|o| f(&o.outcome)).count();
    let ok_during_fault = (1..=cfg.producers)
        .map(|c| (c, history.ok_between(c, fault_started_ms, healed_ms)))
        .collect();
    let first_ok_after = |c: u32| {
        produces()
            .filter(|o| o.client == c && o.is_ok() && o.completed_ms >= healed_ms)
            .map(|o| o.completed_ms - healed_ms)
            .min()
    };
    let recovery_ms = (1..=cfg.producers)
        .map(first_ok_after)
        .collect::<Option<Vec<u64>>>()
        .and_then(|v| v.into_iter().max());
    RunReport {
        config: cfg.clone(),
        command: cfg.command(),
        operations: history.ops.len(),
        acked: count(|o| matches!(o, Outcome::Ok { .. })),
        failed: count(|o| matches!(o, Outcome::Fail { .. })),
        unknown: count(|o| matches!(o, Outcome::Unknown { .. })),
        anomalies: checker::check(history, final_log),
        divergent,
        unreadable,
        unreadable_commits: false,
        members: members::summaries(history),
        ok_during_fault,
        recovery_ms,
        fault_started_ms,
        healed_ms,
    }
}

fn execute(cluster: &mut Cluster, firewall: &Firewall, actions: &[Action]) -> Result<(), ChaosError> {
    for a in actions {
        match *a {
            Action::Kill(n) => cluster.kill(n),
            Action::Restart(n) => cluster.restart(n)?,
            Action::Pause(n) => cluster.signal(n, libc::SIGSTOP),
            Action::Resume(n) => cluster.signal(n, libc::SIGCONT),
            Action::Cut(a, b) => firewall.cut(cluster::number(a), cluster::number(b))?,
            Action::Lossy(a, b) => firewall.lossy(cluster::number(a), cluster::number(b))?,
            Action::HealNetwork => firewall.heal()?,
            Action::Sleep(ms) => std::thread::sleep(Duration::from_millis(ms)),
            Action::FillDisk(n) => {
                let bytes = cluster.fill_disk(n)?;
                eprintln!("ferrite-chaos: filled {n:?}'s disk with {bytes} bytes");
            }
            Action::FreeDisk(n) => cluster.free_disk(n)?,
            Action::StepClock(n, offset_s) => cluster.step_clock(n, offset_s)?,
            Action::Rot(n) => match cluster.rot(n, TOPIC, 0)? {
                Some((path, at)) => eprintln!("ferrite-chaos: rotted byte {at} of {}", path.display()),
                // A rot fault that changed nothing would prove nothing.
                None => {
                    return Err(ChaosError::Cluster(format!(
                        "{n:?} has no closed segment of {TOPIC}-0 to rot"
                    )))
                }
            },
        }
    }
    Ok(())
}

/// Every group's committed offsets after healing, by group and partition;
/// `None` if a group's could not be read.
fn final_commits(shared: &Shared) -> Option<BTreeMap<checker::GroupPartition, i64>> {
    let mut all = BTreeMap::new();
    for group in [workload::GROUP, members::MEMBERS_GROUP] {
        let fetched = workload::committed_offsets(shared, group)?;
        all.extend(fetched.into_iter().map(|(p, o)| ((group.to_string(), p), o)));
    }
    Some(all)
}

/// Every broker whose clock the plan stepped said so in its log: a clock
/// fault that the brokers never saw would prove nothing.
fn clocks_stepped(cluster: &Cluster, start: &[Action]) -> Result<(), ChaosError> {
    for a in start {
        let Action::StepClock(Node::Broker(b), offset_s) = *a else {
            continue;
        };
        let direction = if offset_s < 0 { "back" } else { "ahead" };
        let said = format!("the wall clock stepped {direction}");
        if offset_s != 0 && !cluster.brokers[b].log_text().contains(&said) {
            return Err(ChaosError::Cluster(format!(
                "broker {} never saw its clock step {direction} ({offset_s:+} s): is libfaketime working?",
                b + 1
            )));
        }
    }
    Ok(())
}

fn create_topic(cluster: &Cluster, cfg: &RunConfig) -> Result<(), ChaosError> {
    let rf = cfg.brokers as i16;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for addr in cluster.bootstrap() {
            let Ok(mut c) = Connection::connect(&addr, "ferrite-chaos") else {
                continue;
            };
            let answer = c
                .call(CREATE_TOPICS_KEY, codec::CREATE_TOPICS_V, |w| {
                    codec::create_topics(w, TOPIC, cfg.partitions, rf, &[])
                })
                .and_then(|mut r| Ok(codec::decode_create_topics(&mut r)?));
            // 0: created; 36: it exists (an earlier try got through).
            if let Ok(results) = answer {
                if results.iter().all(|(_, code, _)| *code == 0 || *code == 36) {
                    return Ok(());
                }
            }
        }
        if Instant::now() > deadline {
            return Err(ChaosError::Cluster(format!("could not create topic {TOPIC}")));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Waits until every partition has a leader and all `brokers` in its ISR.
fn wait_settled(shared: &Shared, brokers: usize) -> Result<(), ChaosError> {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    loop {
        if let Some(meta) = workload::metadata(shared) {
            let full = meta.topics.iter().filter(|t| t.name == TOPIC).any(|t| {
                t.partitions.len() == shared.partitions as usize
                    && t.partitions.iter().all(|p| p.leader >= 0 && p.isr.len() == brokers)
            });
            if full {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err(ChaosError::Cluster("the ISRs did not fill up".into()));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The leader of partition 0 and the controller, as broker indexes.
fn roles(shared: &Shared, brokers: usize) -> Result<Roles, ChaosError> {
    let meta = workload::metadata(shared).ok_or_else(|| ChaosError::Cluster("no metadata".into()))?;
    let leader = meta
        .topics
        .iter()
        .filter(|t| t.name == TOPIC)
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition == 0)
        .map(|p| p.leader)
        .filter(|l| *l >= 1)
        .ok_or_else(|| ChaosError::Cluster("partition 0 has no leader".into()))?;
    let index = |id: i32| (id - 1) as usize;
    Ok(Roles {
        zk_servers: cluster::ZK_SERVERS,
        brokers,
        leader: index(leader),
        controller: if meta.controller >= 1 {
            index(meta.controller)
        } else {
            0
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_repeats_every_setting() {
        let cfg = RunConfig {
            fault: Fault::LoseIsr,
            fault_seconds: 8,
            recovery_seconds: 6,
            seed: 3,
            acks: -1,
            min_insync_replicas: 2,
            unclean_leader_election: true,
            brokers: 3,
            partitions: 4,
            producers: 5,
            ferrite: PathBuf::from("ferrite"),
        };
        assert_eq!(
            cfg.command(),
            "ferrite-chaos run --fault lose-isr --seconds 8 --recovery-seconds 6 --seed 3 --acks -1 --min-insync 2 \
             --brokers 3 --partitions 4 --producers 5 --unclean"
        );
    }
}
