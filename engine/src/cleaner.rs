//! The log cleaner: compaction that keeps offsets (`cleanup.policy=compact`).
//!
//! A compacted log keeps, for each key, at least its latest record, at the
//! offset it was written at. The log has a *clean* part (cleaned before)
//! and a *dirty* part after it; a pass:
//!
//! 1. picks the *cleanable* range: sealed segments only (never the active
//!    one), each wholly below the high watermark (the retention limit) and
//!    the first offset of any open transaction,
//!    no younger than `min.compaction.lag.ms` by its largest timestamp
//!    (when that is set); and below the segment holding the recovery point
//!    — a swap must not replace the segment recovery would scan from — so
//!    the pass first flushes the log when the range reaches it (Kafka
//!    flushes at every roll, which has the same effect);
//! 2. runs when the dirty bytes reach `min.cleanable.dirty.ratio` of the
//!    cleanable bytes, or when a dirty segment is older than
//!    `max.compaction.lag.ms`;
//! 3. off the shard ([`crate::clean_job`]): fills a key → latest-offset map
//!    from the dirty segments, then rewrites every cleanable segment, merged
//!    into groups of at most `segment.bytes`, keeping the records the map
//!    does not make obsolete ([`crate::clean_filter`]), without the
//!    records of aborted transactions and, in time, without the markers
//!    whose transactions have no data left ([`crate::clean_txn`]);
//! 4. on the shard, under the flush lock, swaps each group in
//!    ([`crate::clean_swap`]) if its segments are still the log's and no
//!    truncation ran meanwhile; readers holding an old segment's descriptor
//!    read on from it (the bytes there are still valid records at their
//!    offsets), and the new one has another inode;
//! 5. records where the dirty part now starts in `cleaner-checkpoint`.
//!
//! # `cleaner-checkpoint`
//!
//! Text, as Kafka's checkpoint files: line 1 the version `0`, line 2 the
//! first dirty offset (decimal, `\n`-terminated). Replaced atomically
//! (temporary file, fdatasync, rename, directory fsync). Missing or not
//! parsing: the whole log is dirty, which costs a pass and loses nothing.

use std::path::Path;
use std::rc::Rc;

use std::sync::Arc;

use crate::clean_job::{self, CleanJob, CleanedGroup, JobSegment, Pace};
use crate::clean_swap::{self, Manifest};
use crate::clean_txn::CleanTxns;
use crate::error::{EngineError, Result};
use crate::file_cache::FileSlot;
use crate::log::PartitionLog;
use crate::segment::{Segment, SegmentPaths};
use crate::segment_reader::SegmentFile;
use crate::types::{Offset, TimestampMs};

pub const CHECKPOINT_FILE: &str = "cleaner-checkpoint";

/// The shard's cleaner settings (`log.cleaner.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CleanerParams {
    /// Keys the map holds (`log.cleaner.dedupe.buffer.size` over the
    /// shards, [`crate::clean_map::ENTRY_BYTES`] each).
    pub entries_max: usize,
    /// `log.cleaner.io.max.bytes.per.second`; `None`: unpaced.
    pub bytes_per_second: Option<u64>,
}

/// What one pass over a log did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanOutcome {
    pub segments_replaced: usize,
    pub segments_written: usize,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_removed: u64,
    /// Where the dirty part starts now.
    pub first_dirty: Offset,
}

/// What a pass would do.
enum Plan {
    Nothing,
    /// Worth it once the recovery point is past the cleanable segments.
    FlushFirst,
    Job(Box<CleanJob>, Vec<Rc<Segment>>),
}

/// Per-log cleaner state: the first dirty offset, once read from its file.
#[derive(Debug, Default)]
pub struct CleanerState {
    first_dirty: Option<Offset>,
}

/// Facts about one sealed segment, for choosing the cleanable range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentSpan {
    pub base: Offset,
    pub next_offset: Offset,
    pub size: u64,
    pub largest_timestamp: TimestampMs,
}

/// The limits a cleanable segment stays within.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// High watermark: a segment must end at or below it.
    pub hw: Offset,
    /// Base of the segment holding the recovery point: a segment must start
    /// below it.
    pub recovery_base: Offset,
    /// A segment whose largest timestamp is after this is too young.
    pub youngest: TimestampMs,
}

/// How many leading sealed segments may be cleaned.
pub fn cleanable_count(sealed: &[SegmentSpan], bounds: Bounds) -> usize {
    sealed
        .iter()
        .take_while(|s| {
            s.next_offset <= bounds.hw && s.base < bounds.recovery_base && s.largest_timestamp <= bounds.youngest
        })
        .count()
}

/// Whether a cleanable range with a dirty part from `first_dirty` is worth
/// a pass now.
pub fn worth_cleaning(
    cleanable: &[SegmentSpan],
    first_dirty: Offset,
    ratio: crate::log_config::DirtyRatio,
    overdue: TimestampMs,
) -> bool {
    let dirty: Vec<&SegmentSpan> = cleanable.iter().filter(|s| s.next_offset > first_dirty).collect();
    if dirty.is_empty() {
        return false;
    }
    let total: u64 = cleanable.iter().map(|s| s.size).sum();
    let dirty_bytes: u64 = dirty.iter().map(|s| s.size).sum();
    ratio.reached(dirty_bytes, total) || dirty.iter().any(|s| s.largest_timestamp <= overdue)
}

impl PartitionLog {
    /// Where the dirty part starts (the log start when never cleaned; never
    /// past the log end).
    pub fn first_dirty_offset(&self) -> Offset {
        let known = self.cleaner.borrow().first_dirty;
        let first = known.unwrap_or_else(|| load_checkpoint(&self.dir).unwrap_or(Offset::ZERO));
        self.cleaner.borrow_mut().first_dirty = Some(first);
        first.min(self.log_end_offset()).max(self.log_start_offset())
    }

    /// Before a truncation to `end`: what is appended from there on is
    /// dirty. Stored first, so a crash in the truncation cannot leave a
    /// first dirty offset above records appended after it.
    pub(crate) async fn lower_first_dirty(&self, end: Offset) -> Result<()> {
        if self.first_dirty_offset() <= end {
            return Ok(());
        }
        self.cleaner.borrow_mut().first_dirty = Some(end);
        store_checkpoint(&self.dir, end).await
    }

    /// One cleaner pass, if the log is compacted and worth it: the key map,
    /// then each group written (on the shard's blocking pool) and swapped in
    /// before the next is written, so a pass needs the disk space of one
    /// group more, not of the whole range.
    pub async fn clean(self: &Rc<Self>, params: CleanerParams) -> Result<Option<CleanOutcome>> {
        let (job, replaced) = match self.plan_clean(params) {
            Plan::Nothing => return Ok(None),
            Plan::Job(job, replaced) => (job, replaced),
            Plan::FlushFirst => {
                self.flush().await?;
                match self.plan_clean(params) {
                    Plan::Job(job, replaced) => (job, replaced),
                    Plan::Nothing | Plan::FlushFirst => return Ok(None),
                }
            }
        };
        let truncations = self.truncations.get();
        let job: Arc<CleanJob> = Arc::from(job);
        let built = {
            let job = job.clone();
            off_shard(&self.dir, move || {
                let mut pace = Pace::new(job.bytes_per_second);
                clean_job::build_map(&job, &mut pace).map(|(map, to)| (map, to, pace))
            })
        };
        let (map, cleaned_to, mut pace) = built.await??;
        let map = Arc::new(map);
        let mut outcome = CleanOutcome {
            first_dirty: self.first_dirty_offset(),
            ..CleanOutcome::default()
        };
        let mut txns = CleanTxns::new(&job.aborted);
        for group in clean_job::groups(&job.segments, cleaned_to, job.group_bytes_max) {
            let expected: Vec<Rc<Segment>> = replaced
                .iter()
                .filter(|s| group.iter().any(|g| g.base == s.base()))
                .cloned()
                .collect();
            let (job, map) = (job.clone(), map.clone());
            let (written, back) = off_shard(&self.dir, move || {
                let written = clean_job::clean_group(&job, &group, (&map, cleaned_to), &mut pace, &mut txns);
                (written, (pace, txns))
            })
            .await?;
            (pace, txns) = back;
            let (group, stats) = written?;
            outcome.bytes_read += stats.bytes_read;
            outcome.bytes_written += stats.bytes_written;
            outcome.records_removed += stats.records_removed;
            let n = group.replaces.len();
            if !self.swap_in(group, expected, truncations).await? {
                return Ok(Some(outcome));
            }
            outcome.segments_replaced += n;
            outcome.segments_written += 1;
        }
        self.cleaner.borrow_mut().first_dirty = Some(cleaned_to);
        store_checkpoint(&self.dir, cleaned_to).await?;
        outcome.first_dirty = cleaned_to;
        tracing::info!(tp = %self.tp, ?outcome, "cleaned");
        Ok(Some(outcome))
    }

    /// The job for a pass, and the segments it would replace.
    fn plan_clean(&self, params: CleanerParams) -> Plan {
        let config = self.config.borrow().clone();
        if !config.cleanup_policy.compacts() || self.check_usable().is_err() || self.is_damaged() {
            return Plan::Nothing;
        }
        let now = self.clock.now_ms();
        let sealed: Vec<Rc<Segment>> = {
            let segs = self.segments.borrow();
            segs.iter().take(segs.len() - 1).cloned().collect()
        };
        let spans: Vec<SegmentSpan> = sealed
            .iter()
            .map(|s| SegmentSpan {
                base: s.base(),
                next_offset: s.next_offset(),
                size: s.size(),
                largest_timestamp: s.largest_timestamp(),
            })
            .collect();
        let bounds = self.clean_bounds(config.min_compaction_lag_ms, now);
        let n = cleanable_count(&spans, bounds);
        let unsynced = Bounds {
            recovery_base: Offset(i64::MAX),
            ..bounds
        };
        let n_after_flush = cleanable_count(&spans, unsynced);
        let first_dirty = self.first_dirty_offset();
        let overdue = TimestampMs(now.0.saturating_sub(config.max_compaction_lag_ms));
        let worth = |n: usize| worth_cleaning(&spans[..n], first_dirty, config.min_cleanable_dirty_ratio, overdue);
        if !worth(n) {
            return match worth(n_after_flush) {
                true => Plan::FlushFirst,
                false => Plan::Nothing,
            };
        }
        let segments = sealed[..n]
            .iter()
            .map(|s| JobSegment {
                base: s.base(),
                path: s.paths().log.clone(),
                size: s.size(),
                next_offset: s.next_offset(),
                aborted: s.meta().txn_index.entries().to_vec(),
            })
            .collect();
        let job = CleanJob {
            dir: self.dir.clone(),
            segments,
            dirty_from: first_dirty,
            now,
            delete_retention_ms: config.delete_retention_ms,
            entries_max: params.entries_max,
            group_bytes_max: config.segment_bytes,
            index_interval_bytes: config.index_interval_bytes,
            producer_last: self.producers.borrow().last_offsets(),
            producer_epochs: self.producers.borrow().epochs(),
            bytes_per_second: params.bytes_per_second,
            aborted: self.aborted_all(),
        };
        Plan::Job(Box::new(job), sealed[..n].to_vec())
    }

    /// The limits of the cleanable range now (see [`Bounds`]).
    fn clean_bounds(&self, min_compaction_lag_ms: i64, now: TimestampMs) -> Bounds {
        Bounds {
            // Nothing at or past an open transaction's first offset: its
            // records may still be aborted (Kafka stops at the LSO too).
            hw: self
                .first_unstable_offset()
                .map_or(self.deletion_limit(), |u| u.min(self.deletion_limit())),
            recovery_base: self.recovery_point.get().segment_base,
            // Kafka applies the lag only when set: a record stamped ahead of
            // the broker's clock does not hold cleaning off.
            youngest: match min_compaction_lag_ms {
                0 => TimestampMs(i64::MAX),
                lag => TimestampMs(now.0.saturating_sub(lag)),
            },
        }
    }

    /// Puts a cleaned group in place of `expected`, if they are still the
    /// log's (in order, sealed) and no truncation ran since `truncations`.
    /// Returns whether it did. A failure once the swap is committed
    /// poisons the log: recovery completes the swap.
    async fn swap_in(&self, group: CleanedGroup, expected: Vec<Rc<Segment>>, truncations: u64) -> Result<bool> {
        let _flush = self.lock(&self.flush_lock, "wait for flush lock").await?;
        let at = self.still_held(&expected);
        let (Some(at), true, true) = (at, self.truncations.get() == truncations, self.check_usable().is_ok()) else {
            clean_swap::remove_cleaned(&self.dir, group.base);
            return Ok(false);
        };
        // The checkpoint file must not name a replaced segment (or a byte
        // position in one) as where recovery starts: the in-memory recovery
        // point is past them all (see `Bounds`), the file may lag it.
        let last_replaced = group.replaces.last().copied().unwrap_or(group.base);
        let stale = self
            .last_checkpoint
            .get()
            .is_none_or(|c| c.recovery.segment_base <= last_replaced);
        if stale {
            self.write_checkpoint(crate::checkpoint::Shutdown::Unclean).await?;
        }
        let manifest = Manifest {
            base: group.base,
            replaces: group.replaces.clone(),
        };
        manifest.store(&self.dir).await.map_err(|e| self.poison_with(e))?;
        // The batch cache may still hold the group's tail as it was: from
        // now on those offsets are read from the cleaned file.
        let group_end = self.segments.borrow()[at + expected.len()].base();
        self.cache.borrow_mut().drop_below(group_end);
        manifest.carry_out(&self.dir).map_err(|e| self.poison_with(e))?;
        // From here to the splice nothing awaits: no reader finds a retired
        // segment in the list. (Had the renames failed, the old segments
        // would stay in service, unretired, in a poisoned log.)
        for s in &expected {
            s.retire();
        }
        let paths = SegmentPaths::new(&self.dir, group.base);
        let reader = FileSlot::closed(self.file_cache.clone(), &paths.log, SegmentFile::open_boxed);
        let cleaned = Rc::new(Segment::assemble(group.base, paths, reader, None, group.meta));
        {
            let mut segs = self.segments.borrow_mut();
            segs.drain(at..at + expected.len());
            segs.insert(at, cleaned);
        }
        Manifest::finish(&self.dir).await.map_err(|e| self.poison_with(e))?;
        Ok(true)
    }

    /// Where `expected` lies in the segment list, if all of it is there, in
    /// order, before the active segment.
    fn still_held(&self, expected: &[Rc<Segment>]) -> Option<usize> {
        let segs = self.segments.borrow();
        let first = expected.first()?;
        let at = segs.iter().position(|s| Rc::ptr_eq(s, first))?;
        let all = expected
            .iter()
            .enumerate()
            .all(|(i, e)| segs.get(at + i).is_some_and(|s| Rc::ptr_eq(s, e)));
        (all && at + expected.len() < segs.len()).then_some(at)
    }
}

/// Runs `work` on the shard's blocking pool; a panic there (a bug) becomes
/// an error of this log's pass instead of a lost pool thread and a pass
/// that never ends.
async fn off_shard<T: Send + 'static>(dir: &Path, work: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    let caught = glommio::executor()
        .spawn_blocking(move || std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)))
        .await;
    caught.map_err(|panic| EngineError::BadFile {
        path: dir.to_path_buf(),
        reason: format!(
            "the log cleaner failed: {}",
            panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default()
        ),
    })
}

fn load_checkpoint(dir: &Path) -> Option<Offset> {
    let text = std::fs::read_to_string(dir.join(CHECKPOINT_FILE)).ok()?;
    let mut lines = text.split_terminator('\n');
    if lines.next()? != "0" {
        return None;
    }
    let offset = lines.next()?.parse().ok().filter(|o: &i64| *o >= 0)?;
    lines.next().is_none().then_some(Offset(offset))
}

async fn store_checkpoint(dir: &Path, first_dirty: Offset) -> Result<()> {
    crate::checkpoint::replace_file(
        dir,
        CHECKPOINT_FILE,
        &format!("{CHECKPOINT_FILE}.tmp"),
        format!("0\n{}\n", first_dirty.0).as_bytes(),
        &crate::checkpoint::ReplaceOps {
            create: "create cleaner checkpoint",
            fdatasync: "fdatasync cleaner checkpoint",
            close: "close cleaner checkpoint",
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log_config::DirtyRatio;

    fn span(base: i64, next: i64, size: u64, ts: i64) -> SegmentSpan {
        SegmentSpan {
            base: Offset(base),
            next_offset: Offset(next),
            size,
            largest_timestamp: TimestampMs(ts),
        }
    }

    #[test]
    fn the_cleanable_range_stops_at_the_hw_the_recovery_point_and_the_lag() {
        let s = [span(0, 10, 100, 5), span(10, 20, 100, 15), span(20, 30, 100, 25)];
        let b = |hw, rb, young| Bounds {
            hw: Offset(hw),
            recovery_base: Offset(rb),
            youngest: TimestampMs(young),
        };
        assert_eq!(
            cleanable_count(&s, b(30, 20, 100)),
            2,
            "the recovery segment is not cleaned"
        );
        assert_eq!(cleanable_count(&s, b(30, 40, 100)), 3);
        assert_eq!(
            cleanable_count(&s, b(19, 40, 100)),
            1,
            "a segment reaching past the hw is not"
        );
        assert_eq!(
            cleanable_count(&s, b(30, 40, 14)),
            1,
            "a segment younger than the lag is not"
        );
    }

    #[test]
    fn a_pass_needs_the_ratio_or_an_overdue_segment() {
        let s = [span(0, 10, 100, 5), span(10, 20, 100, 15), span(20, 30, 100, 25)];
        let half = DirtyRatio(500_000);
        assert!(worth_cleaning(&s, Offset(10), half, TimestampMs(0)), "2/3 dirty");
        assert!(!worth_cleaning(&s, Offset(20), half, TimestampMs(0)), "1/3 dirty");
        assert!(worth_cleaning(&s, Offset(20), half, TimestampMs(25)), "overdue");
        assert!(
            !worth_cleaning(&s, Offset(30), DirtyRatio(0), TimestampMs(i64::MAX)),
            "nothing dirty"
        );
    }
}
