//! DescribeProducers (key 61, KIP-664), v0, flexible from v0: the
//! producers a partition's leader knows and the transaction each has open
//! there — what an operator needs to find and abort a hanging transaction.
//! Both directions: the broker decodes requests and encodes answers; an
//! admin client does the reverse.
//!
//! Request: topics [name string, partition_indexes [int32]].
//! Response: throttle_time_ms int32, topics [name string, partitions
//! [partition_index int32, error_code int16, error_message nullable string,
//! active_producers [producer_id int64, producer_epoch int32 (sic: int32
//! here), last_sequence int32, last_timestamp int64, coordinator_epoch
//! int32, current_txn_start_offset int64 (-1: none open)]]].
//!
//! No tagged fields are defined in this version; unknown ones are skipped
//! and none are written.

use ferrite_ids::ProducerId;

use super::topic_partitions::TopicPartitions;
use super::wire::{Reader, WireResult, Writer};

pub const API_KEY: i16 = 61;
pub const VERSION_MAX: i16 = 0;
pub const FLEXIBLE_FROM: i16 = 0;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeProducersRequest {
    pub topics: Vec<TopicPartitions<i32>>,
}

/// One producer a partition knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerDescription {
    pub producer_id: ProducerId,
    pub producer_epoch: i32,
    /// -1: none known.
    pub last_sequence: i32,
    /// -1: none known.
    pub last_timestamp: i64,
    /// -1: none known.
    pub coordinator_epoch: i32,
    /// First offset of its open transaction here; -1: none open.
    pub current_txn_start_offset: i64,
}

/// One partition's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionProducers {
    pub partition_index: i32,
    pub error_code: i16,
    pub error_message: Option<String>,
    pub active_producers: Vec<ProducerDescription>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeProducersResponse {
    pub throttle_time_ms: i32,
    pub topics: Vec<TopicPartitions<PartitionProducers>>,
}

/// The fewest bytes a (compact) partition answer takes: index, error code,
/// message (1), producers (1), tagged fields (1).
const PARTITION_BYTES_MIN: usize = 4 + 2 + 1 + 1 + 1;
/// The fewest bytes a (compact) producer takes, with its tagged fields.
const PRODUCER_BYTES_MIN: usize = 8 + 4 + 4 + 8 + 4 + 8 + 1;

impl DescribeProducersRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<DescribeProducersRequest> {
        let f = version >= FLEXIBLE_FROM;
        let topics = TopicPartitions::read_indexes(r, f, ["topics", "partition_indexes"])?;
        r.tagged_fields_if(f)?;
        Ok(DescribeProducersRequest { topics })
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= FLEXIBLE_FROM;
        TopicPartitions::write_indexes(w, f, &self.topics);
        w.empty_tagged_fields_if(f);
    }
}

impl ProducerDescription {
    fn decode(r: &mut Reader) -> WireResult<ProducerDescription> {
        Ok(ProducerDescription {
            producer_id: ProducerId(r.i64("producer_id")?),
            producer_epoch: r.i32("producer_epoch")?,
            last_sequence: r.i32("last_sequence")?,
            last_timestamp: r.i64("last_timestamp")?,
            coordinator_epoch: r.i32("coordinator_epoch")?,
            current_txn_start_offset: r.i64("current_txn_start_offset")?,
        })
    }

    fn encode(&self, w: &mut Writer) {
        w.i64(self.producer_id.0);
        w.i32(self.producer_epoch);
        w.i32(self.last_sequence);
        w.i64(self.last_timestamp);
        w.i32(self.coordinator_epoch);
        w.i64(self.current_txn_start_offset);
    }
}

impl PartitionProducers {
    fn decode(r: &mut Reader, f: bool) -> WireResult<PartitionProducers> {
        Ok(PartitionProducers {
            partition_index: r.i32("partition_index")?,
            error_code: r.i16("error_code")?,
            error_message: r.nullable_string(f, "error_message")?,
            active_producers: r.structs(f, PRODUCER_BYTES_MIN, "active_producers", ProducerDescription::decode)?,
        })
    }

    fn encode(&self, w: &mut Writer, f: bool) {
        w.i32(self.partition_index);
        w.i16(self.error_code);
        w.nullable_string(f, self.error_message.as_deref());
        w.structs(f, &self.active_producers, |w, p| p.encode(w));
    }
}

impl DescribeProducersResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= FLEXIBLE_FROM;
        w.i32(self.throttle_time_ms);
        TopicPartitions::write_all(w, f, &self.topics, |w, p| p.encode(w, f));
        w.empty_tagged_fields_if(f);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<DescribeProducersResponse> {
        let f = version >= FLEXIBLE_FROM;
        let throttle_time_ms = r.i32("throttle_time_ms")?;
        let topics = TopicPartitions::read_all(r, f, PARTITION_BYTES_MIN, ["topics", "partitions"], |r| {
            PartitionProducers::decode(r, f)
        })?;
        r.tagged_fields_if(f)?;
        Ok(DescribeProducersResponse {
            throttle_time_ms,
            topics,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response() -> DescribeProducersResponse {
        DescribeProducersResponse {
            throttle_time_ms: 0,
            topics: vec![TopicPartitions {
                topic: "t".into(),
                partitions: vec![
                    PartitionProducers {
                        partition_index: 0,
                        error_code: 0,
                        error_message: None,
                        active_producers: vec![ProducerDescription {
                            producer_id: ProducerId(7),
                            producer_epoch: 3,
                            last_sequence: 41,
                            last_timestamp: 1_700_000_000_000,
                            coordinator_epoch: -1,
                            current_txn_start_offset: 12,
                        }],
                    },
                    PartitionProducers {
                        partition_index: 1,
                        error_code: 6,
                        error_message: Some("not the leader".into()),
                        active_producers: Vec::new(),
                    },
                ],
            }],
        }
    }

    #[test]
    fn round_trips_and_every_prefix_is_refused() {
        let req = DescribeProducersRequest {
            topics: vec![TopicPartitions {
                topic: "t".into(),
                partitions: vec![0, 1],
            }],
        };
        let mut w = Writer::new();
        req.encode(&mut w, 0);
        let bytes = w.into_bytes().freeze();
        assert_eq!(
            DescribeProducersRequest::decode(&mut Reader::new(bytes.clone()), 0).unwrap(),
            req
        );
        for n in 0..bytes.len() {
            assert!(
                DescribeProducersRequest::decode(&mut Reader::new(bytes.slice(..n)), 0).is_err(),
                "{n}"
            );
        }
        let resp = response();
        let mut w = Writer::new();
        resp.encode(&mut w, 0);
        let bytes = w.into_bytes().freeze();
        assert_eq!(
            DescribeProducersResponse::decode(&mut Reader::new(bytes.clone()), 0).unwrap(),
            resp
        );
        for n in 0..bytes.len() {
            assert!(
                DescribeProducersResponse::decode(&mut Reader::new(bytes.slice(..n)), 0).is_err(),
                "{n}"
            );
        }
    }

    #[test]
    fn the_layout_is_kafkas() {
        // One producer, as Kafka lays it out: int32 epoch, then the rest.
        let mut w = Writer::new();
        response().topics[0].partitions[0].active_producers[0].encode(&mut w);
        let b = w.as_slice();
        assert_eq!(b.len(), 8 + 4 + 4 + 8 + 4 + 8);
        assert_eq!(&b[8..12], &3i32.to_be_bytes(), "the epoch is an int32");
        assert_eq!(&b[28..36], &12i64.to_be_bytes());
    }
}
