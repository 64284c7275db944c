//! What Kafka's admin clients send, from confluent-kafka's AdminClient
//! (`tests/python/admin.py`) against `ferrite standalone`.

mod common;

use std::process::Command;

use common::Broker;

fn run(b: &Broker, mode: &str) -> String {
    let python = std::env::var("FERRITE_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/admin.py");
    let out = Command::new(&python)
        .arg(script)
        .arg(b.bootstrap())
        .arg(mode)
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e} (run scripts/test.sh, or set FERRITE_PYTHON)"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("all ok"),
        "{mode} failed ({}):\n{stdout}\n{stderr}\n(needs confluent-kafka: run scripts/test.sh)",
        out.status
    );
    stdout.into_owned()
}

#[test]
fn list_offsets_max_timestamp_answers_the_record_not_its_batch() {
    run(&Broker::start(&[]), "max-timestamp");
}

#[test]
fn topic_configs_are_described_altered_and_appended_to_as_kafka_does() {
    run(&Broker::start(&[]), "configs");
}

#[test]
fn topics_and_partitions_are_placed_as_their_replica_assignment_lists() {
    run(&Broker::start(&[]), "assignment");
}
