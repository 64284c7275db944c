//! What a broker appended, read back from it: the sum of a topic's log end
//! offsets, asked of each partition's leader (ListOffsets, latest). An
//! acks=0 run is measured by it: with no answers, the client's own count
//! says only how fast it pushed bytes into its sockets, not what the
//! broker took in.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrite_client::codec::{self, LIST_OFFSETS_V};
use ferrite_client::{ClientError, Connection};

/// The sum of `topic`'s log end offsets; `leaders[p]` is partition `p`'s
/// leader.
pub fn log_end_sum(topic: &str, leaders: &[String]) -> Result<i64, ClientError> {
    let mut by_leader: Vec<(&str, Vec<i32>)> = Vec::new();
    for (p, addr) in leaders.iter().enumerate() {
        match by_leader.iter_mut().find(|(a, _)| a == addr) {
            Some((_, parts)) => parts.push(p as i32),
            None => by_leader.push((addr, vec![p as i32])),
        }
    }
    let mut sum = 0;
    for (addr, parts) in by_leader {
        let mut c = Connection::connect(addr, "ferrite-bench")?;
        let asked = [(topic.to_string(), parts)];
        let mut r = c.call(2, LIST_OFFSETS_V, |w| codec::list_offsets_as(w, -2, -1, &asked))?;
        for o in codec::decode_list_offsets(&mut r)? {
            if o.error != 0 {
                return Err(ClientError::Kafka(format!(
                    "ListOffsets {}-{}: error {}",
                    o.topic, o.partition, o.error
                )));
            }
            sum += o.offset;
        }
    }
    Ok(sum)
}

/// How often the sum is read.
const POLL: Duration = Duration::from_millis(50);
/// Once the run is over, the sum counts as final when it reaches what was
/// sent, or has not moved for this long (records lost or refused).
const STILL_AFTER_RUN: Duration = Duration::from_secs(2);
/// The longest wait for it after the run.
const SETTLE_WAIT_MAX: Duration = Duration::from_secs(30);

/// Reads the sum every [`POLL`] from its start (beside the run, so that
/// when the appends ended is known within a poll, whenever the run's
/// threads are joined). A read that fails is skipped.
pub struct Watch {
    /// The sum the run must reach (the start plus what was sent), once
    /// the run is over; `i64::MIN` until then.
    target: Arc<AtomicI64>,
    thread: Option<std::thread::JoinHandle<(i64, Instant)>>,
}

impl Watch {
    /// Starts watching from `before`, the sum before the run.
    pub fn start(topic: &str, leaders: &[String], before: i64) -> Watch {
        let target = Arc::new(AtomicI64::new(i64::MIN));
        let (topic, leaders, wanted) = (topic.to_string(), leaders.to_vec(), target.clone());
        let thread = std::thread::spawn(move || {
            let (mut last, mut seen_at) = (before, Instant::now());
            let mut over_since: Option<Instant> = None;
            loop {
                std::thread::sleep(POLL);
                if let Ok(now) = log_end_sum(&topic, &leaders) {
                    if now != last {
                        (last, seen_at) = (now, Instant::now());
                    }
                }
                let target = wanted.load(Ordering::Relaxed);
                if target == i64::MIN {
                    continue;
                }
                let since = *over_since.get_or_insert_with(Instant::now);
                let still = seen_at.elapsed() > STILL_AFTER_RUN && since.elapsed() > STILL_AFTER_RUN;
                if last >= target || still || since.elapsed() > SETTLE_WAIT_MAX {
                    return (last, seen_at);
                }
            }
        });
        Watch {
            target,
            thread: Some(thread),
        }
    }

    /// Once the run is over, `sent` records later: the sum once it reached
    /// `before + sent` (or stopped moving), and when it reached that value.
    pub fn finish(mut self, before: i64, sent: u64) -> Result<(i64, Instant), ClientError> {
        let target = before.saturating_add(i64::try_from(sent).unwrap_or(i64::MAX));
        self.target.store(target, Ordering::Relaxed);
        let thread = self.thread.take();
        thread
            .map(|t| t.join())
            .unwrap_or_else(|| Ok((before, Instant::now())))
            .map_err(|_| ClientError::Kafka("the log end watcher panicked".into()))
    }
}

impl Drop for Watch {
    /// A run that failed: the watcher stops at its next read.
    fn drop(&mut self) {
        self.target.store(i64::MIN + 1, Ordering::Relaxed);
    }
}
