//! A fetch naming several partitions answers as if it read them one after
//! another in request order, although it reads them together: the first
//! partition that has bytes returns its whole first batch even past its
//! limit (KIP-74), every other stays within its own limit and what the
//! response's `max_bytes` has left.

mod common;

use bytes::Bytes;
use common::{s, Broker, Client};
use ferrite_engine::batch::build_batch;
use ferrite_engine::{Offset, TimestampMs};
use kafka_protocol::messages::{self as km, TopicName};

const TOPIC: &str = "limits";

fn produce(c: &mut Client, partition: i32, batch: &[u8]) {
    let r = c.call(
        &km::ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![km::produce_request::TopicProduceData::default()
                .with_name(TopicName(s(TOPIC)))
                .with_partition_data(vec![km::produce_request::PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(Bytes::copy_from_slice(batch)))])]),
        9,
    );
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
}

/// Creates `TOPIC` with `partitions` partitions.
fn create_topic(c: &mut Client, partitions: i32) {
    let create = km::CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![km::create_topics_request::CreatableTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_num_partitions(partitions)
            .with_replication_factor(1)]);
    assert_eq!(c.call(&create, 7).topics[0].error_code, 0);
}

/// Bytes each of `partitions` answered (from offset 0, each limited to
/// `partition_max`, the response to `max_bytes`).
fn fetch(c: &mut Client, partitions: &[i32], partition_max: i32, max_bytes: i32) -> Vec<usize> {
    let r = c.call(
        &km::FetchRequest::default()
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(max_bytes)
            .with_topics(vec![km::fetch_request::FetchTopic::default()
                .with_topic(TopicName(s(TOPIC)))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|p| {
                            km::fetch_request::FetchPartition::default()
                                .with_partition(*p)
                                .with_fetch_offset(0)
                                .with_partition_max_bytes(partition_max)
                        })
                        .collect(),
                )]),
        12,
    );
    let answered = &r.responses[0].partitions;
    assert_eq!(answered.len(), partitions.len());
    answered
        .iter()
        .zip(partitions)
        .map(|(p, asked)| {
            assert_eq!(p.partition_index, *asked, "answers in request order");
            assert_eq!(p.error_code, 0, "partition {asked}");
            p.records.as_ref().map_or(0, |r| r.len())
        })
        .collect()
}

#[test]
fn a_fetch_of_several_partitions_keeps_each_limit_as_if_read_in_order() {
    let b = Broker::start(&[]);
    let mut c = Client::connect(b.addr());
    create_topic(&mut c, 4);
    // Partition 0 stays empty; 1 holds one big batch; 2 and 3 two small
    // ones each.
    let big = build_batch(Offset(0), TimestampMs(0), &[&[7u8; 2000][..]]);
    let small = build_batch(Offset(0), TimestampMs(0), &[b"s"]);
    let (big_len, small_len) = (big.len(), small.len());
    produce(&mut c, 1, &big);
    for p in [2, 3] {
        produce(&mut c, p, &small);
        produce(&mut c, p, &small);
    }
    let limit = (small_len + 10) as i32;
    assert!(big_len > limit as usize && 2 * small_len > limit as usize);

    // The empty partition first: partition 1 is the first with bytes and
    // returns its batch past its limit; 2 and 3 one small batch each.
    assert_eq!(
        fetch(&mut c, &[0, 1, 2, 3], limit, 1 << 20),
        vec![0, big_len, small_len, small_len]
    );
    // Partition 2 first: it is the one allowed past its limit (it needs
    // not), so partition 1's big batch, over its limit, is not returned.
    assert_eq!(fetch(&mut c, &[2, 1, 3], limit, 1 << 20), vec![small_len, 0, small_len]);
    // Nothing fits its limit: only the first partition with bytes answers.
    assert_eq!(fetch(&mut c, &[0, 1, 2], 10, 1 << 20), vec![0, big_len, 0]);
    // The big batch leaves the response room for one small batch less
    // than partition 2 needs, then exactly that.
    let budget = (big_len + small_len) as i32;
    assert_eq!(fetch(&mut c, &[1, 2], limit, budget - 1), vec![big_len, 0]);
    assert_eq!(fetch(&mut c, &[1, 2], limit, budget), vec![big_len, small_len]);
    // Limits that add up to more than the response takes (read one at a
    // time): 2 fits, 3 gets what is left.
    let budget = (2 * small_len + small_len) as i32;
    let wide = (2 * small_len) as i32;
    assert_eq!(fetch(&mut c, &[2, 3], wide, budget), vec![2 * small_len, small_len]);
}

/// A fetch of `wanted` (topic, partition) pairs from offset 0 that waits
/// up to `max_wait_ms` for `min_bytes`; its answers (error, bytes) in
/// request order and how long it took.
fn fetch_waiting(
    c: &mut Client,
    wanted: &[(&str, i32)],
    partition_max: i32,
    min_bytes: i32,
    max_bytes: i32,
    max_wait_ms: i32,
) -> (Vec<(i16, usize)>, std::time::Duration) {
    let topics = wanted
        .iter()
        .map(|(t, p)| {
            km::fetch_request::FetchTopic::default()
                .with_topic(TopicName(s(t)))
                .with_partitions(vec![km::fetch_request::FetchPartition::default()
                    .with_partition(*p)
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(partition_max)])
        })
        .collect();
    let started = std::time::Instant::now();
    let r = c.call(
        &km::FetchRequest::default()
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(min_bytes)
            .with_max_bytes(max_bytes)
            .with_topics(topics),
        12,
    );
    let took = started.elapsed();
    let answers = r
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| (p.error_code, p.records.as_ref().map_or(0, |r| r.len())))
        .collect();
    (answers, took)
}

#[test]
fn a_fetch_waits_only_while_min_bytes_could_still_come_from_partitions_that_exist() {
    let b = Broker::start(&[]);
    let mut c = Client::connect(b.addr());
    create_topic(&mut c, 2);
    // Partition 0: eight batches of about 1 KiB; partition 1 stays empty.
    let batch = build_batch(Offset(0), TimestampMs(0), &[&[3u8; 1000][..]]);
    for _ in 0..8 {
        produce(&mut c, 0, &batch);
    }
    let limit = (3 * batch.len() + batch.len() / 2) as i32;
    // Long waits, so that a fetch that waits cannot pass for one that did
    // not (the broker holds a fetch 30 s at most).
    let long_ms = 25_000;
    let quick = std::time::Duration::from_secs(10);

    // min_bytes equal to the partition's limit: three whole batches fit,
    // a fourth does not, so more than the limit is there (Kafka counts the
    // bytes available up to the limit) and the fetch is answered at once.
    let (answers, took) = fetch_waiting(&mut c, &[(TOPIC, 0)], limit, limit, 1 << 20, long_ms);
    assert_eq!(answers, vec![(0, 3 * batch.len())]);
    assert!(took < quick, "waited {took:?} with more than min_bytes there");
    // min_bytes past the response's max_bytes: it could never come.
    let (answers, took) = fetch_waiting(&mut c, &[(TOPIC, 0)], 1 << 20, 10 << 20, limit, long_ms);
    assert_eq!(answers, vec![(0, 3 * batch.len())]);
    assert!(took < quick, "waited {took:?} for more than max_bytes");
    // A fetch naming no partition (a consumer closing its fetch session).
    let (answers, took) = fetch_waiting(&mut c, &[], 1 << 20, 1, 1 << 20, long_ms);
    assert!(answers.is_empty());
    assert!(took < quick, "an empty fetch waited {took:?}");
    // An unknown topic beside an empty partition does not end the empty
    // partition's wait; it is answered with it, UNKNOWN_TOPIC_OR_PARTITION.
    let (answers, took) = fetch_waiting(&mut c, &[("no-such-topic", 0), (TOPIC, 1)], 1 << 20, 1, 1 << 20, 1500);
    assert_eq!(answers, vec![(3, 0), (0, 0)]);
    assert!(
        took >= std::time::Duration::from_millis(1400),
        "answered after {took:?}"
    );
    // Only unknown partitions: nothing to wait for.
    let (answers, took) = fetch_waiting(&mut c, &[("no-such-topic", 0)], 1 << 20, 1, 1 << 20, long_ms);
    assert_eq!(answers, vec![(3, 0)]);
    assert!(took < quick, "waited {took:?} on an unknown topic");
}
