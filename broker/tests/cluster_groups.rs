//! A consumer group through the loss of its coordinator, the group
//! coordinator's cluster acceptance: in a 3-broker cluster (ZooKeeper
//! started by the test) two confluent-kafka members consume a 6-partition,
//! RF 3 topic and commit synchronously; the broker leading the group's
//! `__consumer_offsets` partition is killed with SIGKILL after the first
//! commits. The members find the new coordinator and keep committing; no
//! partition's committed offset is lost or goes backwards; every record is
//! consumed and, once the members close, the committed offsets are the log
//! end offsets. The killed broker then restarts, gets the coordinator back
//! (preferred leader election) and serves the group from what it
//! replicated. The members are `tests/python/cluster_groups.py` processes
//! (`FERRITE_PYTHON`, set by `scripts/test.sh`). Every wait is bounded;
//! measured times are printed.
//!
//! The failover (the dead broker's ZooKeeper session runs out after 4 s,
//! then the election, then the clients' next FindCoordinator) takes 4.5 to
//! 5.5 s here, close to the 6 s session: a member whose last heartbeat was
//! early may time its session out on the client side and rejoin under a
//! new member id; the group then rebalances once the old id's session
//! expires on the new coordinator. Both outcomes must keep the offsets.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::cluster::*;

const TOPIC: &str = "cg-orders";
const GROUP: &str = "cg-app";
const PARTITIONS: usize = 6;
const OFFSETS_PARTITIONS: usize = 50;
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/cluster_groups.py");

fn python() -> String {
    std::env::var("FERRITE_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64()
}

/// Runs one mode of the script to completion (at most `limit`); its
/// standard output.
fn run(work: &Path, bootstrap: &str, args: &[&str], limit: Duration) -> String {
    let name = format!("run-{}-{}", args[0], now_s());
    let (out_path, err_path) = (work.join(format!("{name}.out")), work.join(format!("{name}.err")));
    let out = std::fs::File::create(&out_path).expect("stdout file");
    let err = std::fs::File::create(&err_path).expect("stderr file");
    let mut child = Command::new(python())
        .arg(SCRIPT)
        .arg(bootstrap)
        .args(args)
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/test.sh, or set FERRITE_PYTHON)", python()));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    assert!(
        status.is_some_and(|s| s.success()) && stdout.contains("all ok"),
        "{args:?} failed ({status:?}, limit {limit:?}):\n{stdout}\n{stderr}\n\
         (needs confluent-kafka: run scripts/test.sh)"
    );
    stdout
}

/// (committed offsets, log end offsets) of every partition, as a fresh
/// consumer of the group sees them; -1 where nothing is committed.
fn committed(work: &Path, bootstrap: &str) -> (Vec<i64>, Vec<i64>) {
    let n = PARTITIONS.to_string();
    let out = run(
        work,
        bootstrap,
        &["committed", GROUP, TOPIC, &n],
        Duration::from_secs(90),
    );
    let line = |tag: &str| -> Vec<i64> {
        let l = out
            .lines()
            .find_map(|l| l.strip_prefix(tag))
            .unwrap_or_else(|| panic!("no {tag} in {out}"));
        l.trim()
            .trim_matches(['[', ']'])
            .split(',')
            .map(|x| x.trim().parse().expect("an offset"))
            .collect()
    };
    (line("COMMITTED "), line("ENDS "))
}

fn produce(work: &Path, bootstrap: &str, start: usize, count: usize) -> String {
    let (s, c) = (start.to_string(), count.to_string());
    let out = run(work, bootstrap, &["produce", TOPIC, &s, &c], Duration::from_secs(120));
    out.lines().next().unwrap_or_default().to_string()
}

/// A commit a member logged as successful.
#[derive(Clone, Debug)]
struct Commit {
    start: f64,
    end: f64,
    offsets: Vec<(usize, i64)>,
}

/// What a member wrote to its log so far.
#[derive(Default, Debug)]
struct MemberLog {
    /// (time, partitions) at every assignment change.
    assignments: Vec<(f64, Vec<usize>)>,
    values: BTreeSet<String>,
    commits: Vec<Commit>,
    /// (start, end, error) of failed commits.
    errors: Vec<(f64, f64, String)>,
    closed: bool,
}

impl MemberLog {
    fn owned(&self) -> Vec<usize> {
        self.assignments.last().map(|a| a.1.clone()).unwrap_or_default()
    }
}

/// A group member process.
struct Member {
    name: String,
    child: Option<Child>,
    log: PathBuf,
    stderr: PathBuf,
}

impl Member {
    fn start(work: &Path, bootstrap: &str, name: &str) -> Member {
        let log = work.join(format!("{name}.log"));
        let stderr = work.join(format!("{name}.err"));
        let err = std::fs::File::create(&stderr).expect("stderr file");
        let child = Command::new(python())
            .arg(SCRIPT)
            .arg(bootstrap)
            .args(["member", GROUP, TOPIC])
            .arg(&log)
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e} (run scripts/test.sh, or set FERRITE_PYTHON)", python()));
        Member {
            name: name.to_string(),
            child: Some(child),
            log,
            stderr,
        }
    }

    fn read(&self) -> MemberLog {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        // A line still being written is read next time.
        let whole = match text.rfind('\n') {
            Some(i) => &text[..i],
            None => "",
        };
        let mut m = MemberLog::default();
        let f = |s: &str| -> f64 { s.parse().expect("a time") };
        for line in whole.lines() {
            let mut words = line.split(' ');
            match words.next() {
                Some("A") => {
                    let t = f(words.next().expect("time"));
                    let parts = words.filter(|w| !w.is_empty()).map(|w| w.parse().expect("partition"));
                    m.assignments.push((t, parts.collect()));
                }
                Some("R") => {
                    m.values.insert(line[2..].to_string());
                }
                Some("C") => {
                    let (start, end) = (f(words.next().expect("start")), f(words.next().expect("end")));
                    let offsets = words
                        .map(|w| {
                            let (p, o) = w.split_once('=').expect("partition=offset");
                            (p.parse().expect("partition"), o.parse().expect("offset"))
                        })
                        .collect();
                    m.commits.push(Commit { start, end, offsets });
                }
                Some("E") => {
                    let (start, end) = (f(words.next().expect("start")), f(words.next().expect("end")));
                    m.errors.push((start, end, words.collect::<Vec<_>>().join(" ")));
                }
                Some("CLOSED") => m.closed = true,
                _ => panic!("{}: unexpected line {line:?}", self.name),
            }
        }
        m
    }

    /// SIGTERM, then waits (30 s at most) for the member to commit what is
    /// left and close.
    fn terminate(&mut self) {
        let mut c = self.child.take().expect("running");
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(s) = c.try_wait().expect("wait") {
                break s;
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                let _ = c.wait();
                panic!("{} did not close within 30 s of SIGTERM", self.name);
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "{} exited with {status}", self.name);
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> = log.lines().filter(|l| !l.starts_with("R ")).collect();
            let stderr = std::fs::read_to_string(&self.stderr).unwrap_or_default();
            eprintln!(
                "--- {} (records left out) ---\n{}\n--- {} stderr ---\n{stderr}",
                self.name,
                lines.join("\n"),
                self.name
            );
        }
    }
}

fn read_all(members: &[Member]) -> Vec<MemberLog> {
    members.iter().map(|m| m.read()).collect()
}

/// Every successful commit of every member, in the order they were
/// answered.
fn all_commits(logs: &[MemberLog]) -> Vec<Commit> {
    let mut v: Vec<Commit> = logs.iter().flat_map(|l| l.commits.iter().cloned()).collect();
    v.sort_by(|a, b| a.end.total_cmp(&b.end));
    v
}

/// partition → the highest offset committed (successfully) so far.
fn highest_committed(logs: &[MemberLog]) -> BTreeMap<usize, i64> {
    let mut out = BTreeMap::new();
    for c in all_commits(logs) {
        for (p, o) in c.offsets {
            let e = out.entry(p).or_insert(o);
            *e = (*e).max(o);
        }
    }
    out
}

fn values(range: std::ops::Range<usize>) -> BTreeSet<String> {
    range.map(|i| format!("v{i}")).collect()
}

fn consumed(logs: &[MemberLog]) -> BTreeSet<String> {
    logs.iter().flat_map(|l| l.values.iter().cloned()).collect()
}

/// Waits until `members` consumed `expected` and committed exactly `ends`.
fn wait_caught_up(members: &[Member], expected: &BTreeSet<String>, ends: &[i64], limit: Duration) -> Vec<MemberLog> {
    let want: BTreeMap<usize, i64> = ends.iter().enumerate().map(|(p, o)| (p, *o)).collect();
    let mut last = (0, BTreeMap::new());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_for("every record consumed and committed", limit, || {
            let logs = read_all(members);
            let missing = expected.difference(&consumed(&logs)).count();
            last = (missing, highest_committed(&logs));
            (missing == 0 && last.1 == want).then_some(logs)
        })
    }));
    r.unwrap_or_else(|e| {
        panic!(
            "{}: {} records never consumed; committed {:?}, log ends {ends:?}",
            e.downcast_ref::<String>().map_or("timed out", |s| s),
            last.0,
            last.1
        )
    })
}

#[test]
fn killing_the_coordinators_broker_moves_the_group_and_keeps_its_committed_offsets() {
    let _one = serial();
    let test_start = Instant::now();
    let mut cluster = Cluster::start(
        3,
        &["min.insync.replicas=2", "leader.imbalance.check.interval.seconds=2"],
    );
    wait_brokers(&cluster, 3);
    let work = tempfile::tempdir().expect("tempdir");
    let work = work.path();
    let first = cluster.brokers[0].bootstrap();
    let all = cluster.bootstrap();
    assert_eq!(
        create_topic(&first, TOPIC, PARTITIONS as i32, 3, &[]),
        0,
        "create topic"
    );
    wait_for("the topic's leaders", Duration::from_secs(20), || {
        partitions_of(&first, TOPIC, PARTITIONS).filter(|p| p.iter().all(|x| x.1 == 3))
    });
    eprintln!("{}", produce(work, &all, 0, 3000));

    // Two members; before the kill both own partitions and have committed
    // offsets of two of them at least.
    let t = Instant::now();
    let mut members = vec![
        Member::start(work, &all, "member-0"),
        Member::start(work, &all, "member-1"),
    ];
    wait_for(
        "two members owning the partitions, each having committed two",
        Duration::from_secs(60),
        || {
            let logs = read_all(&members);
            let mut owned: Vec<usize> = logs.iter().flat_map(|l| l.owned()).collect();
            owned.sort();
            let ready = owned == (0..PARTITIONS).collect::<Vec<_>>()
                && logs
                    .iter()
                    .all(|l| !l.owned().is_empty() && highest_committed(std::slice::from_ref(l)).len() >= 2);
            ready.then_some(())
        },
    );
    eprintln!("group formed and committing in {:.2} s", t.elapsed().as_secs_f64());
    let coordinator = wait_for("the coordinator", Duration::from_secs(20), || {
        coordinator_of(&cluster, GROUP)
    });
    let p = ferrite_broker::groups::partition_for(GROUP, OFFSETS_PARTITIONS as i32) as usize;
    let offsets_partitions = wait_for("__consumer_offsets with RF 3", Duration::from_secs(20), || {
        partitions_of(&first, "__consumer_offsets", OFFSETS_PARTITIONS).filter(|v| v[p].1 == 3)
    });
    assert_eq!(
        offsets_partitions[p].0, coordinator,
        "the coordinator leads __consumer_offsets-{p}"
    );
    let data_leaders = leaders_of(&first, TOPIC, PARTITIONS).expect("leaders");
    eprintln!("coordinator: broker {coordinator} (__consumer_offsets-{p}); {TOPIC} leaders {data_leaders:?}");

    // Kill the coordinator's broker while the members consume and commit.
    let before = read_all(&members);
    let committed_before = highest_committed(&before);
    let consumed_before = consumed(&before).len();
    let killed_at = now_s();
    let kill = Instant::now();
    cluster.broker(coordinator).kill9();
    eprintln!(
        "killed broker {coordinator} after {} commits, {consumed_before} of 3000 records consumed; committed {committed_before:?}",
        all_commits(&before).len()
    );
    let survivors = cluster.bootstrap();
    let producer = {
        let (work, survivors) = (work.to_path_buf(), survivors.clone());
        std::thread::spawn(move || {
            let t = Instant::now();
            let out = produce(&work, &survivors, 3000, 3000);
            (out, t.elapsed())
        })
    };
    let new_coordinator = wait_for("a new coordinator", Duration::from_secs(30), || {
        coordinator_of(&cluster, GROUP).filter(|c| *c != coordinator)
    });
    eprintln!(
        "FindCoordinator names broker {new_coordinator} {:.2} s after the kill",
        kill.elapsed().as_secs_f64()
    );

    // Every member commits again (a commit started after the kill
    // succeeds).
    let after = wait_for(
        "a commit started after the kill, by every member",
        Duration::from_secs(60),
        || {
            let logs = read_all(&members);
            logs.iter()
                .all(|l| l.commits.iter().any(|c| c.start > killed_at))
                .then_some(logs)
        },
    );
    let first_ok = all_commits(&after)
        .into_iter()
        .find(|c| c.end > killed_at)
        .expect("a commit after the kill");
    let first_started = all_commits(&after)
        .into_iter()
        .find(|c| c.start > killed_at)
        .expect("a commit started after the kill");
    eprintln!(
        "first successful commit answered {:.2} s after the kill (started {:+.2} s); first one started after \
         the kill answered at {:.2} s",
        first_ok.end - killed_at,
        first_ok.start - killed_at,
        first_started.end - killed_at
    );
    for (i, l) in after.iter().enumerate() {
        let c = l.commits.iter().find(|c| c.start > killed_at).expect("checked");
        let failed: Vec<&(f64, f64, String)> = l.errors.iter().filter(|e| e.1 > killed_at).collect();
        let kinds: BTreeSet<&str> = failed.iter().map(|e| e.2.as_str()).collect();
        eprintln!(
            "member-{i}: committing again at {:.2} s after the kill; {} failed commits meanwhile {kinds:?}",
            c.end - killed_at,
            failed.len()
        );
    }

    // What a fresh consumer reads back now: nothing committed before the
    // kill was lost.
    let (read_back, _) = committed(work, &survivors);
    for (p, o) in &committed_before {
        assert!(
            read_back[*p] >= *o,
            "partition {p}: committed {o} before the kill, {} read back after: {read_back:?}",
            read_back[*p]
        );
    }
    eprintln!("read back after the kill: {read_back:?} (before: {committed_before:?})");

    // Every record is consumed and committed; then the members close.
    let (out, took) = producer.join().expect("producer thread");
    eprintln!("after the kill: {out} (measured {:.2} s)", took.as_secs_f64());
    let (_, ends) = committed(work, &survivors);
    assert!(ends.iter().sum::<i64>() >= 6000, "log ends {ends:?}");
    let done = wait_caught_up(&members, &values(0..6000), &ends, Duration::from_secs(90));
    eprintln!(
        "all 6000 records consumed and their offsets committed {:.2} s after the kill",
        kill.elapsed().as_secs_f64()
    );
    let rebalances: Vec<(usize, f64)> = done
        .iter()
        .enumerate()
        .flat_map(|(i, l)| {
            l.assignments
                .iter()
                .filter(|a| a.0 > killed_at)
                .map(move |a| (i, a.0 - killed_at))
        })
        .collect();
    eprintln!("assignment changes after the kill (member, s after): {rebalances:?}");
    for m in &mut members {
        m.terminate();
    }
    let closed = read_all(&members);
    assert!(closed.iter().all(|l| l.closed), "members closed cleanly");
    // No partition's committed offset ever went backwards.
    let mut seen: BTreeMap<usize, (i64, f64)> = BTreeMap::new();
    let history = all_commits(&closed);
    for c in &history {
        for (p, o) in &c.offsets {
            if let Some((prev, at)) = seen.get(p) {
                assert!(
                    o >= prev,
                    "partition {p}: committed {prev} (answered {:.3} s after the kill), then {o} ({:.3} s)",
                    at - killed_at,
                    c.end - killed_at
                );
            }
            seen.insert(*p, (*o, c.end));
        }
    }
    let (final_committed, final_ends) = committed(work, &survivors);
    assert_eq!(final_ends, ends, "log ends");
    assert_eq!(final_committed, ends, "committed offsets after the members closed");
    eprintln!("{} commits in all; committed = log ends = {ends:?}", history.len());
    drop(members);

    // The killed broker restarts, leads its preferred replicas again
    // (coordinator included) and serves the group from what it
    // replicated while down; a new member resumes from the commits.
    let restart = Instant::now();
    cluster.broker(coordinator).spawn();
    let restarted = cluster.broker(coordinator).bootstrap();
    wait_for(
        "the coordinator back on the restarted broker",
        Duration::from_secs(60),
        || {
            (find_coordinator(&restarted, GROUP) == Some((0, coordinator))
                && coordinator_of(&cluster, GROUP) == Some(coordinator))
            .then_some(())
        },
    );
    eprintln!(
        "broker {coordinator} restarted and coordinates the group again after {:.2} s",
        restart.elapsed().as_secs_f64()
    );
    let (back, back_ends) = committed(work, &restarted);
    assert_eq!(back_ends, ends, "log ends after the restart");
    assert_eq!(back, ends, "committed offsets from the restarted coordinator");
    let all = cluster.bootstrap();
    eprintln!("{}", produce(work, &all, 6000, 600));
    let (_, ends) = committed(work, &all);
    let t = Instant::now();
    let mut members = vec![Member::start(work, &all, "member-2")];
    let logs = wait_caught_up(&members, &values(6000..6600), &ends, Duration::from_secs(60));
    let again = consumed(&logs).intersection(&values(0..6000)).count();
    assert_eq!(again, 0, "records below the committed offsets consumed again");
    members[0].terminate();
    let (final_committed, _) = committed(work, &all);
    assert_eq!(final_committed, ends, "committed offsets after the new member closed");
    eprintln!(
        "a new member resumed from the commits, consumed 600 more and committed in {:.2} s; test took {:.1} s",
        t.elapsed().as_secs_f64(),
        test_start.elapsed().as_secs_f64()
    );
}
