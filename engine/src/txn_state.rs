//! Transactions as one partition sees them (KIP-98), free of I/O: which
//! producers have a transaction open here and from which offset, the last
//! stable offset that follows from them, and the transactions that ended
//! in an abort — what a `read_committed` fetch needs.
//!
//! A transactional producer's batches (attribute bit 4) open its
//! transaction at the first one's base offset; the coordinator ends it with
//! a *marker*: a control batch (bits 4 and 5) of one record whose key says
//! COMMIT or ABORT. The first offset of any open transaction bounds what a
//! `read_committed` consumer may see (the *last stable offset*, capped by
//! the high watermark); an aborted transaction's records stay in the log
//! and are listed, with the marker's offset, in the transaction index of
//! the marker's segment ([`crate::txn_index`]), so that such a consumer
//! skips them.
//!
//! # Control record (Kafka's own layout, inside an uncompressed batch)
//!
//! ```text
//! key    version int16 (0) | type int16 (0 ABORT, 1 COMMIT)
//! value  version int16 (0) | coordinator_epoch int32
//! ```
//!
//! An aborted transaction's entry is Kafka's `.txnindex` entry; its layout
//! is documented with that file ([`crate::txn_index`]).

use std::collections::BTreeMap;

use crate::batch::{self, BatchInfo, Compression, HEADER_BYTES};
use crate::error::BatchError;
use crate::record::{self, Record};
use crate::types::{Offset, ProducerId, TimestampMs};

/// How a transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    Abort,
    Commit,
}

impl Marker {
    fn code(self) -> i16 {
        match self {
            Marker::Abort => 0,
            Marker::Commit => 1,
        }
    }
}

/// One transaction that ended in an abort.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: ProducerId,
    pub first_offset: Offset,
    pub last_offset: Offset,
    pub last_stable_offset: Offset,
}

impl AbortedTxn {
    pub const BYTES: usize = 2 + 8 + 8 + 8 + 8;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&0i16.to_be_bytes());
        for v in [
            self.producer_id.0,
            self.first_offset.0,
            self.last_offset.0,
            self.last_stable_offset.0,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }

    /// Decodes exactly [`AbortedTxn::BYTES`] bytes.
    pub fn decode(bytes: &[u8]) -> Result<AbortedTxn, String> {
        if bytes.len() != Self::BYTES {
            return Err(format!(
                "an aborted-transaction entry is {} bytes, not {}",
                Self::BYTES,
                bytes.len()
            ));
        }
        let version = i16::from_be_bytes([bytes[0], bytes[1]]);
        if version != 0 {
            return Err(format!("aborted-transaction entry version {version}"));
        }
        let at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[2 + 8 * i..10 + 8 * i]);
            i64::from_be_bytes(b)
        };
        let t = AbortedTxn {
            producer_id: ProducerId(at(0)),
            first_offset: Offset(at(1)),
            last_offset: Offset(at(2)),
            last_stable_offset: Offset(at(3)),
        };
        if t.first_offset > t.last_offset || t.first_offset.0 < 0 {
            return Err(format!("aborted transaction {t:?} ends before it starts"));
        }
        Ok(t)
    }
}

/// Builds a marker batch for `producer_id`/`epoch` (its offsets and leader
/// epoch stamped by the log like any leader append).
pub fn marker_batch(
    producer_id: ProducerId,
    producer_epoch: i16,
    marker: Marker,
    coordinator_epoch: i32,
    timestamp: TimestampMs,
) -> Vec<u8> {
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&marker.code().to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    let records = [Record {
        offset_delta: 0,
        timestamp_delta: 0,
        key: Some(&key),
        value: Some(&value),
        headers: Vec::new(),
    }];
    let mut out = batch::build_batch_of_records(Offset(0), timestamp, &records);
    let attributes = batch::ATTR_TRANSACTIONAL | batch::ATTR_CONTROL;
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    // Rewrites the CRC over the attributes too; a marker has no sequence.
    batch::set_producer(&mut out, producer_id, producer_epoch, -1);
    out
}

/// The marker a control batch carries; `None` for a control record of
/// another kind (Kafka has leader-change and snapshot records too).
pub fn marker_of(bytes: &[u8], info: &BatchInfo) -> Result<Option<Marker>, BatchError> {
    let invalid = |reason| BatchError::Invalid { reason };
    if !info.is_control || info.compression != Compression::None {
        return Err(invalid("not an uncompressed control batch"));
    }
    let body = bytes
        .get(HEADER_BYTES..info.size)
        .ok_or(invalid("a truncated control batch"))?;
    let records = record::decode_records(body, info.record_count)?;
    let key = records
        .first()
        .and_then(|r| r.key)
        .ok_or(invalid("a control batch without a key"))?;
    if key.len() < 4 {
        return Err(invalid("a control record key shorter than 4 bytes"));
    }
    Ok(match i16::from_be_bytes([key[2], key[3]]) {
        0 => Some(Marker::Abort),
        1 => Some(Marker::Commit),
        _ => None,
    })
}

/// The coordinator epoch a marker's value carries (`None`: not a marker
/// that parses).
pub fn coordinator_epoch_of(bytes: &[u8], info: &BatchInfo) -> Option<i32> {
    if !info.is_control || info.compression != Compression::None {
        return None;
    }
    let body = bytes.get(HEADER_BYTES..info.size)?;
    let records = record::decode_records(body, info.record_count).ok()?;
    let value = records.first()?.value?;
    let epoch = value.get(2..6)?;
    Some(i32::from_be_bytes([epoch[0], epoch[1], epoch[2], epoch[3]]))
}

/// What a transactional batch in the log says about its transaction: the
/// marker of a control batch, `None` for data (or a control record of
/// another kind, or one that does not parse: it ends nothing).
pub fn marker_if_control(bytes: &[u8], info: &BatchInfo) -> Option<Marker> {
    if !info.is_control {
        return None;
    }
    marker_of(bytes, info).ok().flatten()
}

/// The open transactions of a partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxnState {
    open: BTreeMap<ProducerId, Offset>,
}

impl TxnState {
    pub fn new() -> TxnState {
        TxnState::default()
    }

    /// Applies a batch that is in the log: a transactional batch opens its
    /// producer's transaction if none is open; a marker closes it (an
    /// abort is returned, for the transaction index).
    pub fn apply(&mut self, info: &BatchInfo, marker: Option<Marker>) -> Option<AbortedTxn> {
        if !info.is_transactional || !info.producer_id.is_producer() {
            return None;
        }
        if !info.is_control {
            self.open.entry(info.producer_id).or_insert(info.base_offset);
            return None;
        }
        // A control record that is no marker (or does not parse) ends
        // nothing.
        let marker = marker?;
        let first = self.open.remove(&info.producer_id);
        let (Marker::Abort, Some(first_offset)) = (marker, first) else {
            return None;
        };
        Some(AbortedTxn {
            producer_id: info.producer_id,
            first_offset,
            last_offset: info.base_offset,
            last_stable_offset: self.first_unstable().unwrap_or(info.next_offset()),
        })
    }

    /// The first offset of the oldest open transaction: the last stable
    /// offset, before the high watermark caps it.
    pub fn first_unstable(&self) -> Option<Offset> {
        self.open.values().min().copied()
    }

    /// The producer's open transaction's first offset.
    pub fn open_since(&self, producer_id: ProducerId) -> Option<Offset> {
        self.open.get(&producer_id).copied()
    }

    /// A state read back from a snapshot.
    pub fn restore(open: Vec<(ProducerId, Offset)>) -> TxnState {
        TxnState {
            open: open.into_iter().collect(),
        }
    }

    /// Open transactions as `(producer id, first offset)`.
    pub fn open(&self) -> impl Iterator<Item = (ProducerId, Offset)> + '_ {
        self.open.iter().map(|(p, o)| (*p, *o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(pid: i64, base: i64, count: i32, control: bool) -> BatchInfo {
        let mut b = batch::build_batch(Offset(base), TimestampMs(1), &[b"x"]);
        b[21..23].copy_from_slice(
            &(batch::ATTR_TRANSACTIONAL | if control { batch::ATTR_CONTROL } else { 0 }).to_be_bytes(),
        );
        let mut i = batch::peek(&b).unwrap();
        i.producer_id = ProducerId(pid);
        i.last_offset_delta = count - 1;
        i
    }

    #[test]
    fn the_last_stable_offset_waits_for_the_oldest_open_transaction() {
        let mut t = TxnState::new();
        assert_eq!(t.first_unstable(), None);
        t.apply(&info(1, 10, 2, false), None);
        t.apply(&info(2, 12, 1, false), None);
        t.apply(&info(1, 13, 1, false), None);
        assert_eq!(t.first_unstable(), Some(Offset(10)));
        assert_eq!(t.apply(&info(1, 14, 1, true), Some(Marker::Commit)), None);
        assert_eq!(t.first_unstable(), Some(Offset(12)));
        let aborted = t.apply(&info(2, 15, 1, true), Some(Marker::Abort)).expect("aborted");
        assert_eq!(
            aborted,
            AbortedTxn {
                producer_id: ProducerId(2),
                first_offset: Offset(12),
                last_offset: Offset(15),
                last_stable_offset: Offset(16),
            }
        );
        assert_eq!(t.first_unstable(), None);
        assert_eq!(
            t.apply(&info(2, 16, 1, true), Some(Marker::Abort)),
            None,
            "nothing open"
        );
    }

    #[test]
    fn markers_round_trip_and_entries_decode_what_they_encode() {
        let b = marker_batch(ProducerId(9), 3, Marker::Abort, 7, TimestampMs(5));
        let i = batch::validate(&b, b.len(), batch::Validation::Stored).unwrap();
        assert!(i.is_control && i.is_transactional);
        assert_eq!((i.producer_id, i.producer_epoch), (ProducerId(9), 3));
        assert_eq!(marker_of(&b, &i).unwrap(), Some(Marker::Abort));
        let c = marker_batch(ProducerId(9), 3, Marker::Commit, 7, TimestampMs(5));
        let ci = batch::validate(&c, c.len(), batch::Validation::Stored).unwrap();
        assert_eq!(marker_of(&c, &ci).unwrap(), Some(Marker::Commit));
        assert_eq!(coordinator_epoch_of(&c, &ci), Some(7));
        let e = AbortedTxn {
            producer_id: ProducerId(4),
            first_offset: Offset(1),
            last_offset: Offset(9),
            last_stable_offset: Offset(10),
        };
        let mut out = Vec::new();
        e.encode(&mut out);
        assert_eq!(out.len(), AbortedTxn::BYTES);
        assert_eq!(AbortedTxn::decode(&out), Ok(e));
        out[0] = 1;
        assert!(AbortedTxn::decode(&out).is_err());
    }
}
