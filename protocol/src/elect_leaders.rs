//! ElectLeaders (key 43), v0-2 (flexible from v2): elect the preferred
//! replica (type 0; v0 knows no other) of the partitions named, or of every
//! partition when the list is null. Both directions: the broker decodes the
//! request and encodes the answer; `ferrite leaders elect` does the reverse.
//!
//! Request: election_type int8 (v1+), topic_partitions nullable
//! [topic string, partitions [int32]], timeout_ms int32.
//! Response: throttle_time_ms int32, error_code int16 (v1+),
//! replica_election_results [topic string, partition_result
//! [partition_id int32, error_code int16, error_message nullable string]].

use super::topic_partitions::TopicPartitions;
use super::wire::{capacity, Reader, WireResult, Writer};

pub const API_KEY: i16 = 43;
pub const VERSION_MAX: i16 = 2;
pub const FLEXIBLE_FROM: i16 = 2;
/// `election_type` 0: the preferred replica.
pub const PREFERRED: i8 = 0;

/// A topic's partitions to elect leaders for.
pub type ElectTopic = TopicPartitions<i32>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectLeadersRequest {
    pub election_type: i8,
    /// `None`: every partition.
    pub topics: Option<Vec<ElectTopic>>,
    pub timeout_ms: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionResult {
    pub partition: i32,
    pub error_code: i16,
    pub error_message: Option<String>,
}

pub type TopicResult = TopicPartitions<PartitionResult>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectLeadersResponse {
    pub error_code: i16,
    pub results: Vec<TopicResult>,
}

fn flexible(version: i16) -> bool {
    version >= FLEXIBLE_FROM
}

impl ElectLeadersRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<ElectLeadersRequest> {
        let f = flexible(version);
        let election_type = if version >= 1 {
            r.i8("election_type")?
        } else {
            PREFERRED
        };
        let topics = match r.array_len(f, 2, "elect leaders topics")? {
            None => None,
            Some(n) => {
                let mut topics = Vec::with_capacity(capacity(n));
                for _ in 0..n {
                    let topic = r.string(f, "topic")?;
                    let partitions = r.i32_array(f, "partitions")?;
                    r.tagged_fields_if(f)?;
                    topics.push(ElectTopic { topic, partitions });
                }
                Some(topics)
            }
        };
        let timeout_ms = r.i32("timeout_ms")?;
        r.tagged_fields_if(f)?;
        Ok(ElectLeadersRequest {
            election_type,
            topics,
            timeout_ms,
        })
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = flexible(version);
        if version >= 1 {
            w.i8(self.election_type);
        }
        match &self.topics {
            None => w.array_len(f, None),
            Some(topics) => w.structs(f, topics, |w, t| {
                w.string(f, &t.topic);
                w.i32_array(f, &t.partitions);
            }),
        }
        w.i32(self.timeout_ms);
        w.empty_tagged_fields_if(f);
    }
}

impl ElectLeadersResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = flexible(version);
        w.i32(0);
        if version >= 1 {
            w.i16(self.error_code);
        }
        TopicPartitions::write_all(w, f, &self.results, |w, p| {
            w.i32(p.partition);
            w.i16(p.error_code);
            w.nullable_string(f, p.error_message.as_deref());
        });
        w.empty_tagged_fields_if(f);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<ElectLeadersResponse> {
        let f = flexible(version);
        r.i32("throttle_time_ms")?;
        let error_code = if version >= 1 { r.i16("error_code")? } else { 0 };
        let what = ["election results", "partition results"];
        let results = TopicPartitions::read_all(r, f, 7, what, |r| {
            Ok(PartitionResult {
                partition: r.i32("partition_id")?,
                error_code: r.i16("error_code")?,
                error_message: r.nullable_string(f, "error_message")?,
            })
        })?;
        r.tagged_fields_if(f)?;
        Ok(ElectLeadersResponse { error_code, results })
    }
}
