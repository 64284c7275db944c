//! DeleteRecords: real clients' admin APIs (`tests/python/delete_records.py`)
//! and `ferrite topics delete-records` against `ferrite standalone`.

mod common;

use std::process::Command;

use common::{run_python_script, Broker};

#[test]
fn confluent_kafka_and_kafka_python_delete_records() {
    let b = Broker::start(&[]);
    run_python_script(&b, "delete_records.py", &[]);
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
