//! DeleteRecords: real clients' admin APIs (`tests/python/delete_records.py`)
//! and `ferrite topics delete-records` against `ferrite standalone`.

mod common;

use std::process::Command;

use common::Broker;

fn python(b: &Broker, script: &str) -> String {
    let python = std::env::var("FERRITE_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&python)
        .arg(script)
        .arg(b.bootstrap())
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e} (run scripts/test.sh, or set FERRITE_PYTHON)"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("all ok"),
        "{script} failed ({}):\n{stdout}\n{}\nbroker log:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        b.log_text()
    );
    stdout.into_owned()
}

#[test]
fn confluent_kafka_and_kafka_python_delete_records() {
    let b = Broker::start(&[]);
    python(
        &b,
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/delete_records.py"),
    );
}

#[test]
fn the_cli_deletes_records_of_every_partition_or_one() {
    let b = Broker::start(&[]);
    let ferrite = env!("CARGO_BIN_EXE_ferrite");
    let cli = |args: &[&str]| {
        let out = Command::new(ferrite)
            .args(["topics", "--bootstrap", &b.bootstrap()])
            .args(args)
            .output()
            .expect("ferrite");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
        )
    };
    assert!(cli(&["create", "cli-dr", "--partitions", "3"]).0);
    let (ok, text) = cli(&["delete-records", "cli-dr", "--offset", "0"]);
    assert!(ok, "{text}");
    assert_eq!(text.matches("log start now 0").count(), 3, "{text}");
    let (ok, text) = cli(&["delete-records", "cli-dr", "--partition", "1", "--offset", "5"]);
    assert!(!ok, "past the high watermark of an empty partition: {text}");
    assert!(text.contains("OFFSET_OUT_OF_RANGE"), "{text}");
    let (ok, text) = cli(&["delete-records", "cli-dr", "--partition", "1", "--offset", "-1"]);
    assert!(ok && text.contains("cli-dr-1: log start now 0"), "{text}");
}
