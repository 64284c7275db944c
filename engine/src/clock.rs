//! Time as the log sees it. Retention and `segment.ms` read the clock through
//! this trait so that tests can move time by hand.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::types::TimestampMs;

pub trait Clock {
    fn now_ms(&self) -> TimestampMs;
}

/// Wall-clock time.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> TimestampMs {
        let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        TimestampMs(since.as_millis() as i64)
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

impl Clock for ManualClock {
    fn now_ms(&self) -> TimestampMs {
        TimestampMs(self.now.get())
    }
}
