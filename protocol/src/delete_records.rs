//! DeleteRecords (key 21), v0-2 (flexible from v2): move the log start of
//! partitions up to an offset (-1: the high watermark), so that everything
//! below it is deleted. Both directions: the broker decodes the request and
//! encodes the answer; `ferrite topics delete-records` does the reverse.
//!
//! Request: topics [name string, partitions [partition_index int32,
//! offset int64]], timeout_ms int32.
//! Response: throttle_time_ms int32, topics [name string, partitions
//! [partition_index int32, low_watermark int64, error_code int16]].

use super::topic_partitions::TopicPartitions;
use super::wire::{Reader, WireResult, Writer};

pub const API_KEY: i16 = 21;
pub const VERSION_MAX: i16 = 2;
pub const FLEXIBLE_FROM: i16 = 2;
/// The offset that means "up to the high watermark".
pub const HIGH_WATERMARK: i64 = -1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionOffset {
    pub partition: i32,
    pub offset: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeleteRecordsRequest {
    pub topics: Vec<TopicPartitions<PartitionOffset>>,
    pub timeout_ms: i32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionResult {
    pub partition: i32,
    /// The log start after the deletion (-1 with an error).
    pub low_watermark: i64,
    pub error_code: i16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeleteRecordsResponse {
    pub topics: Vec<TopicPartitions<PartitionResult>>,
}

fn flexible(version: i16) -> bool {
    version >= FLEXIBLE_FROM
}

impl DeleteRecordsRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<DeleteRecordsRequest> {
        let f = flexible(version);
        let what = ["delete records topics", "delete records partitions"];
        let topics = TopicPartitions::read_all(r, f, 12, what, |r| {
            Ok(PartitionOffset {
                partition: r.i32("partition_index")?,
                offset: r.i64("offset")?,
            })
        })?;
        let timeout_ms = r.i32("timeout_ms")?;
        r.tagged_fields_if(f)?;
        Ok(DeleteRecordsRequest { topics, timeout_ms })
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = flexible(version);
        TopicPartitions::write_all(w, f, &self.topics, |w, p| {
            w.i32(p.partition);
            w.i64(p.offset);
        });
        w.i32(self.timeout_ms);
        w.empty_tagged_fields_if(f);
    }
}

impl DeleteRecordsResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = flexible(version);
        w.i32(0);
        TopicPartitions::write_all(w, f, &self.topics, |w, p| {
            w.i32(p.partition);
            w.i64(p.low_watermark);
            w.i16(p.error_code);
        });
        w.empty_tagged_fields_if(f);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<DeleteRecordsResponse> {
        let f = flexible(version);
        r.i32("throttle_time_ms")?;
        let what = ["delete records results", "delete records partition results"];
        let topics = TopicPartitions::read_all(r, f, 14, what, |r| {
            Ok(PartitionResult {
                partition: r.i32("partition_index")?,
                low_watermark: r.i64("low_watermark")?,
                error_code: r.i16("error_code")?,
            })
        })?;
        r.tagged_fields_if(f)?;
        Ok(DeleteRecordsResponse { topics })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec_testing::{every_prefix_fails, round_trip};

    #[test]
    fn every_version_round_trips() {
        let req = DeleteRecordsRequest {
            topics: vec![TopicPartitions {
                topic: "t".into(),
                partitions: vec![
                    PartitionOffset {
                        partition: 0,
                        offset: 5,
                    },
                    PartitionOffset {
                        partition: 3,
                        offset: HIGH_WATERMARK,
                    },
                ],
            }],
            timeout_ms: 3000,
        };
        let resp = DeleteRecordsResponse {
            topics: vec![TopicPartitions {
                topic: "t".into(),
                partitions: vec![PartitionResult {
                    partition: 0,
                    low_watermark: 5,
                    error_code: 0,
                }],
            }],
        };
        for v in 0..=VERSION_MAX {
            let bytes = round_trip(&req, |x, w| x.encode(w, v), |r| DeleteRecordsRequest::decode(r, v));
            every_prefix_fails(&bytes, |r| DeleteRecordsRequest::decode(r, v));
            let bytes = round_trip(&resp, |x, w| x.encode(w, v), |r| DeleteRecordsResponse::decode(r, v));
            every_prefix_fails(&bytes, |r| DeleteRecordsResponse::decode(r, v));
        }
    }
}
