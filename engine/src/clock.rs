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
