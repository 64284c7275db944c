//! Committed offsets over time, at the protocol level: `__consumer_offsets`
//! is compacted by the log cleaner to the latest value per key, each at the
//! offset it was written at (and still replays to the same offsets after a
//! restart); offsets of a deleted topic are removed; the
//! offsets of a group empty for longer than `offsets.retention.minutes`
//! expire.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{s, Broker, Client};
use ferrite_engine::batch::{validate, Validation, HEADER_BYTES};
use kafka_protocol::messages::{self as km, GroupId, TopicName};

const GROUP: &str = "lifecycle";

fn create_topic(c: &mut Client, name: &str, partitions: i32) {
    let req = km::CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![km::create_topics_request::CreatableTopic::default()
            .with_name(TopicName(s(name)))
            .with_num_partitions(partitions)
            .with_replication_factor(1)]);
    let r = c.call(&req, 7);
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
}

fn find_coordinator(c: &mut Client) {
    let req = km::FindCoordinatorRequest::default().with_key(s(GROUP));
    let r = c.call(&req, 3);
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
}

/// A commit of `offset` for every partition, as a consumer using `assign`
/// does (no member, generation -1).
fn commit(c: &mut Client, topic: &str, partitions: i32, offset: i64) {
    let parts = (0..partitions)
        .map(|p| {
            km::offset_commit_request::OffsetCommitRequestPartition::default()
                .with_partition_index(p)
                .with_committed_offset(offset + i64::from(p))
        })
        .collect();
    let req = km::OffsetCommitRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![km::offset_commit_request::OffsetCommitRequestTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partitions(parts)]);
    let r = c.call(&req, 8);
    for p in &r.topics[0].partitions {
        assert_eq!(p.error_code, 0, "commit of partition {}", p.partition_index);
    }
}

/// The committed offsets of every partition of `topic` (-1: none).
fn fetch(c: &mut Client, topic: &str, partitions: i32) -> Vec<i64> {
    let req = km::OffsetFetchRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_topics(Some(vec![km::offset_fetch_request::OffsetFetchRequestTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partition_indexes((0..partitions).collect())]));
    let r = c.call(&req, 7);
    assert_eq!(r.error_code, 0);
    r.topics[0].partitions.iter().map(|p| p.committed_offset).collect()
}

fn earliest_offsets_topic_offset(c: &mut Client) -> i64 {
    let req = km::ListOffsetsRequest::default()
        .with_replica_id(km::BrokerId(-1))
        .with_topics(vec![km::list_offsets_request::ListOffsetsTopic::default()
            .with_name(TopicName(s("__consumer_offsets")))
            .with_partitions(vec![km::list_offsets_request::ListOffsetsPartition::default(
            )
            .with_partition_index(0)
            .with_timestamp(-2)])]);
    let r = c.call(&req, 7);
    r.topics[0].partitions[0].offset
}

fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    start.elapsed()
}

/// Every record of `__consumer_offsets-0` from offset 0, by offset: its
/// key and value bytes (value `None`: a tombstone).
fn offsets_topic_records(c: &mut Client) -> BTreeMap<i64, (Vec<u8>, Option<Vec<u8>>)> {
    let mut out = BTreeMap::new();
    let mut offset = 0i64;
    loop {
        let req = km::FetchRequest::default()
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_topics(vec![km::fetch_request::FetchTopic::default()
                .with_topic(TopicName(s("__consumer_offsets")))
                .with_partitions(vec![km::fetch_request::FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1 << 20)])]);
        let r = c.call(&req, 12);
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch of __consumer_offsets at {offset}");
        let records = p.records.clone().unwrap_or_default();
        if records.is_empty() {
            return out;
        }
        let mut at = 0;
        while at < records.len() {
            let info = validate(&records[at..], 1 << 20, Validation::Stored).expect("a whole batch");
            let batch = &records[at..at + info.size];
            let mut body = Vec::new();
            let parsed = ferrite_engine::clean_filter::records_of(batch, &info, &mut body, 1 << 20).expect("records");
            for r in parsed.into_iter().flatten() {
                let o = info.base_offset.0 + i64::from(r.offset_delta);
                let previous = out.insert(o, (r.key.unwrap_or_default().to_vec(), r.value.map(<[u8]>::to_vec)));
                assert!(previous.is_none(), "offset {o} read twice");
            }
            offset = info.next_offset().0;
            at += info.size;
        }
        assert!(at == records.len() && records.len() > HEADER_BYTES);
    }
}

/// The log cleaner compacts `__consumer_offsets` as Kafka's does: each key's
/// latest record stays at the offset it was written at, the log start does
/// not move, and the coordinator replays the cleaned log to the same
/// offsets. (Before the cleaner, the coordinator re-wrote the live values
/// at new offsets and deleted the old segments.)
#[test]
fn offsets_are_compacted_in_place_survive_a_restart_and_go_with_their_topic() {
    // First without the cleaner, to see every record as written.
    let mut b = Broker::start(&[
        "offsets.topic.num.partitions=1",
        "offsets.topic.segment.bytes=4096",
        "offsets.retention.check.interval.ms=1000",
        "log.cleaner.backoff.ms=200",
        "log.cleaner.enable=false",
    ]);
    let mut c = Client::connect(b.addr());
    create_topic(&mut c, "t", 4);
    find_coordinator(&mut c);
    for i in 0..600 {
        commit(&mut c, "t", 4, i * 10);
    }
    assert_eq!(fetch(&mut c, "t", 4), vec![5990, 5991, 5992, 5993]);
    let written = offsets_topic_records(&mut c);
    assert!(written.len() >= 2400, "every commit is in the log: {}", written.len());
    b.stop();
    b.overrides.retain(|o| o != "log.cleaner.enable=false");
    b.spawn();
    let mut c = Client::connect(b.addr());
    // 2400 records, 4 of them live: the cleaner removes the rest below the
    // active segment.
    let mut cleaned = BTreeMap::new();
    let took = wait_for("compaction", Duration::from_secs(20), || {
        cleaned = offsets_topic_records(&mut c);
        cleaned.len() < 200
    });
    // A pass swaps its groups in one after another: the log is read again
    // until it stays the same (the pass is over).
    loop {
        std::thread::sleep(Duration::from_millis(1_000));
        let again = offsets_topic_records(&mut c);
        if again == cleaned {
            break;
        }
        cleaned = again;
    }
    eprintln!("compacted within {took:?} to {} records", cleaned.len());
    for (offset, record) in &cleaned {
        assert_eq!(
            written.get(offset),
            Some(record),
            "offset {offset} holds what was written there"
        );
    }
    let last_commit: Vec<i64> = written.keys().rev().take(4).copied().collect();
    for o in &last_commit {
        assert!(cleaned.contains_key(o), "the latest commit at offset {o} is kept there");
    }
    assert_eq!(
        earliest_offsets_topic_offset(&mut c),
        0,
        "compaction does not move the log start"
    );
    assert_eq!(fetch(&mut c, "t", 4), vec![5990, 5991, 5992, 5993]);
    b.stop();
    b.spawn();
    let mut c = Client::connect(b.addr());
    assert_eq!(
        fetch(&mut c, "t", 4),
        vec![5990, 5991, 5992, 5993],
        "the compacted log replays"
    );
    assert_eq!(
        offsets_topic_records(&mut c),
        cleaned,
        "the cleaned log is the same after a restart"
    );
    let req = km::DeleteTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topic_names(vec![TopicName(s("t"))]);
    let r = c.call(&req, 5);
    assert_eq!(r.responses[0].error_code, 0);
    wait_for("offsets of the deleted topic removed", Duration::from_secs(10), || {
        fetch(&mut c, "t", 4) == vec![-1, -1, -1, -1]
    });
}

#[test]
fn offsets_of_a_group_empty_past_the_retention_expire() {
    let b = Broker::start(&[
        "offsets.retention.minutes=0",
        "offsets.retention.check.interval.ms=1000",
    ]);
    let mut c = Client::connect(b.addr());
    create_topic(&mut c, "e", 2);
    find_coordinator(&mut c);
    commit(&mut c, "e", 2, 7);
    // Expiry runs once a second: the offsets may be seen for at most that.
    wait_for("offsets expired", Duration::from_secs(10), || {
        fetch(&mut c, "e", 2) == vec![-1, -1]
    });
    let r = c.call(&km::ListGroupsRequest::default(), 4);
    assert!(
        !r.groups.iter().any(|g| g.group_id.0.as_str() == GROUP),
        "the expired group is gone: {:?}",
        r.groups
    );
}
