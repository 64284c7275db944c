//! The log's offsets, kept together so that one setter can check how they
//! relate: `log_start ≤ durable ≤ end`.
//!
//! - `log_start`: the first offset a reader may ask for (moves with retention).
//! - `durable`: every batch below it is on the device (fdatasync'd).
//! - `end`: the log end offset (LEO): every batch below it is in the kernel
//!   and readable. Offsets reserved by appends still in flight are above it.
//!
//! The high watermark is not here: it belongs to replication, which passes it
//! to reads as their upper bound.

use crate::types::Offset;

ferrite_ids::ordered_offsets! {
    pub struct LogOffsets { log_start: "log start", durable: "durable", end: "log end" }
}

impl LogOffsets {
    /// Raises the end (appends completed); never lowers it.
    pub fn advance_end(&mut self, end: Offset) {
        self.set(self.log_start(), self.durable(), self.end().max(end));
    }

    /// Raises the durable offset, capped at the end.
    pub fn advance_durable(&mut self, durable: Offset) {
        let d = self.durable().max(durable).min(self.end());
        self.set(self.log_start(), d, self.end());
    }

    /// Moves the log start up; deleted data counts as durable.
    pub fn advance_log_start(&mut self, log_start: Offset) {
        let s = self.log_start().max(log_start);
        assert!(s <= self.end(), "log start {s} beyond log end {}", self.end());
        self.set(s, self.durable().max(s), self.end());
    }

    /// Cuts the log at `end` (truncation), pulling `durable` down with it.
    pub fn truncate(&mut self, end: Offset) {
        let start = self.log_start().min(end);
        self.set(start, self.durable().min(end).max(start), end);
    }

    /// Restarts an empty log at `offset`.
    pub fn reset(&mut self, offset: Offset) {
        self.set(offset, offset, offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_move_together() {
        let mut o = LogOffsets::new(Offset(0), Offset(0), Offset(0));
        o.advance_end(Offset(10));
        o.advance_durable(Offset(20));
        assert_eq!(o.durable(), Offset(10), "durable capped at end");
        o.advance_end(Offset(5));
        assert_eq!(o.end(), Offset(10), "end never goes back by advance");
        o.truncate(Offset(4));
        assert_eq!((o.durable(), o.end()), (Offset(4), Offset(4)));
        o.advance_end(Offset(30));
        o.advance_log_start(Offset(20));
        assert_eq!((o.log_start(), o.durable()), (Offset(20), Offset(20)));
    }

    #[test]
    #[should_panic(expected = "above log end")]
    fn durable_above_end_is_refused() {
        LogOffsets::new(Offset(0), Offset(5), Offset(4));
    }
}
