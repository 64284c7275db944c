//! Long polling by signal: a fetch that found fewer than `min_bytes` waits
//! until one of its partitions may have more, its deadline passes, or the
//! broker stops — Kafka's fetch purgatory, keyed by partition.
//!
//! What signals a partition owned by the fetch's own shard:
//! - a follower's fetch in a cluster: an append reserving bytes
//!   ([`PartitionLog::reserved_moved`]), since followers may read batches
//!   whose write is still under way ([`PartitionLog::read_for_replica`]);
//! - any fetch on a standalone broker: the log end moving
//!   ([`PartitionLog::end_moved`]);
//! - a consumer's fetch in a cluster: the high watermark moving
//!   ([`LocalReplica::hw_changed`]), since consumers read only below it.
//!
//! A partition owned by another shard has no signal here (crossing shards
//! is a message, and a wake-up message per append would cost more than it
//! saves); while a fetch names one, it also looks again every poll interval.
//!
//! The generations are read before the fetch reads its partitions, and the
//! wait compares against them, so an append that lands while the fetch is
//! reading wakes the wait at once instead of being missed.

use std::future::poll_fn;
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use ferrite_engine::{PartitionLog, TopicPartition};
use ferrite_replication::LocalReplica;

use crate::protocol::fetch::FetchRequest;
use crate::shard::BrokerShard;

enum Signal {
    LogEnd(Rc<PartitionLog>),
    Reserved(Rc<PartitionLog>),
    HighWatermark(Rc<LocalReplica>),
}

impl Signal {
    fn notify(&self) -> &ferrite_engine::notify::Notify {
        match self {
            Signal::LogEnd(log) => log.end_moved(),
            Signal::Reserved(log) => log.reserved_moved(),
            Signal::HighWatermark(replica) => replica.hw_changed(),
        }
    }
}

/// What one long-polling fetch waits on, with each signal's generation as
/// it was before the fetch read its partitions.
pub(crate) struct Watches {
    signals: Vec<(Signal, u64)>,
    stop_seen: u64,
    /// Some partition is on another shard: look again every poll interval.
    remote: bool,
}

impl Watches {
    /// Reads the signals of every partition `f` names; call it before
    /// reading them.
    pub(crate) fn take(shard: &BrokerShard, f: &FetchRequest) -> Watches {
        let follower = f.replica_id >= 0;
        let mut signals = Vec::new();
        let mut remote = false;
        for t in &f.topics {
            for p in &t.partitions {
                let tp = TopicPartition::new(t.topic.clone(), p.partition);
                if shard.owner(&tp) != shard.id {
                    remote = true;
                    continue;
                }
                let signal = match &shard.replicas {
                    None => shard.local_log(&tp).map(Signal::LogEnd),
                    Some(replicas) => replicas.get(&tp).map(|r| {
                        if follower {
                            Signal::Reserved(r.log().clone())
                        } else {
                            Signal::HighWatermark(r)
                        }
                    }),
                };
                if let Some(signal) = signal {
                    let seen = signal.notify().generation();
                    signals.push((signal, seen));
                }
            }
        }
        Watches {
            signals,
            stop_seen: shard.stop_signal.generation(),
            remote,
        }
    }

    /// Waits until a signal moved past its generation, `deadline`, or (with
    /// a partition on another shard) `poll`.
    pub(crate) async fn wait(&self, shard: &BrokerShard, deadline: Instant, poll: Duration) {
        let mut left = deadline.saturating_duration_since(Instant::now());
        if self.remote {
            left = left.min(poll);
        }
        let signalled = poll_fn(|cx| {
            if shard.stop_signal.poll_changed_since(self.stop_seen, cx).is_ready() {
                return Poll::Ready(());
            }
            for (signal, seen) in &self.signals {
                if signal.notify().poll_changed_since(*seen, cx).is_ready() {
                    return Poll::Ready(());
                }
            }
            Poll::Pending
        });
        futures_lite::future::or(signalled, glommio::timer::sleep(left)).await;
    }
}
