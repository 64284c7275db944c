//! The most recent batches of a partition, in memory.
//!
//! Consumers and followers that keep up read the tail of the log; serving it
//! from here means they never touch the disk, whatever the write mode. The
//! cache holds a contiguous run of whole batches ending at the log's end,
//! bounded by `bytes_max`; the oldest are evicted first. Only a leader's
//! appends fill it: a follower's tail has no readers.

use std::collections::VecDeque;

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
    pub fn new(bytes_max: usize) -> BatchCache {
        BatchCache {
            batches: VecDeque::new(),
            bytes: 0,
            bytes_max,
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
        while self.bytes > self.bytes_max {
            match self.batches.pop_front() {
                Some(b) => self.bytes -= b.bytes.len(),
                None => break,
            }
        }
    }

    /// Adds the batch that now ends the log. A batch that does not continue
    /// the cached run restarts it.
    pub fn push(&mut self, batch: CachedBatch) {
        assert!(batch.base < batch.next, "empty offset range");
        if self.batches.back().is_some_and(|last| last.next != batch.base) {
            self.clear();
        }
        if batch.bytes.len() > self.bytes_max {
            self.clear();
            return;
        }
        self.bytes += batch.bytes.len();
        self.batches.push_back(batch);
        self.evict();
    }

    pub fn clear(&mut self) {
        self.batches.clear();
        self.bytes = 0;
    }

    /// Drops batches at or after `offset` (log truncation).
    pub fn truncate(&mut self, offset: Offset) {
        while self.batches.back().is_some_and(|b| b.next > offset) {
            if let Some(b) = self.batches.pop_back() {
                self.bytes -= b.bytes.len();
            }
        }
    }

    /// Drops batches wholly below `offset` (log start moved).
    pub fn drop_below(&mut self, offset: Offset) {
        while self.batches.front().is_some_and(|b| b.next <= offset) {
            if let Some(b) = self.batches.pop_front() {
                self.bytes -= b.bytes.len();
            }
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

    #[test]
    fn evicts_oldest_and_reads_whole_batches() {
        let mut c = BatchCache::new(300);
        c.push(batch(0, 10, 100));
        c.push(batch(10, 20, 100));
        c.push(batch(20, 30, 100));
        c.push(batch(30, 40, 100));
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
        let mut c = BatchCache::new(1000);
        c.push(batch(0, 10, 100));
        c.push(batch(10, 20, 100));
        c.truncate(Offset(10));
        assert_eq!(c.bytes(), 100);
        c.push(batch(15, 20, 100));
        assert_eq!(c.bytes(), 100, "a gap restarts the run");
        assert!(c.read(Offset(3), 1000, Offset(100), false).is_none());
        c.drop_below(Offset(20));
        assert_eq!(c.bytes(), 0);
    }
}
