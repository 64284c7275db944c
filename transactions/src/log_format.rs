//! The records of `__transaction_state`, in Kafka's layout (version 0 of
//! its `TransactionLogKey` and `TransactionLogValue`), so Kafka's tools
//! read them. All integers big-endian; strings are an int16 length and
//! UTF-8 bytes.
//!
//! ```text
//! key:   version int16 (0) | transactional_id string
//! value: version int16 (0) | producer_id int64 | producer_epoch int16
//!        | transaction_timeout_ms int32 | transaction_status int8
//!        | transaction_partitions nullable array (int32 count, -1: null) of
//!            [topic string | partition_ids array of int32]
//!        | transaction_last_update_timestamp_ms int64
//!        | transaction_start_timestamp_ms int64
//! ```
//!
//! A transactional id that expired is a tombstone (null value). The
//! partitions are null when no transaction is open, as Kafka writes them.

use std::collections::BTreeSet;

use bytes::Bytes;
use ferrite_ids::{ProducerId, TopicPartition};
use ferrite_protocol::wire::{Reader, WireError, WireResult, Writer};

use crate::metadata::{TxnMeta, TxnStatus};

/// The only key and value version written and read.
pub const VERSION: i16 = 0;
/// Partitions one record may name, at most (a transaction's; Kafka has no
/// limit, the record's size bounds it).
pub const PARTITIONS_MAX: usize = 100_000;

pub fn encode_key(transactional_id: &str) -> Vec<u8> {
    let mut w = Writer::new();
    w.i16(VERSION);
    w.string(false, transactional_id);
    w.into_bytes().to_vec()
}

pub fn decode_key(bytes: &[u8]) -> WireResult<String> {
    let mut r = Reader::new(Bytes::copy_from_slice(bytes));
    check_version(r.i16("transaction log key version")?)?;
    r.string(false, "transactional_id")
}

fn check_version(version: i16) -> WireResult<()> {
    match version {
        VERSION => Ok(()),
        v => Err(WireError::UnsupportedVersion {
            what: "transaction log record",
            version: v,
        }),
    }
}

pub fn encode_value(meta: &TxnMeta) -> Vec<u8> {
    let mut w = Writer::new();
    w.i16(VERSION);
    w.i64(meta.producer_id.0);
    w.i16(meta.producer_epoch);
    w.i32(meta.timeout_ms);
    w.i8(meta.status.code());
    if meta.partitions.is_empty() {
        w.array_len(false, None);
    } else {
        let topics = by_topic(&meta.partitions);
        w.array_len(false, Some(topics.len()));
        for (topic, ids) in topics {
            w.string(false, topic);
            w.i32_array(false, &ids);
        }
    }
    w.i64(meta.update_ms);
    w.i64(meta.start_ms);
    w.into_bytes().to_vec()
}

fn by_topic(partitions: &BTreeSet<TopicPartition>) -> Vec<(&str, Vec<i32>)> {
    let mut out: Vec<(&str, Vec<i32>)> = Vec::new();
    for tp in partitions {
        match out.last_mut() {
            Some((topic, ids)) if *topic == tp.topic => ids.push(tp.partition),
            _ => out.push((&tp.topic, vec![tp.partition])),
        }
    }
    out
}

pub fn decode_value(bytes: &[u8]) -> WireResult<TxnMeta> {
    let mut r = Reader::new(Bytes::copy_from_slice(bytes));
    check_version(r.i16("transaction log value version")?)?;
    let producer_id = ProducerId(r.i64("producer_id")?);
    let producer_epoch = r.i16("producer_epoch")?;
    let timeout_ms = r.i32("transaction_timeout_ms")?;
    let code = r.i8("transaction_status")?;
    let status = TxnStatus::of_code(code).ok_or(WireError::Invalid {
        what: "transaction_status",
        value: i64::from(code),
    })?;
    let mut partitions = BTreeSet::new();
    let topics = r.array_len(false, 4, "transaction_partitions")?.unwrap_or(0);
    for _ in 0..topics {
        let topic = r.string(false, "topic")?;
        for p in r.i32_array(false, "partition_ids")? {
            if partitions.len() >= PARTITIONS_MAX {
                return Err(WireError::Invalid {
                    what: "transaction partitions",
                    value: PARTITIONS_MAX as i64 + 1,
                });
            }
            partitions.insert(TopicPartition::new(topic.clone(), p));
        }
    }
    let update_ms = r.i64("transaction_last_update_timestamp_ms")?;
    let start_ms = r.i64("transaction_start_timestamp_ms")?;
    Ok(TxnMeta {
        producer_id,
        producer_epoch,
        last_producer_epoch: -1,
        timeout_ms,
        status,
        partitions,
        start_ms,
        update_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(partitions: &[(&str, i32)]) -> TxnMeta {
        TxnMeta {
            producer_id: ProducerId(4242),
            producer_epoch: 7,
            last_producer_epoch: -1,
            timeout_ms: 60_000,
            status: if partitions.is_empty() {
                TxnStatus::CompleteCommit
            } else {
                TxnStatus::Ongoing
            },
            partitions: partitions.iter().map(|(t, p)| TopicPartition::new(*t, *p)).collect(),
            start_ms: 1_700_000_000_000,
            update_ms: 1_700_000_000_500,
        }
    }

    #[test]
    fn records_round_trip() {
        for m in [meta(&[]), meta(&[("a", 0), ("a", 3), ("b", 1)])] {
            let bytes = encode_value(&m);
            assert_eq!(decode_value(&bytes).unwrap(), m);
            for cut in 0..bytes.len() {
                assert!(decode_value(&bytes[..cut]).is_err(), "a value cut at {cut} decoded");
            }
        }
        assert_eq!(decode_key(&encode_key("tx-1")).unwrap(), "tx-1");
    }

    #[test]
    fn the_layout_is_kafkas() {
        let bytes = encode_value(&meta(&[("a", 3)]));
        let mut want = Vec::new();
        want.extend_from_slice(&0i16.to_be_bytes());
        want.extend_from_slice(&4242i64.to_be_bytes());
        want.extend_from_slice(&7i16.to_be_bytes());
        want.extend_from_slice(&60_000i32.to_be_bytes());
        want.push(1);
        want.extend_from_slice(&1i32.to_be_bytes());
        want.extend_from_slice(&1i16.to_be_bytes());
        want.push(b'a');
        want.extend_from_slice(&1i32.to_be_bytes());
        want.extend_from_slice(&3i32.to_be_bytes());
        want.extend_from_slice(&1_700_000_000_500i64.to_be_bytes());
        want.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        assert_eq!(bytes, want);
        let empty = encode_value(&meta(&[]));
        assert_eq!(&empty[17..21], &(-1i32).to_be_bytes(), "no partitions: a null array");
    }

    #[test]
    fn other_versions_and_statuses_are_refused() {
        let mut bytes = encode_value(&meta(&[]));
        bytes[1] = 1;
        assert!(decode_value(&bytes).is_err());
        let mut bytes = encode_value(&meta(&[]));
        bytes[16] = 9;
        assert!(decode_value(&bytes).is_err());
    }
}
