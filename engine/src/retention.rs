//! Retention: deleting whole old segments, never the active one.
//!
//! - `retention.ms`: a sealed segment goes once its largest timestamp is more
//!   than `retention.ms` old (`-1`: keep forever).
//! - `retention.bytes`: the oldest sealed segments go while the partition
//!   would still hold at least `retention.bytes` without them (`-1`: no
//!   limit).
//!
//! Both only ever delete a prefix of the segments, oldest first, as Kafka
//! does. The log start offset moves to the first remaining segment and is
//! persisted in the checkpoint; reads below it get `OffsetOutOfRange`. The
//! leader-epoch cache drops the epochs wholly below the new start, and the
//! one holding it now starts there.

use crate::checkpoint::{RecoveryPoint, Shutdown};
use crate::error::Result;
use crate::log::PartitionLog;
use crate::types::{Offset, TimestampMs};

/// The facts retention needs about one sealed segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentFacts {
    pub size: u64,
    pub largest_timestamp: TimestampMs,
}

/// How many leading sealed segments to delete. `total_bytes` includes the
/// active segment, which is never counted among `sealed`.
pub fn segments_to_delete(
    sealed: &[SegmentFacts],
    total_bytes: u64,
    now: TimestampMs,
    retention_ms: i64,
    retention_bytes: i64,
) -> usize {
    let by_time = if retention_ms < 0 {
        0
    } else {
        sealed
            .iter()
            .take_while(|s| now.0.saturating_sub(s.largest_timestamp.0) > retention_ms)
            .count()
    };
    let by_size = if retention_bytes < 0 {
        0
    } else {
        let mut remaining = total_bytes;
        sealed
            .iter()
            .take_while(|s| {
                let keep = remaining.saturating_sub(s.size) >= retention_bytes as u64 && remaining >= s.size;
                if keep {
                    remaining -= s.size;
                }
                keep
            })
            .count()
    };
    by_time.max(by_size)
}

/// The timestamp a segment's age is judged by: its largest record
/// timestamp, or — when its batches carry none (-1) — the log file's
/// modification time, as Kafka does.
fn age_timestamp(s: &crate::segment::Segment) -> TimestampMs {
    let ts = s.largest_timestamp();
    if ts.0 >= 0 {
        return ts;
    }
    let mtime = std::fs::metadata(&s.paths().log)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    match mtime {
        Some(d) => TimestampMs(d.as_millis() as i64),
        // Unknown age: never old enough.
        None => TimestampMs(i64::MAX),
    }
}

/// What a retention run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionOutcome {
    pub segments_deleted: usize,
    pub bytes_deleted: u64,
    pub log_start: Offset,
}

impl PartitionLog {
    /// Applies `retention.ms` and `retention.bytes` now. Runs as its own
    /// task (see `append`).
    pub async fn apply_retention(self: &std::rc::Rc<Self>) -> Result<RetentionOutcome> {
        let this = self.clone();
        crate::log::detached(async move { this.retention_inner().await }).await
    }

    /// DeleteRecords: moves the log start up to `offset` (at most the
    /// retention limit, the high watermark: beyond it `OffsetOutOfRange`),
    /// deleting the segments wholly below it. The start may fall inside a
    /// segment: reads below it are out of range, as in Kafka. Returns the
    /// log start after. Runs as its own task.
    pub async fn delete_records(self: &std::rc::Rc<Self>, offset: Offset) -> Result<Offset> {
        let this = self.clone();
        crate::log::detached(async move {
            this.check_usable()?;
            let _flush = this.lock(&this.flush_lock, "wait for flush lock").await?;
            let limit = this.deletion_limit();
            if offset > limit {
                return Err(crate::error::EngineError::OffsetOutOfRange {
                    tp: this.tp.clone(),
                    requested: offset,
                    log_start: this.log_start_offset(),
                    log_end: limit,
                });
            }
            this.advance_start_to(offset).await
        })
        .await
    }

    /// A follower takes its leader's log start (what the leader's
    /// retention or DeleteRecords removed), up to its own log end. Cheap
    /// when there is nothing to do. Runs as its own task.
    pub async fn follow_log_start(self: &std::rc::Rc<Self>, leader_log_start: Offset) -> Result<Offset> {
        if leader_log_start <= self.log_start_offset() {
            return Ok(self.log_start_offset());
        }
        let this = self.clone();
        crate::log::detached(async move {
            this.check_usable()?;
            let _flush = this.lock(&this.flush_lock, "wait for flush lock").await?;
            this.advance_start_to(leader_log_start.min(this.log_end_offset())).await
        })
        .await
    }

    /// Moves the log start up to `offset` (the caller holds the flush lock
    /// and checked the limit).
    async fn advance_start_to(&self, offset: Offset) -> Result<Offset> {
        if offset <= self.log_start_offset() {
            return Ok(self.log_start_offset());
        }
        let doomed = {
            let segs = self.segments.borrow();
            segs.iter()
                .take(segs.len() - 1)
                .take_while(|s| s.next_offset() <= offset)
                .count()
        };
        self.delete_prefix(doomed).await?;
        if self.log_start_offset() < offset {
            self.offsets.borrow_mut().advance_log_start(offset);
            self.cache.borrow_mut().drop_below(offset);
            let moved = self.epochs.borrow_mut().truncate_from_start(offset);
            self.epochs_changed(moved);
            self.persist_epochs().await.map_err(|e| self.poison_with(e))?;
            self.write_checkpoint(Shutdown::Unclean).await?;
        }
        tracing::info!(tp = %self.tp, log_start = %self.log_start_offset(), "log start moved up");
        Ok(self.log_start_offset())
    }

    /// The highest the log start may move: the log end (a segment rolled
    /// ahead of appends still in flight is not deleted past), and the
    /// retention limit (the high watermark) when set.
    pub(crate) fn deletion_limit(&self) -> Offset {
        let end = self.log_end_offset();
        self.retention_limit.get().map_or(end, |l| l.min(end))
    }

    async fn retention_inner(&self) -> Result<RetentionOutcome> {
        self.check_usable()?;
        let _flush = self.lock(&self.flush_lock, "wait for flush lock").await?;
        let (retention_ms, retention_bytes) = {
            let c = self.config.borrow();
            if !c.cleanup_policy.deletes() {
                return Ok(RetentionOutcome {
                    log_start: self.log_start_offset(),
                    ..RetentionOutcome::default()
                });
            }
            (c.retention_ms, c.retention_bytes)
        };
        let doomed = {
            let segs = self.segments.borrow();
            let sealed: Vec<SegmentFacts> = segs
                .iter()
                .take(segs.len() - 1)
                .map(|s| SegmentFacts {
                    size: s.size(),
                    largest_timestamp: age_timestamp(s),
                })
                .collect();
            let total = segs.iter().map(|s| s.size()).sum();
            segments_to_delete(&sealed, total, self.clock.now_ms(), retention_ms, retention_bytes)
        };
        self.delete_prefix(doomed).await
    }

    /// Deletes the first `doomed` segments (fewer if the log start would
    /// pass the log end or the retention limit); the caller holds the
    /// flush lock.
    async fn delete_prefix(&self, doomed: usize) -> Result<RetentionOutcome> {
        let doomed = {
            let segs = self.segments.borrow();
            let mut n = doomed.min(segs.len() - 1);
            let limit = self.deletion_limit();
            while n > 0 && segs[n].base() > limit {
                n -= 1;
            }
            n
        };
        if doomed == 0 {
            return Ok(RetentionOutcome {
                log_start: self.log_start_offset(),
                ..RetentionOutcome::default()
            });
        }
        let removed: Vec<_> = self.segments.borrow_mut().drain(..doomed).collect();
        let new_start = self
            .segments
            .borrow()
            .front()
            .map(|s| s.base())
            .unwrap_or_else(|| unreachable!());
        self.offsets.borrow_mut().advance_log_start(new_start);
        self.forget_damage_if_gone();
        self.cache.borrow_mut().drop_below(new_start);
        let moved = self.epochs.borrow_mut().truncate_from_start(new_start);
        self.epochs_changed(moved);
        if self.recovery_point.get().offset < new_start {
            self.recovery_point.set(RecoveryPoint {
                offset: new_start,
                segment_base: new_start,
                position: 0,
            });
        }
        let mut outcome = RetentionOutcome {
            segments_deleted: removed.len(),
            bytes_deleted: 0,
            log_start: new_start,
        };
        for s in &removed {
            outcome.bytes_deleted += s.size();
            s.delete_files().await?;
        }
        tracing::info!(tp = %self.tp, deleted = removed.len(), bytes = outcome.bytes_deleted,
            log_start = %new_start, "retention deleted segments");
        self.persist_epochs().await.map_err(|e| self.poison_with(e))?;
        self.write_checkpoint(Shutdown::Unclean).await?;
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(size: u64, ts: i64) -> SegmentFacts {
        SegmentFacts {
            size,
            largest_timestamp: TimestampMs(ts),
        }
    }

    #[test]
    fn time_deletes_only_an_expired_prefix() {
        let s = [seg(10, 100), seg(10, 500), seg(10, 150)];
        assert_eq!(segments_to_delete(&s, 40, TimestampMs(1000), 600, -1), 1);
        assert_eq!(segments_to_delete(&s, 40, TimestampMs(1000), 400, -1), 3);
        assert_eq!(segments_to_delete(&s, 40, TimestampMs(1000), 900, -1), 0);
        assert_eq!(segments_to_delete(&s, 40, TimestampMs(1000), -1, -1), 0);
    }

    #[test]
    fn size_keeps_at_least_retention_bytes() {
        let s = [seg(10, 0), seg(10, 0), seg(10, 0)];
        // 40 bytes in all (active holds 10).
        assert_eq!(segments_to_delete(&s, 40, TimestampMs(0), -1, 25), 1);
        assert_eq!(segments_to_delete(&s, 40, TimestampMs(0), -1, 20), 2);
        assert_eq!(segments_to_delete(&s, 40, TimestampMs(0), -1, 0), 3);
        assert_eq!(segments_to_delete(&s, 40, TimestampMs(0), -1, 41), 0);
    }
}
