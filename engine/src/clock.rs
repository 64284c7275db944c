//! Time as the log sees it, read through this trait so that tests can move
//! time by hand.
//!
//! Two clocks: the wall clock ([`Clock::now_ms`]) for what is compared with
//! record timestamps (retention by time, `segment.ms` against a segment's
//! first append), and a monotonic one ([`Clock::mono_ms`]) for intervals the
//! broker measures itself (`flush.ms`). A wall clock stepped back (NTP, an
//! operator) must not stop time-based flushes until it catches up again.

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::types::TimestampMs;
use ferrite_ids::MonoMs;

pub trait Clock {
    /// Wall-clock time, as record timestamps count it.
    fn now_ms(&self) -> TimestampMs;
    /// Monotonic time: never goes back, counts from an arbitrary origin.
    fn mono_ms(&self) -> MonoMs;
}

/// Wall-clock time, and the process's monotonic clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> TimestampMs {
        let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        TimestampMs(since.as_millis() as i64)
    }

    fn mono_ms(&self) -> MonoMs {
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        MonoMs(ORIGIN.get_or_init(Instant::now).elapsed().as_millis() as u64)
    }
}

/// Notices the wall clock being stepped: between two looks, wall time
/// moved by at least [`StepWatch::STEP_MS_MIN`] more or less than
/// monotonic time did (NTP or an operator setting the clock, a VM resumed).
#[derive(Debug, Default)]
pub struct StepWatch {
    last: Option<(TimestampMs, MonoMs)>,
}

impl StepWatch {
    /// Smaller differences are the two clocks' reading jitter and NTP's
    /// slewing, not steps.
    pub const STEP_MS_MIN: i64 = 1_000;

    /// Takes a look at both clocks; returns how far the wall clock stepped
    /// since the last look (negative: back), if it did.
    pub fn look(&mut self, wall: TimestampMs, mono: MonoMs) -> Option<i64> {
        let (wall_before, mono_before) = self.last.replace((wall, mono))?;
        let mono_ms = i64::try_from(mono.since(mono_before)).unwrap_or(i64::MAX);
        let step_ms = (wall.0 - wall_before.0).saturating_sub(mono_ms);
        (step_ms.abs() >= Self::STEP_MS_MIN).then_some(step_ms)
    }
}

/// A clock that only moves when told to (tests, simulations).
#[derive(Debug, Default)]
pub struct ManualClock {
    now: Cell<i64>,
}

impl ManualClock {
    pub fn new(start: TimestampMs) -> ManualClock {
        ManualClock {
            now: Cell::new(start.0),
        }
    }

    pub fn advance_ms(&self, ms: i64) {
        assert!(ms >= 0, "time does not go backwards");
        self.now.set(self.now.get() + ms);
    }

    pub fn set(&self, t: TimestampMs) {
        assert!(t.0 >= self.now.get(), "time does not go backwards");
        self.now.set(t.0);
    }
}

/// Both of a manual clock's times move together (it never goes back).
impl Clock for ManualClock {
    fn now_ms(&self) -> TimestampMs {
        TimestampMs(self.now.get())
    }

    fn mono_ms(&self) -> MonoMs {
        MonoMs(self.now.get().max(0) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_the_wall_clock_moving_apart_from_the_monotonic_one() {
        let mut w = StepWatch::default();
        assert_eq!(
            w.look(TimestampMs(1_000_000), MonoMs(5_000)),
            None,
            "the first look has nothing to compare"
        );
        assert_eq!(
            w.look(TimestampMs(1_001_000), MonoMs(6_000)),
            None,
            "both moved a second"
        );
        assert_eq!(
            w.look(TimestampMs(1_001_900), MonoMs(7_000)),
            None,
            "100 ms apart is jitter"
        );
        assert_eq!(
            w.look(TimestampMs(1_001_900 - 3_600_000 + 1_000), MonoMs(8_000)),
            Some(-3_600_000)
        );
        assert_eq!(
            w.look(TimestampMs(1_001_900 + 86_400_000), MonoMs(8_000)),
            Some(86_400_000 + 3_600_000 - 1_000)
        );
        assert_eq!(
            w.look(TimestampMs(1_001_900 + 86_400_000 + 2_000), MonoMs(10_000)),
            None
        );
    }
}
