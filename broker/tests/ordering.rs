//! A connection's requests take effect in the order they were sent, as in
//! Kafka: conflicting writes pipelined on one connection (offset commits,
//! produces to the same partitions, config changes) end in the state of the
//! last one, and a read pipelined behind them sees them all.

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use common::{s, Broker, Client};
use ferrite_engine::batch::{build_batch, validate, Validation, HEADER_BYTES};
use ferrite_engine::record::decode_records;
use ferrite_engine::{Offset, TimestampMs};
use kafka_protocol::messages::{self as km, GroupId, TopicName};

/// How many conflicting writes each test pipelines.
const WRITES: i64 = 50;

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

fn commit_request(group: &str, topic: &str, offset: i64) -> km::OffsetCommitRequest {
    km::OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![km::offset_commit_request::OffsetCommitRequestTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partitions(vec![
                km::offset_commit_request::OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(offset),
            ])])
}

fn offset_fetch_request(group: &str, topic: &str) -> km::OffsetFetchRequest {
    km::OffsetFetchRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(Some(vec![km::offset_fetch_request::OffsetFetchRequestTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partition_indexes(vec![0])]))
}

/// Asks for the group's coordinator until it is there (the first call
/// creates `__consumer_offsets`), as a consumer does before committing.
fn find_coordinator(c: &mut Client, group: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let r = c.call(&km::FindCoordinatorRequest::default().with_key(s(group)), 3);
        if r.error_code == 0 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no coordinator: {:?}",
            r.error_message
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn committed(r: &km::OffsetFetchResponse) -> i64 {
    assert_eq!(r.error_code, 0);
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.committed_offset
}

#[test]
fn pipelined_offset_commits_end_at_the_last_one() {
    let b = Broker::start(&[]);
    let mut c = Client::connect(b.addr());
    create_topic(&mut c, "committed", 1);
    for round in 0..3 {
        let group = format!("ordered-{round}");
        find_coordinator(&mut c, &group);
        for offset in 1..=WRITES {
            c.send(&commit_request(&group, "committed", offset), 8);
        }
        // Pipelined behind the commits: it must see every one of them.
        c.send(&offset_fetch_request(&group, "committed"), 7);
        for offset in 1..=WRITES {
            let r = c.response::<km::OffsetCommitRequest>(8).expect("commit answer");
            assert_eq!(r.topics[0].partitions[0].error_code, 0, "commit of {offset}");
        }
        let seen = committed(&c.response::<km::OffsetFetchRequest>(7).expect("offset fetch answer"));
        assert_eq!(seen, WRITES, "round {round}: the fetch pipelined behind the commits");
        let after = committed(&c.call(&offset_fetch_request(&group, "committed"), 7));
        assert_eq!(after, WRITES, "round {round}: the commits took effect out of order");
    }
}

fn produce_request(topic: &str, partitions: &[i32], value: &str) -> km::ProduceRequest {
    let data = partitions
        .iter()
        .map(|&p| {
            let batch = build_batch(Offset(0), TimestampMs(0), &[value.as_bytes()]);
            km::produce_request::PartitionProduceData::default()
                .with_index(p)
                .with_records(Some(Bytes::from(batch)))
        })
        .collect();
    km::ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![km::produce_request::TopicProduceData::default()
            .with_name(TopicName(s(topic)))
            .with_partition_data(data)])
}

/// Every value of one partition, in offset order.
fn read_partition(c: &mut Client, topic: &str, partition: i32) -> Vec<String> {
    let mut out = BTreeMap::new();
    let mut offset = 0i64;
    loop {
        let req = km::FetchRequest::default()
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_topics(vec![km::fetch_request::FetchTopic::default()
                .with_topic(TopicName(s(topic)))
                .with_partitions(vec![km::fetch_request::FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1 << 20)])]);
        let r = c.call(&req, 12);
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0);
        let records = p.records.clone().unwrap_or_default();
        if records.is_empty() {
            return out.into_values().collect();
        }
        let mut at = 0;
        while at < records.len() {
            let info = validate(&records[at..], 1 << 20, Validation::Stored).expect("a whole batch");
            let batch = &records[at..at + info.size];
            for r in decode_records(&batch[HEADER_BYTES..], info.record_count).expect("records") {
                let value = String::from_utf8(r.value.unwrap_or_default().to_vec()).expect("utf-8");
                out.insert(info.base_offset.0 + i64::from(r.offset_delta), value);
            }
            offset = info.next_offset().0;
            at += info.size;
        }
    }
}

/// Produces pipelined with acks=1 to two partitions (one on each shard, so
/// that one is a hop away from the connection's shard), every other request
/// to partition 1 alone: each partition holds the values in the order they
/// were sent, at offsets in the order of the answers.
#[test]
fn pipelined_produces_to_one_partition_land_in_order() {
    let b = Broker::start(&[]);
    let mut c = Client::connect(b.addr());
    for round in 0..3 {
        let topic = format!("produced-{round}");
        create_topic(&mut c, &topic, 2);
        let mut sent = [Vec::new(), Vec::new()];
        for i in 0..WRITES {
            let value = format!("value-{i:03}");
            let partitions: &[i32] = if i % 2 == 0 { &[0, 1] } else { &[1] };
            for &p in partitions {
                sent[p as usize].push(value.clone());
            }
            c.send(&produce_request(&topic, partitions, &value), 9);
        }
        let mut bases = [Vec::new(), Vec::new()];
        for i in 0..WRITES {
            let r = c.response::<km::ProduceRequest>(9).expect("produce answer");
            for p in &r.responses[0].partition_responses {
                assert_eq!(p.error_code, 0, "produce {i} to partition {}", p.index);
                bases[p.index as usize].push(p.base_offset);
            }
        }
        for p in 0..2 {
            let expected: Vec<i64> = (0..sent[p].len() as i64).collect();
            assert_eq!(
                bases[p], expected,
                "round {round}: base offsets of partition {p} in answer order"
            );
            assert_eq!(
                read_partition(&mut c, &topic, p as i32),
                sent[p],
                "round {round}: partition {p} holds the values out of order"
            );
        }
    }
}

fn alter_retention(topic: &str, retention_ms: i64) -> km::IncrementalAlterConfigsRequest {
    km::IncrementalAlterConfigsRequest::default().with_resources(vec![
        km::incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(topic))
            .with_configs(vec![km::incremental_alter_configs_request::AlterableConfig::default()
                .with_name(s("retention.ms"))
                .with_config_operation(0)
                .with_value(Some(s(&retention_ms.to_string())))]),
    ])
}

fn describe_retention(topic: &str) -> km::DescribeConfigsRequest {
    km::DescribeConfigsRequest::default().with_resources(vec![
        km::describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(topic))
            .with_configuration_keys(Some(vec![s("retention.ms")])),
    ])
}

fn retention_of(r: &km::DescribeConfigsResponse) -> String {
    let result = &r.results[0];
    assert_eq!(result.error_code, 0, "{:?}", result.error_message);
    let config = result
        .configs
        .iter()
        .find(|c| c.name.as_str() == "retention.ms")
        .expect("retention.ms is described");
    config.value.as_ref().map(|v| v.to_string()).unwrap_or_default()
}

#[test]
fn pipelined_config_changes_end_at_the_last_one() {
    let b = Broker::start(&[]);
    let mut c = Client::connect(b.addr());
    create_topic(&mut c, "configured", 1);
    let last = 1_000_000 + WRITES;
    for retention in 1_000_001..=last {
        c.send(&alter_retention("configured", retention), 1);
    }
    c.send(&describe_retention("configured"), 4);
    for retention in 1_000_001..=last {
        let r = c
            .response::<km::IncrementalAlterConfigsRequest>(1)
            .expect("alter answer");
        assert_eq!(r.responses[0].error_code, 0, "retention.ms={retention}");
    }
    let seen = retention_of(&c.response::<km::DescribeConfigsRequest>(4).expect("describe answer"));
    assert_eq!(seen, last.to_string(), "the describe pipelined behind the changes");
    let after = retention_of(&c.call(&describe_retention("configured"), 4));
    assert_eq!(after, last.to_string(), "the changes took effect out of order");
}
