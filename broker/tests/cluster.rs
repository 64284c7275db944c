//! `ferrite broker` processes in a cluster on a real ZooKeeper: topic
//! creation spread over the brokers, replication with acks=all, leader
//! failover after kill -9, and metadata from any broker.

mod common;

use std::time::Duration;

use common::cluster::{wait_for, Cluster};
use ferrite_broker::client::codec::{self, MetadataInfo};
use ferrite_broker::client::Connection;

fn metadata(bootstrap: &str, topic: &str) -> Option<MetadataInfo> {
    let mut c = Connection::connect(bootstrap, "cluster-test").ok()?;
    let topics = [topic.to_string()];
    let mut r = c
        .call(3, codec::METADATA_V, |w| codec::metadata(w, Some(&topics)))
        .ok()?;
    codec::decode_metadata(&mut r).ok()
}

/// partition → leader, once every partition of `topic` has one.
fn leaders_of(bootstrap: &str, topic: &str, partitions: usize) -> Option<Vec<i32>> {
    let m = metadata(bootstrap, topic)?;
    let t = m.topics.iter().find(|t| t.name == topic)?;
    if t.error != 0 || t.partitions.len() != partitions {
        return None;
    }
    let mut out = vec![-1; partitions];
    for p in &t.partitions {
        if p.leader < 0 {
            return None;
        }
        out[p.partition as usize] = p.leader;
    }
    Some(out)
}

fn create_topic(bootstrap: &str, name: &str, partitions: i32, rf: i16, configs: &[(&str, &str)]) -> i16 {
    let mut c = Connection::connect(bootstrap, "cluster-test").expect("connect");
    let configs: Vec<(String, String)> = configs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let mut r = c
        .call(19, codec::CREATE_TOPICS_V, |w| {
            codec::create_topics(w, name, partitions, rf, &configs)
        })
        .expect("create topics");
    codec::decode_create_topics(&mut r).expect("decode")[0].1
}

fn produce(bootstrap: &str, topic: &str, partition: i32, acks: i16, value: &[u8]) -> (i16, i64) {
    let mut c = Connection::connect(bootstrap, "cluster-test").expect("connect");
    let batch = ferrite_engine::batch::build_batch(ferrite_engine::Offset(0), ferrite_engine::TimestampMs(1), &[value]);
    let mut r = c
        .call(0, codec::PRODUCE_V, |w| {
            codec::produce(w, acks, 10_000, topic, partition, &batch)
        })
        .expect("produce");
    codec::decode_produce(&mut r).expect("decode")
}

#[test]
fn three_brokers_spread_leaders_replicate_and_fail_over() {
    let mut cluster = Cluster::start(3, &["min.insync.replicas=2"]);
    let first = cluster.brokers[0].bootstrap();
    wait_for("3 live brokers in the metadata", Duration::from_secs(30), || {
        metadata(&first, "none").filter(|m| m.brokers.len() == 3)
    });
    let err = create_topic(&first, "spread", 12, 3, &[]);
    assert_eq!(err, 0, "create topic");
    let leaders = wait_for("12 leaders", Duration::from_secs(20), || {
        leaders_of(&first, "spread", 12)
    });
    for id in 1..=3 {
        assert_eq!(
            leaders.iter().filter(|l| **l == id).count(),
            4,
            "broker {id} leads 4 of {leaders:?}"
        );
    }
    // Every broker serves the same metadata.
    for b in &cluster.brokers {
        let seen = wait_for("metadata on every broker", Duration::from_secs(10), || {
            leaders_of(&b.bootstrap(), "spread", 12)
        });
        assert_eq!(seen, leaders);
    }
    // acks=all commits through the ISR.
    let leader_of_0 = leaders[0];
    let leader_addr = cluster.broker(leader_of_0).bootstrap();
    let mut acked = Vec::new();
    for i in 0..20 {
        let value = format!("record-{i}");
        let (error, offset) = produce(&leader_addr, "spread", 0, -1, value.as_bytes());
        assert_eq!(error, 0, "acks=all produce {i}");
        acked.push((offset, value));
    }
    // Kill the leader of partition 0: another ISR member takes over.
    cluster.broker(leader_of_0).kill9();
    let survivor = cluster.brokers.iter().find(|b| b.is_running()).expect("a survivor");
    let bootstrap = survivor.bootstrap();
    let new_leaders = wait_for("a new leader for partition 0", Duration::from_secs(20), || {
        let l = leaders_of(&bootstrap, "spread", 12)?;
        (l[0] != leader_of_0).then_some(l)
    });
    let new_addr = cluster.broker(new_leaders[0]).bootstrap();
    // Still writable with acks=all (two of three replicas left).
    let (error, _) = wait_for("produce to the new leader", Duration::from_secs(20), || {
        let r = produce(&new_addr, "spread", 0, -1, b"after-failover");
        (r.0 == 0).then_some(r)
    });
    assert_eq!(error, 0);
    // Every acknowledged record is there, at its offset.
    let mut c = Connection::connect(&new_addr, "cluster-test").expect("connect");
    let mut r = c
        .call(1, codec::FETCH_V, |w| codec::fetch(w, 100, 1 << 20, "spread", 0, 0))
        .expect("fetch");
    let fetched = codec::decode_fetch(&mut r).expect("decode fetch");
    assert_eq!(fetched.error, 0);
    let batches = ferrite_engine::scan::scan_bytes(&fetched.records, ferrite_engine::Offset(0)).0;
    assert!(
        batches.len() >= acked.len(),
        "{} batches for {} acked",
        batches.len(),
        acked.len()
    );
    for (i, (offset, _)) in acked.iter().enumerate() {
        assert_eq!(batches[i].1.base_offset.0, *offset);
    }
}
