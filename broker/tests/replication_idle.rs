//! An idle cluster's followers are answered from their leader's memory
//! (`handlers/follower_view.rs`), do not apply an answer that repeats the
//! last one (`cluster/fetcher.rs`), and still stay in the ISR.

mod common;

use std::time::{Duration, Instant};

use common::cluster::{
    acks_all_everywhere, create_topic, leaders_of, metric_sum, partitions_of, produce, serial, wait_for, Cluster,
};

#[test]
fn idle_followers_are_answered_from_memory_and_stay_in_sync() {
    let _serial = serial();
    let (cluster, metrics_port) = Cluster::start_with_metrics_on(1);
    let first = cluster.brokers[0].bootstrap();
    const PARTITIONS: usize = 12;
    wait_for("the topic created", Duration::from_secs(20), || {
        matches!(create_topic(&first, "idle", PARTITIONS as i32, 3, &[]), 0 | 36).then_some(())
    });
    let full = || partitions_of(&first, "idle", PARTITIONS).filter(|p| p.iter().all(|(_, isr)| *isr == 3));
    wait_for("leaders and full ISRs", Duration::from_secs(30), full);
    acks_all_everywhere(&cluster, "idle", PARTITIONS, b"before the quiet");
    // Three times replica.lag.time.max.ms (3 s for test brokers) without a
    // write: every ISR stays whole.
    let idle_until = Instant::now() + Duration::from_secs(9);
    while Instant::now() < idle_until {
        let isr = partitions_of(&first, "idle", PARTITIONS).expect("metadata");
        assert!(
            isr.iter().all(|(_, size)| *size == 3),
            "an ISR shrank while idle: {isr:?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let quiet = wait_for("quiet answers reported", Duration::from_secs(10), || {
        metric_sum(metrics_port, "ferrite_follower_fetch_quiet_total").filter(|n| *n > 0.0)
    });
    // Broker 1 leads about 4 partitions, each followed by two brokers whose
    // fetches come back every 100 ms (the test brokers' wait).
    assert!(quiet >= 100.0, "{quiet} partitions answered from memory in 9 s");
    // And as a follower of about 8, it applied the same answers once.
    let repeats = metric_sum(metrics_port, "ferrite_follower_fetch_repeats_total").unwrap_or(0.0);
    assert!(repeats >= 100.0, "{repeats} repeated answers not applied again in 9 s");
    // Writes after the quiet replicate as before.
    acks_all_everywhere(&cluster, "idle", PARTITIONS, b"after the quiet");
    assert!(full().is_some(), "ISRs whole after the writes");
}

/// A follower's fetch held by its leader wakes on the append itself, not
/// at the end of its wait: with `replica.fetch.wait.max.ms` at 8 s, every
/// acks=all produce after a quiet spell completes in a fraction of that,
/// with every follower still in the ISR (`min.insync.replicas=3`: a
/// follower whose fetch slept through an append drops out after
/// `replica.lag.time.max.ms`, 3 s, and the produce is refused). The leader
/// waits on one signal per follower view, to which each partition's append
/// signal is subscribed; a partition left out holds its followers.
#[test]
fn an_append_wakes_the_followers_held_fetch_at_once() {
    let _serial = serial();
    let cluster = Cluster::start(3, &["replica.fetch.wait.max.ms=8000"]);
    let first = cluster.brokers[0].bootstrap();
    const PARTITIONS: usize = 12;
    wait_for("the topic created", Duration::from_secs(20), || {
        matches!(
            create_topic(&first, "held", PARTITIONS as i32, 3, &[("min.insync.replicas", "3")]),
            0 | 36
        )
        .then_some(())
    });
    let full = || partitions_of(&first, "held", PARTITIONS).filter(|p| p.iter().all(|(_, isr)| *isr == 3));
    wait_for("leaders and full ISRs", Duration::from_secs(30), full);
    // Once through, so that every follower fetches every partition.
    acks_all_everywhere(&cluster, "held", PARTITIONS, b"warm-up");
    std::thread::sleep(Duration::from_secs(1));
    let leaders = leaders_of(&first, "held", PARTITIONS).expect("leaders");
    for round in 0..2 {
        for (p, leader) in leaders.iter().enumerate() {
            let at = cluster.broker_ref(*leader);
            let started = Instant::now();
            let (error, _) = produce(&at.bootstrap(), "held", p as i32, -1, b"woken");
            let took = started.elapsed();
            assert_eq!(
                error, 0,
                "round {round}: acks=all produce to partition {p} after {took:?}"
            );
            assert!(
                took < Duration::from_secs(3),
                "round {round}: an acks=all produce to partition {p} took {took:?}: its followers' fetch was not woken"
            );
        }
        // A quiet spell longer than replica.lag.time.max.ms between rounds.
        std::thread::sleep(Duration::from_secs(4));
    }
    assert!(full().is_some(), "ISRs whole after the writes");
}
