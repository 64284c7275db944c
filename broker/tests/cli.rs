//! `ferrite topics …` against a running broker.

mod common;

use std::process::Command;

use common::Broker;

fn topics(b: &Broker, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .arg("topics")
        .arg("--bootstrap")
        .arg(b.bootstrap())
        .args(args)
        .output()
        .expect("run ferrite topics");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn topics_are_created_described_altered_grown_and_deleted() {
    let b = Broker::start(&[]);
    let (ok, out) = topics(
        &b,
        &["create", "orders", "--partitions", "3", "--config", "retention.ms=5000"],
    );
    assert!(ok, "{out}");
    let (ok, out) = topics(&b, &["create", "orders"]);
    assert!(!ok && out.contains("TOPIC_ALREADY_EXISTS"), "{out}");
    let (ok, out) = topics(&b, &["create", "bad name"]);
    assert!(!ok && out.contains("INVALID_TOPIC_EXCEPTION"), "{out}");
    let (ok, out) = topics(&b, &["list"]);
    assert!(ok && out.contains("orders\t3 partition(s)"), "{out}");
    // As kafka-topics.sh is typed: the broker after the subcommand.
    let after = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(["topics", "list", "--bootstrap", &b.bootstrap()])
        .output()
        .expect("run ferrite topics");
    let said = String::from_utf8_lossy(&after.stdout);
    assert!(
        after.status.success() && said.contains("orders\t3 partition(s)"),
        "{said}"
    );
    let (ok, out) = topics(&b, &["describe", "orders"]);
    assert!(ok, "{out}");
    assert!(out.contains("Partition: 2\tLeader: 0\tReplicas: 0\tIsr: 0"), "{out}");
    assert!(out.contains("retention.ms=5000 (topic)"), "{out}");
    assert!(out.contains("segment.bytes=1073741824 (default)"), "{out}");
    let (ok, out) = topics(
        &b,
        &[
            "alter-config",
            "orders",
            "--set",
            "retention.ms=7000",
            "--set",
            "segment.bytes=1048576",
        ],
    );
    assert!(ok, "{out}");
    let (ok, out) = topics(&b, &["alter-config", "orders", "--set", "retention.ms=soon"]);
    assert!(!ok && out.contains("INVALID_CONFIG"), "{out}");
    let (_, out) = topics(&b, &["describe", "orders"]);
    assert!(
        out.contains("retention.ms=7000 (topic)") && out.contains("segment.bytes=1048576 (topic)"),
        "{out}"
    );
    let (ok, out) = topics(&b, &["alter-config", "orders", "--delete", "segment.bytes"]);
    assert!(ok, "{out}");
    let (_, out) = topics(&b, &["describe", "orders"]);
    assert!(out.contains("segment.bytes=1073741824 (default)"), "{out}");
    let (ok, out) = topics(&b, &["add-partitions", "orders", "--total", "5"]);
    assert!(ok, "{out}");
    let (_, out) = topics(&b, &["describe", "orders"]);
    assert!(out.contains("PartitionCount: 5"), "{out}");
    assert!(b.data_dir().join("orders-4").exists());
    let (ok, out) = topics(&b, &["delete", "orders"]);
    assert!(ok, "{out}");
    let (_, out) = topics(&b, &["list"]);
    assert!(!out.contains("orders"), "{out}");
    for p in 0..5 {
        assert!(
            !b.data_dir().join(format!("orders-{p}")).exists(),
            "partition {p} directory left behind"
        );
    }
    let (ok, out) = topics(&b, &["describe", "orders"]);
    assert!(!ok && out.contains("UNKNOWN_TOPIC_OR_PARTITION"), "{out}");
}
