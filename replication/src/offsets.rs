//! A replica's offsets, kept together so that one setter can check how they
//! relate: `log_start ≤ hw ≤ leo`.
//!
//! - `log_start`: the first offset of the local log (moves with retention).
//! - `hw`: the high watermark. Consumers see only offsets below it; on the
//!   leader it is the smallest log end offset of the ISR, on a follower the
//!   leader's HW capped at the local log end.
//! - `leo`: the local log end offset.

use ferrite_engine::types::Offset;

ferrite_ids::ordered_offsets! {
    pub struct ReplicaOffsets { log_start: "log start", hw: "hw", leo: "log end" }
}

impl ReplicaOffsets {
    /// The log end moved (an append, or a truncation): the HW follows it down.
    pub fn set_leo(&mut self, leo: Offset) {
        let log_start = self.log_start().min(leo);
        self.set(log_start, self.hw().min(leo).max(log_start), leo);
    }

    /// Sets the HW, clamped into `[log_start, leo]`.
    pub fn set_hw_clamped(&mut self, hw: Offset) {
        self.set(self.log_start(), hw.max(self.log_start()).min(self.leo()), self.leo());
    }

    /// The log start moved up (retention); the HW is at least the log start.
    pub fn set_log_start(&mut self, log_start: Offset) {
        let leo = self.leo().max(log_start);
        self.set(log_start, self.hw().max(log_start), leo);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hw_follows_a_truncated_log_end_down() {
        let mut o = ReplicaOffsets::new(Offset(0), Offset(8), Offset(10));
        o.set_leo(Offset(5));
        assert_eq!((o.hw(), o.leo()), (Offset(5), Offset(5)));
        o.set_hw_clamped(Offset(7));
        assert_eq!(o.hw(), Offset(5));
        o.set_log_start(Offset(3));
        assert_eq!((o.log_start(), o.hw()), (Offset(3), Offset(5)));
    }

    #[test]
    #[should_panic(expected = "above log end")]
    fn hw_above_leo_is_refused() {
        ReplicaOffsets::new(Offset(0), Offset(11), Offset(10));
    }
}
