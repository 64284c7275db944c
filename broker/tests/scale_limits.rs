//! Partitions against the open-files limit.
//!
//! - More partitions than the limit has room for (two descriptors each if
//!   every segment file stayed open) all take and serve writes: the shard's
//!   file cache keeps at most `ferrite.log.open.files.per.shard` open, and
//!   connections are still accepted.
//! - A topic that the broker cannot create whole (here: a limit lowered
//!   under the broker's feet, below what its cache counts on) is refused
//!   with KAFKA_STORAGE_ERROR and leaves nothing behind — no partition
//!   directory, no metadata — and the broker keeps accepting connections
//!   and creating topics that fit.
//! - Partitions added to a topic that the broker cannot create whole are
//!   refused the same way and taken back: the topic keeps what it had.
//! - A partition held offline elsewhere does not make other topics'
//!   creation or growth look failed.
//! - The same in a three-broker cluster, with the limit lowered on one of
//!   the replica brokers: the topic is deleted again on every broker.
//!   Partitions added there are refused too, but stay listed: a cluster
//!   never shrinks a topic.

mod common;

use std::process::Command;

use std::time::Duration;

use common::cluster::{
    acks_all_everywhere, consume_all, create_partitions, create_topic, latest_offset, leaders_of, metadata, produce,
    serial, wait_brokers, Cluster,
};
use common::Broker;

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

fn set_open_files_limit(pid: u32, limit: usize) {
    let set = Command::new("prlimit")
        .arg("--pid")
        .arg(pid.to_string())
        .arg(format!("--nofile={limit}:{limit}"))
        .status()
        .expect("prlimit (util-linux)");
    assert!(set.success(), "prlimit failed");
}

#[test]
fn more_partitions_than_open_files_all_serve_and_connections_are_accepted() {
    const PARTITIONS: i32 = 300;
    const PER_SHARD: usize = 20;
    let b = Broker::start(&[&format!("ferrite.log.open.files.per.shard={PER_SHARD}")]);
    let pid = b.child.as_ref().expect("running").id();
    // Room for 200 more descriptors: 300 partitions with their read and
    // write descriptors open would need 600.
    let limit = open_fds(pid) + 200;
    set_open_files_limit(pid, limit);

    assert_eq!(create_topic(&b.bootstrap(), "many", PARTITIONS, 1, &[]), 0);
    // Each produce and fetch is a new connection.
    for round in 0..2i64 {
        for p in 0..PARTITIONS {
            let value = format!("p{p}-r{round}");
            assert_eq!(
                produce(&b.bootstrap(), "many", p, 1, value.as_bytes()),
                (0, round),
                "produce {round} to partition {p}"
            );
        }
        assert!(open_fds(pid) < limit, "descriptors: {} of {limit}", open_fds(pid));
    }
    for p in 0..PARTITIONS {
        let values: Vec<Vec<u8>> = consume_all(&b.bootstrap(), "many", p)
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        let expected: Vec<Vec<u8>> = (0..2).map(|r| format!("p{p}-r{r}").into_bytes()).collect();
        assert_eq!(values, expected, "partition {p}");
    }
    // Two shards, each within its cap, plus connections and the like.
    let fds = open_fds(pid);
    assert!(fds < limit - 100, "descriptors: {fds} of {limit}");
    let log = b.log_text();
    assert!(!log.contains("Too many open files"), "the limit was hit: {log}");
}

#[test]
fn a_topic_that_cannot_be_created_whole_is_refused_and_leaves_nothing() {
    let b = Broker::start(&[]);
    let pid = b.child.as_ref().expect("running").id();
    // Room for about 50 more partitions (two descriptors each).
    let limit = open_fds(pid) + 100;
    set_open_files_limit(pid, limit);

    assert_eq!(
        create_topic(&b.bootstrap(), "too-big", 200, 1, &[]),
        56,
        "KAFKA_STORAGE_ERROR"
    );
    let left: Vec<String> = std::fs::read_dir(b.data_dir())
        .expect("data dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("too-big"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let m = metadata(&b.bootstrap(), "too-big").expect("metadata");
    let t = m.topics.iter().find(|t| t.name == "too-big");
    assert!(t.is_none_or(|t| t.error != 0), "the topic is still listed: {t:?}");
    assert!(
        b.log_text().contains("could not all be created"),
        "the refusal is logged"
    );
    // The broker still accepts connections and creates what fits.
    assert_eq!(create_topic(&b.bootstrap(), "fits", 10, 1, &[]), 0);
    assert!(open_fds(pid) < limit, "descriptors released");
}

#[test]
fn partitions_that_cannot_be_added_whole_are_refused_and_taken_back() {
    let b = Broker::start(&[]);
    let pid = b.child.as_ref().expect("running").id();
    assert_eq!(create_topic(&b.bootstrap(), "grows", 2, 1, &[]), 0);
    for p in 0..2 {
        assert_eq!(produce(&b.bootstrap(), "grows", p, 1, b"before"), (0, 0));
    }
    // Room for about 50 more partitions (two descriptors each).
    let limit = open_fds(pid) + 100;
    set_open_files_limit(pid, limit);

    let (code, message) = create_partitions(&b.bootstrap(), "grows", 200);
    assert_eq!(code, 56, "KAFKA_STORAGE_ERROR: {message:?}");
    let message = message.unwrap_or_default();
    assert!(
        message.contains("keeps its 2"),
        "the answer says what is left: {message}"
    );
    let m = metadata(&b.bootstrap(), "grows").expect("metadata");
    let t = m.topics.iter().find(|t| t.name == "grows").expect("listed");
    assert_eq!(t.partitions.len(), 2, "the added partitions were taken back");
    let left: Vec<String> = std::fs::read_dir(b.data_dir())
        .expect("data dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("grows-") && n != "grows-0" && n != "grows-1")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    // The old partitions keep their records and take more; the topic can
    // still grow by what fits.
    for p in 0..2 {
        assert_eq!(produce(&b.bootstrap(), "grows", p, 1, b"after"), (0, 1));
        let values: Vec<Vec<u8>> = consume_all(&b.bootstrap(), "grows", p)
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        assert_eq!(values, vec![b"before".to_vec(), b"after".to_vec()], "partition {p}");
    }
    assert_eq!(create_partitions(&b.bootstrap(), "grows", 6).0, 0);
    assert_eq!(produce(&b.bootstrap(), "grows", 5, 1, b"new"), (0, 0));
    assert!(open_fds(pid) < limit, "descriptors released");
}

/// A partition held offline (its segment could not be opened at start)
/// fails every metadata installation on its shard; that is not the doing
/// of a topic created or grown later, which is created as usual. Requests
/// for it are answered KAFKA_STORAGE_ERROR.
#[test]
fn an_offline_partition_does_not_undo_other_topics() {
    let mut b = Broker::start(&[]);
    assert_eq!(create_topic(&b.bootstrap(), "broken", 1, 1, &[]), 0);
    assert_eq!(produce(&b.bootstrap(), "broken", 0, 1, b"x"), (0, 0));
    b.stop();
    // A segment that cannot be opened: a directory where its file was.
    let dir = b.data_dir().join("broken-0");
    let log = std::fs::read_dir(&dir)
        .expect("partition directory")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "log"))
        .expect("a segment");
    std::fs::remove_file(&log).expect("remove segment");
    std::fs::create_dir(&log).expect("a directory in its place");
    b.spawn();
    assert_eq!(create_topic(&b.bootstrap(), "fine", 4, 1, &[]), 0);
    assert_eq!(create_partitions(&b.bootstrap(), "fine", 6).0, 0);
    for p in 0..6 {
        assert_eq!(produce(&b.bootstrap(), "fine", p, 1, b"y"), (0, 0), "partition {p}");
    }
    assert!(b.log_text().contains("broken-0"), "the offline partition is logged");
    // Clients are told the log is unusable, not that it does not exist.
    const KAFKA_STORAGE_ERROR: i16 = 56;
    assert_eq!(produce(&b.bootstrap(), "broken", 0, 1, b"z").0, KAFKA_STORAGE_ERROR);
    assert_eq!(latest_offset(&b.bootstrap(), "broken", 0).0, KAFKA_STORAGE_ERROR);
}

/// In a cluster, a topic that one replica broker cannot create whole is
/// refused the same way: the broker that took CreateTopics asks every
/// replica broker whether it created its logs, and when one could not, it
/// deletes the topic again and answers KAFKA_STORAGE_ERROR. No broker
/// keeps a partition directory of it, none lists it, and topics that fit
/// are still created.
#[test]
fn in_a_cluster_a_topic_one_broker_cannot_create_is_refused_and_leaves_nothing() {
    let _serial = serial();
    let cluster = Cluster::start(3, &[]);
    wait_brokers(&cluster, 3);
    let first = cluster.brokers[0].bootstrap();
    let pid = cluster.brokers[1].child.as_ref().expect("running").id();
    // Room on broker 2 for about 50 more partitions (two descriptors each).
    let limit = open_fds(pid) + 100;
    set_open_files_limit(pid, limit);

    assert_eq!(create_topic(&first, "too-big", 200, 3, &[]), 56, "KAFKA_STORAGE_ERROR");
    for b in &cluster.brokers {
        let m = metadata(&b.bootstrap(), "too-big").expect("metadata");
        let t = m.topics.iter().find(|t| t.name == "too-big");
        assert!(
            t.is_none_or(|t| t.error != 0),
            "broker {} still lists the topic: {t:?}",
            b.id
        );
    }
    // Deleting is asynchronous (StopReplica from the controller).
    let left = || -> Vec<(i32, String)> {
        cluster
            .brokers
            .iter()
            .flat_map(|b| {
                std::fs::read_dir(b.data_dir())
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("too-big"))
                    .map(move |n| (b.id, n))
            })
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !left().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let kept = left();
    assert!(
        kept.is_empty(),
        "{} directories left behind, first {:?}",
        kept.len(),
        &kept[..kept.len().min(5)]
    );
    assert!(
        cluster.brokers[0].log_text().contains("could not all be created"),
        "the refusal is logged"
    );
    // Nothing keeps the deleted partitions' files open either (a follower
    // view or an idle fetcher holding their replicas did).
    let deleted_open = || -> Vec<String> {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .map(|t| t.to_string_lossy().into_owned())
            .filter(|t| t.ends_with("(deleted)"))
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !deleted_open().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let open = deleted_open();
    assert!(
        open.is_empty(),
        "{} deleted files still open, first {:?}",
        open.len(),
        &open[..open.len().min(3)]
    );
    // What fits is still created, and takes writes on every replica.
    assert_eq!(create_topic(&first, "fits", 6, 3, &[]), 0);
    acks_all_everywhere(&cluster, "fits", 6, b"fits");
    assert!(open_fds(pid) < limit, "broker 2's descriptors released");

    // Growing it past what broker 2 can create is refused too; the new
    // partitions stay listed, and the old ones keep taking acks=all.
    let leaders = leaders_of(&first, "fits", 6).expect("leaders");
    let (code, message) = create_partitions(&first, "fits", 200);
    assert_eq!(code, 56, "KAFKA_STORAGE_ERROR: {message:?}");
    let message = message.unwrap_or_default();
    assert!(message.contains("broker 2"), "the answer names the broker: {message}");
    assert!(message.contains("stay listed"), "and says what is left: {message}");
    let m = metadata(&first, "fits").expect("metadata");
    let t = m.topics.iter().find(|t| t.name == "fits").expect("listed");
    assert_eq!(t.partitions.len(), 200);
    for (p, leader) in leaders.iter().enumerate() {
        let at = cluster.broker_ref(*leader);
        assert_eq!(
            produce(&at.bootstrap(), "fits", p as i32, -1, b"still"),
            (0, 1),
            "partition {p}"
        );
    }
}
