//! A follower's fetch on its leader, round after round. A follower names the
//! same partitions, in the same order, in every fetch to one shard of its
//! leader (its fetcher's list changes only when leadership moves), and at
//! idle almost all of them are caught up: nothing to read, nothing new to
//! tell. A shard remembers, per follower fetch layout, each partition's
//! replica and what its last full answer was, and answers a partition that
//! is still in that state from memory: no look-up by name, no read, no
//! update of the replica. At 10,000 partitions with RF 3 that full work
//! was most of an idle broker's time.
//!
//! A partition is answered from memory ("quiet") only while all of this
//! holds since its last full answer: the follower asks the same offset in
//! the same leader epoch; this broker still leads it in that epoch; nothing
//! was appended (its append signal did not move: the log end, reserved for
//! followers, was that offset at the full answer, so there is still
//! nothing to send); its high watermark and log start are
//! unchanged; the log is open; no replica was added to or removed from the
//! shard; the follower is in the ISR (a follower that caught up but is not
//! in it yet takes the full path, which tries the ISR expansion again); the
//! log is not failed; and less than a quarter of `replica.lag.time.max.ms`
//! has passed.
//! A follower whose log ends where its leader's does is in sync however
//! long ago it fetched (Kafka's rule), so the ISR does not depend on that
//! last bound; it keeps the replica's record of the follower's fetches at
//! most that old, so the first append after a quiet spell finds a recent
//! one. Anything else takes the full path, which also refreshes the memory.
//!
//! Between passes the fetch waits for an append to one of its partitions
//! on one signal, the view's `appended`, to which each partition's append
//! signal is subscribed (`Notify::subscribe`) when it takes the full path:
//! a waiting round leaves one waker, not one per partition.
//!
//! Views are few (one per follower fetcher of this shard), bounded by
//! [`VIEWS_MAX`], the least recently used dropped beyond it.

use std::cell::RefCell;
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use ferrite_engine::notify::Notify;
use ferrite_engine::{LeaderEpoch, Offset, TopicPartition};
use ferrite_replication::{LocalReplica, RoleKind};

use super::fetch::{response_budget, unanswered, FetchPass};
use crate::shard::BrokerShard;
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::fetch::{FetchPartitionResponse, FetchRequest, FetchTopicResponse};

/// Follower fetch layouts a shard remembers.
pub const VIEWS_MAX: usize = 64;

/// What one partition's last full answer was.
struct Quiet {
    replica: Rc<LocalReplica>,
    /// The generation of the log's append signal read before the full
    /// answer: while it stays, nothing was appended since (cheaper to read
    /// than the log end, which sits behind the active segment).
    reserved_seen: u64,
    fetch_offset: Offset,
    asked_epoch: LeaderEpoch,
    leader_epoch: LeaderEpoch,
    hw: Offset,
    log_start: Offset,
    refreshed: Instant,
}

impl Quiet {
    /// `reserved_now`: the append signal's generation, read before this.
    fn holds(
        &self,
        asked_offset: Offset,
        asked_epoch: LeaderEpoch,
        reserved_now: u64,
        now: Instant,
        refresh: Duration,
    ) -> bool {
        let log = self.replica.log();
        asked_offset == self.fetch_offset
            && asked_epoch == self.asked_epoch
            && reserved_now == self.reserved_seen
            && now.duration_since(self.refreshed) < refresh
            && !log.is_closed()
            && !log.is_poisoned()
            && self.replica.role() == RoleKind::Leader
            && self.replica.leader_epoch() == self.leader_epoch
            && self.replica.hw() == self.hw
            && log.log_start_offset() == self.log_start
    }
}

/// One follower fetch layout: its partitions in request order.
struct View {
    replica_id: i32,
    layout: Vec<(String, Vec<i32>)>,
    entries: Vec<Option<Quiet>>,
    /// The shard's replica changes when the entries were made.
    changes: u64,
    /// Moved by an append to any partition of the view: each partition's
    /// append signal is subscribed to it when taking the full path, so a
    /// waiting fetch leaves one waker here instead of one per partition.
    appended: Rc<Notify>,
}

impl View {
    fn fits(&self, f: &FetchRequest) -> bool {
        self.replica_id == f.replica_id
            && self.layout.len() == f.topics.len()
            && self.layout.iter().zip(&f.topics).all(|((name, parts), t)| {
                *name == t.topic
                    && parts.len() == t.partitions.len()
                    && parts.iter().zip(&t.partitions).all(|(a, b)| *a == b.partition)
            })
    }

    fn of(f: &FetchRequest, changes: u64) -> View {
        let layout: Vec<(String, Vec<i32>)> = f
            .topics
            .iter()
            .map(|t| (t.topic.clone(), t.partitions.iter().map(|p| p.partition).collect()))
            .collect();
        let count = layout.iter().map(|(_, p)| p.len()).sum();
        View {
            replica_id: f.replica_id,
            layout,
            entries: (0..count).map(|_| None).collect(),
            changes,
            appended: Rc::new(Notify::new()),
        }
    }
}

/// A shard's follower views, most recently used last.
#[derive(Default)]
pub struct FollowerViews {
    views: RefCell<Vec<View>>,
    /// Partitions answered from memory since the shard started.
    quiet_answers: std::cell::Cell<u64>,
}

impl FollowerViews {
    /// The view of `f`'s layout (taken out while the fetch runs), or a new
    /// one that remembers nothing yet.
    /// Drops the views made before the shard's replicas last changed
    /// (`changes`): they are of no more use, and they hold replicas (a
    /// deleted partition's files stayed open in one until it aged out).
    pub fn drop_stale(&self, changes: u64) {
        self.views.borrow_mut().retain(|v| v.changes == changes);
    }

    fn take(&self, f: &FetchRequest, changes: u64) -> View {
        self.drop_stale(changes);
        let mut views = self.views.borrow_mut();
        match views.iter().position(|v| v.fits(f)) {
            Some(at) => views.remove(at),
            None => View::of(f, changes),
        }
    }

    /// Keeps `view` for the next fetch of its layout, unless the shard's
    /// replicas changed while it was out (`changes` now).
    fn put_back(&self, view: View, changes: u64) {
        if view.changes != changes {
            return;
        }
        let mut views = self.views.borrow_mut();
        if views.len() >= VIEWS_MAX {
            views.remove(0);
        }
        views.push(view);
    }

    /// Partitions answered from memory since the shard started.
    pub fn quiet_answers(&self) -> u64 {
        self.quiet_answers.get()
    }
}

/// A follower's fetch of partitions all on `shard`, which leads them (or
/// not: the full path answers that): reads until data, an error or
/// `deadline` (at once when `no_wait`), waiting on the partitions' append
/// signals between passes.
pub(crate) async fn fetch_until(
    shard: &Rc<BrokerShard>,
    f: &FetchRequest,
    deadline: Instant,
    no_wait: bool,
) -> Vec<FetchTopicResponse> {
    let Some(replicas) = shard.replicas.clone() else {
        unreachable!("a follower's view on a broker without replicas");
    };
    let refresh = Duration::from_millis((replicas.cluster.config.replica_lag_time_max_ms / 4).max(50));
    let mut view = shard.follower_views.take(f, replicas.changes());
    loop {
        let stop_seen = shard.stop_signal.generation();
        let appended_seen = view.appended.generation();
        let now = Instant::now();
        let mut pass = FetchPass::new(shard, unanswered(f));
        let mut budget = response_budget(f);
        let mut k = 0usize;
        let mut quiet = 0u64;
        for (ti, t) in f.topics.iter().enumerate() {
            for (pi, p) in t.partitions.iter().enumerate() {
                let entry = &mut view.entries[k];
                k += 1;
                if let Some(q) = entry.as_ref() {
                    let seen = q.replica.log().reserved_moved().generation();
                    if q.holds(p.fetch_offset, p.current_leader_epoch, seen, now, refresh) {
                        pass.topics[ti].partitions[pi] = answer_of(q, p.partition);
                        quiet += 1;
                        continue;
                    }
                }
                let replica = replicas.get(&TopicPartition::new(t.topic.clone(), p.partition));
                // Subscribed before its generation is read (`Notify::subscribe`).
                if let Some(r) = &replica {
                    r.log().reserved_moved().subscribe(&view.appended);
                }
                let seen = replica.as_ref().map(|r| r.log().reserved_moved().generation());
                pass.read(shard, f, (ti, pi), &mut budget).await;
                let answered = &pass.topics[ti].partitions[pi];
                *entry = match (&replica, seen) {
                    (Some(r), Some(seen)) => quiet_after(r, f.replica_id, p, answered, seen, now),
                    _ => None,
                };
            }
        }
        let answers = &shard.follower_views.quiet_answers;
        answers.set(answers.get() + quiet);
        let enough = pass.available >= super::fetch::min_bytes(f);
        // Only partitions the metadata does not know: nothing to wait for.
        let nothing_known = pass.known == 0 && quiet == 0;
        let done =
            enough || pass.any_error || nothing_known || Instant::now() >= deadline || shard.stopping.get() || no_wait;
        if done {
            shard.follower_views.put_back(view, replicas.changes());
            return pass.topics;
        }
        let appended = view.appended.clone();
        wait_for_append(shard, &appended, appended_seen, stop_seen, deadline).await;
    }
}

/// Waits until a partition of the view took an append since
/// `appended_seen`, the broker stops, or `deadline`; the view's one signal
/// stands for all of its partitions' (a partition the pass found no replica
/// for has none to wait on: another pass only comes with another append).
async fn wait_for_append(
    shard: &Rc<BrokerShard>,
    appended: &Notify,
    appended_seen: u64,
    stop_seen: u64,
    deadline: Instant,
) {
    let left = deadline.saturating_duration_since(Instant::now());
    let registered: RefCell<Option<Waker>> = RefCell::new(None);
    let signals = poll_fn(|cx| {
        registered.borrow_mut().get_or_insert_with(|| cx.waker().clone());
        if shard.stop_signal.poll_changed_since(stop_seen, cx).is_ready() {
            return Poll::Ready(());
        }
        appended.poll_changed_since(appended_seen, cx)
    });
    futures_lite::future::or(signals, glommio::timer::sleep(left)).await;
    if let Some(waker) = registered.take() {
        shard.stop_signal.forget(&waker);
        appended.forget(&waker);
    }
}

fn answer_of(q: &Quiet, partition: i32) -> FetchPartitionResponse {
    FetchPartitionResponse {
        index: partition,
        error: ErrorCode::None.code(),
        high_watermark: q.hw,
        last_stable_offset: q.hw,
        log_start_offset: q.log_start,
        aborted_transactions: None,
        records: Vec::new(),
    }
}

/// What a full answer leaves to remember: only a caught-up partition with
/// nothing sent and no error can be answered from memory next time.
fn quiet_after(
    replica: &Rc<LocalReplica>,
    follower: i32,
    asked: &ferrite_protocol::fetch::FetchPartition,
    answered: &FetchPartitionResponse,
    reserved_seen: u64,
    now: Instant,
) -> Option<Quiet> {
    let log = replica.log();
    let caught_up = log.reserved_end_offset() == asked.fetch_offset;
    let nothing = answered.error == ErrorCode::None.code() && answered.records.is_empty();
    let same = answered.high_watermark == replica.hw() && answered.log_start_offset == log.log_start_offset();
    let leading = replica.role() == RoleKind::Leader;
    // A follower not in the ISR yet (its expansion may wait on another ISR
    // write) takes the full path each round, which tries the expansion again.
    let in_sync = || {
        replica
            .isr()
            .is_some_and(|isr| isr.contains(&ferrite_replication::BrokerId(follower)))
    };
    (caught_up && nothing && same && leading && in_sync()).then(|| Quiet {
        replica: replica.clone(),
        reserved_seen,
        fetch_offset: asked.fetch_offset,
        asked_epoch: asked.current_leader_epoch,
        leader_epoch: replica.leader_epoch(),
        hw: replica.hw(),
        log_start: log.log_start_offset(),
        refreshed: now,
    })
}
