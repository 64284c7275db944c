//! A short fault suite, as CI runs it: each run is the `ferrite-chaos`
//! binary in a network namespace of its own (root), against the `ferrite`
//! binary of this build. Each must end safe — nothing acknowledged lost,
//! nothing doubled, replicas identical — with the clients served around
//! the fault.

use std::process::Command;

/// One run at a time: each starts three ZooKeeper servers and three
/// brokers.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run(fault: &str, extra: &[&str]) -> serde_json::Value {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let ferrite = std::path::Path::new(env!("CARGO_BIN_EXE_ferrite-chaos")).with_file_name("ferrite");
    assert!(
        ferrite.exists(),
        "{} is missing: build the workspace (`cargo test --workspace` does)",
        ferrite.display()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_ferrite-chaos"))
        .args([
            "run",
            "--fault",
            fault,
            "--seconds",
            "8",
            "--recovery-seconds",
            "8",
            "--seed",
            "7",
        ])
        .args(extra)
        .arg("--ferrite")
        .arg(&ferrite)
        .output()
        .expect("run ferrite-chaos");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(0),
        "ferrite-chaos run --fault {fault} exited with {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status.code()
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("report: {e}\n{stdout}"))
}

/// Every producer had acknowledged produces, and some while the fault held.
fn assert_served(report: &serde_json::Value, during_fault: bool) {
    assert!(report["acked"].as_u64().unwrap_or(0) > 100, "{report:#}");
    if during_fault {
        let per_client = report["ok_during_fault"].as_object().expect("ok_during_fault");
        for (client, ok) in per_client {
            assert!(
                ok.as_u64().unwrap_or(0) > 0,
                "producer {client} had nothing acknowledged during the fault: {report:#}"
            );
        }
    }
    assert!(
        report["recovery_ms"].as_u64().is_some(),
        "a producer never recovered: {report:#}"
    );
}

#[test]
fn killing_the_leader_loses_nothing_acknowledged() {
    let report = run("kill-leader", &[]);
    assert_served(&report, true);
}

#[test]
fn isolating_the_leader_loses_nothing_acknowledged() {
    let report = run("isolate-leader", &[]);
    assert_served(&report, false);
}
