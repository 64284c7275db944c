//! A topic config, or a dynamic broker config, changed through one broker
//! of a three-broker cluster is in force on every broker within a second
//! (Kafka's `/config/changes`): each describes it, the partition's leader
//! enforces it, and a broker that starts afterwards has it too. The
//! controller takes a dynamic `unclean.leader.election.enable`.

mod common;

use std::time::{Duration, Instant};

use common::cluster::{acks_all_everywhere, create_topic, metric_sum, produce, serial, wait_for, Cluster};
use common::{s, Client};
use kafka_protocol::messages as km;

/// How soon a change must be in force everywhere.
const IN_FORCE_WITHIN: Duration = Duration::from_secs(1);

fn alter(c: &mut Client, topic: &str, key: &str, value: &str) {
    let (code, message) = alter_resource(c, RESOURCE_TOPIC, topic, key, value);
    assert_eq!(code, 0, "{message:?}");
}

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;

/// Sets one config of a resource; the answer's error code and message.
fn alter_resource(c: &mut Client, rtype: i8, name: &str, key: &str, value: &str) -> (i16, Option<String>) {
    let req = km::IncrementalAlterConfigsRequest::default().with_resources(vec![
        km::incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(rtype)
            .with_resource_name(s(name))
            .with_configs(vec![km::incremental_alter_configs_request::AlterableConfig::default()
                .with_name(s(key))
                .with_config_operation(0)
                .with_value(Some(s(value)))]),
    ]);
    let r = c.call(&req, 1);
    let message = r.responses[0].error_message.as_ref().map(|m| m.to_string());
    (r.responses[0].error_code, message)
}

/// The value and source of `key` as `c`'s broker describes it.
fn described(c: &mut Client, topic: &str, key: &str) -> (String, i8) {
    described_resource(c, RESOURCE_TOPIC, topic, key).1
}

/// The error code of a resource's description, and the value and source
/// of `key` in it.
fn described_resource(c: &mut Client, rtype: i8, name: &str, key: &str) -> (i16, (String, i8)) {
    let req = km::DescribeConfigsRequest::default().with_resources(vec![
        km::describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(rtype)
            .with_resource_name(s(name))
            .with_configuration_keys(Some(vec![s(key)])),
    ]);
    let r = c.call(&req, 4);
    let code = r.results[0].error_code;
    let Some(config) = r.results[0].configs.first() else {
        // Not known to this broker yet (UNKNOWN_TOPIC_OR_PARTITION).
        return (code, (String::new(), -1));
    };
    let value = config.value.as_ref().map(|v| v.to_string()).unwrap_or_default();
    (code, (value, config.config_source))
}

/// Polls `f` until it holds; returns how long that took.
fn time_until(what: &str, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(10), "{what}: not within 10 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    start.elapsed()
}

#[test]
fn a_config_changed_through_one_broker_is_in_force_on_every_broker() {
    let _serial = serial();
    let mut cluster = Cluster::start(3, &[]);
    let first = cluster.brokers[0].bootstrap();
    // Replication factor 3 needs all three brokers registered.
    wait_for("the topic created", Duration::from_secs(20), || {
        matches!(create_topic(&first, "conf", 1, 3, &[]), 0 | 36).then_some(())
    });
    wait_for("a leader and a full ISR", Duration::from_secs(20), || {
        common::cluster::partitions_of(&first, "conf", 1).filter(|p| p[0].1 == 3)
    });
    let mut clients: Vec<Client> = cluster.brokers.iter().map(|b| Client::connect(b.addr())).collect();
    alter(&mut clients[0], "conf", "retention.ms", "123456");
    for (i, c) in clients.iter_mut().enumerate() {
        let took = time_until("the new retention.ms described", || {
            described(c, "conf", "retention.ms") == ("123456".to_string(), 1)
        });
        assert!(took <= IN_FORCE_WITHIN, "broker {} described it after {took:?}", i + 1);
    }
    // Enforced by the leader, wherever it is: a batch larger than the
    // topic's max.message.bytes is refused (MESSAGE_TOO_LARGE). acks=1: the
    // leader's own check is what is timed, not the followers.
    let leader_bootstrap = || {
        let leader = common::cluster::leaders_of(&first, "conf", 1)
            .map(|l| l[0])
            .unwrap_or(-1);
        cluster.brokers.iter().find(|b| b.id == leader).map(|b| b.bootstrap())
    };
    let large = vec![b'x'; 4096];
    // The leader in the metadata may not have taken up its leadership yet
    // (UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER until its LeaderAndIsr).
    wait_for("the leader accepts a produce", Duration::from_secs(20), || {
        leader_bootstrap()
            .is_some_and(|b| produce(&b, "conf", 0, -1, &large).0 == 0)
            .then_some(())
    });
    alter(&mut clients[1], "conf", "max.message.bytes", "1024");
    let took = time_until("MESSAGE_TOO_LARGE from the leader", || {
        leader_bootstrap().is_some_and(|b| produce(&b, "conf", 0, 1, &large).0 == 10)
    });
    assert!(took <= IN_FORCE_WITHIN, "the leader enforced it after {took:?}");
    alter(&mut clients[2], "conf", "max.message.bytes", "1048588");
    let took = time_until("the batch accepted again", || {
        leader_bootstrap().is_some_and(|b| produce(&b, "conf", 0, 1, &large).0 == 0)
    });
    assert!(took <= IN_FORCE_WITHIN, "accepted again after {took:?}");
    // A topic created with configs has them on every broker, and keeps
    // them when another topic's configs change.
    wait_for("a topic created with configs", Duration::from_secs(20), || {
        matches!(
            create_topic(&first, "born", 1, 3, &[("retention.ms", "777000")]),
            0 | 36
        )
        .then_some(())
    });
    for (i, c) in clients.iter_mut().enumerate() {
        time_until("the creation's retention.ms described", || {
            described(c, "born", "retention.ms") == ("777000".to_string(), 1)
        });
        assert_eq!(described(c, "conf", "retention.ms").0, "123456", "broker {}", i + 1);
    }
    alter(&mut clients[0], "conf", "retention.ms", "654321");
    for (i, c) in clients.iter_mut().enumerate() {
        time_until("the second change described", || {
            described(c, "conf", "retention.ms").0 == "654321"
        });
        assert_eq!(
            described(c, "born", "retention.ms"),
            ("777000".to_string(), 1),
            "broker {}: another topic's change reset this one",
            i + 1
        );
    }
    // A broker that starts afterwards reads every config at its start.
    drop(clients);
    cluster.broker(3).stop();
    cluster.broker(3).spawn();
    let mut late = Client::connect(cluster.broker(3).addr());
    time_until("the restarted broker describes the change", || {
        described(&mut late, "conf", "retention.ms") == ("654321".to_string(), 1)
            && described(&mut late, "born", "retention.ms") == ("777000".to_string(), 1)
    });
}

const SOURCE_DYNAMIC_BROKER: i8 = 2;
const SOURCE_DYNAMIC_DEFAULT: i8 = 3;

#[test]
fn a_dynamic_broker_config_is_in_force_on_every_broker_and_a_brokers_own_wins() {
    let _serial = serial();
    let mut cluster = Cluster::start(3, &[]);
    let first = cluster.brokers[0].bootstrap();
    wait_for("the topic created", Duration::from_secs(20), || {
        matches!(create_topic(&first, "dyn", 1, 3, &[]), 0 | 36).then_some(())
    });
    wait_for("a leader and a full ISR", Duration::from_secs(20), || {
        common::cluster::partitions_of(&first, "dyn", 1).filter(|p| p[0].1 == 3)
    });
    let ids: Vec<i32> = cluster.brokers.iter().map(|b| b.id).collect();
    let mut clients: Vec<Client> = cluster.brokers.iter().map(|b| Client::connect(b.addr())).collect();
    let leader = common::cluster::leaders_of(&first, "dyn", 1).expect("a leader")[0];
    let leader_at = ids
        .iter()
        .position(|&i| i == leader)
        .expect("the leader is one of ours");
    let leader_bootstrap = cluster.brokers[leader_at].bootstrap();
    let large = vec![b'x'; 4096];
    // The leader in the metadata may not have taken up its leadership yet
    // (UNKNOWN_TOPIC_OR_PARTITION until its LeaderAndIsr).
    wait_for("the leader accepts a produce", Duration::from_secs(20), || {
        (produce(&leader_bootstrap, "dyn", 0, 1, &large).0 == 0).then_some(())
    });

    // The cluster's default, set through a broker that may not lead.
    let other = (leader_at + 1) % 3;
    assert_eq!(
        alter_resource(&mut clients[other], RESOURCE_BROKER, "", "message.max.bytes", "1024").0,
        0
    );
    let took = time_until("MESSAGE_TOO_LARGE from the leader", || {
        produce(&leader_bootstrap, "dyn", 0, 1, &large).0 == 10
    });
    assert!(
        took <= IN_FORCE_WITHIN,
        "the leader enforced the default after {took:?}"
    );
    for (i, c) in clients.iter_mut().enumerate() {
        let took = time_until("the default described", || {
            described(c, "dyn", "max.message.bytes") == ("1024".to_string(), SOURCE_DYNAMIC_DEFAULT)
        });
        assert!(took <= IN_FORCE_WITHIN, "broker {} described it after {took:?}", ids[i]);
    }

    // The leader's own value wins over the default; only on the leader.
    let me = leader.to_string();
    assert_eq!(
        alter_resource(
            &mut clients[leader_at],
            RESOURCE_BROKER,
            &me,
            "message.max.bytes",
            "8192"
        )
        .0,
        0
    );
    assert_eq!(
        produce(&leader_bootstrap, "dyn", 0, 1, &large).0,
        0,
        "in force before the answer"
    );
    assert_eq!(
        described_resource(&mut clients[leader_at], RESOURCE_BROKER, &me, "message.max.bytes"),
        (0, ("8192".to_string(), SOURCE_DYNAMIC_BROKER))
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        described(&mut clients[other], "dyn", "max.message.bytes").0,
        "1024",
        "another broker's value"
    );

    // Another broker's id is that broker's to serve (INVALID_REQUEST), and
    // settings read at start are refused.
    let not_me = ids[other].to_string();
    assert_eq!(
        alter_resource(
            &mut clients[leader_at],
            RESOURCE_BROKER,
            &not_me,
            "log.retention.ms",
            "1"
        )
        .0,
        42
    );
    assert_eq!(
        described_resource(&mut clients[leader_at], RESOURCE_BROKER, &not_me, "log.retention.ms").0,
        42
    );
    let (code, message) = alter_resource(&mut clients[leader_at], RESOURCE_BROKER, &me, "zookeeper.connect", "x");
    assert_eq!(code, 42, "{message:?}");

    // A broker that starts afterwards reads the default at its start.
    drop(clients);
    let restarted = ids[other];
    cluster.broker(restarted).stop();
    cluster.broker(restarted).spawn();
    let mut late = Client::connect(cluster.broker(restarted).addr());
    time_until("the restarted broker describes the default", || {
        described(&mut late, "dyn", "max.message.bytes") == ("1024".to_string(), SOURCE_DYNAMIC_DEFAULT)
    });
    // In force in its own settings too (read before its shards listened).
    let id = restarted.to_string();
    time_until("the restarted broker's settings have the default", || {
        described_resource(&mut late, RESOURCE_BROKER, &id, "message.max.bytes")
            == (0, ("1024".to_string(), SOURCE_DYNAMIC_DEFAULT))
    });
}

/// A partition whose only in-sync replica died stays offline while unclean
/// election is off, and gets the out-of-sync replica as leader once the
/// cluster's default `unclean.leader.election.enable` turns on, without a
/// restart (the controller follows `/config/brokers/<default>`).
#[test]
fn turning_unclean_election_on_dynamically_elects_an_offline_partition() {
    let _serial = serial();
    let mut cluster = Cluster::start(3, &[]);
    let first = cluster.brokers[0].bootstrap();
    wait_for("the topic created", Duration::from_secs(20), || {
        matches!(create_topic(&first, "unclean", 1, 2, &[]), 0 | 36).then_some(())
    });
    wait_for("a leader and a full ISR", Duration::from_secs(20), || {
        common::cluster::partitions_of(&first, "unclean", 1).filter(|p| p[0].1 == 2)
    });
    let m = common::cluster::metadata(&first, "unclean").expect("metadata");
    let p = &m.topics[0].partitions[0];
    let leader = p.leader;
    let follower = *p.replicas.iter().find(|&&r| r != leader).expect("two replicas");
    let third = cluster
        .brokers
        .iter()
        .map(|b| b.id)
        .find(|&i| i != leader && i != follower)
        .expect("a third broker");
    let third_bootstrap = cluster.broker(third).bootstrap();
    // The follower stops cleanly (it leaves the ISR), the leader takes a
    // record it never sees, then dies: no in-sync replica is left.
    cluster.broker(follower).stop();
    wait_for("the follower out of the ISR", Duration::from_secs(20), || {
        common::cluster::partitions_of(&third_bootstrap, "unclean", 1).filter(|p| p[0].1 == 1)
    });
    assert_eq!(
        produce(
            &cluster.broker(leader).bootstrap(),
            "unclean",
            0,
            1,
            b"only on the leader"
        )
        .0,
        0
    );
    cluster.broker(leader).kill9();
    cluster.broker(follower).spawn();
    let leader_now = || {
        common::cluster::metadata(&third_bootstrap, "unclean")
            .and_then(|m| m.topics.first().and_then(|t| t.partitions.first().map(|p| p.leader)))
            .unwrap_or(-2)
    };
    wait_for("the partition offline", Duration::from_secs(30), || {
        (leader_now() == -1).then_some(())
    });
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(leader_now(), -1, "elected while unclean election is off");
    let mut c = Client::connect(cluster.broker(third).addr());
    assert_eq!(
        alter_resource(&mut c, RESOURCE_BROKER, "", "unclean.leader.election.enable", "true").0,
        0
    );
    wait_for("the out-of-sync replica elected", Duration::from_secs(20), || {
        (leader_now() == follower).then_some(())
    });
}

/// Runs `tests/python/cluster_configs.py` (confluent-kafka's AdminClient)
/// against `bootstrap`; panics unless it ends with `all ok`.
fn admin_client(bootstrap: &str, args: &[&str]) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/cluster_configs.py");
    let python = std::env::var("FERRITE_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = std::process::Command::new(&python)
        .arg(script)
        .arg(bootstrap)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e} (run scripts/test.sh, or set FERRITE_PYTHON)"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("all ok"),
        "{args:?} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `num.replica.fetchers`, set for one broker through another with
/// confluent-kafka's AdminClient (Kafka's ZooKeeper path: written under
/// `/config/brokers/<id>`, announced, read by that broker), changes how
/// many fetchers that broker runs while it runs, and replication goes on
/// over them; set back to 1, the extra fetchers end. A topic config set
/// with the AdminClient through one broker is described by every broker
/// within a second.
#[test]
fn num_replica_fetchers_and_topic_configs_set_with_a_real_client_reach_their_brokers() {
    let _serial = serial();
    let (cluster, metrics_port) = Cluster::start_with_metrics_on(3);
    let first = cluster.brokers[0].bootstrap();
    const PARTITIONS: usize = 24;
    wait_for("the topic created", Duration::from_secs(20), || {
        matches!(create_topic(&first, "fetched", PARTITIONS as i32, 3, &[]), 0 | 36).then_some(())
    });
    wait_for("leaders and full ISRs", Duration::from_secs(30), || {
        common::cluster::partitions_of(&first, "fetched", PARTITIONS).filter(|p| p.iter().all(|(_, isr)| *isr == 3))
    });
    acks_all_everywhere(&cluster, "fetched", PARTITIONS, b"one fetcher per leader");
    // Broker 3 follows partitions of two leaders (on its one shard); the
    // gauge is reported every 5 s, so a report after every fetcher started.
    std::thread::sleep(Duration::from_secs(6));
    let one_each = wait_for("broker 3's fetchers reported", Duration::from_secs(15), || {
        metric_sum(metrics_port, "ferrite_replica_fetchers").filter(|n| *n >= 1.0)
    });
    assert!(one_each <= 4.0, "{one_each} fetchers with one per leader and shard");

    admin_client(&first, &["fetchers", "3", "3"]);
    let three_each = wait_for("broker 3 runs more fetchers", Duration::from_secs(20), || {
        metric_sum(metrics_port, "ferrite_replica_fetchers").filter(|n| *n > one_each)
    });
    assert!(
        three_each <= 12.0,
        "{three_each} fetchers with three per leader and shard"
    );
    acks_all_everywhere(&cluster, "fetched", PARTITIONS, b"three fetchers per leader");

    admin_client(&first, &["fetchers", "3", "1"]);
    wait_for("broker 3's extra fetchers end", Duration::from_secs(30), || {
        metric_sum(metrics_port, "ferrite_replica_fetchers").filter(|n| *n <= one_each)
    });
    acks_all_everywhere(&cluster, "fetched", PARTITIONS, b"one fetcher per leader again");

    admin_client(&first, &["topic", "fetched", "retention.ms", "7654321"]);
    let mut clients: Vec<Client> = cluster.brokers.iter().map(|b| Client::connect(b.addr())).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        let took = time_until("the new retention.ms described", || {
            described(c, "fetched", "retention.ms") == ("7654321".to_string(), 1)
        });
        assert!(took <= IN_FORCE_WITHIN, "broker {} described it after {took:?}", i + 1);
    }
}
