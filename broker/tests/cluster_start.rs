//! A cluster that has just started serves its clients as a cluster: a
//! broker does not answer Metadata with an empty cluster (no controller,
//! no brokers) before the controller's first UpdateMetadata reached it, so
//! an AdminClient made the moment the brokers listen creates its topics.
//!
//! Each round starts three brokers on a fresh ZooKeeper chroot, asks each
//! for metadata the moment it listens, and creates a topic through each
//! broker at once with confluent-kafka's AdminClient
//! (`tests/python/cluster_start.py`). `FERRITE_CLUSTER_START_ROUNDS` sets
//! the number of rounds (default 100).

mod common;

use std::process::Command;
use std::time::Instant;

use common::cluster::{serial, with_zk, ClusterBroker};
use ferrite_client::codec;
use ferrite_client::Connection;
use ferrite_testkit::zookeeper::ZooKeeper;
use zookeeper_client::{Acls, CreateMode};

/// The first Metadata answer of a broker that has just begun to listen:
/// (controller id, broker count).
fn first_metadata(bootstrap: &str) -> (i32, usize) {
    let mut c = Connection::connect(bootstrap, "cluster-start-test").expect("connect");
    let mut r = c
        .call(3, codec::METADATA_V, |w| codec::metadata(w, None))
        .expect("metadata");
    let m = codec::decode_metadata(&mut r).expect("decode metadata");
    (m.controller, m.brokers.len())
}

fn create_through_each(topic: &str, bootstraps: &[String]) -> Result<(), String> {
    let python = std::env::var("FERRITE_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/cluster_start.py");
    let out = Command::new(&python)
        .arg(script)
        .arg(topic)
        .args(bootstraps)
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e} (run scripts/test.sh, or set FERRITE_PYTHON)"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    match out.status.success() && stdout.contains("all ok") {
        true => Ok(()),
        false => Err(format!("{stdout}{}", String::from_utf8_lossy(&out.stderr))),
    }
}

#[test]
fn every_topic_created_through_a_just_started_broker_is_created() {
    let _serial = serial();
    let rounds: usize = std::env::var("FERRITE_CLUSTER_START_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let zk = ZooKeeper::standalone();
    let started = Instant::now();
    for round in 0..rounds {
        let chroot = format!("/cluster-start-{round}");
        with_zk(&zk.connect_string(), async |store| {
            let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
            store.client().mkdir(&chroot, &persistent).await.expect("chroot");
        });
        let connect = format!("{}{chroot}", zk.connect_string());
        let mut brokers = Vec::new();
        for id in 1..=3 {
            // A longer session than the other cluster tests': a hundred
            // rounds keep ZooKeeper busy, and a request it answers late must
            // not end the broker's session.
            brokers.push(ClusterBroker::new(
                id,
                &connect,
                &["zookeeper.session.timeout.ms=10000"],
            ));
            let b = brokers.last().expect("just started");
            let (controller, count) = first_metadata(&b.bootstrap());
            assert!(
                controller >= 0 && count >= 1,
                "round {round}: broker {id}'s first Metadata answer names controller {controller} and {count} brokers"
            );
        }
        let bootstraps: Vec<String> = brokers.iter().map(|b| b.bootstrap()).collect();
        if let Err(e) = create_through_each("started", &bootstraps) {
            panic!("round {round}: a creation did not complete: {e}");
        }
        for mut b in brokers {
            b.kill9();
        }
    }
    eprintln!("{rounds} rounds in {:.1} s", started.elapsed().as_secs_f64());
}
