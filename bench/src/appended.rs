//! What a broker appended, read back from it: the sum of a topic's log end
//! offsets, asked of each partition's leader (ListOffsets, latest). An
//! acks=0 run is measured by it: with no answers, the client's own count
//! says only how fast it pushed bytes into its sockets, not what the
//! broker took in.

use std::sync::atomic::{AtomicBool, Ordering};
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
/// Reads that must agree, once the run is over, before the sum counts as
/// settled.
const STILL_READS: u32 = 4;
/// The longest wait for it after the run.
const SETTLE_WAIT_MAX: Duration = Duration::from_secs(30);

/// Reads the sum every [`POLL`] from its start (beside the run, so that
/// when the appends ended is known within a poll, whenever the run's
/// threads are joined).
pub struct Watch {
    over: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Result<(i64, Instant), ClientError>>,
}

impl Watch {
    pub fn start(topic: &str, leaders: &[String]) -> Watch {
        let over = Arc::new(AtomicBool::new(false));
        let (topic, leaders, flag) = (topic.to_string(), leaders.to_vec(), over.clone());
        let thread = std::thread::spawn(move || -> Result<(i64, Instant), ClientError> {
            let mut last = log_end_sum(&topic, &leaders)?;
            let mut seen_at = Instant::now();
            let mut still = 0;
            let mut over_since: Option<Instant> = None;
            loop {
                std::thread::sleep(POLL);
                let now = log_end_sum(&topic, &leaders)?;
                if now == last {
                    still += 1;
                } else {
                    (last, seen_at, still) = (now, Instant::now(), 0);
                }
                if flag.load(Ordering::Relaxed) {
                    let since = *over_since.get_or_insert_with(Instant::now);
                    if still >= STILL_READS || since.elapsed() > SETTLE_WAIT_MAX {
                        return Ok((last, seen_at));
                    }
                }
            }
        });
        Watch { over, thread }
    }

    /// Once the run is over: the sum once it stopped moving, and when it
    /// reached that value.
    pub fn finish(self) -> Result<(i64, Instant), ClientError> {
        self.over.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .unwrap_or_else(|_| Err(ClientError::Kafka("the log end watcher panicked".into())))
    }
}
