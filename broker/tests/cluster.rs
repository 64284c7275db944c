//! `ferrite broker` processes in a cluster on a real ZooKeeper (the
//! testkit's, started by each test): topic creation spread over the
//! brokers, replication with acks=all, leader and controller failover
//! after kill -9, min.insync.replicas, topic deletion, preferred elections.
//! Each test is bounded by its waits (`wait_for`); they run one at a time.

mod common;

use std::time::Duration;

use common::cluster::*;
use ferrite_broker::client::codec;
use ferrite_broker::client::Connection;
use ferrite_engine::TopicPartition;

#[test]
fn three_brokers_spread_leaders_replicate_and_fail_over() {
    let _one = serial();
    let mut cluster = Cluster::start(3, &["min.insync.replicas=2"]);
    wait_brokers(&cluster, 3);
    let first = cluster.brokers[0].bootstrap();
    assert_eq!(create_topic(&first, "spread", 12, 3, &[]), 0, "create topic");
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
    // Every broker serves the same metadata; kcat sees it too.
    for b in &cluster.brokers {
        let seen = wait_for("metadata on every broker", Duration::from_secs(10), || {
            leaders_of(&b.bootstrap(), "spread", 12).filter(|l| *l == leaders)
        });
        assert_eq!(seen, leaders);
        let out = std::process::Command::new("kcat")
            .args(["-b", &b.bootstrap(), "-L", "-t", "spread"])
            .output()
            .expect("kcat is installed (scripts/test.sh installs it)");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("12 partitions"), "kcat -L: {text}");
        assert!(text.contains("3 brokers"), "kcat -L: {text}");
    }
    let tp0 = TopicPartition::new("spread", 0);
    let zk = cluster.zk.connect_string();
    let epoch_before = with_zk(&zk, async |s| {
        s.partition_state(&tp0).await.unwrap().unwrap().value.leader_epoch
    });
    // acks=all commits through the ISR.
    let leader_of_0 = leaders[0];
    let leader_addr = cluster.broker(leader_of_0).bootstrap();
    let mut acked = Vec::new();
    for i in 0..20 {
        let value = format!("record-{i}");
        let (error, offset) = produce(&leader_addr, "spread", 0, -1, value.as_bytes());
        assert_eq!(error, 0, "acks=all produce {i}");
        acked.push((offset, value.into_bytes()));
    }
    // Kill the leader of partition 0: within 10 s another ISR member leads
    // every partition it led, with a higher leader epoch.
    cluster.broker(leader_of_0).kill9();
    let survivor = cluster
        .brokers
        .iter()
        .find(|b| b.is_running())
        .expect("a survivor")
        .bootstrap();
    let new_leaders = wait_for("new leaders within 10 s", Duration::from_secs(10), || {
        let l = leaders_of(&survivor, "spread", 12)?;
        l.iter().all(|x| *x != leader_of_0).then_some(l)
    });
    let epoch_after = with_zk(&zk, async |s| {
        s.partition_state(&tp0).await.unwrap().unwrap().value.leader_epoch
    });
    assert!(
        epoch_after > epoch_before,
        "leader epoch {epoch_before} -> {epoch_after}"
    );
    let new_addr = cluster.broker(new_leaders[0]).bootstrap();
    // Clients keep producing with acks=all (two of three replicas left).
    wait_for("produce to the new leader", Duration::from_secs(20), || {
        (produce(&new_addr, "spread", 0, -1, b"after-failover").0 == 0).then_some(())
    });
    let got = consume_all(&new_addr, "spread", 0);
    for (offset, value) in &acked {
        assert!(
            got.contains(&(*offset, value.clone())),
            "acknowledged record at {offset} lost"
        );
    }
}

#[test]
fn a_new_controller_takes_over_and_the_old_epoch_is_refused() {
    let _one = serial();
    let mut cluster = Cluster::start(3, &[]);
    wait_brokers(&cluster, 3);
    let zk = cluster.zk.connect_string();
    let (old_controller, old_epoch) = with_zk(&zk, async |s| {
        let c = s.controller().await.unwrap().expect("a controller");
        let e = s.controller_epoch().await.unwrap().expect("an epoch").0;
        (c, e)
    });
    cluster.broker(old_controller.0).kill9();
    let (new_controller, new_epoch) = wait_for("a new controller within 10 s", Duration::from_secs(10), || {
        with_zk(&zk, async |s| {
            let c = s.controller().await.ok()??;
            let e = s.controller_epoch().await.ok()??.0;
            (c != old_controller).then_some((c, e))
        })
    });
    assert_eq!(new_epoch.0, old_epoch.0 + 1, "/controller_epoch");
    // The survivors hear from the new controller, then refuse the old one.
    let survivor = cluster
        .brokers
        .iter()
        .find(|b| b.is_running() && b.id != new_controller.0)
        .expect("a survivor")
        .bootstrap();
    wait_for("metadata from the new controller", Duration::from_secs(10), || {
        metadata(&survivor, "none").filter(|m| m.controller == new_controller.0)
    });
    let stale = ferrite_broker::protocol::update_metadata::UpdateMetadataRequest {
        controller_id: old_controller,
        controller_epoch: old_epoch,
        broker_epoch: ferrite_controller::control::BrokerEpoch(-1),
        topic_states: vec![],
        live_brokers: vec![],
    };
    let mut body = ferrite_broker::protocol::wire::Writer::new();
    stale.encode(&mut body);
    let frame = codec::frame_v2(6, 7, 1, "stale-controller", body.as_slice());
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(&survivor).expect("connect");
    s.write_all(&frame).expect("send");
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("response length");
    let mut resp = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut resp).expect("response");
    let mut r = ferrite_broker::protocol::wire::Reader::new(bytes::Bytes::from(resp));
    r.i32("correlation").unwrap();
    r.skip_tagged_fields().unwrap();
    let answer = ferrite_broker::protocol::update_metadata::UpdateMetadataResponse::decode(&mut r).unwrap();
    assert_eq!(answer.error_code, 11, "STALE_CONTROLLER_EPOCH");
}

#[test]
fn min_insync_replicas_refuses_acks_all_until_followers_return() {
    let _one = serial();
    let mut cluster = Cluster::start(3, &["min.insync.replicas=2"]);
    wait_brokers(&cluster, 3);
    let first = cluster.brokers[0].bootstrap();
    assert_eq!(create_topic(&first, "minisr", 1, 3, &[]), 0);
    let leader = wait_for("a leader", Duration::from_secs(20), || leaders_of(&first, "minisr", 1))[0];
    let addr = cluster.broker(leader).bootstrap();
    assert_eq!(produce(&addr, "minisr", 0, -1, b"before").0, 0);
    let followers: Vec<i32> = (1..=3).filter(|id| *id != leader).collect();
    for f in &followers {
        cluster.broker(*f).kill9();
    }
    // The ISR shrinks to the leader: acks=all is refused, acks=1 is taken.
    wait_for("NOT_ENOUGH_REPLICAS", Duration::from_secs(20), || {
        (produce(&addr, "minisr", 0, -1, b"refused").0 == 19).then_some(())
    });
    assert_eq!(produce(&addr, "minisr", 0, 1, b"acks-1").0, 0);
    for f in &followers {
        cluster.broker(*f).spawn();
    }
    wait_for("the ISR back to 3", Duration::from_secs(30), || {
        partitions_of(&addr, "minisr", 1).filter(|p| p[0].1 == 3)
    });
    wait_for("acks=all taken again", Duration::from_secs(20), || {
        (produce(&addr, "minisr", 0, -1, b"after").0 == 0).then_some(())
    });
}

#[test]
fn a_deleted_topic_leaves_no_data_and_no_znodes() {
    let _one = serial();
    let cluster = Cluster::start(3, &[]);
    wait_brokers(&cluster, 3);
    let first = cluster.brokers[0].bootstrap();
    assert_eq!(create_topic(&first, "doomed", 3, 3, &[]), 0);
    wait_for("leaders", Duration::from_secs(20), || leaders_of(&first, "doomed", 3));
    let dirs: Vec<std::path::PathBuf> = cluster
        .brokers
        .iter()
        .flat_map(|b| (0..3).map(move |p| b.data_dir().join(format!("doomed-{p}"))))
        .collect();
    wait_for("every replica's directory", Duration::from_secs(20), || {
        dirs.iter().all(|d| d.exists()).then_some(())
    });
    let mut c = Connection::connect(&first, "cluster-test").expect("connect");
    let mut r = c
        .call(20, codec::DELETE_TOPICS_V, |w| {
            codec::delete_topics(w, &["doomed".to_string()])
        })
        .expect("delete");
    assert_eq!(codec::decode_delete_topics(&mut r).expect("decode")[0].1, 0);
    wait_for("the directories gone on every broker", Duration::from_secs(20), || {
        dirs.iter().all(|d| !d.exists()).then_some(())
    });
    let zk = cluster.zk.connect_string();
    wait_for("the topic's znodes gone", Duration::from_secs(20), || {
        with_zk(&zk, async |s| {
            let topic = s.topic("doomed").await.ok()?;
            let pending = s.deletion_pending("doomed").await.ok()?;
            (topic.is_none() && !pending).then_some(())
        })
    });
}

#[test]
fn preferred_elections_give_a_restarted_broker_its_leaders_back() {
    let _one = serial();
    let mut cluster = Cluster::start(3, &["leader.imbalance.check.interval.seconds=2"]);
    wait_brokers(&cluster, 3);
    let first = cluster.brokers[0].bootstrap();
    assert_eq!(create_topic(&first, "balance", 12, 3, &[]), 0);
    let preferred = wait_for("12 leaders", Duration::from_secs(20), || {
        leaders_of(&first, "balance", 12)
    });
    let victim = if cluster.brokers[0].id == 3 { 2 } else { 3 };
    cluster.broker(victim).kill9();
    let survivor = cluster
        .brokers
        .iter()
        .find(|b| b.is_running())
        .expect("survivor")
        .bootstrap();
    wait_for("leaders off the killed broker", Duration::from_secs(15), || {
        leaders_of(&survivor, "balance", 12).filter(|l| !l.contains(&victim))
    });
    cluster.broker(victim).spawn();
    // The automatic rebalance (every 2 s here) moves leadership back once
    // the broker is in the ISRs again.
    wait_for("4 leaders each again", Duration::from_secs(45), || {
        leaders_of(&survivor, "balance", 12).filter(|l| *l == preferred)
    });
    // And the CLI asks for it explicitly (nothing left to move: it succeeds).
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args([
            "leaders",
            "--bootstrap",
            &survivor,
            "elect",
            "--preferred",
            "--topic",
            "balance",
        ])
        .output()
        .expect("ferrite leaders");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 12, "{text}");
}
