//! confluent-kafka and kafka-python against `ferrite standalone` (the
//! script is `tests/python/clients.py`). `scripts/test.sh` installs both
//! into a virtualenv and points `FERRITE_PYTHON` at its interpreter.

mod common;

use std::process::Command;

use common::Broker;

fn run(which: &str) {
    run_against(&Broker::start(&[]), which);
}

#[test]
fn ferrite_partitioner_puts_keys_where_the_java_compatible_one_does() {
    use ferrite_broker::client::group::partitioner::Partitioner;
    let out = run_against(&Broker::start(&[]), "partitioner");
    let mut ours = Partitioner::new();
    let mut checked = 0;
    for line in out.lines().filter(|l| l.starts_with("KEY ")) {
        let mut parts = line.split(' ').skip(1);
        let (key, partition) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let theirs: i32 = partition.parse().expect("partition");
        assert_eq!(
            ours.partition("keyed", Some(key.as_bytes()), None, 7),
            theirs,
            "key {key}"
        );
        checked += 1;
    }
    assert_eq!(checked, 200);
}

fn run_against(b: &Broker, which: &str) -> String {
    let python = std::env::var("FERRITE_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/clients.py");
    let out = Command::new(&python)
        .arg(script)
        .arg(b.bootstrap())
        .arg(which)
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e} (run scripts/test.sh, or set FERRITE_PYTHON)"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("all ok"),
        "{which} failed ({}):\n{stdout}\n{stderr}\n(needs confluent-kafka and kafka-python: run scripts/test.sh)",
        out.status
    );
    stdout.into_owned()
}

#[test]
fn confluent_kafka_round_trips_every_ack_mode_and_codec() {
    run("confluent");
}

#[test]
fn kafka_python_round_trips() {
    run("kafka-python");
}

#[test]
fn confluent_kafka_idempotent_producer_survives_lost_answers_without_duplicates() {
    // Every 7th produce is appended but its answer lost (the connection
    // closes): the producer retries, the broker deduplicates.
    let b = Broker::start(&["ferrite.fault.produce.drop.response.every=7"]);
    run_against(&b, "idempotent");
    let dropped = b.log_text().matches("answer dropped").count();
    assert!(
        dropped >= 5,
        "only {dropped} answers were dropped: the fault was not exercised"
    );
}
