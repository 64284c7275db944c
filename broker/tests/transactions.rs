//! Transactions through confluent-kafka (librdkafka) against a real
//! `ferrite` process (`tests/python/transactions.py`): commit, abort and an
//! open transaction as read_committed and read_uncommitted consumers see
//! them; a second instance fencing the first; the coordinator aborting a
//! transaction past its timeout; and a consume-transform-produce copy that
//! stays exactly-once through kill -9 of the producer (five times, at
//! random points) and of the broker (the coordinator) while it copies.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use common::{run_python_script, Broker};

/// Records the copy test moves from "in" to "out".
const COPIED: usize = 20_000;

fn broker() -> Broker {
    Broker::start(&["transaction.abort.timed.out.transaction.cleanup.interval.ms=500"])
}

/// `ferrite transactions ARGS...`' standard output (it must succeed).
fn cli(b: &Broker, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .arg("transactions")
        .args(args)
        .args(["--bootstrap", &b.bootstrap()])
        .output()
        .expect("ferrite");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "ferrite transactions {args:?}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn read_committed_sees_committed_transactions_and_read_uncommitted_all() {
    let b = broker();
    run_python_script(&b, "transactions.py", &["basic"]);
    // The id the script used, as `ferrite transactions` lists it.
    let listed = cli(&b, &["list"]);
    let line = listed
        .lines()
        .find(|l| l.starts_with("tx-basic-"))
        .unwrap_or_else(|| panic!("not listed:\n{listed}"));
    assert!(line.ends_with("CompleteCommit"), "{line}");
    let id = line.split('\t').next().unwrap_or_default();
    let described = cli(&b, &["describe", id]);
    assert!(described.contains("state: CompleteCommit"), "{described}");
    assert!(described.contains("producer id: "), "{described}");
    let ongoing = cli(&b, &["list", "--state", "Ongoing"]);
    assert!(!ongoing.contains("tx-basic-"), "{ongoing}");
}

/// A transaction's offset commit against a plain commit of the same
/// partition made while it was open: the one written later wins, live and
/// as replayed after a kill -9.
#[test]
fn a_plain_commit_after_a_transactions_offset_commit_stands() {
    let mut b = broker();
    run_python_script(&b, "transactions.py", &["offsets_order", "write"]);
    b.kill9();
    b.spawn();
    run_python_script(&b, "transactions.py", &["offsets_order", "check"]);
}

#[test]
fn kafka_pythons_transactional_producer_commits_and_aborts() {
    let b = broker();
    run_python_script(&b, "transactions.py", &["kafka_python"]);
}

#[test]
fn a_second_producer_with_the_same_transactional_id_fences_the_first() {
    let b = broker();
    run_python_script(&b, "transactions.py", &["zombie"]);
}

#[test]
fn a_transaction_past_its_timeout_is_aborted_and_the_lso_moves_on() {
    let b = broker();
    run_python_script(&b, "transactions.py", &["timeout"]);
}

fn copier(b: &Broker, die_after: u32) -> std::process::Child {
    let python = std::env::var("FERRITE_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/transactions.py");
    Command::new(python)
        .arg(script)
        .arg(b.bootstrap())
        .args(["copy", &COPIED.to_string(), &die_after.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python")
}

/// Runs the copier to its end: "copied", or an exit for a failure the
/// producer cannot go on from (3: a new instance is started).
fn copy_to_the_end(b: &Broker) {
    for _ in 0..10 {
        let out = copier(b, 0).wait_with_output().expect("copier");
        let text = String::from_utf8_lossy(&out.stdout);
        if text.contains("copied") {
            return;
        }
        assert_eq!(out.status.code(), Some(3), "copier failed:\n{text}\n{}", b.log_text());
    }
    panic!("the copy never finished:\n{}", b.log_text());
}

#[test]
fn consume_transform_produce_is_exactly_once_through_kill_9s() {
    let mut b = broker();
    run_python_script(&b, "transactions.py", &["setup", &COPIED.to_string()]);
    // The producer killed five times, after 1 to 5 transactions, half of
    // the time with a transaction open.
    let seed: u64 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    eprintln!("copy test seed {seed}");
    for round in 0..5u64 {
        let die_after = 1 + ((seed >> (round * 8)) % 5) as u32;
        let out = copier(&b, die_after).wait_with_output().expect("copier");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.code() == Some(9) || text.contains("copied"),
            "seed {seed}: the copier did not kill itself ({:?}):\n{text}",
            out.status
        );
    }
    // The broker killed while a copy runs: after a few commits.
    let mut child = copier(&b, 0);
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut commits = 0;
    for line in lines.by_ref() {
        let line = line.expect("copier output");
        if line.starts_with("committed") {
            commits += 1;
        }
        if commits == 3 || line.contains("copied") {
            break;
        }
    }
    // The rest of its output is read (and dropped): a closed pipe would
    // fail its next print.
    let drain = std::thread::spawn(move || lines.for_each(drop));
    b.kill9();
    b.spawn();
    let _ = child.wait();
    let _ = drain.join();
    copy_to_the_end(&b);
    let verified = run_python_script(&b, "transactions.py", &["verify", &COPIED.to_string()]);
    assert!(verified.contains("exactly once"), "seed {seed}: {verified}");
}
