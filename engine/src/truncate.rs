//! Truncation: removing the end of the log, for a follower whose log has
//! diverged from its leader's (replication decides the offset).
//!
//! Crash safety: the checkpoint with the lowered recovery point is made
//! durable *before* any file is deleted or cut, and the checkpoint lock is
//! held throughout, so no checkpoint written meanwhile can claim a durable
//! point inside data that is about to go. The cut is fdatasync'd before the
//! truncation returns.
//!
//! The leader-epoch cache loses the epochs that start at or after the new
//! end (all of them when the log restarts), and its file is rewritten
//! before the truncation returns; a crash before that is repaired at open,
//! which cuts the cache at the recovered log end.
//!
//! A batch that straddles the requested offset is removed whole, so the log
//! may end below it; the new end is returned. Truncating below the log start
//! empties the log and restarts it at that offset.

use std::rc::Rc;

use crate::checkpoint::{RecoveryPoint, Shutdown};
use crate::error::Result;
use crate::log::PartitionLog;
use crate::offset_index;
use crate::segment::Segment;
use crate::segment_appender::SegmentAppender;
use crate::types::Offset;

use std::sync::atomic::{AtomicU64, Ordering};

/// Truncations begun, and ended, in this process on any shard's log.
static TRUNCATIONS_BEGUN: AtomicU64 = AtomicU64::new(0);
static TRUNCATIONS_ENDED: AtomicU64 = AtomicU64::new(0);

/// A mark of "no truncation runs now": the count of truncations begun, if
/// every one of them has ended (`None` while one runs). Bytes read from a
/// segment file below where a read could go stay the file's bytes while
/// [`truncations_since`] says none began after the mark: below a log's end
/// only a truncation rewrites a position.
pub fn truncations_quiet() -> Option<u64> {
    let begun = TRUNCATIONS_BEGUN.load(Ordering::Acquire);
    let ended = TRUNCATIONS_ENDED.load(Ordering::Acquire);
    (begun == ended).then_some(begun)
}

/// Whether a truncation began since `mark` ([`truncations_quiet`]).
pub fn truncations_since(mark: u64) -> bool {
    TRUNCATIONS_BEGUN.load(Ordering::Acquire) != mark
}

/// Counts a truncation as begun, and as ended when dropped, however it
/// ends.
struct TruncationCounted;

impl TruncationCounted {
    fn begin() -> TruncationCounted {
        TRUNCATIONS_BEGUN.fetch_add(1, Ordering::AcqRel);
        TruncationCounted
    }
}

impl Drop for TruncationCounted {
    fn drop(&mut self) {
        TRUNCATIONS_ENDED.fetch_add(1, Ordering::AcqRel);
    }
}

/// Counts a truncation of one log when it begins and again when it ends,
/// so that a reader who saw the same count before and after knows no
/// truncation overlapped its read.
struct CountedOnLog<'a>(&'a std::cell::Cell<u64>);

impl<'a> CountedOnLog<'a> {
    fn begin(count: &'a std::cell::Cell<u64>) -> CountedOnLog<'a> {
        count.set(count.get() + 1);
        CountedOnLog(count)
    }
}

impl Drop for CountedOnLog<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

/// What a truncation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    /// Remove the batches at or after the offset.
    To,
    /// Remove everything and restart the log at the offset.
    Restart,
}

impl PartitionLog {
    /// Removes every batch that ends at or after `offset`; returns the new
    /// log end offset. Runs as its own task (see `append`).
    ///
    /// At or above the log end no batch goes, but the leader epochs that
    /// start at or after `offset` still do: a follower cuts there to drop an
    /// epoch its leader never had.
    pub async fn truncate_to(self: &Rc<Self>, offset: Offset) -> Result<Offset> {
        let ticket = self.turns.ticket();
        let this = self.clone();
        crate::log::detached(async move { this.truncate_inner(offset, Cut::To, ticket).await }).await
    }

    /// Empties the log and restarts it at `offset`, which may lie above the
    /// log end: what a follower does when its leader's log starts past
    /// everything it has. Returns the new log end (`offset`).
    pub async fn restart_at(self: &Rc<Self>, offset: Offset) -> Result<Offset> {
        assert!(offset.0 >= 0, "restart at a negative offset {offset}");
        let ticket = self.turns.ticket();
        let this = self.clone();
        crate::log::detached(async move { this.truncate_inner(offset, Cut::Restart, ticket).await }).await
    }

    async fn truncate_inner(&self, offset: Offset, cut: Cut, ticket: u64) -> Result<Offset> {
        let ticket = self.turns.hold(ticket);
        self.check_usable()?;
        let _turn = ticket.turn().await;
        let _counted = TruncationCounted::begin();
        let _ends = CountedOnLog::begin(&self.truncations);
        let _flush = self.lock(&self.flush_lock, "wait for flush lock").await?;
        let _checkpoint = self.lock(&self.checkpoint_lock, "wait for checkpoint lock").await?;
        self.drain_reserved().await?;
        if cut == Cut::To && offset >= self.log_end_offset() {
            let dropped = self.epochs.borrow_mut().truncate_from_end(offset);
            self.epochs_changed(dropped);
            self.persist_epochs().await.map_err(|e| self.poison_with(e))?;
            return Ok(self.log_end_offset());
        }
        self.lower_first_dirty(offset).await.map_err(|e| self.poison_with(e))?;
        let fully = cut == Cut::Restart || offset < self.log_start_offset();
        let result = match fully {
            true => self.truncate_fully(offset).await,
            false => self.truncate_within(offset).await,
        };
        let end = result.map_err(|e| self.poison_with(e))?;
        self.forget_damage_if_gone();
        // The cut may land below the offset asked for (a batch's base, a
        // damaged range).
        self.lower_first_dirty(end).await.map_err(|e| self.poison_with(e))?;
        self.persist_epochs().await.map_err(|e| self.poison_with(e))?;
        if fully {
            *self.producers.borrow_mut() = crate::producer_state::ProducerStates::new();
        } else {
            self.rebuild_producers().await.map_err(|e| self.poison_with(e))?;
        }
        // The snapshot on disk may describe batches just cut away; a later
        // rebuild must not start from it once the log grows past it again.
        self.snapshot_producers(end).await.map_err(|e| self.poison_with(e))?;
        self.store_checkpoint(Shutdown::Unclean).await?;
        tracing::info!(tp = %self.tp, requested = %offset, end = %end, "truncated log");
        Ok(end)
    }

    async fn truncate_fully(&self, offset: Offset) -> Result<Offset> {
        // Durable first: the log starts at `offset` and nothing is claimed
        // on the device past it (position 0 of a segment not yet created).
        self.recovery_point.set(RecoveryPoint {
            offset,
            segment_base: offset,
            position: 0,
        });
        self.store_checkpoint_with_start(Shutdown::Unclean, offset).await?;
        let removed: Vec<_> = self.segments.borrow_mut().drain(..).collect();
        for s in &removed {
            s.delete_files().await?;
        }
        let fresh = Segment::create(&self.dir, offset, self.mode, &self.file_cache).await?;
        self.segments.borrow_mut().push_back(Rc::new(fresh));
        self.cache.borrow_mut().clear();
        let cleared = self.epochs.borrow_mut().clear();
        self.epochs_changed(cleared);
        self.offsets.borrow_mut().reset(offset);
        self.recovery_point.set(RecoveryPoint {
            offset,
            segment_base: offset,
            position: 0,
        });
        self.flush_state.borrow_mut().dir_dirty = true;
        Ok(offset)
    }

    /// Where a cut for `offset` goes: the segment, the byte position and
    /// the new log end. At a damaged range the scrubber found, when the cut
    /// would keep it: there the walk over batch headers could not go on.
    async fn find_cut(&self, offset: Offset) -> Result<(Rc<Segment>, u64, Offset)> {
        let damaged = self.damage.borrow().clone();
        if let Some(d) = damaged.filter(|d| d.offset <= offset) {
            if let Some(segment) = self.segment_for(d.segment_base).filter(|s| s.base() == d.segment_base) {
                return Ok((segment, d.position, d.offset));
            }
        }
        let segment = self.segment_for(offset).unwrap_or_else(|| self.active());
        let reader = segment.reader().await?;
        let seg_end = segment.readable_end();
        let (_, index_pos) = segment.index_lookup(offset);
        Ok(match reader.find_offset(index_pos, offset, seg_end).await? {
            Some((pos, info)) => (segment, pos, info.base_offset),
            None => {
                let next = segment.next_offset();
                (segment, seg_end, next)
            }
        })
    }

    async fn truncate_within(&self, offset: Offset) -> Result<Offset> {
        // Find the cut before touching anything.
        let (segment, cut_pos, new_next) = self.find_cut(offset).await?;
        let reader = segment.reader().await?;
        let seg_end = segment.readable_end();
        // Durable first: a recovery point at or below the cut.
        let rp = self.recovery_point.get();
        if rp.offset > new_next || rp.segment_base > segment.base() {
            self.recovery_point.set(RecoveryPoint {
                offset: new_next,
                segment_base: segment.base(),
                position: cut_pos,
            });
            self.store_checkpoint(Shutdown::Unclean).await?;
        }
        let later: Vec<_> = {
            let mut segs = self.segments.borrow_mut();
            let keep = segs.partition_point(|s| s.base() <= segment.base());
            segs.drain(keep..).collect()
        };
        for s in &later {
            s.delete_files().await?;
        }
        if !later.is_empty() {
            self.flush_state.borrow_mut().dir_dirty = true;
        }
        let appender = match segment.appender() {
            Some(a) => a,
            None => {
                let a = SegmentAppender::open(
                    &segment.paths().log,
                    self.mode,
                    seg_end,
                    segment.next_offset(),
                    &self.file_cache,
                )
                .await?;
                segment.set_appender(a);
                segment.appender().unwrap_or_else(|| unreachable!())
            }
        };
        appender.reset_to(cut_pos, new_next).await?;
        // The cut itself must be on the device, or the data beyond it
        // could come back after a crash and be taken for valid.
        reader.sync().await?;
        self.trim_meta(&segment, cut_pos, new_next).await?;
        self.cache.borrow_mut().truncate(new_next);
        let cut = self.epochs.borrow_mut().truncate_from_end(new_next);
        self.epochs_changed(cut);
        self.offsets.borrow_mut().truncate(new_next);
        Ok(new_next)
    }

    /// Cuts a segment's metadata at `cut_pos`: drops index entries at or
    /// after it and recomputes the largest timestamp from the last remaining
    /// time entry and the batch headers after the last offset entry.
    async fn trim_meta(&self, segment: &Segment, cut_pos: u64, new_next: Offset) -> Result<()> {
        let base = segment.base();
        let rel_next = offset_index::relative(base, new_next.max(base));
        {
            let mut m = segment.meta_mut();
            m.offset_index.truncate_by(|e| e.relative_offset < rel_next);
            m.time_index.truncate_by(|e| e.relative_offset < rel_next);
            m.cut_aborted_from(new_next);
            m.size = cut_pos;
            m.next_offset = new_next;
            m.synced_size = m.synced_size.min(cut_pos);
            m.indexes_durable = false;
            match m.time_index.last().copied() {
                Some(e) => {
                    m.largest_timestamp = e.timestamp;
                    m.largest_timestamp_offset = base.plus(i64::from(e.relative_offset));
                }
                None => {
                    m.largest_timestamp = crate::types::TimestampMs::NONE;
                    m.largest_timestamp_offset = base;
                }
            }
        }
        let (_, mut pos) = segment.index_lookup(new_next);
        let reader = segment.reader().await?;
        let mut since_index = 0;
        while let Some(info) = reader.batch_at(pos, cut_pos).await? {
            let mut m = segment.meta_mut();
            if info.max_timestamp > m.largest_timestamp {
                m.largest_timestamp = info.max_timestamp;
                m.largest_timestamp_offset = info.base_offset;
            }
            since_index += info.size as u64;
            pos += info.size as u64;
        }
        segment.meta_mut().bytes_since_index = since_index;
        segment.persist_indexes().await
    }
}
