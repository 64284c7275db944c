//! `transactional.id.expiration.ms`: the coordinator removes the state of
//! a transactional id idle (no transaction open or ending) for longer, as
//! Kafka does — a tombstone in `__transaction_state`, so the id stays gone
//! after a restart — and keeps any id with a transaction open.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{s, Broker, Client};
use kafka_protocol::messages::{self as km, TopicName};

fn init(c: &mut Client, id: &str) -> (i64, i16) {
    let r = c.call(
        &km::InitProducerIdRequest::default()
            .with_transactional_id(Some(km::TransactionalId(s(id))))
            .with_transaction_timeout_ms(60_000),
        4,
    );
    assert_eq!(r.error_code, 0);
    (r.producer_id.0, r.producer_epoch)
}

/// `ferrite transactions list`: the ids the brokers hold.
fn listed(b: &Broker) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(["transactions", "list", "--bootstrap", &b.bootstrap()])
        .output()
        .expect("ferrite");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split('\t').next().map(str::to_string))
        .collect()
}

#[test]
fn an_idle_transactional_id_expires_and_an_open_one_stays() {
    let mut b = Broker::start(&[
        "transactional.id.expiration.ms=1500",
        "transaction.remove.expired.transaction.cleanup.interval.ms=200",
    ]);
    let mut c = Client::connect(b.addr());
    init(&mut c, "idle");
    let (pid, epoch) = init(&mut c, "open");
    // The topic, auto-created by a metadata request.
    let meta = c.call(
        &km::MetadataRequest::default()
            .with_allow_auto_topic_creation(true)
            .with_topics(Some(vec![
                km::metadata_request::MetadataRequestTopic::default().with_name(Some(TopicName(s("ids"))))
            ])),
        4,
    );
    assert_eq!(meta.topics.len(), 1);
    let add = c.call(
        &km::AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(km::TransactionalId(s("open")))
            .with_v3_and_below_producer_id(km::ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![
                km::add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(s("ids")))
                    .with_partitions(vec![0]),
            ]),
        3,
    );
    assert_eq!(
        add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        0
    );
    assert_eq!(listed(&b), vec!["idle".to_string(), "open".to_string()]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while listed(&b).contains(&"idle".to_string()) {
        assert!(Instant::now() < deadline, "the idle id never expired");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(listed(&b), vec!["open".to_string()], "an open transaction's id stays");
    b.kill9();
    b.spawn();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let ids = listed(&b);
        if ids == vec!["open".to_string()] {
            break;
        }
        assert!(Instant::now() < deadline, "after a restart: {ids:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
