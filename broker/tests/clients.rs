//! Real clients against `ferrite standalone`: kcat (librdkafka), and a
//! kill -9 in the middle of an acks=all produce run.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

use bytes::Bytes;
use common::{s, Broker, Client};
use ferrite_engine::batch::{build_batch, validate, Validation, HEADER_BYTES};
use ferrite_engine::record::decode_records;
use ferrite_engine::{Offset, TimestampMs};
use kafka_protocol::messages::{self as km, TopicName};

fn kcat(args: &[&str], stdin: Option<&[u8]>) -> Vec<u8> {
    let mut child = Command::new("kcat")
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat is installed (scripts/test.sh installs it)");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        let input = input.to_vec();
        std::thread::spawn(move || pipe.write_all(&input).unwrap());
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "kcat {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn kcat_lists_the_broker() {
    let b = Broker::start(&[]);
    let out = String::from_utf8(kcat(&["-b", &b.bootstrap(), "-L"], None)).unwrap();
    assert!(
        out.contains(&format!("broker 0 at 127.0.0.1:{} (controller)", b.port)),
        "{out}"
    );
}

#[test]
fn kcat_round_trips_a_million_records_with_keys_and_headers() {
    let b = Broker::start(&[]);
    let mut input = Vec::new();
    for i in 0..1_000_000u64 {
        writeln!(input, "key-{i}:value-{i}-{}", i.wrapping_mul(2_654_435_761) % 1_000_003).unwrap();
    }
    kcat(
        &[
            "-b",
            &b.bootstrap(),
            "-P",
            "-t",
            "auto-created",
            "-K:",
            "-H",
            "origin=test",
            "-H",
            "n=1",
        ],
        Some(&input),
    );
    let out = kcat(
        &[
            "-b",
            &b.bootstrap(),
            "-C",
            "-t",
            "auto-created",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%k:%s|%h\n",
        ],
        None,
    );
    let mut got = Vec::with_capacity(input.len());
    let mut lines = 0;
    for line in out.split(|c| *c == b'\n').filter(|l| !l.is_empty()) {
        let bar = line.iter().rposition(|c| *c == b'|').expect("headers");
        assert_eq!(&line[bar + 1..], b"origin=test,n=1", "headers of line {lines}");
        got.extend_from_slice(&line[..bar]);
        got.push(b'\n');
        lines += 1;
    }
    assert_eq!(lines, 1_000_000);
    assert!(got == input, "consumed records differ from produced ones");
}

fn produce_request(topic: &str, records: Bytes) -> km::ProduceRequest {
    km::ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![km::produce_request::TopicProduceData::default()
            .with_name(TopicName(s(topic)))
            .with_partition_data(vec![km::produce_request::PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])])
}

/// A Fetch of one partition from `offset`, waiting up to `max_wait_ms`
/// for at least one byte.
fn fetch_request(topic: &str, partition: i32, offset: i64, max_wait_ms: i32) -> km::FetchRequest {
    km::FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![km::fetch_request::FetchTopic::default()
            .with_topic(TopicName(s(topic)))
            .with_partitions(vec![km::fetch_request::FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])])
}

/// Reads the whole partition back as offset → value.
fn read_back(c: &mut Client, topic: &str) -> BTreeMap<i64, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut offset = 0i64;
    loop {
        let r = c.call(&fetch_request(topic, 0, offset, 0), 12);
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0);
        let records = p.records.clone().unwrap_or_default();
        if records.is_empty() {
            assert_eq!(offset, p.high_watermark, "stopped before the end");
            return out;
        }
        let mut at = 0;
        while at < records.len() {
            let info = validate(&records[at..], 1 << 20, Validation::Stored).expect("every batch read back is valid");
            let batch = &records[at..at + info.size];
            for r in decode_records(&batch[HEADER_BYTES..], info.record_count).unwrap() {
                out.insert(
                    info.base_offset.0 + i64::from(r.offset_delta),
                    r.value.unwrap_or_default().to_vec(),
                );
            }
            offset = info.next_offset().0;
            at += info.size;
        }
    }
}

#[test]
fn kill9_during_an_acks_all_run_loses_nothing_acknowledged() {
    let mut b = Broker::start(&[]);
    let mut c = Client::connect(b.addr());
    let mut acked: BTreeMap<i64, Vec<u8>> = BTreeMap::new();
    let pipeline = 8;
    let mut sent = 0u64;
    let mut killed = false;
    // Pipelined produce; kill -9 once 3000 batches are acknowledged, with
    // requests still in flight.
    let mut inflight: std::collections::VecDeque<Vec<Vec<u8>>> = Default::default();
    while !killed {
        while inflight.len() < pipeline {
            let values: Vec<Vec<u8>> = (0..4).map(|j| format!("v-{sent}-{j}").into_bytes()).collect();
            let refs: Vec<&[u8]> = values.iter().map(|v| v.as_slice()).collect();
            c.send(
                &produce_request("durable", Bytes::from(build_batch(Offset(0), TimestampMs(0), &refs))),
                9,
            );
            inflight.push_back(values);
            sent += 1;
        }
        let r = c.response::<km::ProduceRequest>(9).expect("ack");
        let p = &r.responses[0].partition_responses[0];
        let values = inflight.pop_front().unwrap();
        if p.error_code == 0 {
            for (j, v) in values.into_iter().enumerate() {
                acked.insert(p.base_offset + j as i64, v);
            }
        }
        if acked.len() >= 12_000 {
            b.kill9();
            killed = true;
        }
    }
    b.spawn();
    let mut c = Client::connect(b.addr());
    let stored = read_back(&mut c, "durable");
    for (offset, value) in &acked {
        assert_eq!(stored.get(offset), Some(value), "acknowledged record at {offset} lost");
    }
}

#[test]
fn records_survive_a_clean_restart() {
    let b = Broker::start(&[]);
    let mut c = Client::connect(b.addr());
    for i in 0..50 {
        let v = format!("v{i}");
        let r = c.call(
            &produce_request(
                "d",
                Bytes::from(build_batch(Offset(0), TimestampMs(0), &[v.as_bytes()])),
            ),
            9,
        );
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    }
    let got = read_back(&mut c, "d");
    assert_eq!(got.len(), 50);
    let mut b = b;
    b.stop();
    assert!(b.log_text().contains("stopped"), "no clean stop: {}", b.log_text());
    b.spawn();
    let mut c = Client::connect(b.addr());
    let got = read_back(&mut c, "d");
    assert_eq!(got.len(), 50);
}

/// A long-polling fetch (30 s wait, one byte minimum) is answered when
/// records reach its partition, not at its deadline. Eight partitions on a
/// two-shard broker, each fetched on its own connection, so both the
/// signalled wait (fetch on the partition's own shard) and the polled one
/// (another shard's partition) are exercised.
#[test]
fn a_long_polling_fetch_is_answered_when_records_arrive() {
    let b = Broker::start(&[]);
    let mut admin = Client::connect(b.addr());
    let create = km::CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![km::create_topics_request::CreatableTopic::default()
            .with_name(TopicName(s("poll")))
            .with_num_partitions(8)
            .with_replication_factor(1)]);
    assert_eq!(admin.call(&create, 7).topics[0].error_code, 0);
    for partition in 0..8 {
        let mut fetcher = Client::connect(b.addr());
        fetcher.send(&fetch_request("poll", partition, 0, 30_000), 12);
        // Let the fetch reach its wait before the records come.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let started = std::time::Instant::now();
        let mut produce = produce_request("poll", Bytes::from(build_batch(Offset(0), TimestampMs(0), &[b"wake"])));
        produce.topic_data[0].partition_data[0].index = partition;
        let r = admin.call(&produce, 9);
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
        let answer = fetcher.response::<km::FetchRequest>(12).expect("fetch answered");
        let waited = started.elapsed();
        let p = &answer.responses[0].partitions[0];
        assert_eq!(p.error_code, 0);
        assert!(
            p.records.as_ref().is_some_and(|r| !r.is_empty()),
            "partition {partition}: answered without the records"
        );
        // The deadline is 30 s away; being woken takes milliseconds. The
        // bound is loose so a busy machine cannot fail it.
        assert!(
            waited < std::time::Duration::from_secs(10),
            "partition {partition}: answered after {waited:?}, at its deadline rather than on the append"
        );
    }
}

/// Many requests of different kinds pipelined on one connection — acks=1
/// and acks=0 produces (the latter get no answer), fetches served from the
/// segment files by sendfile (after a restart the cache is empty) and
/// metadata — are answered in request order, each whole, although answers
/// that are ready together leave in one send.
#[test]
fn pipelined_mixed_requests_are_answered_in_order() {
    let mut b = Broker::start(&[]);
    let mut c = Client::connect(b.addr());
    for i in 0..20 {
        let v = format!("stored-{i}");
        let batch = Bytes::from(build_batch(Offset(0), TimestampMs(0), &[v.as_bytes()]));
        let r = c.call(&produce_request("mixed", batch), 9);
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    }
    b.stop();
    b.spawn();
    let mut c = Client::connect(b.addr());
    let produce = |i: usize, acks: i16| {
        let v = format!("piped-{i}");
        produce_request(
            "mixed",
            Bytes::from(build_batch(Offset(0), TimestampMs(0), &[v.as_bytes()])),
        )
        .with_acks(acks)
    };
    // Everything goes out before any answer is read.
    let mut expected = Vec::new();
    for i in 0..60 {
        match i % 4 {
            0 => {
                c.send(&produce(i, 1), 9);
                expected.push("produce");
            }
            1 => {
                c.send(&fetch_request("mixed", 0, (i % 20) as i64, 0), 12);
                expected.push("fetch");
            }
            2 => {
                // acks=0: no answer, so nothing is awaited for it.
                let f = c.frame(&produce(i, 0), 9);
                c.send_raw(&f).expect("send");
            }
            _ => {
                c.send(&km::MetadataRequest::default().with_topics(None), 9);
                expected.push("metadata");
            }
        }
    }
    for (n, kind) in expected.iter().enumerate() {
        match *kind {
            "produce" => {
                let r = c.response::<km::ProduceRequest>(9).expect("produce answer");
                assert_eq!(r.responses[0].partition_responses[0].error_code, 0, "answer {n}");
            }
            "fetch" => {
                let r = c.response::<km::FetchRequest>(12).expect("fetch answer");
                let p = &r.responses[0].partitions[0];
                assert_eq!(p.error_code, 0, "answer {n}");
                let records = p.records.clone().unwrap_or_default();
                let info = validate(&records, 1 << 20, Validation::Stored).expect("a whole batch");
                let batch = &records[..info.size];
                let first = decode_records(&batch[HEADER_BYTES..], info.record_count).unwrap();
                let value = first[0].value.unwrap_or_default();
                assert!(value.starts_with(b"stored-"), "answer {n}: {value:?}");
            }
            _ => {
                let r = c.response::<km::MetadataRequest>(9).expect("metadata answer");
                assert!(r
                    .topics
                    .iter()
                    .any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "mixed")));
            }
        }
    }
    // 20 stored, 15 acks=1 and 15 acks=0 produced while pipelining.
    let got = read_back(&mut c, "mixed");
    assert_eq!(got.len(), 50);
}
