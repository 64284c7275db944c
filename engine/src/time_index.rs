//! The time index (`<base offset>.timeindex`): timestamp → offset.
//!
//! # Layout
//!
//! A sequence of 12-byte entries, no header:
//!
//! ```text
//! byte size field
//!    0    8 timestamp       i64 BE: the largest batch maxTimestamp seen so far
//!                           in this segment, in ms since the epoch
//!    8    4 relativeOffset  u32 BE: base offset (minus the segment's base) of
//!                           the batch where that largest timestamp first appeared
//! ```
//!
//! Timestamps are strictly increasing and offsets non-decreasing. An entry is
//! added alongside an offset-index entry when the largest timestamp has grown
//! since the last one, and once more when the segment is sealed, so that the
//! last entry holds the segment's largest timestamp (which retention by time
//! reads).
//!
//! Why the look-up is exact: for an entry `(T, o)` every batch before `o` has a
//! max timestamp below `T`. The first batch with max timestamp ≥ `target`
//! therefore lies at or after the batch of the last entry with `T < target`;
//! the log walks batch headers from there.

use crate::index::{IndexEntry, SparseIndex};
use crate::types::{Offset, TimestampMs};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeEntry {
    pub timestamp: TimestampMs,
    pub relative_offset: u32,
}

impl IndexEntry for TimeEntry {
    const BYTES: usize = 12;

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.timestamp.0.to_be_bytes());
        out.extend_from_slice(&self.relative_offset.to_be_bytes());
    }

    fn decode(b: &[u8]) -> Result<TimeEntry, String> {
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&b[0..8]);
        Ok(TimeEntry {
            timestamp: TimestampMs(i64::from_be_bytes(ts)),
            relative_offset: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
        })
    }

    fn precedes(&self, next: &TimeEntry) -> bool {
        self.timestamp < next.timestamp && self.relative_offset <= next.relative_offset
    }
}

/// The time index of one segment.
pub type TimeIndex = SparseIndex<TimeEntry>;

/// Where to start walking for the first batch whose max timestamp is at or
/// after `target`: the offset of the last entry with a timestamp below it, or
/// the segment base.
pub fn lookup(index: &TimeIndex, base: Offset, target: TimestampMs) -> Offset {
    match index.floor_by(|e| e.timestamp < target) {
        Some(e) => base.plus(i64::from(e.relative_offset)),
        None => base,
    }
}

/// The largest timestamp the index knows, if any.
pub fn largest(index: &TimeIndex) -> Option<TimestampMs> {
    index.last().map(|e| e.timestamp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn lookup_starts_before_the_first_candidate() {
        let mut idx = TimeIndex::new(PathBuf::from("t.timeindex"));
        for (ts, o) in [(100, 0), (200, 5), (300, 9)] {
            idx.push(TimeEntry {
                timestamp: TimestampMs(ts),
                relative_offset: o,
            });
        }
        let base = Offset(50);
        assert_eq!(lookup(&idx, base, TimestampMs(50)), Offset(50));
        assert_eq!(lookup(&idx, base, TimestampMs(100)), Offset(50));
        assert_eq!(lookup(&idx, base, TimestampMs(101)), Offset(50));
        assert_eq!(lookup(&idx, base, TimestampMs(201)), Offset(55));
        assert_eq!(lookup(&idx, base, TimestampMs(10_000)), Offset(59));
        assert_eq!(largest(&idx), Some(TimestampMs(300)));
    }
}
