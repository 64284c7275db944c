//! The transactional producer's calls to its transaction coordinator:
//! adding partitions and a group's offsets to the open transaction, and
//! ending it. Both directions: the broker decodes requests and encodes
//! answers; a transactional producer does the reverse.
//!
//! AddPartitionsToTxn (key 24), v0-3, flexible from v3. v4 (KIP-890: a
//! batch of transactions, from broker to coordinator) is
//! [`crate::txn_verify`]; v5 is not spoken.
//! Request: transactional_id string, producer_id int64, producer_epoch
//! int16, topics [name string, partitions [int32]].
//! Response: throttle_time_ms int32, results [name string, results
//! [partition_index int32, partition_error_code int16]].
//!
//! AddOffsetsToTxn (key 25), v0-3, flexible from v3.
//! Request: transactional_id string, producer_id int64, producer_epoch
//! int16, group_id string.
//! Response: throttle_time_ms int32, error_code int16.
//!
//! EndTxn (key 26), v0-3, flexible from v3. v5's producer id and epoch in
//! the response (KIP-890) are not spoken.
//! Request: transactional_id string, producer_id int64, producer_epoch
//! int16, committed bool (true: commit; false: abort).
//! Response: throttle_time_ms int32, error_code int16.
//!
//! No tagged fields are defined in these versions; unknown ones are skipped
//! and none are written.

use ferrite_ids::ProducerId;

use super::topic_partitions::{PartitionError, TopicPartitions};
use super::wire::{Reader, WireResult, Writer};

pub const ADD_PARTITIONS_TO_TXN_KEY: i16 = 24;
pub const ADD_PARTITIONS_TO_TXN_VERSION_MAX: i16 = 4;
pub const ADD_PARTITIONS_TO_TXN_FLEXIBLE_FROM: i16 = 3;
pub const ADD_OFFSETS_TO_TXN_KEY: i16 = 25;
pub const ADD_OFFSETS_TO_TXN_VERSION_MAX: i16 = 3;
pub const ADD_OFFSETS_TO_TXN_FLEXIBLE_FROM: i16 = 3;
pub const END_TXN_KEY: i16 = 26;
pub const END_TXN_VERSION_MAX: i16 = 3;
pub const END_TXN_FLEXIBLE_FROM: i16 = 3;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddPartitionsToTxnRequest {
    pub transactional_id: String,
    pub producer_id: ProducerId,
    pub producer_epoch: i16,
    /// Each topic and the indexes of its partitions to add.
    pub topics: Vec<TopicPartitions<i32>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddPartitionsToTxnResponse {
    pub throttle_time_ms: i32,
    /// Each topic's partitions and their error codes
    /// (`partition_error_code` on the wire).
    pub results: Vec<TopicPartitions<PartitionError>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddOffsetsToTxnRequest {
    pub transactional_id: String,
    pub producer_id: ProducerId,
    pub producer_epoch: i16,
    pub group_id: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddOffsetsToTxnResponse {
    pub throttle_time_ms: i32,
    pub error_code: i16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndTxnRequest {
    pub transactional_id: String,
    pub producer_id: ProducerId,
    pub producer_epoch: i16,
    /// True to commit the transaction, false to abort it.
    pub committed: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndTxnResponse {
    pub throttle_time_ms: i32,
    pub error_code: i16,
}

/// The transactional id, producer id and epoch that start each request.
fn read_producer(r: &mut Reader, f: bool) -> WireResult<(String, ProducerId, i16)> {
    let transactional_id = r.string(f, "transactional_id")?;
    let producer_id = ProducerId(r.i64("producer_id")?);
    let producer_epoch = r.i16("producer_epoch")?;
    Ok((transactional_id, producer_id, producer_epoch))
}

fn write_producer(w: &mut Writer, f: bool, transactional_id: &str, producer_id: ProducerId, producer_epoch: i16) {
    w.string(f, transactional_id);
    w.i64(producer_id.0);
    w.i16(producer_epoch);
}

/// `throttle_time_ms, error_code` and the tagged fields: the whole of
/// AddOffsetsToTxn's and EndTxn's responses.
fn read_error_response(r: &mut Reader, f: bool) -> WireResult<(i32, i16)> {
    let throttle_time_ms = r.i32("throttle_time_ms")?;
    let error_code = r.i16("error_code")?;
    r.tagged_fields_if(f)?;
    Ok((throttle_time_ms, error_code))
}

fn write_error_response(w: &mut Writer, f: bool, throttle_time_ms: i32, error_code: i16) {
    w.i32(throttle_time_ms);
    w.i16(error_code);
    w.empty_tagged_fields_if(f);
}

impl AddPartitionsToTxnRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<AddPartitionsToTxnRequest> {
        let f = version >= ADD_PARTITIONS_TO_TXN_FLEXIBLE_FROM;
        let (transactional_id, producer_id, producer_epoch) = read_producer(r, f)?;
        let topics = TopicPartitions::read_indexes(r, f, ["add partitions topics", "add partitions partitions"])?;
        r.tagged_fields_if(f)?;
        Ok(AddPartitionsToTxnRequest {
            transactional_id,
            producer_id,
            producer_epoch,
            topics,
        })
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= ADD_PARTITIONS_TO_TXN_FLEXIBLE_FROM;
        write_producer(w, f, &self.transactional_id, self.producer_id, self.producer_epoch);
        TopicPartitions::write_indexes(w, f, &self.topics);
        w.empty_tagged_fields_if(f);
    }
}

impl AddPartitionsToTxnResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= ADD_PARTITIONS_TO_TXN_FLEXIBLE_FROM;
        w.i32(self.throttle_time_ms);
        TopicPartitions::write_errors(w, f, &self.results);
        w.empty_tagged_fields_if(f);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<AddPartitionsToTxnResponse> {
        let f = version >= ADD_PARTITIONS_TO_TXN_FLEXIBLE_FROM;
        let throttle_time_ms = r.i32("throttle_time_ms")?;
        let results =
            TopicPartitions::read_errors(r, f, ["add partitions results", "add partitions partition results"])?;
        r.tagged_fields_if(f)?;
        Ok(AddPartitionsToTxnResponse {
            throttle_time_ms,
            results,
        })
    }
}

impl AddOffsetsToTxnRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<AddOffsetsToTxnRequest> {
        let f = version >= ADD_OFFSETS_TO_TXN_FLEXIBLE_FROM;
        let (transactional_id, producer_id, producer_epoch) = read_producer(r, f)?;
        let group_id = r.string(f, "group_id")?;
        r.tagged_fields_if(f)?;
        Ok(AddOffsetsToTxnRequest {
            transactional_id,
            producer_id,
            producer_epoch,
            group_id,
        })
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= ADD_OFFSETS_TO_TXN_FLEXIBLE_FROM;
        write_producer(w, f, &self.transactional_id, self.producer_id, self.producer_epoch);
        w.string(f, &self.group_id);
        w.empty_tagged_fields_if(f);
    }
}

impl AddOffsetsToTxnResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= ADD_OFFSETS_TO_TXN_FLEXIBLE_FROM;
        write_error_response(w, f, self.throttle_time_ms, self.error_code);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<AddOffsetsToTxnResponse> {
        let f = version >= ADD_OFFSETS_TO_TXN_FLEXIBLE_FROM;
        let (throttle_time_ms, error_code) = read_error_response(r, f)?;
        Ok(AddOffsetsToTxnResponse {
            throttle_time_ms,
            error_code,
        })
    }
}

impl EndTxnRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<EndTxnRequest> {
        let f = version >= END_TXN_FLEXIBLE_FROM;
        let (transactional_id, producer_id, producer_epoch) = read_producer(r, f)?;
        let committed = r.bool("committed")?;
        r.tagged_fields_if(f)?;
        Ok(EndTxnRequest {
            transactional_id,
            producer_id,
            producer_epoch,
            committed,
        })
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= END_TXN_FLEXIBLE_FROM;
        write_producer(w, f, &self.transactional_id, self.producer_id, self.producer_epoch);
        w.bool(self.committed);
        w.empty_tagged_fields_if(f);
    }
}

impl EndTxnResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= END_TXN_FLEXIBLE_FROM;
        write_error_response(w, f, self.throttle_time_ms, self.error_code);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<EndTxnResponse> {
        let f = version >= END_TXN_FLEXIBLE_FROM;
        let (throttle_time_ms, error_code) = read_error_response(r, f)?;
        Ok(EndTxnResponse {
            throttle_time_ms,
            error_code,
        })
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::super::codec_testing::{every_prefix_fails, round_trip};
    use super::*;

    #[test]
    fn add_partitions_to_txn_round_trips_at_every_version() {
        let req = AddPartitionsToTxnRequest {
            transactional_id: "tx-1".into(),
            producer_id: ProducerId(4000),
            producer_epoch: 3,
            topics: vec![
                TopicPartitions {
                    topic: "orders".into(),
                    partitions: vec![0, 7],
                },
                TopicPartitions {
                    topic: "été".into(),
                    partitions: vec![],
                },
            ],
        };
        let resp = AddPartitionsToTxnResponse {
            throttle_time_ms: 5,
            results: vec![TopicPartitions {
                topic: "orders".into(),
                partitions: vec![
                    PartitionError {
                        partition_index: 0,
                        error_code: 0,
                    },
                    PartitionError {
                        partition_index: 7,
                        error_code: 48,
                    },
                ],
            }],
        };
        for v in 0..crate::txn_verify::BATCHED_FROM {
            let bytes = round_trip(&req, |x, w| x.encode(w, v), |r| AddPartitionsToTxnRequest::decode(r, v));
            every_prefix_fails(&bytes, |r| AddPartitionsToTxnRequest::decode(r, v));
            let bytes = round_trip(
                &resp,
                |x, w| x.encode(w, v),
                |r| AddPartitionsToTxnResponse::decode(r, v),
            );
            every_prefix_fails(&bytes, |r| AddPartitionsToTxnResponse::decode(r, v));
        }
    }

    #[test]
    fn add_offsets_to_txn_round_trips_at_every_version() {
        let req = AddOffsetsToTxnRequest {
            transactional_id: "tx-1".into(),
            producer_id: ProducerId(4000),
            producer_epoch: 3,
            group_id: "g".into(),
        };
        let resp = AddOffsetsToTxnResponse {
            throttle_time_ms: 5,
            error_code: 53,
        };
        for v in 0..=ADD_OFFSETS_TO_TXN_VERSION_MAX {
            let bytes = round_trip(&req, |x, w| x.encode(w, v), |r| AddOffsetsToTxnRequest::decode(r, v));
            every_prefix_fails(&bytes, |r| AddOffsetsToTxnRequest::decode(r, v));
            let bytes = round_trip(&resp, |x, w| x.encode(w, v), |r| AddOffsetsToTxnResponse::decode(r, v));
            every_prefix_fails(&bytes, |r| AddOffsetsToTxnResponse::decode(r, v));
        }
    }

    #[test]
    fn end_txn_round_trips_at_every_version() {
        let resp = EndTxnResponse {
            throttle_time_ms: 0,
            error_code: 47,
        };
        for v in 0..=END_TXN_VERSION_MAX {
            for committed in [true, false] {
                let req = EndTxnRequest {
                    transactional_id: "tx-1".into(),
                    producer_id: ProducerId(4000),
                    producer_epoch: 3,
                    committed,
                };
                let bytes = round_trip(&req, |x, w| x.encode(w, v), |r| EndTxnRequest::decode(r, v));
                every_prefix_fails(&bytes, |r| EndTxnRequest::decode(r, v));
            }
            let bytes = round_trip(&resp, |x, w| x.encode(w, v), |r| EndTxnResponse::decode(r, v));
            every_prefix_fails(&bytes, |r| EndTxnResponse::decode(r, v));
        }
    }

    #[test]
    fn unknown_tagged_fields_are_skipped() {
        // EndTxn v3: "t", producer 1, epoch 0, commit, then one tagged field
        // (tag 9, two bytes) that no version defines.
        let bytes = [2, b't', 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 1, 9, 2, 0xaa, 0xbb];
        let mut r = Reader::new(Bytes::copy_from_slice(&bytes));
        let req = EndTxnRequest::decode(&mut r, 3).unwrap();
        assert_eq!(r.remaining(), 0);
        assert_eq!(
            req,
            EndTxnRequest {
                transactional_id: "t".into(),
                producer_id: ProducerId(1),
                producer_epoch: 0,
                committed: true,
            }
        );
    }

    #[test]
    fn a_huge_partition_count_is_refused_before_allocating() {
        // AddPartitionsToTxn v0: "t", producer 1, epoch 0, one topic "a"
        // claiming 2^31 - 1 partitions in a few bytes.
        let mut bytes = vec![0, 1, b't', 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, b'a'];
        bytes.extend_from_slice(&i32::MAX.to_be_bytes());
        let mut r = Reader::new(Bytes::from(bytes));
        assert!(matches!(
            AddPartitionsToTxnRequest::decode(&mut r, 0),
            Err(crate::wire::WireError::Truncated { .. })
        ));
    }
}
