//! Long polling by signal: a fetch that found fewer than `min_bytes` waits
//! until one of its partitions may have more, its deadline passes, or the
//! broker stops — Kafka's fetch purgatory, keyed by partition. Nothing is
//! polled at an interval.
//!
//! What signals a partition:
//! - a follower's fetch in a cluster: an append reserving bytes
//!   ([`PartitionLog::reserved_moved`]), since followers may read batches
//!   whose write is still under way ([`PartitionLog::read_for_replica`]);
//! - any fetch on a standalone broker: the log end moving
//!   ([`PartitionLog::end_moved`]);
//! - a consumer's fetch in a cluster: the high watermark moving
//!   ([`LocalReplica::hw_changed`]), since consumers read only below it.
//!
//! Signals are shard-local. For the partitions its own shard owns, a fetch
//! reads their generations before reading them, and waits on them. For a
//! partition owned by another shard, the owner reads the generation when
//! it reads the partition for the fetch ([`signal_for`] there), and the
//! wait sends each such shard one message: a task there waits on its
//! partitions against those generations and answers when one moved or the
//! deadline passed. A wait that ends otherwise first tells the shards
//! whose task has not answered to end it ([`cancel_on_owner`]). So a
//! waiting fetch costs two or three messages per shard involved, and an
//! append none; an append that lands between the read and the wait wakes
//! it at once instead of being missed.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Instant;

use ferrite_engine::notify::Notify;
use ferrite_engine::{PartitionLog, ShardId, TopicPartition};
use ferrite_replication::LocalReplica;

use crate::shard::BrokerShard;
use ferrite_protocol::fetch::FetchRequest;

pub(crate) enum Signal {
    LogEnd(Rc<PartitionLog>),
    Reserved(Rc<PartitionLog>),
    HighWatermark(Rc<LocalReplica>),
}

impl Signal {
    pub(crate) fn notify(&self) -> &Notify {
        match self {
            Signal::LogEnd(log) => log.end_moved(),
            Signal::Reserved(log) => log.reserved_moved(),
            Signal::HighWatermark(replica) => replica.hw_changed(),
        }
    }
}

/// Whose fetch it is: what moves a partition's signal depends on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fetcher {
    Follower,
    Consumer,
}

impl Fetcher {
    pub(crate) fn of(f: &FetchRequest) -> Fetcher {
        if f.replica_id >= 0 {
            Fetcher::Follower
        } else {
            Fetcher::Consumer
        }
    }
}

/// The signal of `tp` on `shard`, its owner; `None` when it holds no such
/// partition.
fn signal_for(shard: &BrokerShard, tp: &TopicPartition, fetcher: Fetcher) -> Option<Signal> {
    match &shard.replicas {
        None => shard.local_log(tp).map(Signal::LogEnd),
        Some(replicas) => replicas.get(tp).map(|r| match fetcher {
            Fetcher::Follower => Signal::Reserved(r.log().clone()),
            Fetcher::Consumer => Signal::HighWatermark(r),
        }),
    }
}

/// The generation of `tp`'s signal on its owner `shard`, read before the
/// owner reads the partition for a fetch.
pub(crate) fn generation_on_owner(shard: &BrokerShard, tp: &TopicPartition, fetcher: Fetcher) -> Option<u64> {
    signal_for(shard, tp, fetcher).map(|s| s.notify().generation())
}

/// What one long-polling fetch waits on: each local signal with its
/// generation as it was before the fetch read its partitions, and the
/// partitions of other shards with the generations their owners read.
pub(crate) struct Watches {
    fetcher: Fetcher,
    /// Each local signal, its generation, and where its partition is in
    /// the request (topic index, partition index).
    signals: Vec<(Signal, u64, (usize, usize))>,
    remote: BTreeMap<ShardId, Vec<(TopicPartition, u64)>>,
    /// Whether the wait involved other shards (whose partitions' moves
    /// this shard cannot tell apart).
    had_remote: bool,
    stop_seen: u64,
}

impl Watches {
    /// Reads the signals of every partition of this shard that `f` names;
    /// call it before reading them.
    pub(crate) fn take(shard: &BrokerShard, f: &FetchRequest) -> Watches {
        let fetcher = Fetcher::of(f);
        let mut signals = Vec::new();
        for (ti, t) in f.topics.iter().enumerate() {
            for (pi, p) in t.partitions.iter().enumerate() {
                let tp = TopicPartition::new(t.topic.clone(), p.partition);
                if shard.owner(&tp) != shard.id {
                    continue;
                }
                if let Some(signal) = signal_for(shard, &tp, fetcher) {
                    let seen = signal.notify().generation();
                    signals.push((signal, seen, (ti, pi)));
                }
            }
        }
        Watches {
            fetcher,
            signals,
            remote: BTreeMap::new(),
            had_remote: false,
            stop_seen: shard.stop_signal.generation(),
        }
    }

    /// A partition of shard `owner`, whose signal was at `seen` when the
    /// owner read it.
    pub(crate) fn add_remote(&mut self, owner: ShardId, tp: TopicPartition, seen: u64) {
        self.had_remote = true;
        self.remote.entry(owner).or_default().push((tp, seen));
    }

    /// After a wait: where in the request the partitions whose signal
    /// moved since [`Watches::take`] are, in request order; `None` when
    /// the wait involved other shards (then every partition is read again).
    pub(crate) fn moved(&self) -> Option<Vec<(usize, usize)>> {
        if self.had_remote {
            return None;
        }
        Some(
            self.signals
                .iter()
                .filter(|(signal, seen, _)| signal.notify().generation() != *seen)
                .map(|(_, _, at)| *at)
                .collect(),
        )
    }

    /// Waits until a signal moved past its generation, or `deadline`.
    pub(crate) async fn wait(&mut self, shard: &Rc<BrokerShard>, deadline: Instant) {
        let left = deadline.saturating_duration_since(Instant::now());
        let registered: RefCell<Option<Waker>> = RefCell::new(None);
        let local = poll_fn(|cx| {
            registered.borrow_mut().get_or_insert_with(|| cx.waker().clone());
            if shard.stop_signal.poll_changed_since(self.stop_seen, cx).is_ready() {
                return Poll::Ready(());
            }
            for (signal, seen, _) in &self.signals {
                if signal.notify().poll_changed_since(*seen, cx).is_ready() {
                    return Poll::Ready(());
                }
            }
            Poll::Pending
        });
        let mut pending: Vec<(ShardId, u64, Rc<Cell<bool>>)> = Vec::new();
        let mut remote: Vec<Pin<Box<dyn Future<Output = ()>>>> = Vec::new();
        for (owner, parts) in std::mem::take(&mut self.remote) {
            let seq = shard.remote_wait_seq.get() + 1;
            shard.remote_wait_seq.set(seq);
            let id = ((shard.id.0 as u64) << 48) | seq;
            let answered = Rc::new(Cell::new(false));
            pending.push((owner, id, answered.clone()));
            let fetcher = self.fetcher;
            let asked = shard.run_on(owner, move |s: Rc<BrokerShard>| async move {
                wait_on_owner(s, id, fetcher, parts, deadline).await
            });
            remote.push(Box::pin(async move {
                let _ = asked.await;
                answered.set(true);
            }));
        }
        let any_remote = async move {
            if remote.is_empty() {
                std::future::pending::<()>().await;
            } else {
                futures::future::select_all(remote).await;
            }
        };
        futures_lite::future::or(local, futures_lite::future::or(any_remote, glommio::timer::sleep(left))).await;
        if let Some(waker) = registered.take() {
            shard.stop_signal.forget(&waker);
            for (signal, _, _) in &self.signals {
                signal.notify().forget(&waker);
            }
        }
        for (owner, id, answered) in pending {
            if !answered.get() {
                cancel_on_owner(shard, owner, id);
            }
        }
    }
}

/// On the owner: waits until one of `parts` moved past the generation it
/// had when read, `deadline`, the broker stopping, or a cancel.
async fn wait_on_owner(
    shard: Rc<BrokerShard>,
    id: u64,
    fetcher: Fetcher,
    parts: Vec<(TopicPartition, u64)>,
    deadline: Instant,
) {
    let cancel = Rc::new(Notify::new());
    shard.remote_waits.borrow_mut().insert(id, cancel.clone());
    let stop_seen = shard.stop_signal.generation();
    let signals: Vec<(Signal, u64)> = parts
        .iter()
        .filter_map(|(tp, seen)| signal_for(&shard, tp, fetcher).map(|s| (s, *seen)))
        .collect();
    // A partition gone since the read (moved, deleted): the fetch reads
    // again and reports it.
    let gone = signals.len() < parts.len();
    let left = deadline.saturating_duration_since(Instant::now());
    if !gone && !shard.stopping.get() {
        let registered: RefCell<Option<Waker>> = RefCell::new(None);
        let signalled = poll_fn(|cx| {
            registered.borrow_mut().get_or_insert_with(|| cx.waker().clone());
            if cancel.poll_changed_since(0, cx).is_ready() {
                return Poll::Ready(());
            }
            if shard.stop_signal.poll_changed_since(stop_seen, cx).is_ready() {
                return Poll::Ready(());
            }
            for (signal, seen) in &signals {
                if signal.notify().poll_changed_since(*seen, cx).is_ready() {
                    return Poll::Ready(());
                }
            }
            Poll::Pending
        });
        futures_lite::future::or(signalled, glommio::timer::sleep(left)).await;
        if let Some(waker) = registered.take() {
            cancel.forget(&waker);
            shard.stop_signal.forget(&waker);
            for (signal, _) in &signals {
                signal.notify().forget(&waker);
            }
        }
    }
    shard.remote_waits.borrow_mut().remove(&id);
}

/// Ends wait `id` on `owner` if it is still there (it may have answered
/// meanwhile). Sent and not awaited.
fn cancel_on_owner(shard: &Rc<BrokerShard>, owner: ShardId, id: u64) {
    let shard = shard.clone();
    glommio::spawn_local(async move {
        let _ = shard
            .run_on(owner, move |s: Rc<BrokerShard>| async move {
                let waiting = s.remote_waits.borrow_mut().remove(&id);
                if let Some(cancel) = waiting {
                    cancel.notify_all();
                }
            })
            .await;
    })
    .detach();
}
