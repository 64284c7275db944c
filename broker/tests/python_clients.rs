//! confluent-kafka and kafka-python against `ferrite standalone` (the
//! script is `tests/python/clients.py`). `scripts/test.sh` installs both
//! into a virtualenv and points `FERRITE_PYTHON` at its interpreter.

mod common;

use std::process::Command;

use common::Broker;

fn run(which: &str) {
    let b = Broker::start(&[]);
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
}

#[test]
fn confluent_kafka_round_trips_every_ack_mode_and_codec() {
    run("confluent");
}

#[test]
fn kafka_python_round_trips() {
    run("kafka-python");
}
