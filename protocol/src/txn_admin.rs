//! The transaction admin APIs (KIP-664): describing transactions by id and
//! listing them. Both directions: the broker (a transaction coordinator)
//! decodes requests and encodes answers; an admin client does the reverse.
//! Fields absent from a version decode as the schema's default.
//!
//! DescribeTransactions (key 65), v0 only, flexible from v0.
//! Request: transactional_ids [string].
//! Response: throttle_time_ms int32, transaction_states [error_code int16,
//! transactional_id string, transaction_state string,
//! transaction_timeout_ms int32, transaction_start_time_ms int64,
//! producer_id int64, producer_epoch int16, topics [topic string,
//! partitions [int32]]].
//!
//! ListTransactions (key 66), v0-1, flexible from v0. v2's
//! transactional_id_pattern is not spoken.
//! Request: state_filters [string], producer_id_filters [int64],
//! duration_filter int64 (v1+; -1 when absent: no filter).
//! Response: throttle_time_ms int32, error_code int16,
//! unknown_state_filters [string], transaction_states [transactional_id
//! string, producer_id int64, transaction_state string].
//!
//! No tagged fields are defined in these versions; unknown ones are skipped
//! and none are written.

use ferrite_ids::ProducerId;

use super::topic_partitions::TopicPartitions;
use super::wire::{Reader, WireResult, Writer};

pub const DESCRIBE_TRANSACTIONS_KEY: i16 = 65;
pub const DESCRIBE_TRANSACTIONS_VERSION_MAX: i16 = 0;
pub const DESCRIBE_TRANSACTIONS_FLEXIBLE_FROM: i16 = 0;
pub const LIST_TRANSACTIONS_KEY: i16 = 66;
pub const LIST_TRANSACTIONS_VERSION_MAX: i16 = 1;
pub const LIST_TRANSACTIONS_FLEXIBLE_FROM: i16 = 0;

/// ListTransactions `duration_filter` that filters nothing (and the value
/// when v0 carries none).
pub const NO_DURATION_FILTER: i64 = -1;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeTransactionsRequest {
    pub transactional_ids: Vec<String>,
}

/// One transactional id's state, as DescribeTransactions answers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionDescription {
    pub error_code: i16,
    pub transactional_id: String,
    /// "Empty", "Ongoing", "PrepareCommit", "CompleteAbort", ...
    pub transaction_state: String,
    pub transaction_timeout_ms: i32,
    /// -1 with no transaction open.
    pub transaction_start_time_ms: i64,
    pub producer_id: ProducerId,
    pub producer_epoch: i16,
    /// The partitions in the transaction.
    pub topics: Vec<TopicPartitions<i32>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeTransactionsResponse {
    pub throttle_time_ms: i32,
    pub transaction_states: Vec<TransactionDescription>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListTransactionsRequest {
    /// Empty: transactions in every state.
    pub state_filters: Vec<String>,
    /// Empty: transactions of every producer.
    pub producer_id_filters: Vec<ProducerId>,
    /// Only transactions open longer than this (ms);
    /// [`NO_DURATION_FILTER`]: all.
    pub duration_filter: i64,
}

/// One transaction, as ListTransactions answers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedTransaction {
    pub transactional_id: String,
    pub producer_id: ProducerId,
    pub transaction_state: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListTransactionsResponse {
    pub throttle_time_ms: i32,
    pub error_code: i16,
    /// The state filters the coordinator did not know.
    pub unknown_state_filters: Vec<String>,
    pub transaction_states: Vec<ListedTransaction>,
}

/// The fewest bytes a (compact) description takes: error code,
/// transactional id and state (at least 1 each), timeout, start time,
/// producer id and epoch, topics (at least 1) and tagged fields.
const DESCRIPTION_BYTES_MIN: usize = 2 + 1 + 1 + 4 + 8 + 8 + 2 + 1 + 1;
/// The fewest bytes a (compact) listed transaction takes: transactional id
/// (at least 1), producer id, state (at least 1) and tagged fields.
const LISTED_BYTES_MIN: usize = 1 + 8 + 1 + 1;

impl DescribeTransactionsRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<DescribeTransactionsRequest> {
        let f = version >= DESCRIBE_TRANSACTIONS_FLEXIBLE_FROM;
        let transactional_ids = r.strings(f, "transactional_ids")?;
        r.tagged_fields_if(f)?;
        Ok(DescribeTransactionsRequest { transactional_ids })
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= DESCRIBE_TRANSACTIONS_FLEXIBLE_FROM;
        w.strings(f, &self.transactional_ids);
        w.empty_tagged_fields_if(f);
    }
}

impl TransactionDescription {
    fn decode(r: &mut Reader, f: bool) -> WireResult<TransactionDescription> {
        Ok(TransactionDescription {
            error_code: r.i16("error_code")?,
            transactional_id: r.string(f, "transactional_id")?,
            transaction_state: r.string(f, "transaction_state")?,
            transaction_timeout_ms: r.i32("transaction_timeout_ms")?,
            transaction_start_time_ms: r.i64("transaction_start_time_ms")?,
            producer_id: ProducerId(r.i64("producer_id")?),
            producer_epoch: r.i16("producer_epoch")?,
            topics: TopicPartitions::read_indexes(r, f, ["transaction topics", "transaction partitions"])?,
        })
    }

    fn encode(&self, w: &mut Writer, f: bool) {
        w.i16(self.error_code);
        w.string(f, &self.transactional_id);
        w.string(f, &self.transaction_state);
        w.i32(self.transaction_timeout_ms);
        w.i64(self.transaction_start_time_ms);
        w.i64(self.producer_id.0);
        w.i16(self.producer_epoch);
        TopicPartitions::write_indexes(w, f, &self.topics);
    }
}

impl DescribeTransactionsResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= DESCRIBE_TRANSACTIONS_FLEXIBLE_FROM;
        w.i32(self.throttle_time_ms);
        w.structs(f, &self.transaction_states, |w, d| d.encode(w, f));
        w.empty_tagged_fields_if(f);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<DescribeTransactionsResponse> {
        let f = version >= DESCRIBE_TRANSACTIONS_FLEXIBLE_FROM;
        let throttle_time_ms = r.i32("throttle_time_ms")?;
        let transaction_states = r.structs(f, DESCRIPTION_BYTES_MIN, "transaction_states", |r| {
            TransactionDescription::decode(r, f)
        })?;
        r.tagged_fields_if(f)?;
        Ok(DescribeTransactionsResponse {
            throttle_time_ms,
            transaction_states,
        })
    }
}

impl ListTransactionsRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<ListTransactionsRequest> {
        let f = version >= LIST_TRANSACTIONS_FLEXIBLE_FROM;
        let state_filters = r.strings(f, "state_filters")?;
        let producer_id_filters = r
            .i64_array(f, "producer_id_filters")?
            .into_iter()
            .map(ProducerId)
            .collect();
        let duration_filter = if version >= 1 {
            r.i64("duration_filter")?
        } else {
            NO_DURATION_FILTER
        };
        r.tagged_fields_if(f)?;
        Ok(ListTransactionsRequest {
            state_filters,
            producer_id_filters,
            duration_filter,
        })
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= LIST_TRANSACTIONS_FLEXIBLE_FROM;
        w.strings(f, &self.state_filters);
        let ids: Vec<i64> = self.producer_id_filters.iter().map(|p| p.0).collect();
        w.i64_array(f, &ids);
        if version >= 1 {
            w.i64(self.duration_filter);
        }
        w.empty_tagged_fields_if(f);
    }
}

impl ListTransactionsResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= LIST_TRANSACTIONS_FLEXIBLE_FROM;
        w.i32(self.throttle_time_ms);
        w.i16(self.error_code);
        w.strings(f, &self.unknown_state_filters);
        w.structs(f, &self.transaction_states, |w, t| {
            w.string(f, &t.transactional_id);
            w.i64(t.producer_id.0);
            w.string(f, &t.transaction_state);
        });
        w.empty_tagged_fields_if(f);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<ListTransactionsResponse> {
        let f = version >= LIST_TRANSACTIONS_FLEXIBLE_FROM;
        let throttle_time_ms = r.i32("throttle_time_ms")?;
        let error_code = r.i16("error_code")?;
        let unknown_state_filters = r.strings(f, "unknown_state_filters")?;
        let transaction_states = r.structs(f, LISTED_BYTES_MIN, "transaction_states", |r| {
            Ok(ListedTransaction {
                transactional_id: r.string(f, "transactional_id")?,
                producer_id: ProducerId(r.i64("producer_id")?),
                transaction_state: r.string(f, "transaction_state")?,
            })
        })?;
        r.tagged_fields_if(f)?;
        Ok(ListTransactionsResponse {
            throttle_time_ms,
            error_code,
            unknown_state_filters,
            transaction_states,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::codec_testing::{every_prefix_fails, huge_compact_count, round_trip};
    use super::super::wire::WireError;
    use super::*;

    #[test]
    fn describe_transactions_round_trips_at_every_version() {
        let req = DescribeTransactionsRequest {
            transactional_ids: vec!["tx-1".into(), "été".into()],
        };
        let resp = DescribeTransactionsResponse {
            throttle_time_ms: 4,
            transaction_states: vec![
                TransactionDescription {
                    error_code: 0,
                    transactional_id: "tx-1".into(),
                    transaction_state: "Ongoing".into(),
                    transaction_timeout_ms: 60_000,
                    transaction_start_time_ms: 1_700_000_000_000,
                    producer_id: ProducerId(4000),
                    producer_epoch: 3,
                    topics: vec![TopicPartitions {
                        topic: "orders".into(),
                        partitions: vec![0, 5],
                    }],
                },
                TransactionDescription {
                    error_code: 105,
                    transactional_id: "été".into(),
                    transaction_state: "".into(),
                    transaction_timeout_ms: 0,
                    transaction_start_time_ms: -1,
                    producer_id: ProducerId::NONE,
                    producer_epoch: -1,
                    topics: vec![],
                },
            ],
        };
        for v in 0..=DESCRIBE_TRANSACTIONS_VERSION_MAX {
            let bytes = round_trip(
                &req,
                |x, w| x.encode(w, v),
                |r| DescribeTransactionsRequest::decode(r, v),
            );
            every_prefix_fails(&bytes, |r| DescribeTransactionsRequest::decode(r, v));
            let bytes = round_trip(
                &resp,
                |x, w| x.encode(w, v),
                |r| DescribeTransactionsResponse::decode(r, v),
            );
            every_prefix_fails(&bytes, |r| DescribeTransactionsResponse::decode(r, v));
        }
    }

    #[test]
    fn list_transactions_round_trips_at_every_version() {
        let resp = ListTransactionsResponse {
            throttle_time_ms: 4,
            error_code: 0,
            unknown_state_filters: vec!["Weird".into()],
            transaction_states: vec![ListedTransaction {
                transactional_id: "tx-1".into(),
                producer_id: ProducerId(4000),
                transaction_state: "Ongoing".into(),
            }],
        };
        for v in 0..=LIST_TRANSACTIONS_VERSION_MAX {
            let req = ListTransactionsRequest {
                state_filters: vec!["Ongoing".into(), "Weird".into()],
                producer_id_filters: vec![ProducerId(4000), ProducerId(1)],
                duration_filter: if v >= 1 { 30_000 } else { NO_DURATION_FILTER },
            };
            let bytes = round_trip(&req, |x, w| x.encode(w, v), |r| ListTransactionsRequest::decode(r, v));
            every_prefix_fails(&bytes, |r| ListTransactionsRequest::decode(r, v));
            let bytes = round_trip(&resp, |x, w| x.encode(w, v), |r| ListTransactionsResponse::decode(r, v));
            every_prefix_fails(&bytes, |r| ListTransactionsResponse::decode(r, v));
        }
    }

    #[test]
    fn huge_counts_are_refused_before_allocating() {
        let mut r = Reader::new(huge_compact_count(&[], &[0]));
        assert!(matches!(
            DescribeTransactionsRequest::decode(&mut r, 0),
            Err(WireError::Truncated { .. })
        ));
        // No state filters, then 2^31 - 1 producer ids.
        let mut r = Reader::new(huge_compact_count(&[1], &[0]));
        assert!(matches!(
            ListTransactionsRequest::decode(&mut r, 0),
            Err(WireError::Truncated { .. })
        ));
        // Throttle, error, no unknown filters, then 2^31 - 1 transactions.
        let mut r = Reader::new(huge_compact_count(&[0, 0, 0, 0, 0, 0, 1], &[0]));
        assert!(matches!(
            ListTransactionsResponse::decode(&mut r, 0),
            Err(WireError::Truncated { .. })
        ));
    }
}
