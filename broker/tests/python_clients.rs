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
    use ferrite_client::group::partitioner::Partitioner;
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

/// kafka-python's consumer fetches in incremental sessions (KIP-227): it
/// reads every record of 8 partitions written a few at a time, and after
/// leaving 4 of them only the other 4; the broker answered incremental
/// fetches (a broker without sessions answers id 0 and the client sends
/// full fetches only).
#[test]
fn kafka_python_reads_through_incremental_fetch_sessions() {
    let metrics_port = ferrite_testkit::free_port();
    let b = Broker::start(&[&format!("ferrite.metrics.listen=127.0.0.1:{metrics_port}")]);
    run_against(&b, "kafka-python-sessions");
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(("127.0.0.1", metrics_port)).expect("metrics");
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    c.read_to_string(&mut text).unwrap();
    let incremental: f64 = text
        .lines()
        .find(|l| l.starts_with("ferrite_fetch_incremental_total"))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0);
    assert!(incremental >= 20.0, "{incremental} incremental fetches");
}

#[test]
#[cfg(feature = "fault-injection")]
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
