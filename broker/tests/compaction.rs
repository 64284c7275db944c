//! A compacted topic through a real client: confluent-kafka produces many
//! values over few keys with each codec's batches, the broker's cleaner
//! compacts the topic, and a CRC-checking consumer reads each key's latest
//! record at the offset it was produced at (`tests/python/compaction.py`).

mod common;

use common::{run_python_script, Broker};

fn run(codec: &str) {
    let b = Broker::start(&["log.cleaner.backoff.ms=200"]);
    run_python_script(&b, "compaction.py", &[codec]);
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
