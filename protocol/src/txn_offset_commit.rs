//! TxnOffsetCommit (key 28), v0-3 (flexible from v3): a transactional
//! producer commits a consumer group's offsets as part of its transaction;
//! they become visible when the transaction commits. Both directions: the
//! broker (the group's coordinator) decodes the request and encodes the
//! answer; a transactional producer does the reverse. Fields absent from a
//! version decode as the schema's default.
//!
//! Request: transactional_id string, group_id string, producer_id int64,
//! producer_epoch int16, generation_id int32 (v3+; -1 when absent),
//! member_id string (v3+; "" when absent), group_instance_id nullable
//! string (v3+; null when absent), topics [name string, partitions
//! [partition_index int32, committed_offset int64, committed_leader_epoch
//! int32 (v2+; -1 when absent), committed_metadata nullable string]].
//! Response: throttle_time_ms int32, topics [name string, partitions
//! [partition_index int32, error_code int16]].
//!
//! The response's topics are OffsetCommit's ([`OffsetTopicResult`]).
//!
//! No tagged fields are defined in these versions; unknown ones are skipped
//! and none are written.

use ferrite_ids::{LeaderEpoch, Offset, ProducerId};

use super::group_offsets::{OffsetTopicResult, UNSET};
use super::topic_partitions::TopicPartitions;
use super::wire::{Reader, WireResult, Writer};

pub const API_KEY: i16 = 28;
pub const VERSION_MAX: i16 = 3;
pub const FLEXIBLE_FROM: i16 = 3;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnOffsetCommitPartition {
    pub partition_index: i32,
    pub committed_offset: Offset,
    /// [`LeaderEpoch::NONE`] when absent (before v2).
    pub committed_leader_epoch: LeaderEpoch,
    pub committed_metadata: Option<String>,
}

pub type TxnOffsetCommitTopic = TopicPartitions<TxnOffsetCommitPartition>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnOffsetCommitRequest {
    pub transactional_id: String,
    pub group_id: String,
    pub producer_id: ProducerId,
    pub producer_epoch: i16,
    /// [`UNSET`] when absent (before v3).
    pub generation_id: i32,
    /// Empty when absent (before v3).
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub topics: Vec<TxnOffsetCommitTopic>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnOffsetCommitResponse {
    pub throttle_time_ms: i32,
    pub topics: Vec<OffsetTopicResult>,
}

fn flexible(version: i16) -> bool {
    version >= FLEXIBLE_FROM
}

const RESULTS_WHAT: [&str; 2] = ["txn offset commit results", "txn offset commit partition results"];

impl TxnOffsetCommitPartition {
    fn decode(r: &mut Reader, version: i16, f: bool) -> WireResult<TxnOffsetCommitPartition> {
        let partition_index = r.i32("partition_index")?;
        let committed_offset = Offset(r.i64("committed_offset")?);
        let committed_leader_epoch = if version >= 2 {
            LeaderEpoch(r.i32("committed_leader_epoch")?)
        } else {
            LeaderEpoch::NONE
        };
        let committed_metadata = r.nullable_string(f, "committed_metadata")?;
        Ok(TxnOffsetCommitPartition {
            partition_index,
            committed_offset,
            committed_leader_epoch,
            committed_metadata,
        })
    }

    fn encode(&self, w: &mut Writer, version: i16, f: bool) {
        w.i32(self.partition_index);
        w.i64(self.committed_offset.0);
        if version >= 2 {
            w.i32(self.committed_leader_epoch.0);
        }
        w.nullable_string(f, self.committed_metadata.as_deref());
    }
}

impl TxnOffsetCommitRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<TxnOffsetCommitRequest> {
        let f = flexible(version);
        let transactional_id = r.string(f, "transactional_id")?;
        let group_id = r.string(f, "group_id")?;
        let producer_id = ProducerId(r.i64("producer_id")?);
        let producer_epoch = r.i16("producer_epoch")?;
        let (generation_id, member_id, group_instance_id) = if version >= 3 {
            (
                r.i32("generation_id")?,
                r.string(f, "member_id")?,
                r.nullable_string(f, "group_instance_id")?,
            )
        } else {
            (UNSET, String::new(), None)
        };
        let what = ["txn offset commit topics", "txn offset commit partitions"];
        // partition_index, committed_offset, committed_metadata (at least 1).
        let topics = TopicPartitions::read_all(r, f, 13, what, |r| TxnOffsetCommitPartition::decode(r, version, f))?;
        r.tagged_fields_if(f)?;
        Ok(TxnOffsetCommitRequest {
            transactional_id,
            group_id,
            producer_id,
            producer_epoch,
            generation_id,
            member_id,
            group_instance_id,
            topics,
        })
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = flexible(version);
        w.string(f, &self.transactional_id);
        w.string(f, &self.group_id);
        w.i64(self.producer_id.0);
        w.i16(self.producer_epoch);
        if version >= 3 {
            w.i32(self.generation_id);
            w.string(f, &self.member_id);
            w.nullable_string(f, self.group_instance_id.as_deref());
        }
        TopicPartitions::write_all(w, f, &self.topics, |w, p| p.encode(w, version, f));
        w.empty_tagged_fields_if(f);
    }
}

impl TxnOffsetCommitResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = flexible(version);
        w.i32(self.throttle_time_ms);
        TopicPartitions::write_errors(w, f, &self.topics);
        w.empty_tagged_fields_if(f);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<TxnOffsetCommitResponse> {
        let f = flexible(version);
        let throttle_time_ms = r.i32("throttle_time_ms")?;
        let topics = TopicPartitions::read_errors(r, f, RESULTS_WHAT)?;
        r.tagged_fields_if(f)?;
        Ok(TxnOffsetCommitResponse {
            throttle_time_ms,
            topics,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::codec_testing::{every_prefix_fails, round_trip};
    use super::super::group_offsets::OffsetPartitionResult;
    use super::*;

    fn since<T>(version: i16, from: i16, v: T, default: T) -> T {
        if version >= from {
            v
        } else {
            default
        }
    }

    fn request(v: i16) -> TxnOffsetCommitRequest {
        let partition = |partition_index, committed_metadata| TxnOffsetCommitPartition {
            partition_index,
            committed_offset: Offset(42 + i64::from(partition_index)),
            committed_leader_epoch: LeaderEpoch(since(v, 2, 5, UNSET)),
            committed_metadata,
        };
        TxnOffsetCommitRequest {
            transactional_id: "tx-1".into(),
            group_id: "g".into(),
            producer_id: ProducerId(4000),
            producer_epoch: 3,
            generation_id: since(v, 3, 9, UNSET),
            member_id: since(v, 3, "m-1", "").into(),
            group_instance_id: since(v, 3, Some("i-1".into()), None),
            topics: vec![
                TxnOffsetCommitTopic {
                    topic: "orders".into(),
                    partitions: vec![partition(0, Some("meta".into())), partition(3, None)],
                },
                TxnOffsetCommitTopic {
                    topic: "été".into(),
                    partitions: vec![],
                },
            ],
        }
    }

    #[test]
    fn round_trips_at_every_version() {
        let resp = TxnOffsetCommitResponse {
            throttle_time_ms: 7,
            topics: vec![OffsetTopicResult {
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
            }],
        };
        for v in 0..=VERSION_MAX {
            let req = request(v);
            let bytes = round_trip(&req, |x, w| x.encode(w, v), |r| TxnOffsetCommitRequest::decode(r, v));
            every_prefix_fails(&bytes, |r| TxnOffsetCommitRequest::decode(r, v));
            let bytes = round_trip(&resp, |x, w| x.encode(w, v), |r| TxnOffsetCommitResponse::decode(r, v));
            every_prefix_fails(&bytes, |r| TxnOffsetCommitResponse::decode(r, v));
        }
    }

    #[test]
    fn fields_a_version_lacks_are_neither_written_nor_read() {
        // v1 and v2 differ by the leader epoch alone (4 bytes per
        // partition, two partitions); v3 adds the member fields and
        // switches to compact encodings.
        let len = |v: i16| {
            let mut w = Writer::new();
            request(3).encode(&mut w, v);
            w.len()
        };
        assert_eq!(len(2) - len(1), 8);
        assert_eq!(len(0), len(1));
        let mut w = Writer::new();
        request(3).encode(&mut w, 1);
        let mut r = Reader::new(w.into_bytes().freeze());
        let back = TxnOffsetCommitRequest::decode(&mut r, 1).unwrap();
        assert_eq!(back, request(1));
    }
}
