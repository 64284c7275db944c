//! A short fault suite, as CI runs it: each run is the `ferrite-chaos`
//! binary in a network namespace of its own (root), against the `ferrite`
//! binary of this build. Each must end safe — nothing acknowledged lost,
//! nothing doubled, replicas identical — with the clients served around
//! the fault.

use std::process::Command;

/// One run at a time: each starts three ZooKeeper servers and three
/// brokers.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `fault` (8 s, 8 s of recovery, seed 7) and returns its report and
/// exit status.
fn run_any(fault: &str, extra: &[&str]) -> (serde_json::Value, Option<i32>) {
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
    let report = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "--fault {fault}: no report ({e}); exit {:?}\nstderr:\n{stderr}",
            out.status.code()
        )
    });
    (report, out.status.code())
}

/// Runs `fault`, which must end safe.
fn run(fault: &str, extra: &[&str]) -> serde_json::Value {
    let (report, code) = run_any(fault, extra);
    assert_eq!(code, Some(0), "--fault {fault} was not safe: {report:#}");
    report
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

/// The leader's replica rots in a closed segment: its scrubber finds it,
/// leadership moves, and the old leader fetches the range again (the run
/// compares every replica's bytes below the HW at the end).
#[test]
fn bit_rot_in_the_leaders_replica_is_healed_and_loses_nothing() {
    let report = run("rot-leader", &[]);
    assert_served(&report, true);
}

/// The leader's disk fills up: it hands leadership over (its logs refuse
/// writes), and once freed and restarted it catches up.
#[test]
fn a_full_disk_on_the_leader_loses_nothing() {
    let report = run("fill-leader-disk", &[]);
    assert_served(&report, true);
}

/// The leader's wall clock steps an hour back and a follower's a day
/// ahead, then the other way round: each broker logs the step (the run
/// fails otherwise), and nothing acknowledged is lost.
#[test]
fn stepped_wall_clocks_lose_nothing() {
    let report = run("skew-clocks", &[]);
    assert_served(&report, true);
}

/// Also the group with members: each member read and had commits
/// acknowledged (the checker has read their commits per group).
#[test]
fn killing_the_leader_loses_nothing_acknowledged() {
    let report = run("kill-leader", &[]);
    assert_served(&report, true);
    let members = report["members"].as_object().expect("members");
    assert_eq!(members.len(), 2, "{report:#}");
    for (client, m) in members {
        assert!(
            m["reads"].as_u64().unwrap_or(0) > 0,
            "member {client} read nothing: {report:#}"
        );
        assert!(
            m["commits_ok"].as_u64().unwrap_or(0) > 0,
            "member {client} had no commit acknowledged: {report:#}"
        );
    }
}

#[test]
fn isolating_the_leader_loses_nothing_acknowledged() {
    let report = run("isolate-leader", &[]);
    assert_served(&report, false);
}

/// The negative control: with unclean election on, bringing back only a
/// replica that had left the ISR loses acknowledged records, and the
/// checker must say so.
#[test]
fn unclean_election_after_losing_the_isr_is_reported_as_loss() {
    let (report, code) = run_any("lose-isr", &["--unclean"]);
    assert_eq!(code, Some(1), "the run should not be safe: {report:#}");
    let lost = report["anomalies"]["lost"].as_array().map_or(0, Vec::len);
    assert!(lost > 0, "no acknowledged record reported lost: {report:#}");
}
