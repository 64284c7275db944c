//! A topic config changed through one broker of a three-broker cluster is
//! in force on every broker within a second (Kafka's `/config/changes`):
//! each describes it, the partition's leader enforces it, and a broker that
//! starts afterwards has it too.

mod common;

use std::time::{Duration, Instant};

use common::cluster::{create_topic, produce, serial, wait_for, Cluster};
use common::{s, Client};
use kafka_protocol::messages as km;

/// How soon a change must be in force everywhere.
const IN_FORCE_WITHIN: Duration = Duration::from_secs(1);

fn alter(c: &mut Client, topic: &str, key: &str, value: &str) {
    let req = km::IncrementalAlterConfigsRequest::default().with_resources(vec![
        km::incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(topic))
            .with_configs(vec![km::incremental_alter_configs_request::AlterableConfig::default()
                .with_name(s(key))
                .with_config_operation(0)
                .with_value(Some(s(value)))]),
    ]);
    let r = c.call(&req, 1);
    assert_eq!(r.responses[0].error_code, 0, "{:?}", r.responses[0].error_message);
}

/// The value and source of `key` as `c`'s broker describes it.
fn described(c: &mut Client, topic: &str, key: &str) -> (String, i8) {
    let req = km::DescribeConfigsRequest::default().with_resources(vec![
        km::describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(topic))
            .with_configuration_keys(Some(vec![s(key)])),
    ]);
    let r = c.call(&req, 4);
    let Some(config) = r.results[0].configs.first() else {
        // Not known to this broker yet (UNKNOWN_TOPIC_OR_PARTITION).
        return (String::new(), -1);
    };
    let value = config.value.as_ref().map(|v| v.to_string()).unwrap_or_default();
    (value, config.config_source)
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
    assert_eq!(
        produce(&leader_bootstrap().expect("a leader"), "conf", 0, -1, &large).0,
        0
    );
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
