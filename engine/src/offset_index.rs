//! The offset index (`<base offset>.index`): relative offset → file position.
//!
//! # Layout
//!
//! A sequence of 8-byte entries, no header:
//!
//! ```text
//! byte size field
//!    0    4 relativeOffset  u32 BE: batch base offset - segment base offset
//!    4    4 position        u32 BE: byte position of that batch in the .log file
//! ```
//!
//! Entries are strictly increasing in both columns. One entry is added for
//! the first batch that starts after `index.interval.bytes` (default 4096) have
//! been appended since the previous entry, so a look-up lands at most one
//! interval (plus one batch) before its target and the walk from there reads
//! a handful of batch headers. A 1 GiB segment of 4 KiB intervals needs
//! 262,144 entries, 2 MiB. Positions fit in u32 because `segment.bytes` is
//! capped at `i32::MAX`, as in Kafka. Why there is no checksum: see
//! [`crate::index`].

use crate::index::{IndexEntry, SparseIndex};
use crate::types::Offset;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetEntry {
    pub relative_offset: u32,
    pub position: u32,
}

impl IndexEntry for OffsetEntry {
    const BYTES: usize = 8;

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.relative_offset.to_be_bytes());
        out.extend_from_slice(&self.position.to_be_bytes());
    }

    fn decode(b: &[u8]) -> Result<OffsetEntry, String> {
        Ok(OffsetEntry {
            relative_offset: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            position: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        })
    }

    fn precedes(&self, next: &OffsetEntry) -> bool {
        self.relative_offset < next.relative_offset && self.position < next.position
    }
}

/// The offset index of one segment.
pub type OffsetIndex = SparseIndex<OffsetEntry>;

/// Relative offset of `offset` in a segment based at `base`, asserting it fits.
pub fn relative(base: Offset, offset: Offset) -> u32 {
    let rel = offset.0 - base.0;
    assert!(rel >= 0, "offset {offset} below segment base {base}");
    assert!(
        rel <= i64::from(u32::MAX),
        "offset {offset} too far above segment base {base}"
    );
    rel as u32
}

/// The last entry whose offset is at or before `target`: `(offset, position)`,
/// or the segment start when there is none.
pub fn lookup(index: &OffsetIndex, base: Offset, target: Offset) -> (Offset, u64) {
    if target < base {
        return (base, 0);
    }
    let rel = (target.0 - base.0).min(i64::from(u32::MAX)) as u32;
    match index.floor_by(|e| e.relative_offset <= rel) {
        Some(e) => (base.plus(i64::from(e.relative_offset)), u64::from(e.position)),
        None => (base, 0),
    }
}

/// The last entry whose position is at or before `position`.
pub fn lookup_position(index: &OffsetIndex, base: Offset, position: u64) -> (Offset, u64) {
    match index.floor_by(|e| u64::from(e.position) <= position) {
        Some(e) => (base.plus(i64::from(e.relative_offset)), u64::from(e.position)),
        None => (base, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn index_of(entries: &[(u32, u32)]) -> OffsetIndex {
        let mut idx = OffsetIndex::new(PathBuf::from("t.index"));
        for &(o, p) in entries {
            idx.push(OffsetEntry {
                relative_offset: o,
                position: p,
            });
        }
        idx
    }

    #[test]
    fn lookup_finds_floor_entries() {
        let idx = index_of(&[(10, 4100), (25, 8300), (40, 12500)]);
        let base = Offset(1000);
        assert_eq!(lookup(&idx, base, Offset(999)), (base, 0));
        assert_eq!(lookup(&idx, base, Offset(1009)), (base, 0));
        assert_eq!(lookup(&idx, base, Offset(1010)), (Offset(1010), 4100));
        assert_eq!(lookup(&idx, base, Offset(1039)), (Offset(1025), 8300));
        assert_eq!(lookup(&idx, base, Offset(1_000_000)), (Offset(1040), 12500));
        assert_eq!(lookup_position(&idx, base, 8299), (Offset(1010), 4100));
        assert_eq!(lookup_position(&idx, base, 8300), (Offset(1025), 8300));
    }

    #[test]
    fn decode_refuses_unsorted_and_ragged_files() {
        let idx = index_of(&[(1, 10), (2, 20)]);
        let mut bytes = Vec::new();
        for e in idx.entries() {
            e.encode(&mut bytes);
        }
        assert_eq!(
            OffsetIndex::decode(PathBuf::from("x"), &bytes).unwrap().entries(),
            idx.entries()
        );
        assert!(OffsetIndex::decode(PathBuf::from("x"), &bytes[..7]).is_err());
        let mut swapped = bytes[8..].to_vec();
        swapped.extend_from_slice(&bytes[..8]);
        assert!(OffsetIndex::decode(PathBuf::from("x"), &swapped).is_err());
    }

    #[test]
    #[should_panic]
    fn push_out_of_order_panics() {
        index_of(&[(5, 100), (4, 200)]);
    }
}
