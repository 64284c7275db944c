use super::*;
use ferrite_engine::LeaderEpoch;
use ferrite_protocol::response::Chunk;

fn asked(partition: i32, fetch_offset: i64) -> FetchPartition {
    FetchPartition {
        partition,
        current_leader_epoch: LeaderEpoch::NONE,
        fetch_offset: Offset(fetch_offset),
        log_start_offset: Offset::NONE,
        partition_max_bytes: 1 << 20,
    }
}

fn request(session_id: i32, session_epoch: i32, topics: &[(&str, &[(i32, i64)])]) -> FetchRequest {
    FetchRequest {
        replica_id: -1,
        max_wait_ms: 0,
        min_bytes: 1,
        max_bytes: 1 << 20,
        isolation: ferrite_protocol::fetch::Isolation::ReadUncommitted,
        session_id,
        session_epoch,
        topics: topics
            .iter()
            .map(|(t, ps)| FetchTopic {
                topic: t.to_string(),
                partitions: ps.iter().map(|(p, o)| asked(*p, *o)).collect(),
            })
            .collect(),
        forgotten: Vec::new(),
    }
}

/// The answer a broker would give: every partition `f` names, with the
/// high watermark `hw(topic, partition)` and records where `data` says.
fn answer(f: &FetchRequest, hw: impl Fn(&str, i32) -> i64, data: &[(&str, i32)]) -> Vec<FetchTopicResponse> {
    let mut topics = crate::handlers::fetch::unanswered(f);
    for t in &mut topics {
        for p in &mut t.partitions {
            p.high_watermark = Offset(hw(&t.topic, p.index));
            p.last_stable_offset = p.high_watermark;
            p.log_start_offset = Offset(0);
            if data.contains(&(t.topic.as_str(), p.index)) {
                p.records = vec![Chunk::Bytes(bytes::Bytes::from_static(b"batch"))];
            }
        }
    }
    topics
}

fn named(topics: &[FetchTopicResponse]) -> Vec<(String, i32)> {
    topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic.clone(), p.index)))
        .collect()
}

fn sessions(slots: usize) -> FetchSessions {
    FetchSessions::new(ShardId(1), slots)
}

/// Opens a session over a, b-0 and b-1; returns its id.
fn open(s: &FetchSessions) -> i32 {
    let mut f = request(0, INITIAL_EPOCH, &[("a", &[(0, 0)]), ("b", &[(0, 0), (1, 0)])]);
    let plan = s.prepare(&mut f).unwrap();
    assert_eq!(plan, Plan::Open);
    let (id, topics) = s.finish(plan, &f, answer(&f, |_, _| 5, &[]));
    assert!(id > 0, "a session id");
    assert_eq!(id & 0xff, 1, "the shard in the low byte");
    assert_eq!(named(&topics).len(), 3, "a full answer names every partition");
    id
}

#[test]
fn an_incremental_fetch_answers_only_what_changed() {
    let s = sessions(10);
    let id = open(&s);
    // Nothing named, nothing moved: the whole session is read, nothing sent.
    let mut f = request(id, 1, &[]);
    let plan = s.prepare(&mut f).unwrap();
    assert_eq!(plan, Plan::Incremental { id });
    assert_eq!(
        f.topics.iter().map(|t| t.partitions.len()).sum::<usize>(),
        3,
        "the session's partitions"
    );
    let (sent_id, topics) = s.finish(plan, &f, answer(&f, |_, _| 5, &[]));
    assert_eq!(sent_id, id);
    assert!(topics.is_empty(), "{:?}", named(&topics));
    // b-1 has records, a-0's high watermark moved.
    let mut f = request(id, 2, &[]);
    let plan = s.prepare(&mut f).unwrap();
    let hw = |t: &str, p: i32| if (t, p) == ("a", 0) { 7 } else { 5 };
    let (_, topics) = s.finish(plan, &f, answer(&f, hw, &[("b", 1)]));
    assert_eq!(named(&topics), vec![("a".to_string(), 0), ("b".to_string(), 1)]);
    // The moved high watermark is remembered: not sent again.
    let mut f = request(id, 3, &[]);
    let plan = s.prepare(&mut f).unwrap();
    let (_, topics) = s.finish(plan, &f, answer(&f, hw, &[]));
    assert!(topics.is_empty(), "{:?}", named(&topics));
}

#[test]
fn named_partitions_update_the_session_and_forgotten_ones_leave_it() {
    let s = sessions(10);
    let id = open(&s);
    let mut f = request(id, 1, &[("b", &[(1, 42)]), ("c", &[(0, 0)])]);
    f.forgotten = vec![("a".to_string(), vec![0])];
    let plan = s.prepare(&mut f).unwrap();
    let all: Vec<(String, i32, i64)> = f
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.topic.clone(), p.partition, p.fetch_offset.0))
        })
        .collect();
    assert_eq!(
        all,
        vec![
            ("b".to_string(), 0, 0),
            ("b".to_string(), 1, 42),
            ("c".to_string(), 0, 0)
        ],
        "a-0 forgotten, b-1's offset updated, c-0 added"
    );
    // The new partition has never been answered: it is sent.
    let (_, topics) = s.finish(plan, &f, answer(&f, |_, _| 5, &[]));
    assert_eq!(named(&topics), vec![("c".to_string(), 0)]);
}

#[test]
fn wrong_epochs_unknown_sessions_and_closed_ones_are_refused() {
    let s = sessions(10);
    let id = open(&s);
    assert_eq!(
        s.prepare(&mut request(id, 2, &[])),
        Err(ErrorCode::InvalidFetchSessionEpoch)
    );
    assert_eq!(
        s.prepare(&mut request(id + 256, 1, &[])),
        Err(ErrorCode::FetchSessionIdNotFound)
    );
    let mut follower = request(id, 1, &[]);
    follower.replica_id = 3;
    assert_eq!(
        s.prepare(&mut follower),
        Err(ErrorCode::FetchSessionIdNotFound),
        "a consumer's session"
    );
    // A failed attempt does not move the epoch.
    assert!(s.prepare(&mut request(id, 1, &[])).is_ok());
    // Epoch -1 closes the session and is answered without one.
    let mut close = request(id, FINAL_EPOCH, &[("a", &[(0, 0)])]);
    let plan = s.prepare(&mut close).unwrap();
    assert_eq!(plan, Plan::Sessionless);
    assert_eq!(s.finish(plan, &close, answer(&close, |_, _| 5, &[])).0, 0);
    assert_eq!(
        s.prepare(&mut request(id, 2, &[])),
        Err(ErrorCode::FetchSessionIdNotFound)
    );
    assert_eq!(s.count(), 0);
}

#[test]
fn a_full_cache_answers_without_a_session_and_ids_are_unique() {
    let s = sessions(2);
    let first = open(&s);
    let second = open(&s);
    assert_ne!(first, second);
    // Both in use (idle for less than EVICTABLE_IDLE): no room.
    let mut f = request(0, INITIAL_EPOCH, &[("a", &[(0, 0)])]);
    let plan = s.prepare(&mut f).unwrap();
    assert_eq!(s.finish(plan, &f, answer(&f, |_, _| 5, &[])).0, 0, "no session");
    assert_eq!(s.count(), 2);
    // A full fetch that names its own session replaces it.
    let mut f = request(first, INITIAL_EPOCH, &[("a", &[(0, 0)])]);
    let plan = s.prepare(&mut f).unwrap();
    let (third, _) = s.finish(plan, &f, answer(&f, |_, _| 5, &[]));
    assert!(third > 0 && third != first && third != second);
    assert_eq!(s.count(), 2);
    // No slots: never a session.
    let none = sessions(0);
    let mut f = request(0, INITIAL_EPOCH, &[("a", &[(0, 0)])]);
    let plan = none.prepare(&mut f).unwrap();
    assert_eq!(none.finish(plan, &f, answer(&f, |_, _| 5, &[])).0, 0);
}

#[test]
fn partitions_that_sent_records_go_to_the_end_and_errors_are_sent_again() {
    let s = sessions(10);
    let id = open(&s);
    // a-0 and b-0 send records: the next fetch reads b-1 first.
    let mut f = request(id, 1, &[]);
    let plan = s.prepare(&mut f).unwrap();
    s.finish(plan, &f, answer(&f, |_, _| 5, &[("a", 0), ("b", 0)]));
    let mut f = request(id, 2, &[]);
    let plan = s.prepare(&mut f).unwrap();
    let order: Vec<(String, i32)> = f
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic.clone(), p.partition)))
        .collect();
    assert_eq!(
        order,
        vec![("b".to_string(), 1), ("a".to_string(), 0), ("b".to_string(), 0)],
        "the partitions with records last, in the order they sent them"
    );
    // An error is sent; the same high watermark afterwards is sent again.
    let mut answered = answer(&f, |_, _| 5, &[]);
    answered[0].partitions[0].error = ErrorCode::NotLeaderOrFollower.code();
    let (_, topics) = s.finish(plan, &f, answered);
    assert_eq!(named(&topics), vec![("b".to_string(), 1)]);
    let mut f = request(id, 3, &[]);
    let plan = s.prepare(&mut f).unwrap();
    let (_, topics) = s.finish(plan, &f, answer(&f, |_, _| 5, &[]));
    assert_eq!(
        named(&topics),
        vec![("b".to_string(), 1)],
        "sent again once the error cleared"
    );
}
