//! Ferrite's own group member (`client::group::member`) against `ferrite
//! standalone`: three members per assignor share a topic exclusively and
//! take over a leaver's partitions; sticky keeps the survivors' partitions;
//! commits round-trip and a stale member's commit is refused; and one
//! Ferrite member shares a topic with a confluent-kafka consumer
//! (`FERRITE_PYTHON`, set by `scripts/test.sh`). Every wait is bounded. One
//! test at a time: each starts its own broker and runs several members.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::Broker;
use ferrite_client::group::coordinator_client::{CoordinatorClient, RetryPolicy};
use ferrite_client::group::member::{AssignorKind, GroupMember, MemberConfig, MemberError};
use ferrite_client::{codec, Connection};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const NO_DELAY: &str = "group.initial.rebalance.delay.ms=0";

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn create_topic(b: &Broker, name: &str, partitions: i32) {
    let mut c = Connection::connect(&b.bootstrap(), "client-group-test").expect("connect");
    let mut r = c
        .call(19, codec::CREATE_TOPICS_V, |w| {
            codec::create_topics(w, name, partitions, 1, &[])
        })
        .expect("create topics");
    let res = codec::decode_create_topics(&mut r).expect("decode");
    assert!(res.iter().all(|(_, e, _)| *e == 0), "create {name}: {res:?}");
}

fn config(b: &Broker, group: &str, topic: &str) -> MemberConfig {
    let mut cfg = MemberConfig::new(&b.bootstrap(), group, &[topic]);
    cfg.session_timeout_ms = 6_000;
    cfg.rebalance_timeout_ms = 10_000;
    cfg.heartbeat_interval_ms = Some(200);
    cfg
}

fn tps(topic: &str, partitions: impl IntoIterator<Item = i32>) -> Vec<(String, i32)> {
    partitions.into_iter().map(|p| (topic.to_string(), p)).collect()
}

/// Polls `f` every 20 ms until it gives a value or `limit` passes.
fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What a member thread last saw.
#[derive(Clone, Debug, Default)]
struct View {
    generation: i32,
    leader: bool,
    assignment: Vec<(String, i32)>,
    error: Option<String>,
    left: bool,
}

/// A member polling on its own thread until told to leave.
struct Running {
    view: Arc<Mutex<View>>,
    leave: mpsc::Sender<()>,
    thread: Option<JoinHandle<()>>,
}

impl Running {
    fn start(cfg: MemberConfig, kind: AssignorKind) -> Running {
        let view = Arc::new(Mutex::new(View {
            generation: -1,
            ..View::default()
        }));
        let (leave, told) = mpsc::channel::<()>();
        let v = view.clone();
        let thread = std::thread::spawn(move || {
            let set_error = |e: MemberError| v.lock().unwrap().error = Some(e.to_string());
            let mut m = match GroupMember::join_with(cfg, kind) {
                Ok(m) => m,
                Err(e) => return set_error(e),
            };
            // A bound on the thread itself, should the test never say leave.
            let deadline = Instant::now() + Duration::from_secs(120);
            loop {
                {
                    let mut view = v.lock().unwrap();
                    view.generation = m.generation();
                    view.leader = m.is_leader();
                    view.assignment = m.assignment().to_vec();
                }
                match told.recv_timeout(Duration::from_millis(20)) {
                    Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
                    _ => {
                        let result = m.leave();
                        let mut view = v.lock().unwrap();
                        view.left = true;
                        view.assignment.clear();
                        if let Err(e) = result {
                            view.error = Some(e.to_string());
                        }
                        return;
                    }
                }
                if let Err(e) = m.poll() {
                    return set_error(e);
                }
            }
        });
        Running {
            view,
            leave,
            thread: Some(thread),
        }
    }

    fn view(&self) -> View {
        let v = self.view.lock().unwrap().clone();
        assert!(v.error.is_none(), "member failed: {v:?}");
        v
    }

    /// Leaves the group and waits for the thread (bounded by its own
    /// request timeouts).
    fn leave(mut self) {
        let _ = self.leave.send(());
        if let Some(t) = self.thread.take() {
            t.join().expect("member thread panicked");
        }
        let v = self.view.lock().unwrap().clone();
        assert!(v.left && v.error.is_none(), "leave: {v:?}");
    }
}

/// The members' views, if they all are in one generation and own every
/// partition of `topic` exactly once between them.
fn settled_views(members: &[&Running], topic: &str, partitions: i32) -> Option<Vec<View>> {
    let views: Vec<View> = members.iter().map(|m| m.view()).collect();
    let g = views[0].generation;
    if g < 0 || views.iter().any(|v| v.generation != g) {
        return None;
    }
    let mut all: Vec<(String, i32)> = views.iter().flat_map(|v| v.assignment.clone()).collect();
    all.sort();
    (all == tps(topic, 0..partitions)).then_some(views)
}

/// The common generation, as [`settled_views`] finds it.
fn settled(members: &[&Running], topic: &str, partitions: i32) -> Option<i32> {
    settled_views(members, topic, partitions).map(|v| v[0].generation)
}

fn three_members_then_one_leaves(kind: AssignorKind) {
    let _serial = serial();
    let b = Broker::start(&[NO_DELAY]);
    let name = format!("{kind:?}").to_lowercase();
    let (topic, group) = (format!("cg-{name}"), format!("g-{name}"));
    create_topic(&b, &topic, 6);
    let started = Instant::now();
    let members: Vec<Running> = (0..3)
        .map(|_| Running::start(config(&b, &group, &topic), kind))
        .collect();
    let all: Vec<&Running> = members.iter().collect();
    let before = wait_for(Duration::from_secs(20), || settled_views(&all, &topic, 6)).unwrap_or_else(|| {
        panic!(
            "three members did not settle: {:?}",
            all.iter().map(|m| m.view()).collect::<Vec<_>>()
        )
    });
    let g1 = before[0].generation;
    eprintln!(
        "{name}: 3 members settled in generation {g1} after {:?}",
        started.elapsed()
    );
    for v in &before {
        assert_eq!(v.assignment.len(), 2, "{name}: uneven {before:?}");
    }
    assert_eq!(before.iter().filter(|v| v.leader).count(), 1, "one leader: {before:?}");

    let mut members = members.into_iter();
    let leaver = members.next().expect("three");
    let survivors: Vec<Running> = members.collect();
    let left_at = Instant::now();
    leaver.leave();
    let two: Vec<&Running> = survivors.iter().collect();
    let after = wait_for(Duration::from_secs(10), || {
        settled_views(&two, &topic, 6).filter(|v| v[0].generation > g1)
    })
    .unwrap_or_else(|| {
        panic!(
            "survivors did not take over: {:?}",
            two.iter().map(|m| m.view()).collect::<Vec<_>>()
        )
    });
    let g2 = after[0].generation;
    eprintln!(
        "{name}: 2 survivors own all 6 in generation {g2}, {:?} after the leave",
        left_at.elapsed()
    );
    for (i, now) in after.iter().enumerate() {
        assert_eq!(now.assignment.len(), 3, "{name}: uneven after the leave");
        if kind == AssignorKind::Sticky {
            let had: BTreeSet<_> = before[i + 1].assignment.iter().collect();
            let has: BTreeSet<_> = now.assignment.iter().collect();
            assert!(
                had.is_subset(&has),
                "sticky moved a survivor's partition: {had:?} -> {has:?}"
            );
        }
    }
    for s in survivors {
        s.leave();
    }
}

#[test]
fn range_members_share_partitions_and_take_over_a_leaver() {
    three_members_then_one_leaves(AssignorKind::Range);
}

#[test]
fn roundrobin_members_share_partitions_and_take_over_a_leaver() {
    three_members_then_one_leaves(AssignorKind::RoundRobin);
}

#[test]
fn sticky_members_share_partitions_and_survivors_keep_theirs() {
    three_members_then_one_leaves(AssignorKind::Sticky);
}

#[test]
fn commits_round_trip_and_a_wrong_generation_is_refused() {
    let _serial = serial();
    let b = Broker::start(&[NO_DELAY]);
    create_topic(&b, "commits", 3);
    let mut m = GroupMember::join_with(config(&b, "g-commits", "commits"), AssignorKind::Range).expect("join");
    assert_eq!(m.assignment(), tps("commits", 0..3).as_slice());
    assert!(m.is_leader() && m.generation() >= 1, "generation {}", m.generation());
    assert!(m.committed(&tps("commits", 0..3)).expect("committed").is_empty());

    m.commit(&[("commits".into(), 0, 42), ("commits".into(), 1, 7)])
        .expect("commit");
    let got = m.committed(&tps("commits", 0..3)).expect("committed");
    let want = [(("commits".to_string(), 0), 42), (("commits".to_string(), 1), 7)];
    assert_eq!(got.into_iter().collect::<Vec<_>>(), want);

    let e = m.commit(&[("commits".into(), 9, 1)]).expect_err("no partition 9");
    assert_eq!(e.code(), Some(3), "{e}");
    assert!(e.to_string().contains("commits-9"), "{e}");

    // A commit in another generation than the member's: ILLEGAL_GENERATION.
    let (id, generation) = (m.member_id().to_string(), m.generation());
    let stale = m
        .coordinator_client()
        .commit_offsets(generation - 1, &id, &[("commits".into(), 0, 1)]);
    let e = stale.expect_err("stale generation");
    assert_eq!(e.code(), Some(22), "{e}");
    assert!(e.to_string().contains("ILLEGAL_GENERATION"), "{e}");
    assert!(!m.rejoin_needed());

    // The offsets outlive the membership.
    m.leave().expect("leave");
    let mut c = CoordinatorClient::new(
        &b.bootstrap(),
        "g-commits",
        "test",
        RetryPolicy::default(),
        Duration::from_secs(10),
    );
    let got = c.fetch_offsets(&tps("commits", 0..2)).expect("fetch");
    assert_eq!(got.into_iter().collect::<Vec<_>>(), want);
}

#[test]
fn a_member_removed_from_its_generation_gets_an_error_on_commit_then_rejoins() {
    let _serial = serial();
    let b = Broker::start(&[NO_DELAY, "group.min.session.timeout.ms=1000"]);
    create_topic(&b, "stale", 2);
    let mut cfg = config(&b, "g-stale", "stale");
    cfg.session_timeout_ms = 2_000;
    cfg.rebalance_timeout_ms = 2_000;
    let mut a = GroupMember::join_with(cfg, AssignorKind::Range).expect("join");
    let ga = a.generation();

    // `a` stops polling; `b` joins and the group moves on without it.
    let other = Running::start(config(&b, "g-stale", "stale"), AssignorKind::Range);
    let gb = wait_for(Duration::from_secs(15), || {
        settled(&[&other], "stale", 2).filter(|g| *g > ga)
    })
    .unwrap_or_else(|| panic!("the group did not move on: {:?}", other.view()));

    eprintln!("stale: the group moved from generation {ga} to {gb} without a");
    let e = a
        .commit(&[("stale".into(), 0, 5)])
        .expect_err("a is not in the generation");
    eprintln!("stale: a's commit: {e}");
    assert!(matches!(e.code(), Some(22) | Some(25)), "{e}");
    assert!(
        a.rejoin_needed(),
        "a commit refused for the generation must ask for a rejoin"
    );

    // The next poll joins again; then both share the topic and commits work.
    assert!(a.poll().expect("rejoin"), "poll must rejoin");
    assert!(a.generation() > gb, "{} after {gb}", a.generation());
    let joined = wait_for(Duration::from_secs(10), || {
        a.poll().expect("poll");
        let v = other.view();
        let mut all: Vec<_> = v.assignment.iter().chain(a.assignment()).cloned().collect();
        all.sort();
        (v.generation == a.generation() && all == tps("stale", 0..2)).then_some(())
    });
    assert!(
        joined.is_some(),
        "a and b did not share the topic: {:?} / {:?}",
        a.assignment(),
        other.view()
    );
    let mine: Vec<(String, i32, i64)> = a.assignment().iter().map(|(t, p)| (t.clone(), *p, 5)).collect();
    a.commit(&mine).expect("commit after the rejoin");
    other.leave();
}

// ---- Interoperation with confluent-kafka ----

const CONFLUENT_MEMBER: &str = r#"
import json, os, sys, time
from confluent_kafka import Consumer
bootstrap, group, topic, stop = sys.argv[1:5]
def show(event, parts):
    print(json.dumps({"event": event, "partitions": sorted(p.partition for p in parts)}), flush=True)
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
              "partition.assignment.strategy": "range", "session.timeout.ms": 6000,
              "heartbeat.interval.ms": 200, "enable.auto.commit": False})
c.subscribe([topic], on_assign=lambda c, ps: show("assign", ps), on_revoke=lambda c, ps: show("revoke", ps))
end = time.time() + 90
while time.time() < end and not os.path.exists(stop):
    c.poll(0.05)
c.close()
print(json.dumps({"event": "closed", "partitions": []}), flush=True)
"#;

/// A confluent-kafka consumer in a child process; its assignment as the
/// callbacks report it.
struct Confluent {
    child: Child,
    stop: std::path::PathBuf,
    owned: Arc<Mutex<Option<Vec<i32>>>>,
    closed: Arc<Mutex<bool>>,
}

impl Confluent {
    fn start(b: &Broker, group: &str, topic: &str, stop: std::path::PathBuf) -> Confluent {
        let python = std::env::var("FERRITE_PYTHON").unwrap_or_else(|_| "python3".into());
        let mut child = Command::new(&python)
            .args(["-c", CONFLUENT_MEMBER, &b.bootstrap(), group, topic])
            .arg(&stop)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{python}: {e} (run scripts/test.sh, or set FERRITE_PYTHON)"));
        let (owned, closed) = (Arc::new(Mutex::new(None)), Arc::new(Mutex::new(false)));
        let out = child.stdout.take().expect("stdout");
        let (o, c) = (owned.clone(), closed.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                    continue;
                };
                let parts: Vec<i32> = v["partitions"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|p| p.as_i64()).map(|p| p as i32).collect())
                    .unwrap_or_default();
                match v["event"].as_str() {
                    Some("assign") => *o.lock().unwrap() = Some(parts),
                    Some("revoke") => *o.lock().unwrap() = None,
                    Some("closed") => *c.lock().unwrap() = true,
                    _ => {}
                }
            }
        });
        Confluent {
            child,
            stop,
            owned,
            closed,
        }
    }

    fn owned(&mut self) -> Option<Vec<i32>> {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("the confluent-kafka consumer exited early ({status}); needs confluent-kafka: run scripts/test.sh");
        }
        self.owned.lock().unwrap().clone()
    }

    fn close(mut self) {
        std::fs::write(&self.stop, b"stop").expect("stop file");
        let status = self.child.wait().expect("wait");
        assert!(status.success(), "confluent-kafka consumer: {status}");
        assert!(*self.closed.lock().unwrap(), "the consumer did not report its close");
    }
}

impl Drop for Confluent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Ferrite member and the confluent consumer own the four partitions
/// between them, exclusively, two each.
fn shared_with(ferrite: &Running, confluent: &mut Confluent) -> Option<()> {
    let theirs = confluent.owned()?;
    let ours = ferrite.view();
    let mut all: Vec<i32> = ours.assignment.iter().map(|(_, p)| *p).chain(theirs.clone()).collect();
    all.sort();
    (all == [0, 1, 2, 3] && theirs.len() == 2).then_some(())
}

#[test]
fn a_ferrite_member_and_a_confluent_kafka_consumer_share_a_topic() {
    let _serial = serial();
    let b = Broker::start(&[NO_DELAY]);
    create_topic(&b, "interop", 4);
    let work = tempfile::tempdir().expect("tempdir");
    let (group, topic) = ("g-interop", "interop");

    // Ferrite first: it leads and assigns with librdkafka's subscription.
    let started = Instant::now();
    let first = Running::start(config(&b, group, topic), AssignorKind::Range);
    wait_for(Duration::from_secs(10), || {
        (first.view().assignment.len() == 4).then_some(())
    })
    .expect("first alone");
    let mut confluent = Confluent::start(&b, group, topic, work.path().join("stop"));
    wait_for(Duration::from_secs(30), || shared_with(&first, &mut confluent)).unwrap_or_else(|| {
        panic!(
            "not shared (ferrite leads): {:?} / {:?}",
            first.view(),
            confluent.owned()
        )
    });
    assert!(first.view().leader, "the first member leads");
    eprintln!("interop: shared with ferrite leading after {:?}", started.elapsed());

    // The Ferrite member leaves: librdkafka takes everything, then leads
    // when a new Ferrite member joins.
    first.leave();
    wait_for(Duration::from_secs(10), || {
        (confluent.owned()? == [0, 1, 2, 3]).then_some(())
    })
    .unwrap_or_else(|| panic!("confluent did not take over: {:?}", confluent.owned()));
    let second = Running::start(config(&b, group, topic), AssignorKind::Range);
    wait_for(Duration::from_secs(30), || shared_with(&second, &mut confluent)).unwrap_or_else(|| {
        panic!(
            "not shared (librdkafka leads): {:?} / {:?}",
            second.view(),
            confluent.owned()
        )
    });
    assert!(!second.view().leader, "librdkafka leads");
    eprintln!("interop: shared with librdkafka leading after {:?}", started.elapsed());

    // librdkafka leaves: the Ferrite member takes everything.
    confluent.close();
    wait_for(Duration::from_secs(10), || {
        (second.view().assignment == tps(topic, 0..4)).then_some(())
    })
    .unwrap_or_else(|| panic!("ferrite did not take over: {:?}", second.view()));
    eprintln!("interop: ferrite took over after {:?}", started.elapsed());
    second.leave();
}
