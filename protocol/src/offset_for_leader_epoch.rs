//! OffsetForLeaderEpoch (key 23), v2-4, flexible from v4. A follower asks
//! its leader where each of its epochs ends, to know where to truncate its
//! log (KIP-101/279); both ends are here because one Ferrite broker sends it
//! to another.
//!
//! Request: replica_id int32 (v3+; -2, a debug consumer, when absent),
//! topics [topic string, partitions [partition int32,
//! current_leader_epoch int32, leader_epoch int32]].
//!
//! Response: throttle_time_ms int32, topics [topic string, partitions
//! [error_code int16, partition int32, leader_epoch int32, end_offset int64]].
//!
//! No tagged fields are defined in these versions; unknown ones are skipped
//! and none are written.

use ferrite_ids::BrokerId;
use ferrite_ids::{LeaderEpoch, Offset};

use super::topic_partitions::TopicPartitions;
use super::wire::{Reader, WireError, WireResult, Writer};

pub const API_KEY: i16 = 23;
pub const VERSION_MIN: i16 = 2;
pub const VERSION_MAX: i16 = 4;
pub const FLEXIBLE_FROM: i16 = 4;

/// `replica_id` of a consumer.
pub const CONSUMER_REPLICA_ID: BrokerId = BrokerId(-1);
/// `replica_id` when the request does not carry one (v2): a "debug"
/// consumer, allowed to see offsets past the high watermark.
pub const DEBUG_REPLICA_ID: BrokerId = BrokerId(-2);

pub fn supports(version: i16) -> bool {
    (VERSION_MIN..=VERSION_MAX).contains(&version)
}

pub fn is_flexible(version: i16) -> bool {
    version >= FLEXIBLE_FROM
}

fn check_version(version: i16) -> WireResult<bool> {
    if !supports(version) {
        return Err(WireError::Invalid {
            what: "OffsetForLeaderEpoch version",
            value: i64::from(version),
        });
    }
    Ok(is_flexible(version))
}

fn assert_version(version: i16) -> bool {
    assert!(supports(version), "OffsetForLeaderEpoch v{version} is not spoken");
    is_flexible(version)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetForLeaderPartition {
    pub partition: i32,
    /// The requester's idea of the current leader epoch, for fencing
    /// (-1: not checked).
    pub current_leader_epoch: LeaderEpoch,
    /// The epoch whose end offset is asked for.
    pub leader_epoch: LeaderEpoch,
}

pub type OffsetForLeaderTopic = TopicPartitions<OffsetForLeaderPartition>;

const WHAT: [&str; 2] = ["offset for leader epoch topics", "offset for leader epoch partitions"];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetForLeaderEpochRequest {
    /// The follower's broker id, or -1 for a consumer; not on the wire
    /// before v3 (decoded as [`DEBUG_REPLICA_ID`]).
    pub replica_id: BrokerId,
    pub topics: Vec<OffsetForLeaderTopic>,
}

impl OffsetForLeaderEpochRequest {
    /// Encodes the body at `version`, which must be in 2..=4.
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let flexible = assert_version(version);
        if version >= 3 {
            w.i32(self.replica_id.0);
        }
        TopicPartitions::write_all(w, flexible, &self.topics, |w, p| {
            w.i32(p.partition);
            w.i32(p.current_leader_epoch.0);
            w.i32(p.leader_epoch.0);
        });
        w.empty_tagged_fields_if(flexible);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<OffsetForLeaderEpochRequest> {
        let flexible = check_version(version)?;
        let replica_id = if version >= 3 {
            BrokerId(r.i32("replica_id")?)
        } else {
            DEBUG_REPLICA_ID
        };
        let topics = TopicPartitions::read_all(r, flexible, 12, WHAT, |r| {
            Ok(OffsetForLeaderPartition {
                partition: r.i32("partition")?,
                current_leader_epoch: LeaderEpoch(r.i32("current_leader_epoch")?),
                leader_epoch: LeaderEpoch(r.i32("leader_epoch")?),
            })
        })?;
        r.tagged_fields_if(flexible)?;
        Ok(OffsetForLeaderEpochRequest { replica_id, topics })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochEndOffset {
    pub error_code: i16,
    pub partition: i32,
    /// The largest epoch not above the requested one that the leader has,
    /// or -1 (with end offset -1) when there is none.
    pub leader_epoch: LeaderEpoch,
    /// Where that epoch ends: the start offset of the next epoch, or the
    /// log end offset for the current one.
    pub end_offset: Offset,
}

pub type OffsetForLeaderTopicResult = TopicPartitions<EpochEndOffset>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetForLeaderEpochResponse {
    pub throttle_time_ms: i32,
    pub topics: Vec<OffsetForLeaderTopicResult>,
}

impl OffsetForLeaderEpochResponse {
    /// Encodes the body at `version`, which must be in 2..=4.
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let flexible = assert_version(version);
        w.i32(self.throttle_time_ms);
        TopicPartitions::write_all(w, flexible, &self.topics, |w, p| {
            w.i16(p.error_code);
            w.i32(p.partition);
            w.i32(p.leader_epoch.0);
            w.i64(p.end_offset.0);
        });
        w.empty_tagged_fields_if(flexible);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<OffsetForLeaderEpochResponse> {
        let flexible = check_version(version)?;
        let throttle_time_ms = r.i32("throttle_time_ms")?;
        let topics = TopicPartitions::read_all(r, flexible, 18, WHAT, |r| {
            Ok(EpochEndOffset {
                error_code: r.i16("error_code")?,
                partition: r.i32("partition")?,
                leader_epoch: LeaderEpoch(r.i32("leader_epoch")?),
                end_offset: Offset(r.i64("end_offset")?),
            })
        })?;
        r.tagged_fields_if(flexible)?;
        Ok(OffsetForLeaderEpochResponse {
            throttle_time_ms,
            topics,
        })
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn request() -> OffsetForLeaderEpochRequest {
        OffsetForLeaderEpochRequest {
            replica_id: BrokerId(3),
            topics: vec![OffsetForLeaderTopic {
                topic: "t".into(),
                partitions: vec![OffsetForLeaderPartition {
                    partition: 1,
                    current_leader_epoch: LeaderEpoch(7),
                    leader_epoch: LeaderEpoch(5),
                }],
            }],
        }
    }

    #[test]
    fn v4_request_bytes_follow_the_schema() {
        let mut w = Writer::new();
        request().encode(&mut w, 4);
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 0, 0, 3,         // replica_id
            2,                  // topics: compact array of 1
            2, b't',            // topic: compact string
            2,                  // partitions: 1
            0, 0, 0, 1,         // partition
            0, 0, 0, 7,         // current_leader_epoch
            0, 0, 0, 5,         // leader_epoch
            0,                  // partition tagged fields
            0,                  // topic tagged fields
            0,                  // request tagged fields
        ];
        assert_eq!(w.as_slice(), expected);
        let mut w = Writer::new();
        request().encode(&mut w, 2);
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 0, 0, 1,         // topics: 1 (no replica_id before v3)
            0, 1, b't',         // topic
            0, 0, 0, 1,         // partitions: 1
            0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 5,
        ];
        assert_eq!(w.as_slice(), expected);
        let d = OffsetForLeaderEpochRequest::decode(&mut Reader::new(Bytes::copy_from_slice(expected)), 2).unwrap();
        assert_eq!(d.replica_id, DEBUG_REPLICA_ID);
    }

    #[test]
    fn unsupported_versions_are_refused() {
        let mut r = Reader::new(Bytes::from_static(&[0, 0, 0, 0]));
        assert!(matches!(
            OffsetForLeaderEpochRequest::decode(&mut r, 1),
            Err(WireError::Invalid { .. })
        ));
    }

    #[test]
    fn every_truncation_is_an_error() {
        for v in VERSION_MIN..=VERSION_MAX {
            let mut w = Writer::new();
            request().encode(&mut w, v);
            let full = w.into_bytes().freeze();
            for cut in 0..full.len() {
                let mut r = Reader::new(full.slice(..cut));
                assert!(
                    OffsetForLeaderEpochRequest::decode(&mut r, v).is_err(),
                    "v{v} cut at {cut}"
                );
            }
            let resp = OffsetForLeaderEpochResponse {
                throttle_time_ms: 0,
                topics: vec![OffsetForLeaderTopicResult {
                    topic: "t".into(),
                    partitions: vec![EpochEndOffset {
                        error_code: 0,
                        partition: 1,
                        leader_epoch: LeaderEpoch(5),
                        end_offset: Offset(100),
                    }],
                }],
            };
            let mut w = Writer::new();
            resp.encode(&mut w, v);
            let full = w.into_bytes().freeze();
            for cut in 0..full.len() {
                let mut r = Reader::new(full.slice(..cut));
                assert!(
                    OffsetForLeaderEpochResponse::decode(&mut r, v).is_err(),
                    "v{v} cut at {cut}"
                );
            }
            let mut r = Reader::new(full);
            assert_eq!(OffsetForLeaderEpochResponse::decode(&mut r, v).unwrap(), resp);
            assert_eq!(r.remaining(), 0);
        }
    }

    #[test]
    fn huge_counts_are_refused() {
        // v3: replica_id, then a classic topics count of 2^31 - 1.
        let mut r = Reader::new(Bytes::from_static(&[0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff, 0, 0]));
        assert!(matches!(
            OffsetForLeaderEpochRequest::decode(&mut r, 3),
            Err(WireError::Truncated { .. })
        ));
        // v4: a compact partitions count of 2^31 - 1 (varint 2^31).
        let mut r = Reader::new(Bytes::from_static(&[
            0, 0, 0, 0, 2, 2, b't', 0x80, 0x80, 0x80, 0x80, 0x08, 0,
        ]));
        assert!(matches!(
            OffsetForLeaderEpochResponse::decode(&mut r, 4),
            Err(WireError::Truncated { .. })
        ));
    }
}
