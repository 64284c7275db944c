//! Consumer groups with real clients against `ferrite standalone` (the
//! script is `tests/python/groups.py`; `scripts/test.sh` installs the
//! clients and sets `FERRITE_PYTHON`). One group test at a time: each runs
//! three consumer processes and measures how fast a killed member's
//! partitions move.

mod common;

use std::process::Command;
use std::sync::Mutex;

use common::Broker;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn python(b: &Broker, args: &[&str]) {
    let python = std::env::var("FERRITE_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/groups.py");
    let out = Command::new(&python)
        .arg(script)
        .arg(b.bootstrap())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e} (run scripts/test.sh, or set FERRITE_PYTHON)"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{args:?}:\n{stdout}");
    assert!(
        out.status.success() && stdout.contains("all ok"),
        "{args:?} failed ({}):\n{stdout}\n{stderr}\n(needs confluent-kafka and kafka-python: run scripts/test.sh)",
        out.status
    );
}

/// Three members, one killed, every record consumed, offsets committed;
/// then the broker restarts and the committed offsets are still there.
fn three_members_then_restart(strategy: &str) {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut b = Broker::start(&[]);
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path().to_str().expect("utf-8 path").to_string();
    python(&b, &["members", strategy, &dir]);
    b.stop();
    b.spawn();
    let saved = format!("{dir}/committed.json");
    let group = format!("group-{strategy}");
    let topic = format!("groups-{strategy}");
    python(&b, &["committed", &group, &topic, &saved]);
}

#[test]
fn range_group_shares_partitions_survives_a_member_kill_and_a_restart() {
    three_members_then_restart("range");
}

#[test]
fn roundrobin_group_shares_partitions_survives_a_member_kill_and_a_restart() {
    three_members_then_restart("roundrobin");
}

#[test]
fn cooperative_sticky_group_shares_partitions_survives_a_member_kill_and_a_restart() {
    three_members_then_restart("cooperative-sticky");
}

#[test]
fn kafka_python_group_consumer_resumes_from_its_commit() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let b = Broker::start(&[]);
    python(&b, &["kafka-python-resume"]);
}

#[test]
fn a_static_member_restarted_within_its_session_causes_no_rebalance() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let b = Broker::start(&[]);
    let work = tempfile::tempdir().expect("tempdir");
    python(&b, &["static", work.path().to_str().expect("utf-8 path")]);
}
