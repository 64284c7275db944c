//! Transactions through the loss of their coordinator's broker: in a
//! 3-broker cluster (ZooKeeper started by the test) a confluent-kafka
//! consume-transform-produce copy (`tests/python/transactions.py`, topics
//! of RF 3, `__transaction_state` of RF 3) runs; after its first commits
//! the broker leading the transactional id's `__transaction_state`
//! partition is killed with SIGKILL. That broker also leads some of the
//! data partitions: their leaders fail over too. The copy goes on (or a new
//! instance takes over when the producer's error is fatal), and a
//! read_committed consumer finds every input record in the output exactly
//! once. The killed broker then restarts and the copy is verified again.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::cluster::*;

const COPIED: usize = 20_000;
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/transactions.py");
const STATE_PARTITIONS: usize = 50;

fn python() -> String {
    std::env::var("FERRITE_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Runs one mode of the script to its end; its standard output.
fn run(bootstrap: &str, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(python())
        .arg(SCRIPT)
        .arg(bootstrap)
        .args(args)
        .stderr(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/test.sh, or set FERRITE_PYTHON)", python()));
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn copy_to_the_end(bootstrap: &str, cluster: &Cluster) {
    for _ in 0..10 {
        let (code, out) = run(bootstrap, &["copy", &COPIED.to_string(), "0"]);
        if out.contains("copied") {
            return;
        }
        assert_eq!(code, Some(3), "copier failed:\n{out}\n{}", logs(cluster));
    }
    panic!("the copy never finished:\n{}", logs(cluster));
}

fn logs(cluster: &Cluster) -> String {
    cluster
        .brokers
        .iter()
        .map(|b| format!("--- broker {}:\n{}", b.id, b.log_text()))
        .collect()
}

fn verify(bootstrap: &str, cluster: &Cluster) {
    let (code, out) = run(bootstrap, &["verify", &COPIED.to_string()]);
    assert!(
        code == Some(0) && out.contains("exactly once"),
        "verify ({code:?}):\n{out}\n{}",
        logs(cluster)
    );
    eprint!("{out}");
}

#[test]
fn a_copy_stays_exactly_once_when_the_transaction_coordinators_broker_dies() {
    let _one = serial();
    let mut cluster = Cluster::start(
        3,
        &[
            "min.insync.replicas=2",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
        ],
    );
    wait_brokers(&cluster, 3);
    let first = cluster.brokers[0].bootstrap();
    let (code, out) = run(&cluster.bootstrap(), &["setup", &COPIED.to_string(), "3"]);
    assert_eq!(code, Some(0), "setup:\n{out}\n{}", logs(&cluster));

    let script = Path::new(SCRIPT);
    let mut child = Command::new(python())
        .arg(script)
        .arg(cluster.bootstrap())
        .args(["copy", &COPIED.to_string(), "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut commits = 0;
    for line in lines.by_ref() {
        let line = line.expect("copier output");
        commits += usize::from(line.starts_with("committed"));
        if commits == 3 || line.contains("copied") {
            break;
        }
    }
    // The rest of its output is read (and dropped): a closed pipe would
    // fail its next print.
    let drain = std::thread::spawn(move || lines.for_each(drop));
    let p = ferrite_broker::groups::partition_for("copier-1", STATE_PARTITIONS as i32) as usize;
    let state = wait_for("__transaction_state with RF 3", Duration::from_secs(20), || {
        partitions_of(&first, "__transaction_state", STATE_PARTITIONS).filter(|v| v[p].1 == 3)
    });
    let coordinator = state[p].0;
    let data_leaders = leaders_of(&first, "out", 3).expect("leaders of out");
    eprintln!("coordinator: broker {coordinator} (__transaction_state-{p}); out's leaders {data_leaders:?}; killed after {commits} commits");
    cluster.broker(coordinator).kill9();
    let survivors = cluster.bootstrap();
    let _ = child.wait();
    let _ = drain.join();
    copy_to_the_end(&survivors, &cluster);
    verify(&survivors, &cluster);

    cluster.broker(coordinator).spawn();
    wait_brokers(&cluster, 3);
    verify(&cluster.bootstrap(), &cluster);
}
