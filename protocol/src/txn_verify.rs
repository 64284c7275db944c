//! AddPartitionsToTxn v4 (key 24, KIP-890): the brokers' batched form. A
//! partition's leader asks a transaction coordinator, before it appends
//! the first transactional batch of a producer's transaction, whether that
//! transaction is open and holds the partition (`verify_only`); the
//! coordinator may also be asked to add partitions, as v0–3 do. Clients
//! use v0–3 ([`crate::txn_producer`]); v4 needs CLUSTER_ACTION.
//!
//! Request: transactions [transactional_id string, producer_id int64,
//! producer_epoch int16, verify_only bool, topics [name string,
//! partitions [int32]]].
//! Response: throttle_time_ms int32, error_code int16,
//! results_by_transaction [transactional_id string, topic_results [name
//! string, results_by_partition [partition_index int32,
//! partition_error_code int16]]].
//!
//! Flexible (compact strings and arrays, tagged fields after each struct);
//! no tagged fields are defined: unknown ones are skipped, none written.

use ferrite_ids::ProducerId;

use super::topic_partitions::{PartitionError, TopicPartitions};
use super::wire::{Reader, WireResult, Writer};

/// The first (and only) version of the batched form.
pub const BATCHED_FROM: i16 = 4;

/// One transaction a leader asks about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnToVerify {
    pub transactional_id: String,
    pub producer_id: ProducerId,
    pub producer_epoch: i16,
    /// True: only say whether the partitions are in the transaction.
    pub verify_only: bool,
    pub topics: Vec<TopicPartitions<i32>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddPartitionsToTxnBatch {
    pub transactions: Vec<TxnToVerify>,
}

/// One transaction's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnVerified {
    pub transactional_id: String,
    pub topics: Vec<TopicPartitions<PartitionError>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddPartitionsToTxnBatchResponse {
    pub throttle_time_ms: i32,
    /// A failure of the whole request (CLUSTER_AUTHORIZATION_FAILED).
    pub error_code: i16,
    pub results: Vec<TxnVerified>,
}

/// The fewest bytes a transaction takes: id (1), producer id, epoch,
/// verify_only, topics (1), tagged fields (1).
const TXN_BYTES_MIN: usize = 1 + 8 + 2 + 1 + 1 + 1;
/// The fewest bytes a transaction's answer takes: id (1), topics (1),
/// tagged fields (1).
const RESULT_BYTES_MIN: usize = 3;

impl AddPartitionsToTxnBatch {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<AddPartitionsToTxnBatch> {
        assert!(version >= BATCHED_FROM, "v{version} is not the batched form");
        let transactions = r.structs(true, TXN_BYTES_MIN, "transactions", |r| {
            Ok(TxnToVerify {
                transactional_id: r.string(true, "transactional_id")?,
                producer_id: ProducerId(r.i64("producer_id")?),
                producer_epoch: r.i16("producer_epoch")?,
                verify_only: r.bool("verify_only")?,
                topics: TopicPartitions::read_indexes(r, true, ["transaction topics", "transaction partitions"])?,
            })
        })?;
        r.tagged_fields_if(true)?;
        Ok(AddPartitionsToTxnBatch { transactions })
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        assert!(version >= BATCHED_FROM, "v{version} is not the batched form");
        w.structs(true, &self.transactions, |w, t| {
            w.string(true, &t.transactional_id);
            w.i64(t.producer_id.0);
            w.i16(t.producer_epoch);
            w.bool(t.verify_only);
            TopicPartitions::write_indexes(w, true, &t.topics);
        });
        w.empty_tagged_fields_if(true);
    }
}

impl AddPartitionsToTxnBatchResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        assert!(version >= BATCHED_FROM, "v{version} is not the batched form");
        w.i32(self.throttle_time_ms);
        w.i16(self.error_code);
        w.structs(true, &self.results, |w, t| {
            w.string(true, &t.transactional_id);
            TopicPartitions::write_errors(w, true, &t.topics);
        });
        w.empty_tagged_fields_if(true);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<AddPartitionsToTxnBatchResponse> {
        assert!(version >= BATCHED_FROM, "v{version} is not the batched form");
        let throttle_time_ms = r.i32("throttle_time_ms")?;
        let error_code = r.i16("error_code")?;
        let results = r.structs(true, RESULT_BYTES_MIN, "results_by_transaction", |r| {
            Ok(TxnVerified {
                transactional_id: r.string(true, "transactional_id")?,
                topics: TopicPartitions::read_errors(r, true, ["topic_results", "results_by_partition"])?,
            })
        })?;
        r.tagged_fields_if(true)?;
        Ok(AddPartitionsToTxnBatchResponse {
            throttle_time_ms,
            error_code,
            results,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_every_prefix_is_refused() {
        let req = AddPartitionsToTxnBatch {
            transactions: vec![TxnToVerify {
                transactional_id: "tx".into(),
                producer_id: ProducerId(5),
                producer_epoch: 2,
                verify_only: true,
                topics: TopicPartitions::from_runs([("t".to_string(), 0), ("t".to_string(), 4)]),
            }],
        };
        let mut w = Writer::new();
        req.encode(&mut w, 4);
        let bytes = w.into_bytes().freeze();
        assert_eq!(
            AddPartitionsToTxnBatch::decode(&mut Reader::new(bytes.clone()), 4).unwrap(),
            req
        );
        for n in 0..bytes.len() {
            assert!(
                AddPartitionsToTxnBatch::decode(&mut Reader::new(bytes.slice(..n)), 4).is_err(),
                "{n}"
            );
        }
        let resp = AddPartitionsToTxnBatchResponse {
            throttle_time_ms: 0,
            error_code: 0,
            results: vec![TxnVerified {
                transactional_id: "tx".into(),
                topics: vec![TopicPartitions {
                    topic: "t".into(),
                    partitions: vec![PartitionError {
                        partition_index: 4,
                        error_code: 48,
                    }],
                }],
            }],
        };
        let mut w = Writer::new();
        resp.encode(&mut w, 4);
        let bytes = w.into_bytes().freeze();
        assert_eq!(
            AddPartitionsToTxnBatchResponse::decode(&mut Reader::new(bytes.clone()), 4).unwrap(),
            resp
        );
        for n in 0..bytes.len() {
            assert!(
                AddPartitionsToTxnBatchResponse::decode(&mut Reader::new(bytes.slice(..n)), 4).is_err(),
                "{n}"
            );
        }
    }
}
