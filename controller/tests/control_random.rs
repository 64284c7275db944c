//! Seeded random runs of the controller against the harness: brokers die
//! and return, shut down cleanly, controllers fail over, topics come and go,
//! partitions move, leaders shrink ISRs under the controller's feet. After
//! every step the cluster must be consistent (see `Cluster::check_invariants`).
//! A failure prints its seed; `FERRITE_SIM_SEED=<n>` replays one seed, and
//! `FERRITE_SIM_SEEDS=<n>` runs seeds 0..n (300 by default; the test
//! command runs 10,000 in a release build).

mod sim;

use ferrite_controller::control::*;
use ferrite_controller::election::UncleanElection;
use ferrite_controller::metadata::BrokerId;
use ferrite_controller::partition_state::{Versioned, ZkVersion};
use sim::*;

use ferrite_testkit::rng::Rng;

const BROKERS: i32 = 5;

fn step(c: &mut Cluster, rng: &mut Rng, topics: &mut Vec<String>, serial: &mut u32) {
    let live: Vec<BrokerId> = c.live.keys().copied().collect();
    let dead: Vec<BrokerId> = (1..=BROKERS)
        .map(BrokerId)
        .filter(|b| !c.live.contains_key(b))
        .collect();
    match rng.index(12) {
        0 if live.len() > 1 => c.kill(rng.pick(&live)),
        1 if !dead.is_empty() => c.restart(rng.pick(&dead)),
        2 if live.len() > 1 => {
            let b = rng.pick(&live);
            c.run(Event::ControlledShutdown { broker: b });
            c.kill(b);
        }
        3 => c.run(Event::PreferredElection {
            partitions: None,
            origin: ElectionOrigin::Request(u64::from(*serial)),
        }),
        4 => c.run(Event::RebalanceTick),
        5 => c.elect(rng.pick(&live)),
        6 => {
            *serial += 1;
            let name = format!("t{serial}");
            let rf = 1 + rng.index(live.len().min(3)) as i16;
            c.create_topic(&name, 1 + rng.index(6) as i32, rf, rng.index(5));
            topics.push(name);
        }
        7 if !topics.is_empty() => {
            let name = topics.remove(rng.index(topics.len()));
            c.zk.deletions.insert(name.clone());
            c.run(Event::DeletionsRequested { topics: vec![name] });
        }
        8 if !topics.is_empty() => {
            let name = topics[rng.index(topics.len())].clone();
            let count = c.zk.topics[&name].replicas.len();
            let p = rng.index(count) as i32;
            let rf = 1 + rng.index(live.len().min(3));
            let mut target = Vec::new();
            while target.len() < rf {
                let b = rng.pick(&live);
                if !target.contains(&b) {
                    target.push(b);
                }
            }
            c.zk.reassignments.push((tp(&name, p), target.clone()));
            c.run(Event::ReassignmentRequested {
                moves: vec![(tp(&name, p), target)],
            });
        }
        9 => shrink_some_isr(c, rng),
        10 => damage_some_replica(c, rng),
        _ => {
            let live = c.live_brokers();
            c.run(Event::BrokersChanged { live });
        }
    }
}

/// A broker's scrubber finds its replica of some partition damaged (the
/// leader's, half the time) and announces it.
fn damage_some_replica(c: &mut Cluster, rng: &mut Rng) {
    let held: Vec<_> =
        c.zk.states
            .iter()
            .filter(|(k, _)| !c.zk.deletions.contains(&k.topic))
            .filter_map(|(k, s)| {
                let replicas = &c.zk.topics.get(&k.topic)?.replicas.get(k.partition as usize)?.clone();
                let broker = match s.value.leader {
                    Some(l) if rng.index(2) == 0 => l,
                    _ => *replicas.get(rng.index(replicas.len().max(1)))?,
                };
                Some((broker, k.clone()))
            })
            .collect();
    if held.is_empty() {
        return;
    }
    let (broker, k) = held[rng.index(held.len())].clone();
    c.run(Event::ReplicasDamaged {
        replicas: vec![(broker, tp(&k.topic, k.partition))],
    });
}

/// A leader drops a follower from its ISR (it fell behind), writing
/// ZooKeeper itself, and announces it.
fn shrink_some_isr(c: &mut Cluster, rng: &mut Rng) {
    let candidates: Vec<_> =
        c.zk.states
            .iter()
            .filter(|(k, s)| s.value.isr.len() > 1 && s.value.leader.is_some() && !c.zk.deletions.contains(&k.topic))
            .map(|(k, _)| k.clone())
            .collect();
    if candidates.is_empty() {
        return;
    }
    let k = candidates[rng.index(candidates.len())].clone();
    let current = c.zk.states[&k].clone();
    let leader = current.value.leader.unwrap();
    let mut state = current.value.clone();
    let followers: Vec<BrokerId> = state.isr.iter().copied().filter(|b| *b != leader).collect();
    let drop = rng.pick(&followers);
    state.isr.retain(|b| *b != drop);
    let v = Versioned {
        value: state,
        version: ZkVersion(current.version.0 + 1),
    };
    c.zk.states.insert(k.clone(), v.clone());
    if let Some(info) = c.brokers.get_mut(&leader).and_then(|b| b.replicas.get_mut(&k)) {
        info.zk_version = v.version;
    }
    // Half the time the controller hears of it before anything else happens.
    if rng.index(2) == 0 {
        c.run(Event::IsrChanged { states: vec![(k, v)] });
    } else {
        c.queue.push_back(Event::IsrChanged { states: vec![(k, v)] });
    }
}

fn run_seed(seed: u64) {
    let mut rng = Rng::new(seed);
    let unclean = if rng.index(4) == 0 {
        UncleanElection::Enabled
    } else {
        UncleanElection::Disabled
    };
    let config = ControllerConfig {
        unclean_election: unclean,
        ..ControllerConfig::default()
    };
    let mut c = Cluster::new(BROKERS, config);
    let mut topics = Vec::new();
    let mut serial = 0;
    for _ in 0..60 {
        step(&mut c, &mut rng, &mut topics, &mut serial);
        if c.queue.is_empty() {
            c.check_invariants();
        }
    }
    // With everyone back, the ISRs fill and a preferred election balances.
    for b in 1..=BROKERS {
        if !c.live.contains_key(&BrokerId(b)) {
            c.restart(BrokerId(b));
        }
    }
    // Replicas that left an ISR alive (a damaged leader's) rejoin once
    // caught up: leaders expand ISRs after any event.
    let live = c.live_brokers();
    c.run(Event::BrokersChanged { live });
    c.run(Event::PreferredElection {
        partitions: None,
        origin: ElectionOrigin::AdminZnode,
    });
    c.check_invariants();
    for (k, s) in &c.zk.states {
        let replicas = &c.zk.topics[&k.topic].replicas[k.partition as usize];
        if c.zk.deletions.contains(&k.topic) || c.zk.reassignments.iter().any(|(t, _)| t == k) {
            continue;
        }
        assert_eq!(
            s.value.leader,
            Some(replicas[0]),
            "{k}: preferred replica leads once all are back: {:?}",
            s.value
        );
    }
    assert!(c.zk.deletions.is_empty(), "deletions finish once every broker is back");
}

#[test]
fn random_cluster_histories_keep_the_invariants() {
    let seeds: Vec<u64> = match std::env::var("FERRITE_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("FERRITE_SIM_SEED is a number")],
        Err(_) => {
            let n = std::env::var("FERRITE_SIM_SEEDS")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(300u64);
            (0..n).collect()
        }
    };
    for seed in seeds {
        let result = std::panic::catch_unwind(|| run_seed(seed));
        if let Err(e) = result {
            eprintln!("controller simulation failed with seed {seed} (replay: FERRITE_SIM_SEED={seed})");
            std::panic::resume_unwind(e);
        }
    }
}
