//! The seeded replication simulation (see `sim/mod.rs`).
//!
//! `FERRITE_SIM_SEED=<n>` replays one seed; `FERRITE_SIM_SEEDS=<n>` sets how
//! many seeds the main test runs.

#[path = "simulation/world.rs"]
mod sim;

use sim::{run_seed, SimConfig};

fn seeds(default: u64) -> Vec<u64> {
    if let Ok(s) = std::env::var("FERRITE_SIM_SEED") {
        return vec![s.parse().expect("FERRITE_SIM_SEED is a number")];
    }
    let n = std::env::var("FERRITE_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    (1..=n).collect()
}

fn acks_all(min_isr: usize) -> SimConfig {
    SimConfig {
        min_insync_replicas: min_isr,
        steps: 4_000,
        acks_one_must_survive: false,
        acks_all_percent: 70,
    }
}

#[test]
fn acks_all_records_survive_crashes_cut_offs_and_failovers() {
    for min_isr in [1, 2] {
        let cfg = acks_all(min_isr);
        let mut total = sim::Stats::default();
        for seed in seeds(150) {
            match run_seed(seed, &cfg) {
                Ok(s) => {
                    total.acked_all += s.acked_all;
                    total.elections += s.elections;
                    total.crashes += s.crashes;
                    total.isolations += s.isolations;
                    total.zk_cuts += s.zk_cuts;
                    total.pair_cuts += s.pair_cuts;
                    total.truncations += s.truncations;
                    total.not_enough_replicas += s.not_enough_replicas;
                    total.read_ahead += s.read_ahead;
                }
                Err(msg) => panic!("seed={seed} min.insync.replicas={min_isr}: {msg}\nreplay: FERRITE_SIM_SEED={seed} cargo test -p ferrite-replication --test sim"),
            }
        }
        println!("min.insync.replicas={min_isr}: {total:?}");
        // The runs must have exercised what they claim to.
        assert!(total.acked_all > 0, "nothing was acknowledged");
        assert!(
            total.elections > 0 && total.crashes > 0 && total.isolations > 0,
            "{total:?}"
        );
        assert!(total.zk_cuts > 0 && total.pair_cuts > 0, "{total:?}");
        assert!(total.truncations > 0, "no follower ever truncated: {total:?}");
        assert!(
            total.read_ahead > 0,
            "no follower read what its leader had not written: {total:?}"
        );
    }
}

#[test]
fn the_checker_catches_lost_acks_1_records() {
    // Seed document 004: with acks=1 the leader answers before its followers
    // have the records, so a failover loses some of them. Counting those
    // answers as acknowledged must make the checker fail on some seed; if
    // it never did, it could not catch a real loss either.
    let cfg = SimConfig {
        min_insync_replicas: 1,
        steps: 4_000,
        acks_one_must_survive: true,
        acks_all_percent: 0,
    };
    let failed = (1..=60).find(|&seed| run_seed(seed, &cfg).is_err());
    assert!(
        failed.is_some(),
        "acks=1 never lost a record in 60 seeds: the checker is blind"
    );
}
