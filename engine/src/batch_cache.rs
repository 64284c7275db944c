//! The most recent batches of a partition, in memory.
//!
//! Consumers and followers that keep up read the tail of the log; serving it
//! from here means they never touch the disk, whatever the write mode. The
//! cache holds a contiguous run of whole batches ending at the log's end,
//! bounded by `bytes_max` (`cache_bytes_max`, per partition); the oldest are
//! evicted first. Only a leader's appends fill it: a follower's tail has no
//! readers.
//!
//! Every partition cache of a shard also shares one [`CacheBudget`]
//! (`ferrite.log.cache.bytes.per.shard`): when the shard's caches hold more
//! than it together, the batches cached longest ago go first, whichever
//! partition holds them. Memory then follows the load, not the partition
//! count: ten thousand partitions that each took one write hold their
//! batches only while the budget lasts, and an idle partition ends up
//! holding none.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::{Rc, Weak};

use bytes::Bytes;

use crate::types::Offset;

#[derive(Clone, Debug)]
pub struct CachedBatch {
    pub base: Offset,
    /// Offset after the batch.
    pub next: Offset,
    pub bytes: Bytes,
}

#[derive(Debug)]
pub struct BatchCache {
    batches: VecDeque<CachedBatch>,
    bytes: usize,
    bytes_max: usize,
    budget: Rc<CacheBudget>,
}

/// The bytes a shard's partition caches hold together, and the order their
/// batches were cached in (see the module doc).
#[derive(Debug)]
pub struct CacheBudget {
    bytes: Cell<usize>,
    bytes_max: usize,
    /// Batches cached, shard-wide.
    batches: Cell<usize>,
    /// Each batch cached, oldest first: its cache and base offset. Entries
    /// of batches a cache dropped by itself are skipped when they come up
    /// (and swept out when they outnumber the live ones).
    order: RefCell<VecDeque<(Weak<RefCell<BatchCache>>, Offset)>>,
}

/// Entries of the order beyond twice the live batches (and this many)
/// start a sweep of the stale ones.
const ORDER_SLACK_MIN: usize = 1024;

impl CacheBudget {
    pub fn new(bytes_max: usize) -> Rc<CacheBudget> {
        Rc::new(CacheBudget {
            bytes: Cell::new(0),
            bytes_max,
            batches: Cell::new(0),
            order: RefCell::new(VecDeque::new()),
        })
    }

    /// A budget for one log alone (tests, benches, tools): no shard-wide
    /// limit beyond each log's own.
    pub fn unshared() -> Rc<CacheBudget> {
        CacheBudget::new(usize::MAX)
    }

    /// Bytes every cache of the shard holds.
    pub fn bytes(&self) -> usize {
        self.bytes.get()
    }

    pub fn bytes_max(&self) -> usize {
        self.bytes_max
    }

    fn added(&self, bytes: usize) {
        self.bytes.set(self.bytes.get() + bytes);
        self.batches.set(self.batches.get() + 1);
    }

    fn removed(&self, bytes: usize) {
        assert!(self.bytes.get() >= bytes, "cache budget bytes underflow");
        assert!(self.batches.get() >= 1, "cache budget batches underflow");
        self.bytes.set(self.bytes.get() - bytes);
        self.batches.set(self.batches.get() - 1);
    }

    /// Notes a batch just cached by `cache` (which is `current`, borrowed
    /// by the caller), and sweeps out the entries of batches gone when
    /// they outnumber the live ones.
    fn record(&self, cache: Weak<RefCell<BatchCache>>, base: Offset, current: &BatchCache) {
        let mut order = self.order.borrow_mut();
        order.push_back((cache.clone(), base));
        if order.len() > ORDER_SLACK_MIN.max(2 * self.batches.get()) {
            order.retain(|(c, base)| {
                if Weak::ptr_eq(c, &cache) {
                    return current.holds(*base);
                }
                // Another cache borrowed right now keeps its entries.
                c.upgrade()
                    .is_some_and(|c| c.try_borrow().map_or(true, |c| c.holds(*base)))
            });
        }
    }

    /// Evicts the batches cached longest ago, shard-wide, until the caches
    /// fit the budget. A cache borrowed elsewhere right now is passed over
    /// (its batches come up again later).
    pub fn enforce(&self) {
        while self.bytes.get() > self.bytes_max {
            let Some((cache, base)) = self.order.borrow_mut().pop_front() else {
                return;
            };
            let Some(cache) = cache.upgrade() else { continue };
            let Ok(mut c) = cache.try_borrow_mut() else { continue };
            c.evict_through(base);
        }
    }
}

impl Drop for BatchCache {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Batches served from the cache.
#[derive(Clone, Debug)]
pub struct CacheRead {
    pub batches: Vec<Bytes>,
    pub first_offset: Offset,
    pub next_offset: Offset,
    pub bytes: usize,
}

impl BatchCache {
    /// A partition's cache, holding at most `bytes_max` and sharing the
    /// shard's `budget`.
    pub fn new(bytes_max: usize, budget: Rc<CacheBudget>) -> Rc<RefCell<BatchCache>> {
        Rc::new(RefCell::new(BatchCache {
            batches: VecDeque::new(),
            bytes: 0,
            bytes_max,
            budget,
        }))
    }

    /// The shard's budget this cache shares.
    pub fn budget(&self) -> Rc<CacheBudget> {
        self.budget.clone()
    }

    /// Whether a batch starting at `base` is cached.
    fn holds(&self, base: Offset) -> bool {
        let first = self.batches.front().map(|b| b.base);
        let last = self.batches.back().map(|b| b.base);
        first.is_some_and(|f| f <= base) && last.is_some_and(|l| base <= l)
    }

    fn pop_front(&mut self) -> Option<CachedBatch> {
        let b = self.batches.pop_front()?;
        self.bytes -= b.bytes.len();
        self.budget.removed(b.bytes.len());
        Some(b)
    }

    fn pop_back(&mut self) -> Option<CachedBatch> {
        let b = self.batches.pop_back()?;
        self.bytes -= b.bytes.len();
        self.budget.removed(b.bytes.len());
        Some(b)
    }

    /// Evicts (for the shard's budget) the batches up to the one starting
    /// at `base`, if it is still cached.
    fn evict_through(&mut self, base: Offset) {
        if !self.holds(base) {
            return;
        }
        while self.batches.front().is_some_and(|b| b.base <= base) {
            self.pop_front();
        }
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn set_bytes_max(&mut self, bytes_max: usize) {
        self.bytes_max = bytes_max;
        self.evict();
    }

    fn evict(&mut self) {
        while self.bytes > self.bytes_max && self.pop_front().is_some() {}
    }

    /// Adds the batch that now ends the log (`me` is this cache, for the
    /// shard's order). A batch that does not continue the cached run
    /// restarts it. The caller then has the shard's budget enforced
    /// ([`CacheBudget::enforce`]), once this cache is no longer borrowed.
    pub fn push(&mut self, me: &Rc<RefCell<BatchCache>>, batch: CachedBatch) {
        assert!(batch.base < batch.next, "empty offset range");
        if self.batches.back().is_some_and(|last| last.next != batch.base) {
            self.clear();
        }
        if batch.bytes.len() > self.bytes_max {
            self.clear();
            return;
        }
        self.bytes += batch.bytes.len();
        self.budget.added(batch.bytes.len());
        let base = batch.base;
        self.batches.push_back(batch);
        let budget = self.budget.clone();
        budget.record(Rc::downgrade(me), base, self);
        self.evict();
    }

    pub fn clear(&mut self) {
        while self.pop_front().is_some() {}
    }

    /// Drops batches at or after `offset` (log truncation).
    pub fn truncate(&mut self, offset: Offset) {
        while self.batches.back().is_some_and(|b| b.next > offset) {
            self.pop_back();
        }
    }

    /// Drops batches wholly below `offset` (log start moved).
    pub fn drop_below(&mut self, offset: Offset) {
        while self.batches.front().is_some_and(|b| b.next <= offset) {
            self.pop_front();
        }
    }

    /// Whole batches from the one holding `from`, each ending at or before
    /// `upper`, up to `max_bytes` (the first batch is returned even when
    /// larger if `at_least_one`). `None` when the cache does not hold `from`.
    pub fn read(&self, from: Offset, max_bytes: usize, upper: Offset, at_least_one: bool) -> Option<CacheRead> {
        let first = self.batches.front()?;
        if from < first.base {
            return None;
        }
        let start = self.batches.partition_point(|b| b.next <= from);
        if start == self.batches.len() {
            return None;
        }
        let mut out = CacheRead {
            batches: Vec::new(),
            first_offset: self.batches[start].base,
            next_offset: self.batches[start].base,
            bytes: 0,
        };
        for b in self.batches.range(start..) {
            if b.next > upper {
                break;
            }
            let fits = out.bytes + b.bytes.len() <= max_bytes;
            let first_anyway = at_least_one && out.batches.is_empty();
            if !fits && !first_anyway {
                break;
            }
            out.bytes += b.bytes.len();
            out.next_offset = b.next;
            out.batches.push(b.bytes.clone());
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: i64, next: i64, len: usize) -> CachedBatch {
        CachedBatch {
            base: Offset(base),
            next: Offset(next),
            bytes: Bytes::from(vec![base as u8; len]),
        }
    }

    /// A cache with a budget of its own, large enough not to matter.
    fn alone(bytes_max: usize) -> Rc<RefCell<BatchCache>> {
        BatchCache::new(bytes_max, CacheBudget::new(usize::MAX))
    }

    fn push(c: &Rc<RefCell<BatchCache>>, b: CachedBatch) {
        c.borrow_mut().push(c, b);
        let budget = c.borrow().budget.clone();
        budget.enforce();
    }

    #[test]
    fn evicts_oldest_and_reads_whole_batches() {
        let c = alone(300);
        push(&c, batch(0, 10, 100));
        push(&c, batch(10, 20, 100));
        push(&c, batch(20, 30, 100));
        push(&c, batch(30, 40, 100));
        let c = c.borrow();
        assert_eq!(c.bytes(), 300);
        assert!(c.read(Offset(5), 1000, Offset(40), false).is_none(), "evicted");
        let r = c.read(Offset(15), 150, Offset(40), false).expect("cached");
        assert_eq!((r.first_offset, r.next_offset, r.bytes), (Offset(10), Offset(20), 100));
        let r = c.read(Offset(15), 1000, Offset(30), false).expect("cached");
        assert_eq!(r.next_offset, Offset(30), "stops at upper");
        let r = c.read(Offset(15), 50, Offset(40), true).expect("cached");
        assert_eq!(r.bytes, 100, "at least one batch");
        let r = c.read(Offset(15), 50, Offset(40), false).expect("cached");
        assert_eq!(r.bytes, 0);
        assert!(c.read(Offset(40), 1000, Offset(40), false).is_none());
    }

    #[test]
    fn truncation_and_gaps_keep_the_run_contiguous() {
        let c = alone(1000);
        push(&c, batch(0, 10, 100));
        push(&c, batch(10, 20, 100));
        c.borrow_mut().truncate(Offset(10));
        assert_eq!(c.borrow().bytes(), 100);
        push(&c, batch(15, 20, 100));
        assert_eq!(c.borrow().bytes(), 100, "a gap restarts the run");
        assert!(c.borrow().read(Offset(3), 1000, Offset(100), false).is_none());
        c.borrow_mut().drop_below(Offset(20));
        assert_eq!(c.borrow().bytes(), 0);
    }

    #[test]
    fn the_shards_budget_evicts_the_batches_cached_longest_ago_whichever_partition_holds_them() {
        let budget = CacheBudget::new(350);
        let a = BatchCache::new(1000, budget.clone());
        let b = BatchCache::new(1000, budget.clone());
        push(&a, batch(0, 1, 100));
        push(&b, batch(0, 1, 100));
        push(&a, batch(1, 2, 100));
        assert_eq!(budget.bytes(), 300);
        push(&b, batch(1, 2, 100));
        assert_eq!(budget.bytes(), 300, "a's first batch went");
        assert!(a.borrow().read(Offset(0), 1000, Offset(10), false).is_none());
        assert!(b.borrow().read(Offset(0), 1000, Offset(10), false).is_some());
        // One busy partition among idle ones takes the budget over.
        for i in 2..10 {
            push(&a, batch(i, i + 1, 100));
        }
        assert_eq!(b.borrow().bytes(), 0, "the idle partition holds nothing");
        assert_eq!(a.borrow().bytes(), 300);
        assert_eq!(budget.bytes(), 300);
    }

    #[test]
    fn the_budget_counts_what_caches_drop_by_themselves_and_on_drop() {
        let budget = CacheBudget::new(usize::MAX);
        let a = BatchCache::new(250, budget.clone());
        for i in 0..5 {
            push(&a, batch(i, i + 1, 100));
        }
        assert_eq!(budget.bytes(), 200, "the partition's own limit");
        a.borrow_mut().truncate(Offset(4));
        assert_eq!(budget.bytes(), 100);
        let b = BatchCache::new(1000, budget.clone());
        push(&b, batch(0, 1, 100));
        drop(a);
        assert_eq!(budget.bytes(), 100, "a dropped cache gives its bytes back");
        drop(b);
        assert_eq!(budget.bytes(), 0);
    }

    #[test]
    fn stale_order_entries_are_swept_and_never_evict_what_they_did_not_name() {
        let budget = CacheBudget::new(usize::MAX);
        let a = BatchCache::new(100, budget.clone());
        // Each push evicts the one before (the partition's own limit): the
        // order fills with stale entries, which the sweep keeps bounded.
        for i in 0..10_000 {
            push(&a, batch(i, i + 1, 100));
        }
        assert!(
            budget.order.borrow().len() <= 2 * ORDER_SLACK_MIN,
            "{}",
            budget.order.borrow().len()
        );
        assert_eq!(budget.bytes(), 100);
        assert!(a.borrow().read(Offset(9_999), 1000, Offset(10_000), false).is_some());
    }
}
