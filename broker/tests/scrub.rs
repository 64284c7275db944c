//! The scrubber in a running standalone broker: a byte changed in a closed
//! segment is found within the interval, the damaged range is refused with
//! KAFKA_STORAGE_ERROR, and a CRC-checking consumer (confluent-kafka with
//! `check.crcs=true`) never receives a record from it.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{s, segment_files, Broker, Client};
use ferrite_engine::batch::build_batch;
use ferrite_engine::{Offset, TimestampMs};
use ferrite_testkit::free_port;
use kafka_protocol::messages::{self as km, TopicName};

const TOPIC: &str = "scrubbed";
const KAFKA_STORAGE_ERROR: i16 = 56;

fn produce(c: &mut Client, count: u32) {
    for i in 0..count {
        let value = format!("record-{i:05}-").repeat(4_000);
        let batch = Bytes::from(build_batch(Offset(0), TimestampMs(0), &[value.as_bytes()]));
        let req = km::ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![km::produce_request::TopicProduceData::default()
                .with_name(TopicName(s(TOPIC)))
                .with_partition_data(vec![km::produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch))])]);
        assert_eq!(c.call(&req, 9).responses[0].partition_responses[0].error_code, 0);
    }
}

/// The error code and record bytes of a fetch at `offset`.
fn fetch(c: &mut Client, offset: i64) -> (i16, Bytes) {
    let req =
        km::FetchRequest::default()
            .with_max_bytes(1 << 20)
            .with_topics(vec![km::fetch_request::FetchTopic::default()
                .with_topic(TopicName(s(TOPIC)))
                .with_partitions(vec![km::fetch_request::FetchPartition::default()
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1 << 20)])]);
    let r = c.call(&req, 12);
    let p = &r.responses[0].partitions[0];
    (p.error_code, p.records.clone().unwrap_or_default())
}

/// Base offsets of the batches in `records`, with the offset after the last.
fn offsets(records: &[u8]) -> (Vec<i64>, i64) {
    let mut at = 0;
    let mut bases = Vec::new();
    let mut next = 0;
    while at < records.len() {
        let info = ferrite_engine::batch::peek(&records[at..]).expect("batch");
        bases.push(info.base_offset.0);
        next = info.next_offset().0;
        at += info.size as usize;
    }
    (bases, next)
}

fn base_of(file: &Path) -> i64 {
    file.file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .expect("segment name")
}

fn scrape(port: u16) -> String {
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("metrics port");
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("request");
    let mut out = String::new();
    c.read_to_string(&mut out).expect("response");
    out
}

fn damage_found(text: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with("ferrite_scrub_damage_found_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn damage_in_a_closed_segment_is_found_refused_and_never_consumed() {
    let metrics_port = free_port();
    let b = Broker::start(&[
        "log.segment.bytes=262144",
        "ferrite.scrub.interval.ms=100",
        &format!("ferrite.metrics.listen=127.0.0.1:{metrics_port}"),
    ]);
    let mut c = Client::connect(b.addr());
    produce(&mut c, 60);
    let files = segment_files(&b.data_dir().join(format!("{TOPIC}-0")));
    assert!(files.len() >= 4, "{files:?}");
    // A record byte of the second segment's second batch.
    let victim = &files[1];
    let (damaged_from, damaged_to) = (base_of(victim) + 1, base_of(&files[2]));
    let bytes = std::fs::read(victim).expect("segment");
    let first = ferrite_engine::batch::peek(&bytes).expect("first batch");
    let at = first.size as u64 + 1_000;
    let f = std::fs::OpenOptions::new().write(true).open(victim).expect("open");
    f.write_all_at(&[bytes[at as usize] ^ 0x20], at).expect("flip");
    f.sync_all().expect("sync");
    drop(f);

    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (error, _) = fetch(&mut c, damaged_from);
        if error == KAFKA_STORAGE_ERROR {
            break;
        }
        assert_eq!(error, 0);
        assert!(Instant::now() < deadline, "the damage was not found");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The whole rest of the segment is refused; reads from below stop
    // before it; the next segment is served.
    assert_eq!(fetch(&mut c, damaged_to - 1).0, KAFKA_STORAGE_ERROR);
    let mut at = 0;
    while at < damaged_from {
        let (error, records) = fetch(&mut c, at);
        assert_eq!(error, 0);
        let (_, next) = offsets(&records);
        assert!(next > at && next <= damaged_from, "{at}..{next}");
        at = next;
    }
    let (error, records) = fetch(&mut c, damaged_to);
    assert_eq!(error, 0);
    assert_eq!(offsets(&records).0.first(), Some(&damaged_to));

    // A consumer that checks CRCs gets everything below the damage intact,
    // nothing from it, and is not handed the damaged bytes.
    let python = std::env::var("FERRITE_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/scrub.py");
    let out = Command::new(&python)
        .args([script, &b.bootstrap(), TOPIC, "6"])
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e} (run scripts/test.sh, or set FERRITE_PYTHON)"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let received: Vec<i64> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("OFFSET "))
        .map(|o| o.parse().expect("offset"))
        .collect();
    assert_eq!(received, (0..damaged_from).collect::<Vec<_>>(), "{stdout}\n{stderr}");
    assert!(!stdout.contains("CORRUPT"), "{stdout}");

    let deadline = Instant::now() + Duration::from_secs(15);
    while damage_found(&scrape(metrics_port)) < 1.0 {
        assert!(Instant::now() < deadline, "ferrite_scrub_damage_found_total stayed 0");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(b.log_text().contains("scrub found damage"), "{}", b.log_text());
}
