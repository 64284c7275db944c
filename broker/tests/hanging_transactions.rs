//! A hanging transaction — open on a partition while its coordinator does
//! not know it — holds the partition's last stable offset, and with it
//! every `read_committed` consumer, until someone ends it: `ferrite
//! transactions producers` finds it (DescribeProducers) and `ferrite
//! transactions abort` ends it with an ABORT marker (WriteTxnMarkers), as
//! `kafka-transactions.sh` does. KIP-890's verification keeps them from
//! forming: a transaction's first write to a partition the coordinator was
//! not told of is refused (INVALID_TXN_STATE), as is a late write after
//! the transaction ended. With it turned off
//! (`transaction.partition.verification.enable=false`) a producer that
//! skips AddPartitionsToTxn leaves one, and the tools end it.

mod common;

use std::process::Command;

use bytes::{Bytes, BytesMut};
use common::{s, Broker, Client};
use ferrite_engine::batch::{build_batch, set_producer, ATTR_TRANSACTIONAL};
use ferrite_engine::{Offset, ProducerId, TimestampMs};
use kafka_protocol::messages::{self as km, TopicName};

fn cli(b: &Broker, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .arg("transactions")
        .args(args)
        .args(["--bootstrap", &b.bootstrap()])
        .output()
        .expect("ferrite");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn produce(c: &mut Client, records: Bytes, transactional_id: Option<&str>) -> (i16, i64) {
    let req = km::ProduceRequest::default()
        .with_transactional_id(transactional_id.map(|t| km::TransactionalId(s(t))))
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![km::produce_request::TopicProduceData::default()
            .with_name(TopicName(s("hang")))
            .with_partition_data(vec![km::produce_request::PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let r = c.call(&req, 9);
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

fn batch(pid: i64, epoch: i16, seq: i32, transactional: bool) -> Bytes {
    let mut b = BytesMut::from(&build_batch(Offset(0), TimestampMs(1_700_000_000_000), &[b"v"])[..]);
    if transactional {
        b[21..23].copy_from_slice(&ATTR_TRANSACTIONAL.to_be_bytes());
    }
    set_producer(&mut b, ProducerId(pid), epoch, seq);
    b.freeze()
}

/// ListOffsets latest of hang-0 at an isolation level (1: read_committed).
fn latest(c: &mut Client, isolation: i8) -> i64 {
    let req = km::ListOffsetsRequest::default()
        .with_replica_id(km::BrokerId(-1))
        .with_isolation_level(isolation)
        .with_topics(vec![km::list_offsets_request::ListOffsetsTopic::default()
            .with_name(TopicName(s("hang")))
            .with_partitions(vec![km::list_offsets_request::ListOffsetsPartition::default(
            )
            .with_partition_index(0)
            .with_timestamp(-1)])]);
    let r = c.call(&req, 5);
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

/// InitProducerId for a transactional id: (producer id, epoch).
fn init(c: &mut Client, id: &str) -> (i64, i16) {
    let init = c.call(
        &km::InitProducerIdRequest::default()
            .with_transactional_id(Some(km::TransactionalId(s(id))))
            .with_transaction_timeout_ms(60_000),
        4,
    );
    assert_eq!(init.error_code, 0);
    (init.producer_id.0, init.producer_epoch)
}

const INVALID_TXN_STATE: i16 = 48;

#[test]
fn a_write_the_coordinator_was_not_told_of_is_refused() {
    let b = Broker::start(&[]);
    let mut c = Client::connect(b.addr());
    let (pid, epoch) = init(&mut c, "verified");
    assert_eq!(produce(&mut c, batch(-1, -1, -1, false), None), (0, 0));
    let (code, _) = produce(&mut c, batch(pid, epoch, 0, true), Some("verified"));
    assert_eq!(code, INVALID_TXN_STATE, "no AddPartitionsToTxn: refused");
    assert_eq!(
        latest(&mut c, 1),
        1,
        "nothing opened: the last stable offset is the log end"
    );

    // Told: the write passes, and the transaction commits.
    let add = c.call(
        &km::AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(km::TransactionalId(s("verified")))
            .with_v3_and_below_producer_id(km::ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![
                km::add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(s("hang")))
                    .with_partitions(vec![0]),
            ]),
        3,
    );
    let added = &add.results_by_topic_v3_and_below[0].results_by_partition[0];
    assert_eq!(added.partition_error_code, 0);
    // What a leader asks (AddPartitionsToTxn v4, verify_only): partition 0
    // is in the transaction, 1 is not.
    let asked = c.call(
        &km::AddPartitionsToTxnRequest::default().with_transactions(vec![
            km::add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
                .with_transactional_id(km::TransactionalId(s("verified")))
                .with_producer_id(km::ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_verify_only(true)
                .with_topics(vec![
                    km::add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(s("hang")))
                        .with_partitions(vec![0, 1]),
                ]),
        ]),
        4,
    );
    assert_eq!(asked.error_code, 0);
    let codes: Vec<(i32, i16)> = asked.results_by_transaction[0].topic_results[0]
        .results_by_partition
        .iter()
        .map(|p| (p.partition_index, p.partition_error_code))
        .collect();
    assert_eq!(codes, vec![(0, 0), (1, INVALID_TXN_STATE)]);
    assert_eq!(produce(&mut c, batch(pid, epoch, 0, true), Some("verified")), (0, 1));
    assert_eq!(
        produce(&mut c, batch(pid, epoch, 1, true), Some("verified")),
        (0, 2),
        "open: no asking"
    );
    assert_eq!(latest(&mut c, 1), 1, "open");
    let end = c.call(
        &km::EndTxnRequest::default()
            .with_transactional_id(km::TransactionalId(s("verified")))
            .with_producer_id(km::ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(true),
        3,
    );
    assert_eq!(end.error_code, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while latest(&mut c, 1) != 4 {
        assert!(std::time::Instant::now() < deadline, "the commit marker never landed");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // A late write of the ended transaction (a retry, a zombie of the
    // same epoch) would open a transaction nothing ends: refused.
    // While the coordinator still completes the commit the answer is the
    // retriable NOT_ENOUGH_REPLICAS (a client retries).
    const NOT_ENOUGH_REPLICAS: i16 = 19;
    let late = loop {
        let (code, _) = produce(&mut c, batch(pid, epoch, 2, true), Some("verified"));
        if code != NOT_ENOUGH_REPLICAS || std::time::Instant::now() > deadline {
            break code;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(late, INVALID_TXN_STATE, "after the commit");
    assert_eq!(latest(&mut c, 1), latest(&mut c, 0), "nothing left open");
}

#[test]
fn a_hanging_transaction_is_found_and_aborted_by_hand() {
    let b = Broker::start(&["transaction.partition.verification.enable=false"]);
    let mut c = Client::connect(b.addr());
    let (pid, epoch) = init(&mut c, "hanger");
    assert_eq!(produce(&mut c, batch(-1, -1, -1, false), None), (0, 0));
    // No AddPartitionsToTxn: the coordinator never hears of this partition.
    assert_eq!(produce(&mut c, batch(pid, epoch, 0, true), Some("hanger")), (0, 1));
    assert_eq!(produce(&mut c, batch(-1, -1, -1, false), None), (0, 2));
    assert_eq!(latest(&mut c, 0), 3);
    assert_eq!(
        latest(&mut c, 1),
        1,
        "the open transaction holds the last stable offset"
    );

    let (ok, shown) = cli(&b, &["producers", "--topic", "hang", "--partition", "0"]);
    assert!(ok, "{shown}");
    let row = shown
        .lines()
        .find(|l| l.starts_with(&format!("{pid}\t")))
        .unwrap_or_else(|| panic!("producer {pid} listed: {shown}"));
    assert!(row.ends_with("\t1"), "its transaction starts at 1: {row}");

    let (ok, said) = cli(
        &b,
        &["abort", "--topic", "hang", "--partition", "0", "--start-offset", "2"],
    );
    assert!(!ok, "no transaction starts at 2: {said}");
    assert!(said.contains("no open transaction starts at offset 2"), "{said}");
    assert_eq!(latest(&mut c, 1), 1, "nothing written");

    let (ok, said) = cli(
        &b,
        &["abort", "--topic", "hang", "--partition", "0", "--start-offset", "1"],
    );
    assert!(ok, "{said}");
    assert!(said.contains(&format!("producer {pid}")), "{said}");
    assert_eq!(latest(&mut c, 1), 4, "the marker at 3 ends it: the LSO is the log end");
    let (_, shown) = cli(&b, &["producers", "--topic", "hang", "--partition", "0"]);
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with(&format!("{pid}\t")) && l.ends_with("\t-1")),
        "no transaction open any more: {shown}"
    );
}
