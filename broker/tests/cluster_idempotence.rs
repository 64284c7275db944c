//! The idempotent producer in a 3-broker cluster: producer ids from every
//! broker are distinct (blocks reserved in ZooKeeper), and a new leader
//! deduplicates a retry of a batch its predecessor acknowledged, because
//! the followers learnt the producer's sequences from the replicated log.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::cluster::*;
use common::Client;
use ferrite_client::codec;
use ferrite_client::Connection;
use ferrite_engine::batch::{build_batch, set_producer};
use ferrite_engine::{Offset, TimestampMs};
use kafka_protocol::messages as km;

const PRODUCER: i64 = 4242;

fn batch(seq: i32, records: usize) -> Vec<u8> {
    let values: Vec<Vec<u8>> = (0..records).map(|i| format!("s{seq}-{i}").into_bytes()).collect();
    let refs: Vec<&[u8]> = values.iter().map(|v| &v[..]).collect();
    let mut b = build_batch(Offset(0), TimestampMs(1_700_000_000_000), &refs);
    set_producer(&mut b, ferrite_engine::ProducerId(PRODUCER), 0, seq);
    b
}

/// (error, base offset) of an acks=all produce to `idem`-0 at `bootstrap`.
fn produce(bootstrap: &str, records: &[u8]) -> (i16, i64) {
    let Ok(mut c) = Connection::connect(bootstrap, "idempotence-test") else {
        return (-1, -1);
    };
    match c.call(0, codec::PRODUCE_V, |w| {
        codec::produce(w, -1, 10_000, "idem", 0, records)
    }) {
        Ok(mut r) => codec::decode_produce(&mut r).unwrap_or((-1, -1)),
        Err(_) => (-1, -1),
    }
}

fn leader(cluster: &Cluster) -> Option<i32> {
    cluster
        .brokers
        .iter()
        .filter(|b| b.is_running())
        .find_map(|b| leaders_of(&b.bootstrap(), "idem", 1))
        .map(|l| l[0])
        .filter(|l| *l >= 0)
}

#[test]
fn producer_ids_are_unique_and_a_new_leader_deduplicates() {
    let _one = serial();
    let mut cluster = Cluster::start(3, &[]);
    wait_brokers(&cluster, 3);
    let mut ids = BTreeSet::new();
    for b in &cluster.brokers {
        let mut c = Client::connect(b.addr());
        for _ in 0..5 {
            let r = c.call(
                &km::InitProducerIdRequest::default()
                    .with_transactional_id(None)
                    .with_transaction_timeout_ms(60_000),
                4,
            );
            assert_eq!(r.error_code, 0, "broker {}", b.id);
            assert!(ids.insert(r.producer_id.0), "producer id {} twice", r.producer_id.0);
        }
    }
    assert_eq!(
        create_topic(
            &cluster.brokers[0].bootstrap(),
            "idem",
            1,
            3,
            &[("min.insync.replicas", "2")]
        ),
        0
    );
    let first = wait_for("a leader", Duration::from_secs(10), || leader(&cluster));
    let at = |c: &Cluster, id: i32| {
        c.brokers
            .iter()
            .find(|b| b.id == id)
            .map(|b| b.bootstrap())
            .unwrap_or_default()
    };
    let addr = at(&cluster, first);
    wait_for("the first batch acknowledged", Duration::from_secs(10), || {
        (produce(&addr, &batch(0, 5)) == (0, 0)).then_some(())
    });
    assert_eq!(produce(&addr, &batch(5, 5)), (0, 5));
    cluster.broker(first).kill9();
    let next = wait_for("a new leader", Duration::from_secs(15), || {
        leader(&cluster).filter(|l| *l != first)
    });
    let addr = at(&cluster, next);
    // The retry of the batch the old leader acknowledged last.
    let retried = wait_for("the new leader answering", Duration::from_secs(10), || {
        let r = produce(&addr, &batch(5, 5));
        (r.0 == 0).then_some(r)
    });
    assert_eq!(retried, (0, 5), "the new leader knows the batch");
    assert_eq!(produce(&addr, &batch(0, 5)), (0, 0));
    assert_eq!(produce(&addr, &batch(10, 5)), (0, 10));
    let records = consume_all(&addr, "idem", 0);
    assert_eq!(records.len(), 15, "each record once");
    let offsets: Vec<i64> = records.iter().map(|(o, _)| *o).collect();
    assert_eq!(offsets, (0..15).collect::<Vec<i64>>());
}
