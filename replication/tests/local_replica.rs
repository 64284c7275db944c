//! `LocalReplica` on real engine logs: a leader and a follower on one glommio
//! executor, with the network and ZooKeeper played by the test.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use ferrite_engine::batch::build_batch;
use ferrite_engine::clock::SystemClock;
use ferrite_engine::{
    LeaderEpoch, LogConfig, Offset, OpenParams, PartitionLog, Repair, SizeLimit, TimestampMs, TopicPartition, WriteMode,
};
use ferrite_replication::{
    Acks, Backoff, BrokerId, IsrWrite, IsrWriteOutcome, LeaderAndIsr, LocalReplica, MonoMs, ReplicaConfig,
    ReplicaLinks, RoleKind, ZkVersion,
};

const A: BrokerId = BrokerId(1);
const B: BrokerId = BrokerId(2);
const C: BrokerId = BrokerId(3);

#[derive(Debug)]
enum Call {
    WriteIsr(IsrWrite),
    AskEpochEnd { leader: BrokerId, epoch: LeaderEpoch },
    Start(BrokerId),
    Stop,
    Resign(LeaderEpoch, Offset),
}

#[derive(Default)]
struct Links(RefCell<Vec<Call>>);

impl ReplicaLinks for Links {
    fn write_isr(&self, _tp: &TopicPartition, write: IsrWrite) {
        self.0.borrow_mut().push(Call::WriteIsr(write));
    }
    fn ask_epoch_end(&self, _tp: &TopicPartition, leader: BrokerId, epoch: LeaderEpoch, _backoff: Backoff) {
        self.0.borrow_mut().push(Call::AskEpochEnd { leader, epoch });
    }
    fn start_fetching(&self, _tp: &TopicPartition, leader: BrokerId, _offset: Offset) {
        self.0.borrow_mut().push(Call::Start(leader));
    }
    fn stop_fetching(&self, _tp: &TopicPartition) {
        self.0.borrow_mut().push(Call::Stop);
    }
    fn resign(&self, _tp: &TopicPartition, leader_epoch: LeaderEpoch, offset: Offset) {
        self.0.borrow_mut().push(Call::Resign(leader_epoch, offset));
    }
}

struct Node {
    id: BrokerId,
    replica: LocalReplica,
    links: Rc<Links>,
    fetching: RefCell<Option<BrokerId>>,
    /// Resignations asked for, as `pump` took them from `links`.
    resigned: RefCell<Vec<(LeaderEpoch, Offset)>>,
}

fn run<T>(f: impl std::future::Future<Output = T>) -> T {
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .make()
        .expect("executor")
        .run(f)
}

async fn node(id: BrokerId, dir: &Path, min_isr: usize) -> Node {
    node_with(id, dir, min_isr, LogConfig::default()).await
}

async fn node_with(id: BrokerId, dir: &Path, min_isr: usize, config: LogConfig) -> Node {
    let log = PartitionLog::open(OpenParams {
        tp: TopicPartition::new("t", 0),
        dir: dir.to_path_buf(),
        config,
        mode: WriteMode::Buffered,
        clock: Rc::new(SystemClock),
        repair: Repair::Refuse,
        cache_budget: ferrite_engine::batch_cache::CacheBudget::unshared(),
        file_cache: ferrite_engine::file_cache::FileCache::unbounded(),
    })
    .await
    .unwrap();
    let links = Rc::new(Links::default());
    let config = ReplicaConfig {
        min_insync_replicas: min_isr,
        ..ReplicaConfig::default()
    };
    let replica = LocalReplica::new(log, id, config, Offset(0), links.clone());
    Node {
        id,
        replica,
        links,
        fetching: RefCell::new(None),
        resigned: RefCell::new(Vec::new()),
    }
}

fn state(leader: BrokerId, epoch: i32, isr: &[BrokerId]) -> LeaderAndIsr {
    state_of(&[A, B], leader, epoch, isr)
}

fn state_of(replicas: &[BrokerId], leader: BrokerId, epoch: i32, isr: &[BrokerId]) -> LeaderAndIsr {
    LeaderAndIsr {
        leader: Some(leader),
        leader_epoch: LeaderEpoch(epoch),
        isr: isr.to_vec(),
        replicas: replicas.to_vec(),
        zk_version: ZkVersion(epoch),
    }
}

fn batch(n: usize, fill: u8) -> BytesMut {
    let value = [fill; 100];
    let values: Vec<&[u8]> = (0..n).map(|_| &value[..]).collect();
    BytesMut::from(&build_batch(Offset(0), TimestampMs(1), &values)[..])
}

/// Every batch of a log, as bytes.
async fn all_bytes(log: &PartitionLog) -> Vec<u8> {
    let end = log.log_end_offset();
    let mut out = Vec::new();
    let mut at = log.log_start_offset();
    while at < end {
        let read = log.read(at, 1 << 20, end, SizeLimit::AtLeastOneBatch).await.unwrap();
        out.extend(read.to_vec().await.unwrap());
        at = read.next_offset;
    }
    out
}

/// Plays the network and ZooKeeper between `nodes` for `rounds` rounds:
/// answers every call, and lets each fetching follower fetch once.
async fn pump(nodes: &[&Node], zk_version: &RefCell<i32>, rounds: usize) {
    let by_id = |id: BrokerId| nodes.iter().find(|n| n.id == id).copied().unwrap();
    for round in 0..rounds {
        let now = MonoMs(round as u64);
        for n in nodes {
            let calls: Vec<Call> = n.links.0.borrow_mut().drain(..).collect();
            for call in calls {
                match call {
                    Call::WriteIsr(w) => {
                        assert_eq!(
                            w.expected,
                            ZkVersion(*zk_version.borrow()),
                            "ISR write at a stale version"
                        );
                        *zk_version.borrow_mut() += 1;
                        let version = ZkVersion(*zk_version.borrow());
                        n.replica
                            .isr_written(w.leader_epoch, IsrWriteOutcome::Written { version })
                            .await
                            .unwrap();
                    }
                    Call::AskEpochEnd { leader, epoch } => {
                        let current = n.replica.leader_epoch();
                        let answer = by_id(leader).replica.answer_epoch_end(Some(current), epoch);
                        n.replica.epoch_end_received(epoch, current, answer).await.unwrap();
                    }
                    Call::Start(leader) => *n.fetching.borrow_mut() = Some(leader),
                    Call::Stop => *n.fetching.borrow_mut() = None,
                    Call::Resign(e, o) => n.resigned.borrow_mut().push((e, o)),
                }
            }
            let Some(leader) = *n.fetching.borrow() else { continue };
            let leader = by_id(leader);
            let from = n.replica.log().log_end_offset();
            let fetched_in = n.replica.leader_epoch();
            let grant = leader
                .replica
                .replica_fetch(n.id, from, Some(fetched_in), now)
                .await
                .unwrap();
            let records = if from < grant.log_end {
                let read = leader
                    .replica
                    .log()
                    .read(from, 1 << 20, grant.log_end, SizeLimit::AtLeastOneBatch)
                    .await
                    .unwrap();
                Bytes::from(read.to_vec().await.unwrap())
            } else {
                Bytes::new()
            };
            let leader_start = leader.replica.log().log_start_offset();
            n.replica
                .append_fetched(records, grant.hw, leader_start, fetched_in)
                .await
                .unwrap();
        }
    }
}

#[test]
fn acks_all_waits_for_the_follower_and_the_logs_end_identical() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    run(async {
        let a = Rc::new(node(A, da.path(), 2).await);
        let b = node(B, db.path(), 2).await;
        let zk = RefCell::new(1);
        a.replica
            .leader_and_isr(&state(A, 1, &[A, B]), MonoMs(0))
            .await
            .unwrap();
        b.replica
            .leader_and_isr(&state(A, 1, &[A, B]), MonoMs(0))
            .await
            .unwrap();
        assert_eq!(
            (a.replica.role(), b.replica.role()),
            (RoleKind::Leader, RoleKind::Follower)
        );
        let producer = {
            let a = a.clone();
            glommio::spawn_local(async move { a.replica.produce(batch(10, 7), Acks::All, MonoMs(u64::MAX)).await })
                .detach()
        };
        glommio::yield_if_needed().await;
        glommio::timer::sleep(std::time::Duration::from_millis(20)).await;
        // Nobody fetched yet: the record is appended but not committed.
        assert_eq!(a.replica.log().log_end_offset(), Offset(10));
        assert_eq!(a.replica.hw(), Offset(0));
        pump(&[&a, &b], &zk, 3).await;
        let info = producer.await.unwrap().unwrap();
        assert_eq!(info.last_offset, Offset(9));
        assert_eq!(a.replica.hw(), Offset(10));
        assert_eq!(b.replica.hw(), Offset(10));
        assert_eq!(all_bytes(a.replica.log()).await, all_bytes(b.replica.log()).await);
        // A caught-up follower stays in the ISR however long it is quiet
        // (Kafka's rule); once the leader has more, a silent one leaves, and
        // acks=all is refused.
        a.replica.tick(MonoMs(1_000_000)).await.unwrap();
        assert_eq!(a.replica.isr(), Some(vec![A, B]));
        a.replica
            .produce(batch(1, 1), Acks::Leader, MonoMs(u64::MAX))
            .await
            .unwrap();
        a.replica.tick(MonoMs(2_000_000)).await.unwrap();
        pump(&[&a], &zk, 1).await;
        assert_eq!(a.replica.isr(), Some(vec![A]));
        let refused = a.replica.produce(batch(1, 1), Acks::All, MonoMs(u64::MAX)).await;
        assert!(
            matches!(
                refused,
                Err(ferrite_replication::ReplicaOpError::Replication(
                    ferrite_replication::ReplicationError::NotEnoughReplicas { .. }
                ))
            ),
            "{refused:?}"
        );
        assert_eq!(
            a.replica.log().log_end_offset(),
            Offset(11),
            "a refused produce appended"
        );
    });
}

#[test]
fn a_diverged_follower_truncates_to_the_new_leaders_epoch_and_rejoins() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    run(async {
        let a = node(A, da.path(), 1).await;
        let b = node(B, db.path(), 1).await;
        let zk = RefCell::new(1);
        for n in [&a, &b] {
            n.replica
                .leader_and_isr(&state(A, 1, &[A, B]), MonoMs(0))
                .await
                .unwrap();
        }
        a.replica
            .produce(batch(5, 1), Acks::Leader, MonoMs(u64::MAX))
            .await
            .unwrap();
        pump(&[&a, &b], &zk, 3).await;
        assert_eq!(b.replica.log().log_end_offset(), Offset(5));
        // A, cut off, goes on leading in epoch 2 and takes three records no
        // one else gets; B is elected in epoch 3 and takes two.
        *zk.borrow_mut() = 2;
        a.replica.leader_and_isr(&state(A, 2, &[A]), MonoMs(1)).await.unwrap();
        a.replica
            .produce(batch(3, 2), Acks::Leader, MonoMs(u64::MAX))
            .await
            .unwrap();
        *zk.borrow_mut() = 3;
        b.replica.leader_and_isr(&state(B, 3, &[B]), MonoMs(1)).await.unwrap();
        b.replica
            .produce(batch(2, 3), Acks::Leader, MonoMs(u64::MAX))
            .await
            .unwrap();
        assert_eq!(a.replica.log().log_end_offset(), Offset(8));
        // A learns it follows B: it cuts its epoch-2 records and fetches.
        a.replica.leader_and_isr(&state(B, 3, &[B]), MonoMs(2)).await.unwrap();
        pump(&[&a, &b], &zk, 4).await;
        assert_eq!(a.replica.log().log_end_offset(), Offset(7));
        assert_eq!(all_bytes(a.replica.log()).await, all_bytes(b.replica.log()).await);
        let epochs: Vec<(i32, i64)> = a
            .replica
            .log()
            .epoch_entries()
            .iter()
            .map(|e| (e.epoch.0, e.start_offset.0))
            .collect();
        assert_eq!(epochs, vec![(1, 0), (3, 5)]);
        // And it rejoined B's ISR.
        assert_eq!(b.replica.isr(), Some(vec![A, B]));
        assert_eq!(b.replica.hw(), Offset(7));
    });
}

/// Lets every other ready task run once.
async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await
}

/// Found by the reassignment-under-load cluster test: a follower's append of
/// records fetched from the old leader was still running when the new
/// leader's epoch-end answer arrived, so the truncation point was chosen
/// from the log end before that append; the old leader's record then landed
/// at an offset where the new leader holds another, and the follower's next
/// fetch offset told the leader it had replicated it. The append now
/// finishes first, and the truncation cuts its record.
#[test]
fn a_fetch_in_flight_when_the_leader_changes_is_cut_by_the_truncation() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    run(async {
        let a = node(A, dirs[0].path(), 1).await;
        let b = Rc::new(node(B, dirs[1].path(), 1).await);
        let c = node(C, dirs[2].path(), 1).await;
        let all = [A, B, C];
        let zk = RefCell::new(1);
        for n in [&a, &*b, &c] {
            n.replica
                .leader_and_isr(&state_of(&all, A, 1, &all), MonoMs(0))
                .await
                .unwrap();
        }
        a.replica
            .produce(batch(5, 1), Acks::Leader, MonoMs(u64::MAX))
            .await
            .unwrap();
        pump(&[&a, &b, &c], &zk, 3).await;
        // A takes one more record; B has fetched it, C has not.
        a.replica
            .produce(batch(1, 2), Acks::Leader, MonoMs(u64::MAX))
            .await
            .unwrap();
        let grant = a
            .replica
            .replica_fetch(B, Offset(5), Some(LeaderEpoch(1)), MonoMs(1))
            .await
            .unwrap();
        let read = a
            .replica
            .log()
            .read(Offset(5), 1 << 20, grant.log_end, SizeLimit::AtLeastOneBatch)
            .await
            .unwrap();
        let stale = Bytes::from(read.to_vec().await.unwrap());
        // C is elected in epoch 2 and takes a record of its own at 5.
        c.replica
            .leader_and_isr(&state_of(&all, C, 2, &[B, C]), MonoMs(2))
            .await
            .unwrap();
        c.replica
            .produce(batch(1, 3), Acks::Leader, MonoMs(u64::MAX))
            .await
            .unwrap();
        // B's append of A's record is under way when it learns of epoch 2.
        let append = {
            let b = b.clone();
            glommio::spawn_local(async move {
                b.replica
                    .append_fetched(stale, grant.hw, Offset(0), LeaderEpoch(1))
                    .await
            })
            .detach()
        };
        yield_now().await;
        b.replica
            .leader_and_isr(&state_of(&all, C, 2, &[B, C]), MonoMs(2))
            .await
            .unwrap();
        let answer = c.replica.answer_epoch_end(Some(LeaderEpoch(2)), LeaderEpoch(1));
        assert!(matches!(answer, Ok(Some((LeaderEpoch(1), Offset(5))))), "{answer:?}");
        b.replica
            .epoch_end_received(LeaderEpoch(1), LeaderEpoch(2), answer)
            .await
            .unwrap();
        append.await.unwrap().unwrap();
        b.links
            .0
            .borrow_mut()
            .retain(|call| !matches!(call, Call::AskEpochEnd { .. }));
        pump(&[&b, &c], &zk, 3).await;
        assert_eq!(b.replica.log().log_end_offset(), Offset(6));
        assert_eq!(all_bytes(b.replica.log()).await, all_bytes(c.replica.log()).await);
    });
}

/// Leader A and follower B (ISR both, epoch 1) on logs of 2 KiB segments,
/// after 30 batches of 4 records produced and fetched one at a time, so
/// that both logs rolled many times.
async fn rolled_pair(da: &Path, db: &Path) -> (Node, Node, RefCell<i32>) {
    let small = LogConfig {
        segment_bytes: 2048,
        ..LogConfig::default()
    };
    let a = node_with(A, da, 1, small.clone()).await;
    let b = node_with(B, db, 1, small).await;
    let zk = RefCell::new(1);
    for n in [&a, &b] {
        n.replica
            .leader_and_isr(&state(A, 1, &[A, B]), MonoMs(0))
            .await
            .unwrap();
    }
    for fill in 0..30u8 {
        a.replica
            .produce(batch(4, fill), Acks::Leader, MonoMs(u64::MAX))
            .await
            .unwrap();
        pump(&[&a, &b], &zk, 1).await;
    }
    pump(&[&a, &b], &zk, 2).await;
    (a, b, zk)
}

/// A log directory's segment files, oldest first.
fn segment_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    files
}

/// Flips a byte of the first batch of segment `file`, at `at(batch size)`;
/// returns the batch's base offset.
fn rot_first_batch(file: &Path, at: impl Fn(usize) -> usize) -> Offset {
    let mut bytes = std::fs::read(file).unwrap();
    let first = ferrite_engine::batch::peek(&bytes).unwrap();
    bytes[at(first.size)] ^= 0x5a;
    std::fs::write(file, &bytes).unwrap();
    first.base_offset
}

/// The resignations a node asked for: (its epoch, the damaged offset).
fn resigns(n: &Node) -> Vec<(LeaderEpoch, Offset)> {
    let pending = n.links.0.borrow();
    let still_in_links = pending.iter().filter_map(|c| match c {
        Call::Resign(e, o) => Some((*e, *o)),
        _ => None,
    });
    n.resigned.borrow().iter().copied().chain(still_in_links).collect()
}

/// One scrub pass over `log`, which must find damage.
async fn scrub_finds(log: &PartitionLog) -> ferrite_engine::scrub::Damage {
    log.scrub(&mut ferrite_engine::scrub::ScrubPacer::new(1 << 30))
        .await
        .unwrap()
        .damage
        .expect("damage found")
}

/// The scrubber finds a byte changed in a closed segment of a follower, far
/// below the HW: the follower stops serving the range and asks to leave the
/// ISR; only the LeaderAndIsr that leaves it out lets it cut its log there,
/// and it fetches the rest again, ending identical to the leader and back in
/// its ISR.
#[test]
fn a_follower_heals_a_damaged_range_by_fetching_it_again() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    run(async {
        let (a, b, zk) = rolled_pair(da.path(), db.path()).await;
        let end = a.replica.log().log_end_offset();
        assert_eq!((b.replica.log().log_end_offset(), b.replica.hw()), (end, end));
        b.replica.log().flush().await.unwrap();
        let files = segment_files(db.path());
        assert!(files.len() > 3, "{files:?}");
        // A record byte in the second segment's first batch.
        let damaged = rot_first_batch(&files[1], |size| size - 20);
        let found = scrub_finds(b.replica.log()).await;
        assert_eq!(found.offset, damaged);
        assert!(found.offset < b.replica.hw(), "far below the HW");
        assert!(b
            .replica
            .log()
            .read(found.offset, 1 << 20, end, SizeLimit::AtLeastOneBatch)
            .await
            .is_err());
        // An ISR member does not cut below the HW: it asks, once an epoch,
        // to be taken out of the ISR.
        pump(&[&a, &b], &zk, 3).await;
        assert!(b.replica.log().is_damaged(), "no cut while in the ISR");
        assert_eq!(resigns(&b), vec![(LeaderEpoch(1), found.offset)]);
        // The controller's answer: a new epoch without it in the ISR.
        for n in [&a, &b] {
            n.replica.leader_and_isr(&state(A, 2, &[A]), MonoMs(10)).await.unwrap();
        }
        assert!(!b.replica.log().is_damaged(), "the range was cut away");
        assert_eq!(b.replica.log().log_end_offset(), found.offset);
        *zk.borrow_mut() = 2;
        pump(&[&a, &b], &zk, 6).await;
        assert_eq!(b.replica.log().log_end_offset(), end);
        assert_eq!(b.replica.hw(), end);
        assert_eq!(a.replica.isr(), Some(vec![A, B]), "back in the ISR once caught up");
        assert_eq!(all_bytes(b.replica.log()).await, all_bytes(a.replica.log()).await);
        // The rewritten segment checks clean.
        let again = b
            .replica
            .log()
            .scrub(&mut ferrite_engine::scrub::ScrubPacer::new(1 << 30))
            .await
            .unwrap();
        assert!(again.damage.is_none());
    });
}

/// A damaged leader asks to hand leadership over (again after
/// `RESIGN_RETRY_MS` while it still leads); once the controller makes it a
/// follower of an in-sync replica, it cuts its log at the damage and
/// fetches the range again.
#[test]
fn a_damaged_leader_asks_to_resign_and_heals_as_a_follower() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    run(async {
        let (a, b, zk) = rolled_pair(da.path(), db.path()).await;
        let end = a.replica.log().log_end_offset();
        a.replica.log().flush().await.unwrap();
        let files = segment_files(da.path());
        let damaged = rot_first_batch(&files[2], |_| 30);
        let found = scrub_finds(a.replica.log()).await;
        assert_eq!(found.offset, damaged);
        let t0 = 1_000_000;
        a.replica.tick(MonoMs(t0)).await.unwrap();
        assert_eq!(resigns(&a), vec![(LeaderEpoch(1), found.offset)]);
        a.replica.tick(MonoMs(t0 + 1_000)).await.unwrap();
        assert_eq!(resigns(&a).len(), 1, "asked once per retry interval");
        a.replica
            .tick(MonoMs(t0 + ferrite_replication::leader::RESIGN_RETRY_MS))
            .await
            .unwrap();
        assert_eq!(resigns(&a).len(), 2);
        // The controller moves leadership to B and takes A out of the ISR.
        for n in [&a, &b] {
            n.replica.leader_and_isr(&state(B, 2, &[B]), MonoMs(t0)).await.unwrap();
        }
        assert_eq!(a.replica.role(), RoleKind::Follower);
        *zk.borrow_mut() = 2;
        pump(&[&a, &b], &zk, 8).await;
        assert!(!a.replica.log().is_damaged(), "the range was fetched again");
        assert_eq!(a.replica.log().log_end_offset(), end);
        assert_eq!(all_bytes(a.replica.log()).await, all_bytes(b.replica.log()).await);
        assert_eq!(b.replica.isr(), Some(vec![A, B]), "A rejoined once caught up");
    });
}
