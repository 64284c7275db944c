//! An idle cluster's followers are answered from their leader's memory
//! (`handlers/follower_view.rs`), do not apply an answer that repeats the
//! last one (`cluster/fetcher.rs`), and still stay in the ISR.

mod common;

use std::time::{Duration, Instant};

use common::cluster::{create_topic, partitions_of, produce, serial, wait_for, Cluster, ClusterBroker};

/// A counter summed over the shards of the broker whose metrics listen on
/// `port`.
fn counted(port: u16, name: &str) -> Option<f64> {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut text = String::new();
    c.read_to_string(&mut text).ok()?;
    let values: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

fn acks_all_everywhere(cluster: &Cluster, topic: &str, partitions: usize, value: &[u8]) {
    let first = cluster.brokers[0].bootstrap();
    let leaders = common::cluster::leaders_of(&first, topic, partitions).expect("leaders");
    for (p, leader) in leaders.iter().enumerate() {
        let at = cluster
            .brokers
            .iter()
            .find(|b| b.id == *leader)
            .expect("a leader of ours");
        wait_for("an acks=all produce", Duration::from_secs(20), || {
            (produce(&at.bootstrap(), topic, p as i32, -1, value).0 == 0).then_some(())
        });
    }
}

#[test]
fn idle_followers_are_answered_from_memory_and_stay_in_sync() {
    let _serial = serial();
    let zk = ferrite_testkit::zookeeper::ZooKeeper::standalone();
    let connect = zk.connect_string();
    let metrics_port = ferrite_testkit::free_port();
    let metrics = format!("ferrite.metrics.listen=127.0.0.1:{metrics_port}");
    let brokers = vec![
        ClusterBroker::new(1, &connect, &[&metrics]),
        ClusterBroker::new(2, &connect, &[]),
        ClusterBroker::new(3, &connect, &[]),
    ];
    let cluster = Cluster { zk, brokers };
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
        counted(metrics_port, "ferrite_follower_fetch_quiet_total").filter(|n| *n > 0.0)
    });
    // Broker 1 leads about 4 partitions, each followed by two brokers whose
    // fetches come back every 100 ms (the test brokers' wait).
    assert!(quiet >= 100.0, "{quiet} partitions answered from memory in 9 s");
    // And as a follower of about 8, it applied the same answers once.
    let repeats = counted(metrics_port, "ferrite_follower_fetch_repeats_total").unwrap_or(0.0);
    assert!(repeats >= 100.0, "{repeats} repeated answers not applied again in 9 s");
    // Writes after the quiet replicate as before.
    acks_all_everywhere(&cluster, "idle", PARTITIONS, b"after the quiet");
    assert!(full().is_some(), "ISRs whole after the writes");
}
