//! A wall clock stepped back or forward (NTP, an operator, a VM resumed)
//! must not change when `flush.ms` flushes: that interval is measured on
//! the monotonic clock (`clock.rs`).

mod common;

use std::cell::Cell;
use std::rc::Rc;

use common::*;
use ferrite_engine::clock::Clock;
use ferrite_engine::{LogConfig, PartitionLog, TimestampMs, WriteMode};
use ferrite_ids::MonoMs;

/// A clock whose wall time and monotonic time the test sets apart.
struct SteppedClock {
    wall_ms: Cell<i64>,
    mono_ms: Cell<u64>,
}

impl Clock for SteppedClock {
    fn now_ms(&self) -> TimestampMs {
        TimestampMs(self.wall_ms.get())
    }

    fn mono_ms(&self) -> MonoMs {
        MonoMs(self.mono_ms.get())
    }
}

const FLUSH_MS: i64 = 1_000;
const HOUR_MS: i64 = 3_600_000;

#[test]
fn flush_ms_counts_monotonic_time_whatever_the_wall_clock_does() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock = Rc::new(SteppedClock {
            wall_ms: Cell::new(1_700_000_000_000),
            mono_ms: Cell::new(50_000),
        });
        let config = LogConfig {
            flush_ms: FLUSH_MS,
            ..LogConfig::default()
        };
        let dyn_clock: Rc<dyn Clock> = clock.clone();
        let log = PartitionLog::open(params(dir.path(), config, WriteMode::Buffered, dyn_clock))
            .await
            .unwrap();
        log.append(producer_batch(3, 100, clock.wall_ms.get(), 1), LEADER)
            .await
            .unwrap();
        assert!(!log.flush_due(), "due before flush.ms passed");

        // The wall clock jumps a day ahead: no time passed, nothing is due.
        clock.wall_ms.set(clock.wall_ms.get() + 24 * HOUR_MS);
        assert!(!log.flush_due(), "a wall clock stepped forward made a flush due");

        // Stepped an hour back, while flush.ms passes: the flush is due (a
        // wall-clock interval would hold it off for an hour).
        clock.wall_ms.set(clock.wall_ms.get() - 25 * HOUR_MS);
        clock.mono_ms.set(clock.mono_ms.get() + FLUSH_MS as u64);
        assert!(log.flush_due(), "a wall clock stepped back held flush.ms off");
        assert!(log.flush_if_due().await.unwrap());
        assert_eq!(log.unflushed_records(), 0);

        // The next interval starts at that flush, on the monotonic clock.
        log.append(producer_batch(2, 100, clock.wall_ms.get(), 2), LEADER)
            .await
            .unwrap();
        clock.mono_ms.set(clock.mono_ms.get() + FLUSH_MS as u64 - 1);
        assert!(!log.flush_due(), "due before flush.ms passed since the last flush");
        clock.mono_ms.set(clock.mono_ms.get() + 1);
        assert!(log.flush_due());
    });
}
