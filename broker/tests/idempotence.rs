//! The idempotent producer at the protocol level: InitProducerId hands out
//! ids that stay unique across restarts; a retried batch is acknowledged
//! with its original offset and not appended again; a sequence gap gets
//! OUT_OF_ORDER_SEQUENCE_NUMBER and an older epoch INVALID_PRODUCER_EPOCH.
//! (`python_clients.rs` has the same with a real client and lost answers.)

mod common;

use bytes::{Bytes, BytesMut};
use common::{s, Broker, Client};
use ferrite_engine::batch::{build_batch, set_producer};
use ferrite_engine::{Offset, TimestampMs};
use kafka_protocol::messages::{self as km, TopicName};

const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const INVALID_PRODUCER_EPOCH: i16 = 47;

fn init_producer_id(c: &mut Client) -> (i64, i16) {
    let r = c.call(
        &km::InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000),
        4,
    );
    assert_eq!(r.error_code, 0);
    (r.producer_id.0, r.producer_epoch)
}

fn batch(pid: i64, epoch: i16, seq: i32, records: usize) -> Bytes {
    let values: Vec<Vec<u8>> = (0..records).map(|i| format!("v{seq}-{i}").into_bytes()).collect();
    let refs: Vec<&[u8]> = values.iter().map(|v| &v[..]).collect();
    let mut b = BytesMut::from(&build_batch(Offset(0), TimestampMs(1_700_000_000_000), &refs)[..]);
    set_producer(&mut b, ferrite_engine::ProducerId(pid), epoch, seq);
    b.freeze()
}

/// (error code, base offset) of a produce of `records` to `topic`-0.
fn produce(c: &mut Client, topic: &str, records: Bytes) -> (i16, i64) {
    let req = km::ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![km::produce_request::TopicProduceData::default()
            .with_name(TopicName(s(topic)))
            .with_partition_data(vec![km::produce_request::PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let r = c.call(&req, 9);
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

#[test]
fn retries_are_deduplicated_and_gaps_and_stale_epochs_refused() {
    let b = Broker::start(&[]);
    let mut c = Client::connect(b.addr());
    let (pid, epoch) = init_producer_id(&mut c);
    assert_eq!(epoch, 0);
    // Auto-created on the first produce.
    assert_eq!(produce(&mut c, "idem", batch(pid, 0, 0, 5)), (0, 0));
    assert_eq!(produce(&mut c, "idem", batch(pid, 0, 5, 5)), (0, 5));
    assert_eq!(
        produce(&mut c, "idem", batch(pid, 0, 0, 5)),
        (0, 0),
        "a retry gets its offset"
    );
    assert_eq!(
        produce(&mut c, "idem", batch(pid, 0, 20, 5)).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    assert_eq!(
        produce(&mut c, "idem", batch(pid, 0, 10, 5)),
        (0, 10),
        "nothing was appended meanwhile"
    );
    // A new epoch starts at sequence 0; the old one is fenced.
    assert_eq!(produce(&mut c, "idem", batch(pid, 1, 0, 1)), (0, 15));
    assert_eq!(produce(&mut c, "idem", batch(pid, 0, 15, 1)).0, INVALID_PRODUCER_EPOCH);
    // A non-idempotent batch is not affected.
    let plain = Bytes::from(build_batch(Offset(0), TimestampMs(1), &[b"x"]));
    assert_eq!(produce(&mut c, "idem", plain), (0, 16));
}

#[test]
fn producer_ids_stay_unique_across_restarts() {
    let mut b = Broker::start(&[]);
    let mut seen = std::collections::BTreeSet::new();
    for round in 0..2 {
        let mut c = Client::connect(b.addr());
        for _ in 0..20 {
            let (pid, _) = init_producer_id(&mut c);
            assert!(seen.insert(pid), "producer id {pid} handed out twice (round {round})");
        }
        b.stop();
        b.spawn();
    }
    // The dedup state survives the restart too.
    let mut c = Client::connect(b.addr());
    let (pid, _) = init_producer_id(&mut c);
    assert_eq!(produce(&mut c, "after", batch(pid, 0, 0, 3)), (0, 0));
    b.stop();
    b.spawn();
    let mut c = Client::connect(b.addr());
    assert_eq!(
        produce(&mut c, "after", batch(pid, 0, 0, 3)),
        (0, 0),
        "retry after a restart"
    );
    assert_eq!(produce(&mut c, "after", batch(pid, 0, 3, 3)), (0, 3));
}

#[test]
fn transactional_records_without_a_transactional_id_are_refused() {
    const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
    let b = Broker::start(&[]);
    let mut c = Client::connect(b.addr());
    let (pid, _) = init_producer_id(&mut c);
    assert_eq!(produce(&mut c, "txn-bare", batch(pid, 0, 0, 1)), (0, 0));
    let mut txn = BytesMut::from(&batch(pid, 0, 1, 1)[..]);
    txn[21..23].copy_from_slice(&ferrite_engine::batch::ATTR_TRANSACTIONAL.to_be_bytes());
    set_producer(&mut txn, ferrite_engine::ProducerId(pid), 0, 1);
    // Without a transactional id: a transaction no coordinator knows would
    // hold back every read_committed consumer of the partition.
    assert_eq!(
        produce(&mut c, "txn-bare", txn.freeze()).0,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    assert_eq!(
        produce(&mut c, "txn-bare", batch(pid, 0, 1, 1)),
        (0, 1),
        "nothing was appended"
    );
}
