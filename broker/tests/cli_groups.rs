//! `ferrite groups …` against a running broker: offsets committed with
//! `reset-offsets --execute`, read back with `describe`, `list` and
//! `delete`, and a kcat group consumer seen as a member.

mod common;

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::Broker;

fn ferrite(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(args)
        .output()
        .expect("run ferrite");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `ferrite groups ARGS --bootstrap B`.
fn groups(b: &Broker, args: &[&str]) -> (bool, String) {
    let bootstrap = b.bootstrap();
    let mut all = vec!["groups"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--bootstrap", &bootstrap]);
    ferrite(&all)
}

fn ok(b: &Broker, args: &[&str]) -> String {
    let (success, out) = groups(b, args);
    assert!(success, "ferrite groups {args:?} failed: {out}");
    out
}

/// `count` records into one partition with kcat.
fn produce(b: &Broker, topic: &str, partition: i32, count: usize) {
    let mut child = Command::new("kcat")
        .args(["-b", &b.bootstrap(), "-P", "-t", topic, "-p", &partition.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat is installed (scripts/test.sh installs it)");
    let mut input = Vec::new();
    for i in 0..count {
        writeln!(input, "record-{partition}-{i}").unwrap();
    }
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "kcat: {}", String::from_utf8_lossy(&out.stderr));
}

fn topic_with_records(b: &Broker, topic: &str, per_partition: &[usize]) {
    let n = per_partition.len().to_string();
    let (created, out) = ferrite(&[
        "topics",
        "--bootstrap",
        &b.bootstrap(),
        "create",
        topic,
        "--partitions",
        &n,
    ]);
    assert!(created, "{out}");
    for (p, count) in per_partition.iter().enumerate() {
        produce(b, topic, p as i32, *count);
    }
}

/// One `describe` row: (current, log end, lag, consumer id).
type Row = (String, String, String, String);

/// `describe`'s rows of `topic`, by partition.
fn rows(out: &str, topic: &str) -> Vec<(i32, Row)> {
    let mut rows: Vec<(i32, Row)> = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() == 9 && f[1] == topic && f[2] != "PARTITION")
        .map(|f| {
            let row = (f[3].into(), f[4].into(), f[5].into(), f[6].into());
            (f[2].parse().expect("partition"), row)
        })
        .collect();
    rows.sort();
    rows
}

fn offsets(out: &str, topic: &str) -> Vec<(i32, String, String, String)> {
    rows(out, topic)
        .into_iter()
        .map(|(p, (current, end, lag, _))| (p, current, end, lag))
        .collect()
}

fn row(p: i32, current: i64, end: i64) -> (i32, String, String, String) {
    (p, current.to_string(), end.to_string(), (end - current).to_string())
}

/// `reset-offsets`' (topic, partition, new offset) lines.
fn planned(out: &str) -> Vec<(String, i32, i64)> {
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() == 3 && f[0] != "TOPIC")
        .filter_map(|f| Some((f[0].to_string(), f[1].parse().ok()?, f[2].parse().ok()?)))
        .collect()
}

fn listed(b: &Broker) -> Vec<Vec<String>> {
    ok(b, &["list"])
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

#[test]
fn offsets_are_reset_described_listed_and_deleted() {
    let b = Broker::start(&[]);
    topic_with_records(&b, "orders", &[50, 30, 20]);
    let out = ok(
        &b,
        &[
            "reset-offsets",
            "--group",
            "g",
            "--topic",
            "orders",
            "--to-offset",
            "10",
            "--execute",
        ],
    );
    let ten: Vec<_> = (0..3).map(|p| ("orders".to_string(), p, 10)).collect();
    assert_eq!(planned(&out), ten, "{out}");
    assert!(!out.contains("dry run"), "{out}");
    let out = ok(&b, &["describe", "--group", "g"]);
    assert!(out.contains("has no active members"), "{out}");
    assert_eq!(
        offsets(&out, "orders"),
        vec![row(0, 10, 50), row(1, 10, 30), row(2, 10, 20)],
        "{out}"
    );
    assert!(rows(&out, "orders").iter().all(|(_, r)| r.3 == "-"), "{out}");

    // A dry run prints and changes nothing.
    let out = ok(
        &b,
        &["reset-offsets", "--group", "g", "--topic", "orders", "--shift-by", "-5"],
    );
    let five: Vec<_> = (0..3).map(|p| ("orders".to_string(), p, 5)).collect();
    assert_eq!(planned(&out), five, "{out}");
    assert!(out.contains("dry run"), "{out}");
    let out = ok(&b, &["describe", "--group", "g"]);
    assert_eq!(
        offsets(&out, "orders"),
        vec![row(0, 10, 50), row(1, 10, 30), row(2, 10, 20)],
        "{out}"
    );

    // Chosen partitions, clamped to the log.
    let out = ok(
        &b,
        &[
            "reset-offsets",
            "--group",
            "g",
            "--topic",
            "orders:0,2",
            "--to-offset",
            "1000",
        ],
    );
    let clamped = vec![("orders".to_string(), 0, 50), ("orders".to_string(), 2, 20)];
    assert_eq!(planned(&out), clamped, "{out}");
    let out = ok(
        &b,
        &[
            "reset-offsets",
            "--group",
            "g",
            "--topic",
            "orders:1",
            "--shift-by=-50",
            "--execute",
        ],
    );
    assert_eq!(planned(&out), vec![("orders".to_string(), 1, 0)], "{out}");
    let out = ok(&b, &["describe", "--group", "g"]);
    assert_eq!(
        offsets(&out, "orders"),
        vec![row(0, 10, 50), row(1, 0, 30), row(2, 10, 20)],
        "{out}"
    );

    let out = ok(
        &b,
        &[
            "reset-offsets",
            "--group",
            "g",
            "--topic",
            "orders",
            "--to-latest",
            "--execute",
        ],
    );
    assert_eq!(
        planned(&out).iter().map(|x| x.2).collect::<Vec<_>>(),
        vec![50, 30, 20],
        "{out}"
    );
    let out = ok(&b, &["describe", "--group", "g"]);
    assert_eq!(
        offsets(&out, "orders"),
        vec![row(0, 50, 50), row(1, 30, 30), row(2, 20, 20)],
        "{out}"
    );
    let out = ok(
        &b,
        &["reset-offsets", "--group", "g", "--topic", "orders", "--to-earliest"],
    );
    assert_eq!(
        planned(&out).iter().map(|x| x.2).collect::<Vec<_>>(),
        vec![0, 0, 0],
        "{out}"
    );

    let groups_now = listed(&b);
    assert!(
        groups_now.iter().any(|l| l[0] == "g" && l[1] == "Empty"),
        "{groups_now:?}"
    );
    let out = ok(&b, &["describe", "--group", "g", "--state"]);
    assert!(
        out.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("g ") && l.contains("Empty")),
        "{out}"
    );

    let out = ok(&b, &["delete", "--group", "g"]);
    assert!(out.contains("Deleted consumer group 'g'"), "{out}");
    let groups_now = listed(&b);
    assert!(!groups_now.iter().any(|l| l[0] == "g"), "{groups_now:?}");
    let out = ok(&b, &["describe", "--group", "g"]);
    assert!(out.contains("does not exist"), "{out}");
    assert!(offsets(&out, "orders").is_empty(), "{out}");

    let (success, out) = groups(&b, &["delete", "--group", "never-seen"]);
    assert!(!success && out.contains("GROUP_ID_NOT_FOUND"), "{out}");
}

#[test]
fn bad_requests_exit_non_zero_with_a_message() {
    let b = Broker::start(&[]);
    topic_with_records(&b, "few", &[3]);
    let cases: &[(&[&str], &str)] = &[
        (
            &["reset-offsets", "--group", "g", "--topic", "nope", "--to-earliest"],
            "UNKNOWN_TOPIC_OR_PARTITION",
        ),
        (
            &["reset-offsets", "--group", "g", "--topic", "few:7", "--to-earliest"],
            "no partition 7",
        ),
        (
            &["reset-offsets", "--group", "g", "--topic", "few:x", "--to-earliest"],
            "expected TOPIC or TOPIC:P1,P2",
        ),
        (
            &["reset-offsets", "--group", "g", "--topic", "few", "--shift-by", "1"],
            "no committed offset",
        ),
        (
            &[
                "reset-offsets",
                "--group",
                "g",
                "--topic",
                "few",
                "--to-latest",
                "--to-earliest",
            ],
            "cannot be used with",
        ),
        (&["reset-offsets", "--group", "g", "--topic", "few"], "required"),
    ];
    for (args, expected) in cases {
        let (success, out) = groups(&b, args);
        assert!(!success && out.contains(expected), "{args:?}: {out}");
        assert!(!out.contains("panicked"), "{args:?}: {out}");
    }
    let (success, out) = ferrite(&["groups", "list", "--bootstrap", "127.0.0.1:1"]);
    assert!(!success && out.contains("ferrite groups: 127.0.0.1:1"), "{out}");
}

/// Kills a kcat left running by a failed assertion.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn kcat_consumer(b: &Broker, group: &str, topic: &str) -> KillOnDrop {
    let child = Command::new("kcat")
        .args(["-b", &b.bootstrap(), "-G", group, "-q", topic])
        .args(["-X", "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=200"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kcat is installed (scripts/test.sh installs it)");
    KillOnDrop(child)
}

fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_kcat_consumer_shows_as_the_owner_of_its_partitions() {
    let b = Broker::start(&["group.initial.rebalance.delay.ms=0"]);
    topic_with_records(&b, "events", &[4, 5, 6]);
    let mut kcat = kcat_consumer(&b, "watchers", "events");
    let owned = wait_for("kcat to own the partitions and commit", Duration::from_secs(30), || {
        let out = ok(&b, &["describe", "--group", "watchers"]);
        let rs = rows(&out, "events");
        let done = rs.len() == 3 && rs.iter().all(|(_, r)| r.3 != "-" && r.2 == "0");
        done.then_some(rs)
    });
    let consumer = owned[0].1 .3.clone();
    assert!(owned.iter().all(|(_, r)| r.3 == consumer), "{owned:?}");
    let out = ok(&b, &["describe", "--group", "watchers", "--members"]);
    assert!(out.contains(&consumer) && out.contains("events(0,1,2)"), "{out}");
    let out = ok(&b, &["describe", "--group", "watchers", "--state"]);
    assert!(out.contains("Stable"), "{out}");
    let (success, out) = groups(
        &b,
        &[
            "reset-offsets",
            "--group",
            "watchers",
            "--topic",
            "events",
            "--to-earliest",
            "--execute",
        ],
    );
    assert!(!success && out.contains("has active members"), "{out}");
    let (success, out) = groups(&b, &["delete", "--group", "watchers"]);
    assert!(!success && out.contains("NON_EMPTY_GROUP"), "{out}");

    // SIGTERM: kcat commits, leaves the group, and the group is empty.
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(kcat.0.id() as i32, libc::SIGTERM) };
    wait_for("kcat to exit", Duration::from_secs(15), || {
        kcat.0.try_wait().ok().flatten()
    });
    let out = wait_for("the group to empty", Duration::from_secs(15), || {
        let out = ok(&b, &["describe", "--group", "watchers"]);
        out.contains("has no active members").then_some(out)
    });
    assert_eq!(
        offsets(&out, "events"),
        vec![row(0, 4, 4), row(1, 5, 5), row(2, 6, 6)],
        "{out}"
    );
    let groups_now = listed(&b);
    assert!(
        groups_now.iter().any(|l| l[..] == ["watchers", "Empty", "consumer"]),
        "{groups_now:?}"
    );
}
