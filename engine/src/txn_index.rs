//! A segment's transaction index (Kafka's `.txnindex`): the transactions
//! that ended in an abort whose ABORT marker is in the segment, in marker
//! order. A `read_committed` fetch gets from it the aborted transactions
//! overlapping what it reads, so that the consumer skips their records.
//!
//! # File `<base>.txnindex`
//!
//! Entries back to back, no header, each 34 bytes, big-endian — Kafka's
//! own entry layout:
//!
//! ```text
//! version             int16  0
//! producer_id         int64
//! first_offset        int64  the transaction's first batch (may lie in an
//!                            earlier segment)
//! last_offset         int64  its ABORT marker (in this segment)
//! last_stable_offset  int64  the partition's first unstable offset once
//!                            the marker was written
//! ```
//!
//! sorted by `last_offset`, strictly ascending. Like the other indexes it
//! is derived data, kept whole in memory and mirrored to the file
//! ([`crate::index::SparseIndex`]); unlike them the file exists only once
//! the segment has an entry (a missing file is an empty index, as in
//! Kafka). The file is written with the segment's other indexes and made
//! durable before any producer-state snapshot that covers its entries is
//! written ([`crate::producer_state`]): when a log opens, the entries of
//! markers at or past the snapshot's offset are cut and found again by
//! replaying the batches after it, so a crash loses none and doubles none.
//! A file that does not parse (size, version, order) makes the open
//! rebuild every segment's transaction index from the whole log.
//!
//! `last_stable_offset` bounds a search: a transaction aborted later was
//! open when this marker was written, so its first offset is at least this
//! entry's last stable offset; once that reaches a read's upper bound no
//! later entry can overlap the read.

use crate::index::{IndexEntry, SparseIndex};
use crate::txn_state::AbortedTxn;
use crate::types::Offset;

impl IndexEntry for AbortedTxn {
    const BYTES: usize = AbortedTxn::BYTES;

    fn encode(&self, out: &mut Vec<u8>) {
        AbortedTxn::encode(self, out);
    }

    fn decode(bytes: &[u8]) -> Result<AbortedTxn, String> {
        AbortedTxn::decode(bytes)
    }

    fn precedes(&self, next: &AbortedTxn) -> bool {
        self.last_offset < next.last_offset
    }
}

/// The transaction index of one segment.
pub type TxnIndex = SparseIndex<AbortedTxn>;

/// File extension of a segment's transaction index.
pub const EXTENSION: &str = "txnindex";

/// Largest transaction index file accepted on load (about 7.9 million
/// entries), as for the other indexes.
pub const FILE_BYTES_MAX: u64 = 256 << 20;

/// Adds to `out` the entries of `index` a read of `[from, upper)` must
/// report: marker at or after `from`, transaction begun below `upper`.
/// Returns true once no later entry (of this segment or a later one) can
/// overlap the read.
pub fn collect(index: &TxnIndex, from: Offset, upper: Offset, out: &mut Vec<AbortedTxn>) -> bool {
    let entries = index.entries();
    let start = entries.partition_point(|a| a.last_offset < from);
    for a in &entries[start..] {
        if a.first_offset < upper {
            out.push(*a);
        }
        if a.last_stable_offset >= upper {
            return true;
        }
    }
    false
}

/// Cuts the entries of markers at or past `offset`.
pub fn cut_from(index: &mut TxnIndex, offset: Offset) {
    index.truncate_by(|a| a.last_offset < offset);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ProducerId;

    fn entry(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: ProducerId(pid),
            first_offset: Offset(first),
            last_offset: Offset(last),
            last_stable_offset: Offset(lso),
        }
    }

    #[test]
    fn a_search_reports_the_overlapping_entries_and_stops_at_the_stable_offset() {
        let mut index = TxnIndex::new("x.txnindex".into());
        index.push(entry(1, 0, 5, 3));
        index.push(entry(2, 3, 9, 10));
        index.push(entry(3, 12, 20, 21));
        let mut out = Vec::new();
        assert!(!collect(&index, Offset(0), Offset(100), &mut out));
        assert_eq!(out.len(), 3);
        out.clear();
        assert!(
            collect(&index, Offset(6), Offset(10), &mut out),
            "entry 2's LSO reaches 10"
        );
        assert_eq!(out, vec![entry(2, 3, 9, 10)]);
        out.clear();
        assert!(collect(&index, Offset(10), Offset(12), &mut out));
        assert!(out.is_empty(), "transaction 3 began at 12, past the read");
        cut_from(&mut index, Offset(9));
        assert_eq!(index.entries(), &[entry(1, 0, 5, 3)]);
    }

    #[test]
    fn the_file_refuses_entries_out_of_marker_order_and_other_versions() {
        let mut bytes = Vec::new();
        entry(1, 0, 5, 6).encode(&mut bytes);
        entry(2, 1, 7, 8).encode(&mut bytes);
        assert_eq!(
            TxnIndex::decode("x".into(), &bytes).expect("decodes").entries().len(),
            2
        );
        let mut swapped = bytes[34..].to_vec();
        swapped.extend_from_slice(&bytes[..34]);
        assert!(TxnIndex::decode("x".into(), &swapped).is_err());
        let mut versioned = bytes.clone();
        versioned[1] = 1;
        assert!(TxnIndex::decode("x".into(), &versioned).is_err());
        assert!(TxnIndex::decode("x".into(), &bytes[..40]).is_err());
    }
}
