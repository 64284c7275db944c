//! Tells the operator when the wall clock steps (NTP, an operator, a VM
//! resumed): one warning and `ferrite_wall_clock_steps_total`. What follows
//! the wall clock — retention by time, `segment.ms`, the commit times of
//! committed offsets — moves with it; what the broker measures
//! itself (ISR lag, ZooKeeper and group sessions, `flush.ms`, request
//! timeouts) runs on the monotonic clock and does not notice.

use std::rc::Rc;
use std::time::Duration;

use ferrite_engine::clock::{Clock, StepWatch, SystemClock};

use crate::shard::BrokerShard;

/// How often the two clocks are compared.
const LOOK_EVERY_MS: u64 = 1_000;

/// Runs on one shard until the broker stops.
pub async fn watch_wall_clock(shard: Rc<BrokerShard>) {
    let clock = SystemClock;
    let mut watch = StepWatch::default();
    while !shard.stopping.get() {
        if let Some(step_ms) = watch.look(clock.now_ms(), clock.mono_ms()) {
            let direction = if step_ms < 0 { "back" } else { "ahead" };
            tracing::warn!(
                step_ms,
                "the wall clock stepped {direction} by {} s: retention by time, segment.ms and offset commit times follow it; \
                 ISR lag, sessions and flush.ms do not",
                step_ms.unsigned_abs() / 1_000
            );
            metrics::counter!("ferrite_wall_clock_steps_total").increment(1);
        }
        glommio::timer::sleep(Duration::from_millis(LOOK_EVERY_MS)).await;
    }
}
