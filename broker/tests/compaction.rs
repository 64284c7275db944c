//! A compacted topic through a real client: confluent-kafka produces many
//! values over few keys with each codec's batches, the broker's cleaner
//! compacts the topic, and a CRC-checking consumer reads each key's latest
//! record at the offset it was produced at (`tests/python/compaction.py`).

mod common;

use std::process::Command;

use common::Broker;

fn run(codec: &str) {
    let b = Broker::start(&["log.cleaner.backoff.ms=200"]);
    let python = std::env::var("FERRITE_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/compaction.py");
    let out = Command::new(&python)
        .arg(script)
        .arg(b.bootstrap())
        .arg(codec)
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e} (run scripts/test.sh, or set FERRITE_PYTHON)"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("all ok"),
        "compaction ({codec}) failed ({}):\n{stdout}\n{stderr}\nbroker log:\n{}",
        out.status,
        b.log_text()
    );
    assert!(
        b.log_text().contains("cleaned"),
        "the cleaner's pass is logged:\n{}",
        b.log_text()
    );
}

#[test]
fn confluent_kafka_reads_a_compacted_topic_uncompressed() {
    run("none");
}

#[test]
fn confluent_kafka_reads_a_compacted_topic_of_snappy_batches() {
    run("snappy");
}

#[test]
fn confluent_kafka_reads_a_compacted_topic_of_zstd_batches() {
    run("zstd");
}
