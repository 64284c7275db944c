//! `ferrite topics delete-records NAME --offset O [--partition P]`: moves
//! the log start of a topic's partitions (all of them, or one) up to an
//! offset (-1: the high watermark), like `kafka-delete-records.sh`. Each
//! partition's request goes to its leader.

use std::collections::BTreeMap;

use crate::check;
use ferrite_client::codec::{self, METADATA_V};
use ferrite_client::{ClientError, Connection};
use ferrite_protocol::delete_records::{self, DeleteRecordsRequest, DeleteRecordsResponse, PartitionOffset};
use ferrite_protocol::topic_partitions::TopicPartitions;

const DELETE_RECORDS_V: i16 = 1;

/// Each partition of `topic` and its leader's address (`host:port`; an
/// error for a partition without one).
pub(crate) fn partition_leaders(
    bootstrap: &str,
    topic: &str,
) -> Result<BTreeMap<i32, Result<String, ClientError>>, ClientError> {
    let mut c = Connection::connect(bootstrap, "ferrite-cli")?;
    let topics = vec![topic.to_string()];
    let mut r = c.call(3, METADATA_V, |w| codec::metadata(w, Some(&topics)))?;
    let m = codec::decode_metadata(&mut r)?;
    let t = m
        .topics
        .first()
        .ok_or_else(|| ClientError::Kafka("empty metadata".into()))?;
    check(topic, t.error, None)?;
    Ok(t.partitions
        .iter()
        .map(|p| {
            let leader = m
                .brokers
                .iter()
                .find(|b| b.id == p.leader)
                .map(|b| format!("{}:{}", b.host, b.port))
                .ok_or_else(|| ClientError::Kafka(format!("{topic}-{}: no leader", p.partition)));
            (p.partition, leader)
        })
        .collect())
}
const TIMEOUT_MS: i32 = 30_000;

pub fn run(
    bootstrap: &str,
    name: &str,
    partition: Option<i32>,
    offset: i64,
    out: &mut dyn std::io::Write,
) -> Result<(), ClientError> {
    if offset < delete_records::HIGH_WATERMARK {
        return Err(ClientError::Kafka(format!(
            "--offset {offset}: expected an offset, or -1 for the high watermark"
        )));
    }
    // Partitions by the address of their leader.
    let mut by_leader: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for (p, leader) in partition_leaders(bootstrap, name)? {
        if partition.is_none_or(|want| want == p) {
            by_leader.entry(leader?).or_default().push(p);
        }
    }
    if by_leader.is_empty() {
        return Err(ClientError::Kafka(format!(
            "{name}: no partition {}",
            partition.unwrap_or(-1)
        )));
    }
    let w = |e: std::io::Error| ClientError::Kafka(e.to_string());
    for (leader, partitions) in by_leader {
        let req = DeleteRecordsRequest {
            topics: vec![TopicPartitions {
                topic: name.to_string(),
                partitions: partitions
                    .iter()
                    .map(|&partition| PartitionOffset { partition, offset })
                    .collect(),
            }],
            timeout_ms: TIMEOUT_MS,
        };
        let mut c = Connection::connect(&leader, "ferrite-cli")?;
        let mut r = c.call(delete_records::API_KEY, DELETE_RECORDS_V, |w| {
            req.encode(w, DELETE_RECORDS_V)
        })?;
        let resp = DeleteRecordsResponse::decode(&mut r, DELETE_RECORDS_V)?;
        for t in resp.topics {
            for p in t.partitions {
                check(&format!("{}-{}", t.topic, p.partition), p.error_code, None)?;
                writeln!(out, "{}-{}: log start now {}", t.topic, p.partition, p.low_watermark).map_err(w)?;
            }
        }
    }
    Ok(())
}
