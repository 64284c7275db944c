//! `ferrite broker` processes in a cluster on a real ZooKeeper (the
//! testkit's, started by each test): topic creation spread over the
//! brokers, replication with acks=all, leader and controller failover
//! after kill -9, min.insync.replicas, topic deletion, preferred elections.
//! Each test is bounded by its waits (`wait_for`); they run one at a time.

mod common;

use std::time::Duration;

use common::cluster::*;
use ferrite_client::codec;
use ferrite_client::Connection;
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
    // ListOffsets: the leader answers with the HW; the followers with
    // NOT_LEADER_OR_FOLLOWER (6), so clients refresh their metadata.
    assert_eq!(latest_offset(&leader_addr, "spread", 0), (0, 20));
    for b in cluster.brokers.iter().filter(|b| b.id != leader_of_0) {
        assert_eq!(
            latest_offset(&b.bootstrap(), "spread", 0).0,
            6,
            "ListOffsets on follower {}",
            b.id
        );
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
    let stale = ferrite_protocol::update_metadata::UpdateMetadataRequest {
        controller_id: old_controller,
        controller_epoch: old_epoch,
        broker_epoch: ferrite_controller::control::BrokerEpoch(-1),
        topic_states: vec![],
        live_brokers: vec![],
    };
    let mut body = ferrite_protocol::wire::Writer::new();
    stale.encode(&mut body);
    let frame = codec::frame_v2(6, 7, 1, "stale-controller", body.as_slice());
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(&survivor).expect("connect");
    s.write_all(&frame).expect("send");
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("response length");
    let mut resp = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut resp).expect("response");
    let mut r = ferrite_protocol::wire::Reader::new(bytes::Bytes::from(resp));
    r.i32("correlation").unwrap();
    r.skip_tagged_fields().unwrap();
    let answer = ferrite_protocol::update_metadata::UpdateMetadataResponse::decode(&mut r).unwrap();
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
    // The leader named in the metadata may not have applied its
    // LeaderAndIsr yet (UNKNOWN_TOPIC_OR_PARTITION): wait until it takes one.
    wait_for("the leader taking writes", Duration::from_secs(20), || {
        (produce(&addr, "minisr", 0, -1, b"before").0 == 0).then_some(())
    });
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
fn added_partitions_get_replicas_and_a_deleted_topic_leaves_no_data_and_no_znodes() {
    let _one = serial();
    let cluster = Cluster::start(3, &[]);
    wait_brokers(&cluster, 3);
    let first = cluster.brokers[0].bootstrap();
    assert_eq!(create_topic(&first, "doomed", 3, 3, &[]), 0);
    wait_for("leaders", Duration::from_secs(20), || leaders_of(&first, "doomed", 3));
    // Partitions added later get leaders and replicas the same way.
    let mut c = Connection::connect(&first, "cluster-test").expect("connect");
    let mut r = c
        .call(37, codec::CREATE_PARTITIONS_V, |w| {
            codec::create_partitions(w, "doomed", 5)
        })
        .expect("create partitions");
    assert_eq!(codec::decode_create_partitions(&mut r).expect("decode")[0].1, 0);
    let leaders = wait_for("5 leaders", Duration::from_secs(20), || leaders_of(&first, "doomed", 5));
    assert!(leaders.iter().all(|l| (1..=3).contains(l)));
    let dirs: Vec<std::path::PathBuf> = cluster
        .brokers
        .iter()
        .flat_map(|b| (0..5).map(move |p| b.data_dir().join(format!("doomed-{p}"))))
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

#[test]
fn a_partition_moves_to_new_replicas_under_load_without_losing_records() {
    let _one = serial();
    let mut cluster = Cluster::start(4, &["min.insync.replicas=2"]);
    wait_brokers(&cluster, 4);
    let first = cluster.brokers[0].bootstrap();
    assert_eq!(create_topic(&first, "moving", 1, 3, &[]), 0);
    wait_for("a leader", Duration::from_secs(20), || leaders_of(&first, "moving", 1));
    let current = metadata(&first, "moving").unwrap().topics[0].partitions[0]
        .replicas
        .clone();
    let added = (1..=4).find(|b| !current.contains(b)).unwrap();
    let dropped = current[0];
    let mut target: Vec<i32> = current.iter().copied().filter(|b| *b != dropped).collect();
    target.push(added);
    // A producer with acks=all runs throughout.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let addrs: Vec<(i32, String)> = cluster.brokers.iter().map(|b| (b.id, b.bootstrap())).collect();
    let producer = {
        let (stop, acked, addrs) = (stop.clone(), acked.clone(), addrs.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let Some(l) = leaders_of(&addrs[1].1, "moving", 1) else {
                    continue;
                };
                let Some((_, to)) = addrs.iter().find(|(id, _)| *id == l[0]) else {
                    continue;
                };
                n += 1;
                let value = format!("m{n}").into_bytes();
                let (error, offset) = produce(to, "moving", 0, -1, &value);
                if error == 0 {
                    acked.lock().unwrap().push((offset, value));
                } else {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        })
    };
    wait_for("records before the move", Duration::from_secs(20), || {
        (acked.lock().unwrap().len() > 20).then_some(())
    });
    let plan = cluster.brokers[0].dir.path().join("plan.json");
    let replicas: Vec<String> = target.iter().map(|b| b.to_string()).collect();
    std::fs::write(
        &plan,
        format!(
            r#"{{"version":1,"partitions":[{{"topic":"moving","partition":0,"replicas":[{}]}}]}}"#,
            replicas.join(",")
        ),
    )
    .unwrap();
    let zk = cluster.zk.connect_string();
    let ferrite = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferrite"))
            .args(args)
            .output()
            .expect("ferrite");
        assert!(
            out.status.success(),
            "ferrite {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    ferrite(&[
        "partitions",
        "reassign",
        "--zookeeper",
        &zk,
        "--plan",
        plan.to_str().unwrap(),
    ]);
    let observer = addrs[1].1.clone();
    wait_for("the new replicas, all in sync", Duration::from_secs(60), || {
        let m = metadata(&observer, "moving")?;
        let p = &m.topics[0].partitions[0];
        let mut r = p.replicas.clone();
        r.sort();
        let mut t = target.clone();
        t.sort();
        (r == t && p.isr.len() == 3 && target.contains(&p.leader)).then_some(())
    });
    wait_for("the reassignment finished", Duration::from_secs(30), || {
        ferrite(&["partitions", "reassign", "--zookeeper", &zk, "--verify"])
            .contains("no reassignment in progress")
            .then_some(())
    });
    wait_for("the dropped replica's data gone", Duration::from_secs(30), || {
        (!cluster.broker(dropped).data_dir().join("moving-0").exists()).then_some(())
    });
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    producer.join().unwrap();
    let leader = leaders_of(&observer, "moving", 1).unwrap()[0];
    let acked = acked.lock().unwrap().clone();
    // A new leader's high watermark catches up with the records of the
    // old leader's epoch once its followers fetch from it (as in Kafka):
    // until then a consumer may not see the last acknowledged records yet.
    // Lost is never visible, within 20 s.
    let visible = |records: &Vec<(i64, Vec<u8>)>| acked.iter().all(|a| records.contains(a));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let records = loop {
        let records = consume_all(&cluster.broker(leader).bootstrap(), "moving", 0);
        if visible(&records) || std::time::Instant::now() > deadline {
            break records;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    for (offset, value) in &acked {
        assert!(
            records.contains(&(*offset, value.clone())),
            "acknowledged record at {offset} lost (high watermark {:?})",
            records.last().map(|r| r.0 + 1)
        );
    }
    let hw = records.last().map_or(0, |r| r.0 + 1);
    wait_replicas_reach(&cluster, &target, "moving", 0, hw);
    for b in cluster.brokers.iter_mut() {
        b.stop();
    }
    let batches = |id: i32| {
        let log = cluster
            .brokers
            .iter()
            .find(|b| b.id == id)
            .unwrap()
            .log_bytes("moving", 0);
        let (found, _, _) = ferrite_engine::scan::scan_bytes(&log, ferrite_engine::Offset(0));
        found
            .into_iter()
            .filter(|(_, b)| b.next_offset().0 <= hw)
            .map(|(pos, b)| log[pos as usize..pos as usize + b.size].to_vec())
            .collect::<Vec<_>>()
    };
    let reference = batches(target[0]);
    assert!(!reference.is_empty());
    for id in &target {
        assert_eq!(batches(*id), reference, "replica {id} differs below the HW");
    }
}

#[test]
fn a_zookeeper_ensemble_survives_one_server_and_without_quorum_only_leadership_stops() {
    let _one = serial();
    let ensemble = ferrite_testkit::zookeeper::ZooKeeper::ensemble();
    let mut cluster = Cluster::start_on(ensemble, 3, &["min.insync.replicas=2"]);
    wait_brokers(&cluster, 3);
    let first = cluster.brokers[0].bootstrap();
    assert_eq!(create_topic(&first, "quorum", 3, 3, &[]), 0);
    let leaders = wait_for("leaders", Duration::from_secs(20), || leaders_of(&first, "quorum", 3));
    // One ZooKeeper server down: the cluster still works, failover included.
    cluster.zk.servers[0].stop();
    // When the stopped server led the ensemble the other two elect a new
    // leader first; the brokers' failover is timed from when ZooKeeper
    // serves again. (A CI run once timed out below with the brokers unable
    // to open a session for 30 s; a failure here prints the servers' logs.)
    cluster.zk.wait_serving(2);
    let victim = leaders[0];
    let survivor = cluster.brokers.iter().find(|b| b.id != victim).unwrap().bootstrap();
    cluster.broker(victim).kill9();
    let moved = wait_for(
        "failover with one ZooKeeper server down",
        Duration::from_secs(30),
        || leaders_of(&survivor, "quorum", 3).filter(|l| !l.contains(&victim)),
    );
    cluster.broker(victim).spawn();
    wait_for("the ISRs whole again", Duration::from_secs(30), || {
        partitions_of(&survivor, "quorum", 3).filter(|p| p.iter().all(|x| x.1 == 3))
    });
    let addrs: Vec<(i32, String)> = cluster.brokers.iter().map(|b| (b.id, b.bootstrap())).collect();
    let addr_of = |id: i32| addrs.iter().find(|(b, _)| *b == id).unwrap().1.clone();
    for (p, l) in moved.iter().enumerate() {
        wait_for("acks=all with one server down", Duration::from_secs(20), || {
            (produce(&addr_of(*l), "quorum", p as i32, -1, b"one-down").0 == 0).then_some(())
        });
    }
    // Quorum lost: existing leaders keep taking and serving records.
    cluster.zk.servers[1].stop();
    std::thread::sleep(Duration::from_secs(2));
    for (p, l) in moved.iter().enumerate() {
        assert_eq!(
            produce(&addr_of(*l), "quorum", p as i32, -1, b"no-quorum").0,
            0,
            "partition {p}"
        );
        let records = consume_all(&addr_of(*l), "quorum", p as i32);
        assert!(records.iter().any(|(_, v)| v == b"no-quorum"));
    }
    // But a dead leader is not replaced while there is no quorum.
    let l0 = moved[0];
    let other = addrs.iter().find(|(b, _)| *b != l0).unwrap().1.clone();
    cluster.broker(l0).kill9();
    std::thread::sleep(Duration::from_secs(8));
    let seen = leaders_of(&other, "quorum", 3).map(|l| l[0]);
    assert_eq!(
        seen,
        Some(l0),
        "a leadership change happened without a ZooKeeper quorum"
    );
    // Quorum back: the partition gets a live leader.
    cluster.zk.servers[1].start();
    cluster.zk.wait_serving(2);
    wait_for("a new leader once the quorum is back", Duration::from_secs(40), || {
        leaders_of(&other, "quorum", 3).filter(|l| l[0] != l0)
    });
}

#[test]
fn the_cli_preferred_election_and_controlled_shutdown_move_leaders() {
    let _one = serial();
    let mut cluster = Cluster::start(3, &["auto.leader.rebalance.enable=false"]);
    wait_brokers(&cluster, 3);
    let first = cluster.brokers[0].bootstrap();
    assert_eq!(create_topic(&first, "elect", 6, 3, &[]), 0);
    let preferred = wait_for("6 leaders", Duration::from_secs(20), || leaders_of(&first, "elect", 6));
    let victim = 3;
    // Controlled shutdown: SIGTERM moves the broker's leaderships away
    // before it exits, long before its ZooKeeper session would expire.
    let status = cluster.broker(victim).stop();
    assert!(status.success(), "exit {status}");
    let stopped_at = std::time::Instant::now();
    let observer = cluster.broker(1).bootstrap();
    // Its registration goes with its closed session, not 4 s later at expiry.
    let zk = cluster.zk.connect_string();
    wait_for("the stopped broker unregistered", Duration::from_secs(10), || {
        with_zk(&zk, async |s| s.live_brokers().await.ok().filter(|b| b.len() == 2))
    });
    assert!(
        stopped_at.elapsed() < Duration::from_secs(3),
        "unregistered only after {:?}",
        stopped_at.elapsed()
    );
    let moved = wait_for("no leaders on the stopped broker", Duration::from_secs(10), || {
        leaders_of(&observer, "elect", 6).filter(|l| !l.contains(&victim))
    });
    assert!(
        stopped_at.elapsed() < Duration::from_secs(3),
        "leaders moved only after {:?}",
        stopped_at.elapsed()
    );
    assert_ne!(moved, preferred);
    cluster.broker(victim).spawn();
    wait_for("the ISRs whole again", Duration::from_secs(30), || {
        partitions_of(&observer, "elect", 6).filter(|p| p.iter().all(|x| x.1 == 3))
    });
    // Without automatic rebalancing nothing moves back by itself...
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(leaders_of(&observer, "elect", 6), Some(moved));
    // ...until the CLI asks.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(["leaders", "--bootstrap", &observer, "elect", "--preferred"])
        .output()
        .expect("ferrite leaders");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_for("the preferred leaders back", Duration::from_secs(20), || {
        leaders_of(&observer, "elect", 6).filter(|l| *l == preferred)
    });
}

/// Every replica of `__consumer_offsets` is compacted by its own broker's
/// log cleaner (as in Kafka), so followers do not keep the history either;
/// compaction keeps the log start where it was.
#[test]
fn every_replica_of_the_offsets_topic_is_compacted() {
    use kafka_protocol::messages::{self as km, GroupId, TopicName};
    let _one = serial();
    let mut cluster = Cluster::start(
        3,
        &[
            "offsets.topic.num.partitions=1",
            "offsets.topic.replication.factor=3",
            "offsets.topic.segment.bytes=4096",
            "offsets.retention.check.interval.ms=1000",
            "log.cleaner.backoff.ms=200",
        ],
    );
    wait_brokers(&cluster, 3);
    let first = cluster.brokers[0].bootstrap();
    assert_eq!(create_topic(&first, "t", 4, 1, &[]), 0, "create topic");
    let coordinator = wait_for("a coordinator", Duration::from_secs(20), || {
        coordinator_of(&cluster, "g")
    });
    let addr = cluster.broker(coordinator).addr();
    let mut c = common::Client::connect(addr);
    let mut commit = |i: i64| -> bool {
        let parts = (0..4)
            .map(|p| {
                km::offset_commit_request::OffsetCommitRequestPartition::default()
                    .with_partition_index(p)
                    .with_committed_offset(i * 10 + i64::from(p))
            })
            .collect();
        let req = km::OffsetCommitRequest::default()
            .with_group_id(GroupId(common::s("g")))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![km::offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(common::s("t")))
                .with_partitions(parts)]);
        let r = c.call(&req, 8);
        r.topics[0].partitions.iter().all(|p| p.error_code == 0)
    };
    // The offsets partition may still be loading on its new leader.
    wait_for("a first commit", Duration::from_secs(20), || commit(0).then_some(()));
    for i in 1..600i64 {
        assert!(commit(i), "commit {i}");
    }
    // 2400 records, 4 of them live: every replica's cleaner removes the
    // obsolete ones below its active segment.
    let log_bytes = |dir: std::path::PathBuf| -> u64 {
        std::fs::read_dir(dir.join("__consumer_offsets-0"))
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(u64::MAX)
    };
    for b in &cluster.brokers {
        let bytes = wait_for("the replica compacted", Duration::from_secs(30), || {
            let n = log_bytes(b.data_dir());
            (n < 3 * 4096).then_some(n)
        });
        eprintln!("broker {}: {bytes} bytes of __consumer_offsets-0 left", b.id);
    }
    let start = wait_for("the log start", Duration::from_secs(20), || {
        let mut c = Connection::connect(&cluster.broker(coordinator).bootstrap(), "cluster-test").ok()?;
        let topics = [("__consumer_offsets".to_string(), vec![0])];
        let mut r = c
            .call(2, codec::LIST_OFFSETS_V, |w| codec::list_offsets(w, -2, &topics))
            .ok()?;
        let start = codec::decode_list_offsets(&mut r).ok()?.first()?.offset;
        Some(start)
    });
    assert_eq!(start, 0, "compaction keeps the log start");
}

/// DeleteRecords (here through `ferrite topics delete-records`) moves the
/// leader's log start; its followers take it from their next fetch, so a
/// leader elected after a kill -9 starts the log there too.
#[test]
fn delete_records_moves_every_replicas_log_start() {
    let _one = serial();
    let mut cluster = Cluster::start(3, &[]);
    wait_brokers(&cluster, 3);
    let first = cluster.brokers[0].bootstrap();
    assert_eq!(create_topic(&first, "dr", 1, 3, &[]), 0, "create topic");
    let leader = wait_for("a leader", Duration::from_secs(20), || {
        leaders_of(&first, "dr", 1).map(|l| l[0]).filter(|l| *l >= 0)
    });
    let to_leader = cluster.broker(leader).bootstrap();
    for i in 0..100 {
        let (code, _) = produce(&to_leader, "dr", 0, -1, format!("v{i}").as_bytes());
        assert_eq!(code, 0, "produce {i}");
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args([
            "topics",
            "delete-records",
            "dr",
            "--offset",
            "40",
            "--bootstrap",
            &first,
        ])
        .output()
        .expect("ferrite");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("dr-0: log start now 40"),
        "{text}"
    );
    for b in cluster.brokers.iter().filter(|b| b.id != leader) {
        wait_for("the follower's log start", Duration::from_secs(20), || {
            b.log_text()
                .lines()
                .any(|l| l.contains("log start moved up") && l.contains("tp=dr-0") && l.contains("log_start=40"))
                .then_some(())
        });
    }
    cluster.broker(leader).kill9();
    let earliest = wait_for("a new leader's log start", Duration::from_secs(30), || {
        let other = cluster.brokers.iter().find(|b| b.id != leader)?;
        let new_leader = leaders_of(&other.bootstrap(), "dr", 1)?[0];
        if new_leader < 0 || new_leader == leader {
            return None;
        }
        let mut c = Connection::connect(&cluster.broker_ref(new_leader).bootstrap(), "cluster-test").ok()?;
        let topics = [("dr".to_string(), vec![0])];
        let mut r = c
            .call(2, codec::LIST_OFFSETS_V, |w| codec::list_offsets(w, -2, &topics))
            .ok()?;
        let p = codec::decode_list_offsets(&mut r).ok()?.first()?.clone();
        (p.error == 0).then_some(p.offset)
    });
    assert_eq!(earliest, 40, "the new leader's log starts where the old one's did");
}
