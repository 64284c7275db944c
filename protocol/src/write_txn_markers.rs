//! WriteTxnMarkers (key 27), v0-1 (flexible from v1): a transaction
//! coordinator asks a partition leader to append the commit or abort
//! markers that end transactions. Both directions: the coordinator encodes
//! the request and decodes the answer; the leader does the reverse.
//!
//! Request: markers [producer_id int64, producer_epoch int16,
//! transaction_result bool (true: commit; false: abort), topics [name
//! string, partition_indexes [int32]], coordinator_epoch int32].
//! Response: markers [producer_id int64, topics [name string, partitions
//! [partition_index int32, error_code int16]]].
//!
//! No tagged fields are defined in these versions; unknown ones are skipped
//! and none are written.

use ferrite_ids::ProducerId;

use super::topic_partitions::{PartitionError, TopicPartitions};
use super::wire::{Reader, WireResult, Writer};

pub const API_KEY: i16 = 27;
pub const VERSION_MAX: i16 = 1;
pub const FLEXIBLE_FROM: i16 = 1;

/// The markers to write for one producer's transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WritableTxnMarker {
    pub producer_id: ProducerId,
    pub producer_epoch: i16,
    /// True: commit markers; false: abort markers.
    pub transaction_result: bool,
    /// Each topic and the indexes of its partitions to mark
    /// (`partition_indexes` on the wire).
    pub topics: Vec<TopicPartitions<i32>>,
    pub coordinator_epoch: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteTxnMarkersRequest {
    pub markers: Vec<WritableTxnMarker>,
}

/// The answer for one producer's markers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnMarkerResult {
    pub producer_id: ProducerId,
    pub topics: Vec<TopicPartitions<PartitionError>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteTxnMarkersResponse {
    pub markers: Vec<TxnMarkerResult>,
}

fn flexible(version: i16) -> bool {
    version >= FLEXIBLE_FROM
}

/// The fewest bytes a marker takes: producer id and epoch, result, topics
/// (at least 1) and coordinator epoch.
const MARKER_BYTES_MIN: usize = 8 + 2 + 1 + 1 + 4;
/// The fewest bytes a marker's answer takes: producer id and topics (at
/// least 1).
const RESULT_BYTES_MIN: usize = 8 + 1;

impl WritableTxnMarker {
    fn decode(r: &mut Reader, f: bool) -> WireResult<WritableTxnMarker> {
        let producer_id = ProducerId(r.i64("producer_id")?);
        let producer_epoch = r.i16("producer_epoch")?;
        let transaction_result = r.bool("transaction_result")?;
        let topics = TopicPartitions::read_indexes(r, f, ["txn marker topics", "partition_indexes"])?;
        let coordinator_epoch = r.i32("coordinator_epoch")?;
        Ok(WritableTxnMarker {
            producer_id,
            producer_epoch,
            transaction_result,
            topics,
            coordinator_epoch,
        })
    }

    fn encode(&self, w: &mut Writer, f: bool) {
        w.i64(self.producer_id.0);
        w.i16(self.producer_epoch);
        w.bool(self.transaction_result);
        TopicPartitions::write_indexes(w, f, &self.topics);
        w.i32(self.coordinator_epoch);
    }
}

impl WriteTxnMarkersRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<WriteTxnMarkersRequest> {
        let f = flexible(version);
        let markers = r.structs(f, MARKER_BYTES_MIN, "txn markers", |r| WritableTxnMarker::decode(r, f))?;
        r.tagged_fields_if(f)?;
        Ok(WriteTxnMarkersRequest { markers })
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = flexible(version);
        w.structs(f, &self.markers, |w, m| m.encode(w, f));
        w.empty_tagged_fields_if(f);
    }
}

impl WriteTxnMarkersResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = flexible(version);
        w.structs(f, &self.markers, |w, m| {
            w.i64(m.producer_id.0);
            TopicPartitions::write_errors(w, f, &m.topics);
        });
        w.empty_tagged_fields_if(f);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<WriteTxnMarkersResponse> {
        let f = flexible(version);
        let markers = r.structs(f, RESULT_BYTES_MIN, "txn marker results", |r| {
            Ok(TxnMarkerResult {
                producer_id: ProducerId(r.i64("producer_id")?),
                topics: TopicPartitions::read_errors(
                    r,
                    f,
                    ["txn marker topic results", "txn marker partition results"],
                )?,
            })
        })?;
        r.tagged_fields_if(f)?;
        Ok(WriteTxnMarkersResponse { markers })
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::super::codec_testing::{every_prefix_fails, round_trip};
    use super::*;

    fn request() -> WriteTxnMarkersRequest {
        WriteTxnMarkersRequest {
            markers: vec![
                WritableTxnMarker {
                    producer_id: ProducerId(4000),
                    producer_epoch: 3,
                    transaction_result: true,
                    topics: vec![TopicPartitions {
                        topic: "orders".into(),
                        partitions: vec![0, 2],
                    }],
                    coordinator_epoch: 11,
                },
                WritableTxnMarker {
                    producer_id: ProducerId(4001),
                    producer_epoch: 0,
                    transaction_result: false,
                    topics: vec![],
                    coordinator_epoch: 11,
                },
            ],
        }
    }

    fn response() -> WriteTxnMarkersResponse {
        WriteTxnMarkersResponse {
            markers: vec![TxnMarkerResult {
                producer_id: ProducerId(4000),
                topics: vec![TopicPartitions {
                    topic: "orders".into(),
                    partitions: vec![
                        PartitionError {
                            partition_index: 0,
                            error_code: 0,
                        },
                        PartitionError {
                            partition_index: 2,
                            error_code: 6,
                        },
                    ],
                }],
            }],
        }
    }

    #[test]
    fn round_trips_at_every_version() {
        for v in 0..=VERSION_MAX {
            let bytes = round_trip(
                &request(),
                |x, w| x.encode(w, v),
                |r| WriteTxnMarkersRequest::decode(r, v),
            );
            every_prefix_fails(&bytes, |r| WriteTxnMarkersRequest::decode(r, v));
            let bytes = round_trip(
                &response(),
                |x, w| x.encode(w, v),
                |r| WriteTxnMarkersResponse::decode(r, v),
            );
            every_prefix_fails(&bytes, |r| WriteTxnMarkersResponse::decode(r, v));
        }
    }

    #[test]
    fn v0_bytes_follow_the_schema() {
        // The oracle crate no longer speaks v0 (removed in Kafka 4.0).
        let req = WriteTxnMarkersRequest {
            markers: vec![WritableTxnMarker {
                producer_id: ProducerId(5),
                producer_epoch: 1,
                transaction_result: true,
                topics: vec![TopicPartitions {
                    topic: "t".into(),
                    partitions: vec![4],
                }],
                coordinator_epoch: 2,
            }],
        };
        let mut w = Writer::new();
        req.encode(&mut w, 0);
        let want: &[u8] = &[
            0, 0, 0, 1, // markers
            0, 0, 0, 0, 0, 0, 0, 5, // producer_id
            0, 1, // producer_epoch
            1, // transaction_result
            0, 0, 0, 1, 0, 1, b't', // topics, name
            0, 0, 0, 1, 0, 0, 0, 4, // partition_indexes
            0, 0, 0, 2, // coordinator_epoch
        ];
        assert_eq!(w.as_slice(), want);
        let resp = WriteTxnMarkersResponse {
            markers: vec![TxnMarkerResult {
                producer_id: ProducerId(5),
                topics: vec![TopicPartitions {
                    topic: "t".into(),
                    partitions: vec![PartitionError {
                        partition_index: 4,
                        error_code: 3,
                    }],
                }],
            }],
        };
        let bytes: &[u8] = &[
            0, 0, 0, 1, // markers
            0, 0, 0, 0, 0, 0, 0, 5, // producer_id
            0, 0, 0, 1, 0, 1, b't', // topics, name
            0, 0, 0, 1, 0, 0, 0, 4, 0, 3, // partitions
        ];
        let mut r = Reader::new(Bytes::from_static(bytes));
        assert_eq!(WriteTxnMarkersResponse::decode(&mut r, 0).unwrap(), resp);
        assert_eq!(r.remaining(), 0);
    }
}
