//! The consumer-group offset APIs: committing, fetching and deleting a
//! group's committed offsets. Both directions: the broker decodes requests
//! and encodes answers; Ferrite's own client does the reverse. Fields absent
//! from a version decode as the schema's default.
//!
//! OffsetCommit (key 8), v0-8, flexible from v8.
//! Request: group_id string, generation_id int32 (v1+; -1 when absent),
//! member_id string (v1+), group_instance_id nullable string (v7+),
//! retention_time_ms int64 (v2-4; -1 when absent: the broker's retention),
//! topics [name string, partitions [partition_index int32,
//! committed_offset int64, committed_leader_epoch int32 (v6+; -1 when
//! absent), commit_timestamp int64 (v1 only; -1 when absent),
//! committed_metadata nullable string]].
//! Response: throttle_time_ms int32 (v3+), topics [name string, partitions
//! [partition_index int32, error_code int16]].
//!
//! OffsetFetch (key 9), v0-7, flexible from v6.
//! Request: group_id string, topics [name string, partition_indexes
//! [int32]] (nullable from v2: null asks for every partition the group has
//! committed), require_stable bool (v7+).
//! Response: throttle_time_ms int32 (v3+), topics [name string, partitions
//! [partition_index int32, committed_offset int64, committed_leader_epoch
//! int32 (v5+; -1 when absent), metadata nullable string, error_code int16]],
//! error_code int16 (v2+).
//!
//! OffsetDelete (key 47), v0 only, not flexible.
//! Request: group_id string, topics [name string, partitions
//! [partition_index int32]].
//! Response: error_code int16, throttle_time_ms int32, topics [name string,
//! partitions [partition_index int32, error_code int16]].
//!
//! Each topic array decodes into [`TopicPartitions`] (a topic's `name` is
//! its `topic`; OffsetFetch's `partition_indexes` its `partitions`).
//!
//! No tagged fields are defined in these versions; unknown ones are skipped
//! and none are written.

use ferrite_ids::{LeaderEpoch, Offset, TimestampMs};

use super::topic_partitions::{PartitionError, TopicPartitions};
use super::wire::{capacity, Reader, WireError, WireResult, Writer};

pub const OFFSET_COMMIT_KEY: i16 = 8;
pub const OFFSET_COMMIT_MAX_VERSION: i16 = 8;
pub const OFFSET_COMMIT_FLEXIBLE_FROM: i16 = 8;
pub const OFFSET_FETCH_KEY: i16 = 9;
pub const OFFSET_FETCH_MAX_VERSION: i16 = 7;
pub const OFFSET_FETCH_FLEXIBLE_FROM: i16 = 6;
pub const OFFSET_DELETE_KEY: i16 = 47;
pub const OFFSET_DELETE_MAX_VERSION: i16 = 0;

/// The schema's default for absent generation ids, leader epochs,
/// retention times and commit timestamps.
pub const UNSET: i32 = -1;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetCommitPartition {
    pub partition_index: i32,
    pub committed_offset: Offset,
    /// [`LeaderEpoch::NONE`] when absent.
    pub committed_leader_epoch: LeaderEpoch,
    /// v1 only.
    pub commit_timestamp: TimestampMs,
    pub committed_metadata: Option<String>,
}

pub type OffsetCommitTopic = TopicPartitions<OffsetCommitPartition>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetCommitRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub retention_time_ms: i64,
    pub topics: Vec<OffsetCommitTopic>,
}

/// One partition's answer to OffsetCommit, OffsetDelete or TxnOffsetCommit.
pub type OffsetPartitionResult = PartitionError;

/// One topic's answers to OffsetCommit, OffsetDelete or TxnOffsetCommit.
pub type OffsetTopicResult = TopicPartitions<OffsetPartitionResult>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetCommitResponse {
    pub throttle_time_ms: i32,
    pub topics: Vec<OffsetTopicResult>,
}

impl OffsetCommitPartition {
    fn decode(r: &mut Reader, version: i16, f: bool) -> WireResult<OffsetCommitPartition> {
        let partition_index = r.i32("partition_index")?;
        let committed_offset = Offset(r.i64("committed_offset")?);
        let committed_leader_epoch = if version >= 6 {
            LeaderEpoch(r.i32("committed_leader_epoch")?)
        } else {
            LeaderEpoch::NONE
        };
        let commit_timestamp = if version == 1 {
            TimestampMs(r.i64("commit_timestamp")?)
        } else {
            TimestampMs::NONE
        };
        let committed_metadata = r.nullable_string(f, "committed_metadata")?;
        Ok(OffsetCommitPartition {
            partition_index,
            committed_offset,
            committed_leader_epoch,
            commit_timestamp,
            committed_metadata,
        })
    }

    fn encode(&self, w: &mut Writer, version: i16, f: bool) {
        w.i32(self.partition_index);
        w.i64(self.committed_offset.0);
        if version >= 6 {
            w.i32(self.committed_leader_epoch.0);
        }
        if version == 1 {
            w.i64(self.commit_timestamp.0);
        }
        w.nullable_string(f, self.committed_metadata.as_deref());
    }
}

impl OffsetCommitRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<OffsetCommitRequest> {
        let f = version >= OFFSET_COMMIT_FLEXIBLE_FROM;
        let group_id = r.string(f, "group_id")?;
        let (generation_id, member_id) = if version >= 1 {
            (r.i32("generation_id")?, r.string(f, "member_id")?)
        } else {
            (UNSET, String::new())
        };
        let group_instance_id = if version >= 7 {
            r.nullable_string(f, "group_instance_id")?
        } else {
            None
        };
        let retention_time_ms = if (2..=4).contains(&version) {
            r.i64("retention_time_ms")?
        } else {
            i64::from(UNSET)
        };
        let what = ["offset commit topics", "offset commit partitions"];
        let topics = TopicPartitions::read_all(r, f, 13, what, |r| OffsetCommitPartition::decode(r, version, f))?;
        r.tagged_fields_if(f)?;
        Ok(OffsetCommitRequest {
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            retention_time_ms,
            topics,
        })
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= OFFSET_COMMIT_FLEXIBLE_FROM;
        w.string(f, &self.group_id);
        if version >= 1 {
            w.i32(self.generation_id);
            w.string(f, &self.member_id);
        }
        if version >= 7 {
            w.nullable_string(f, self.group_instance_id.as_deref());
        }
        if (2..=4).contains(&version) {
            w.i64(self.retention_time_ms);
        }
        TopicPartitions::write_all(w, f, &self.topics, |w, p| p.encode(w, version, f));
        w.empty_tagged_fields_if(f);
    }
}

const RESULTS_WHAT: [&str; 2] = ["topic results", "partition results"];

impl OffsetCommitResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= OFFSET_COMMIT_FLEXIBLE_FROM;
        if version >= 3 {
            w.i32(self.throttle_time_ms);
        }
        TopicPartitions::write_errors(w, f, &self.topics);
        w.empty_tagged_fields_if(f);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<OffsetCommitResponse> {
        let f = version >= OFFSET_COMMIT_FLEXIBLE_FROM;
        let throttle_time_ms = if version >= 3 { r.i32("throttle_time_ms")? } else { 0 };
        let topics = TopicPartitions::read_errors(r, f, RESULTS_WHAT)?;
        r.tagged_fields_if(f)?;
        Ok(OffsetCommitResponse {
            throttle_time_ms,
            topics,
        })
    }
}

/// A topic and the partition indexes asked for.
pub type OffsetFetchTopic = TopicPartitions<i32>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetFetchRequest {
    pub group_id: String,
    /// `None` (v2+): every partition the group has committed.
    pub topics: Option<Vec<OffsetFetchTopic>>,
    pub require_stable: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetFetchPartitionResult {
    pub partition_index: i32,
    /// [`Offset::NONE`]: nothing committed.
    pub committed_offset: Offset,
    pub committed_leader_epoch: LeaderEpoch,
    pub metadata: Option<String>,
    pub error_code: i16,
}

pub type OffsetFetchTopicResult = TopicPartitions<OffsetFetchPartitionResult>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetFetchResponse {
    pub throttle_time_ms: i32,
    pub topics: Vec<OffsetFetchTopicResult>,
    /// The group-level error (v2+).
    pub error_code: i16,
}

impl OffsetFetchRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<OffsetFetchRequest> {
        let f = version >= OFFSET_FETCH_FLEXIBLE_FROM;
        let group_id = r.string(f, "group_id")?;
        let topics = match r.array_len(f, 3, "offset fetch topics")? {
            None if version < 2 => {
                return Err(WireError::UnexpectedNull {
                    what: "offset fetch topics",
                })
            }
            None => None,
            Some(n) => {
                let mut topics = Vec::with_capacity(capacity(n));
                for _ in 0..n {
                    let topic = r.string(f, "topic")?;
                    let partitions = r.i32_array(f, "partition_indexes")?;
                    r.tagged_fields_if(f)?;
                    topics.push(OffsetFetchTopic { topic, partitions });
                }
                Some(topics)
            }
        };
        let require_stable = version >= 7 && r.bool("require_stable")?;
        r.tagged_fields_if(f)?;
        Ok(OffsetFetchRequest {
            group_id,
            topics,
            require_stable,
        })
    }

    /// Panics if `topics` is `None` below v2, which cannot ask for all.
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= OFFSET_FETCH_FLEXIBLE_FROM;
        w.string(f, &self.group_id);
        match &self.topics {
            None => {
                assert!(version >= 2, "OffsetFetch v{version} cannot ask for every topic");
                w.array_len(f, None);
            }
            Some(topics) => w.structs(f, topics, |w, t| {
                w.string(f, &t.topic);
                w.i32_array(f, &t.partitions);
            }),
        }
        if version >= 7 {
            w.bool(self.require_stable);
        }
        w.empty_tagged_fields_if(f);
    }
}

impl OffsetFetchPartitionResult {
    fn decode(r: &mut Reader, version: i16, f: bool) -> WireResult<OffsetFetchPartitionResult> {
        let partition_index = r.i32("partition_index")?;
        let committed_offset = Offset(r.i64("committed_offset")?);
        let committed_leader_epoch = if version >= 5 {
            LeaderEpoch(r.i32("committed_leader_epoch")?)
        } else {
            LeaderEpoch::NONE
        };
        let metadata = r.nullable_string(f, "metadata")?;
        let error_code = r.i16("error_code")?;
        Ok(OffsetFetchPartitionResult {
            partition_index,
            committed_offset,
            committed_leader_epoch,
            metadata,
            error_code,
        })
    }

    fn encode(&self, w: &mut Writer, version: i16, f: bool) {
        w.i32(self.partition_index);
        w.i64(self.committed_offset.0);
        if version >= 5 {
            w.i32(self.committed_leader_epoch.0);
        }
        w.nullable_string(f, self.metadata.as_deref());
        w.i16(self.error_code);
    }
}

impl OffsetFetchResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= OFFSET_FETCH_FLEXIBLE_FROM;
        if version >= 3 {
            w.i32(self.throttle_time_ms);
        }
        TopicPartitions::write_all(w, f, &self.topics, |w, p| p.encode(w, version, f));
        if version >= 2 {
            w.i16(self.error_code);
        }
        w.empty_tagged_fields_if(f);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<OffsetFetchResponse> {
        let f = version >= OFFSET_FETCH_FLEXIBLE_FROM;
        let throttle_time_ms = if version >= 3 { r.i32("throttle_time_ms")? } else { 0 };
        let what = ["offset fetch topics", "offset fetch partitions"];
        let topics = TopicPartitions::read_all(r, f, 15, what, |r| OffsetFetchPartitionResult::decode(r, version, f))?;
        let error_code = if version >= 2 { r.i16("error_code")? } else { 0 };
        r.tagged_fields_if(f)?;
        Ok(OffsetFetchResponse {
            throttle_time_ms,
            topics,
            error_code,
        })
    }
}

/// A topic and the partition indexes whose offsets go.
pub type OffsetDeleteTopic = TopicPartitions<i32>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetDeleteRequest {
    pub group_id: String,
    pub topics: Vec<OffsetDeleteTopic>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetDeleteResponse {
    pub error_code: i16,
    pub throttle_time_ms: i32,
    pub topics: Vec<OffsetTopicResult>,
}

impl OffsetDeleteRequest {
    /// v0 only: `_version` is taken for symmetry with the other codecs.
    pub fn decode(r: &mut Reader, _version: i16) -> WireResult<OffsetDeleteRequest> {
        let group_id = r.string(false, "group_id")?;
        let n = r.array_len_required(false, 6, "offset delete topics")?;
        let mut topics = Vec::with_capacity(capacity(n));
        for _ in 0..n {
            // Each partition is a struct of one int32: the same bytes as an
            // int32 array in a non-flexible version.
            let topic = r.string(false, "topic")?;
            let partitions = r.i32_array(false, "offset delete partitions")?;
            topics.push(OffsetDeleteTopic { topic, partitions });
        }
        Ok(OffsetDeleteRequest { group_id, topics })
    }

    pub fn encode(&self, w: &mut Writer, _version: i16) {
        w.string(false, &self.group_id);
        w.structs(false, &self.topics, |w, t| {
            w.string(false, &t.topic);
            w.i32_array(false, &t.partitions);
        });
    }
}

impl OffsetDeleteResponse {
    pub fn encode(&self, w: &mut Writer, _version: i16) {
        w.i16(self.error_code);
        w.i32(self.throttle_time_ms);
        TopicPartitions::write_errors(w, false, &self.topics);
    }

    pub fn decode(r: &mut Reader, _version: i16) -> WireResult<OffsetDeleteResponse> {
        let error_code = r.i16("error_code")?;
        let throttle_time_ms = r.i32("throttle_time_ms")?;
        let topics = TopicPartitions::read_errors(r, false, RESULTS_WHAT)?;
        Ok(OffsetDeleteResponse {
            error_code,
            throttle_time_ms,
            topics,
        })
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::super::codec_testing::{every_prefix_fails, round_trip};
    use super::*;

    fn since<T>(version: i16, from: i16, v: T, default: T) -> T {
        if version >= from {
            v
        } else {
            default
        }
    }

    fn commit_request(v: i16) -> OffsetCommitRequest {
        let partition = |partition_index, committed_metadata| OffsetCommitPartition {
            partition_index,
            committed_offset: Offset(42 + i64::from(partition_index)),
            committed_leader_epoch: LeaderEpoch(since(v, 6, 5, UNSET)),
            commit_timestamp: TimestampMs(if v == 1 { 1_000 } else { -1 }),
            committed_metadata,
        };
        OffsetCommitRequest {
            group_id: "g".into(),
            generation_id: since(v, 1, 3, UNSET),
            member_id: since(v, 1, "m-1", "").into(),
            group_instance_id: since(v, 7, Some("i-1".into()), None),
            retention_time_ms: if (2..=4).contains(&v) { 86_400_000 } else { -1 },
            topics: vec![
                OffsetCommitTopic {
                    topic: "orders".into(),
                    partitions: vec![partition(0, Some("meta".into())), partition(3, None)],
                },
                OffsetCommitTopic {
                    topic: "été".into(),
                    partitions: vec![],
                },
            ],
        }
    }

    fn topic_results() -> Vec<OffsetTopicResult> {
        vec![OffsetTopicResult {
            topic: "orders".into(),
            partitions: vec![
                OffsetPartitionResult {
                    partition_index: 0,
                    error_code: 0,
                },
                OffsetPartitionResult {
                    partition_index: 3,
                    error_code: 22,
                },
            ],
        }]
    }

    #[test]
    fn offset_commit_round_trips_at_every_version() {
        for v in 0..=OFFSET_COMMIT_MAX_VERSION {
            let req = commit_request(v);
            let bytes = round_trip(&req, |q, w| q.encode(w, v), |r| OffsetCommitRequest::decode(r, v));
            every_prefix_fails(&bytes, |r| OffsetCommitRequest::decode(r, v));
            let resp = OffsetCommitResponse {
                throttle_time_ms: since(v, 3, 9, 0),
                topics: topic_results(),
            };
            round_trip(&resp, |p, w| p.encode(w, v), |r| OffsetCommitResponse::decode(r, v));
        }
    }

    #[test]
    fn offset_commit_v0_and_v1_bytes_follow_the_schema() {
        // The oracle crate no longer speaks v0-1 (removed in Kafka 4.0).
        let req = OffsetCommitRequest {
            topics: vec![OffsetCommitTopic {
                topic: "t".into(),
                partitions: vec![OffsetCommitPartition {
                    partition_index: 2,
                    committed_offset: Offset(42),
                    committed_leader_epoch: LeaderEpoch::NONE,
                    commit_timestamp: TimestampMs(1_000),
                    committed_metadata: None,
                }],
            }],
            ..commit_request(1)
        };
        let mut w = Writer::new();
        req.encode(&mut w, 1);
        #[rustfmt::skip]
        let v1: &[u8] = &[
            0, 1, b'g',                     // group_id
            0, 0, 0, 3,                     // generation_id
            0, 3, b'm', b'-', b'1',         // member_id
            0, 0, 0, 1,                     // topics: 1
            0, 1, b't',                     // name
            0, 0, 0, 1,                     // partitions: 1
            0, 0, 0, 2,                     // partition_index
            0, 0, 0, 0, 0, 0, 0, 42,        // committed_offset
            0, 0, 0, 0, 0, 0, 0x03, 0xe8,   // commit_timestamp 1000
            0xff, 0xff,                     // committed_metadata null
        ];
        assert_eq!(w.as_slice(), v1);
        let mut w = Writer::new();
        req.encode(&mut w, 0);
        let mut v0 = v1[..3].to_vec();
        v0.extend_from_slice(&v1[12..35]);
        v0.extend_from_slice(&v1[43..]);
        assert_eq!(w.as_slice(), &v0[..]);
    }

    fn fetch_response(v: i16) -> OffsetFetchResponse {
        OffsetFetchResponse {
            throttle_time_ms: since(v, 3, 4, 0),
            topics: vec![OffsetFetchTopicResult {
                topic: "orders".into(),
                partitions: vec![
                    OffsetFetchPartitionResult {
                        partition_index: 0,
                        committed_offset: Offset(42),
                        committed_leader_epoch: LeaderEpoch(since(v, 5, 5, UNSET)),
                        metadata: Some("meta".into()),
                        error_code: 0,
                    },
                    OffsetFetchPartitionResult {
                        partition_index: 1,
                        committed_offset: Offset::NONE,
                        committed_leader_epoch: LeaderEpoch::NONE,
                        metadata: None,
                        error_code: 0,
                    },
                ],
            }],
            error_code: since(v, 2, 16, 0),
        }
    }

    #[test]
    fn offset_fetch_round_trips_at_every_version() {
        for v in 0..=OFFSET_FETCH_MAX_VERSION {
            let named = Some(vec![
                OffsetFetchTopic {
                    topic: "orders".into(),
                    partitions: vec![0, 1],
                },
                OffsetFetchTopic {
                    topic: "empty".into(),
                    partitions: vec![],
                },
            ]);
            let all = since(v, 2, vec![None], vec![]);
            for topics in std::iter::once(named).chain(all) {
                let req = OffsetFetchRequest {
                    group_id: "g".into(),
                    topics,
                    require_stable: v >= 7,
                };
                let bytes = round_trip(&req, |q, w| q.encode(w, v), |r| OffsetFetchRequest::decode(r, v));
                every_prefix_fails(&bytes, |r| OffsetFetchRequest::decode(r, v));
            }
            let resp = fetch_response(v);
            round_trip(&resp, |p, w| p.encode(w, v), |r| OffsetFetchResponse::decode(r, v));
        }
    }

    #[test]
    fn offset_fetch_null_topics_are_refused_before_v2() {
        // group_id "g", topics null.
        let bytes = Bytes::from_static(&[0, 1, b'g', 0xff, 0xff, 0xff, 0xff]);
        for v in 0..=1 {
            assert!(matches!(
                OffsetFetchRequest::decode(&mut Reader::new(bytes.clone()), v),
                Err(WireError::UnexpectedNull { .. })
            ));
        }
        let req = OffsetFetchRequest::decode(&mut Reader::new(bytes), 2).unwrap();
        assert_eq!(req.topics, None);
    }

    #[test]
    fn offset_delete_round_trips() {
        let req = OffsetDeleteRequest {
            group_id: "g".into(),
            topics: vec![
                OffsetDeleteTopic {
                    topic: "orders".into(),
                    partitions: vec![0, 7],
                },
                OffsetDeleteTopic {
                    topic: "t".into(),
                    partitions: vec![],
                },
            ],
        };
        let bytes = round_trip(&req, |q, w| q.encode(w, 0), |r| OffsetDeleteRequest::decode(r, 0));
        every_prefix_fails(&bytes, |r| OffsetDeleteRequest::decode(r, 0));
        let resp = OffsetDeleteResponse {
            error_code: 0,
            throttle_time_ms: 1,
            topics: topic_results(),
        };
        round_trip(&resp, |p, w| p.encode(w, 0), |r| OffsetDeleteResponse::decode(r, 0));
    }
}
