//! Reads: offsets to byte regions, for zero-copy sends.
//!
//! A read names the bytes to send rather than copying them: a region of one
//! segment file (descriptor, position, length) for `sendfile`, or the cached
//! batches when the reader is at the tail. Regions always hold whole batches,
//! from the batch that contains the requested offset, each ending at or below
//! the caller's upper bound (the high watermark), within `max_bytes` — except
//! that with [`SizeLimit::AtLeastOneBatch`] the first batch is returned whole
//! even when larger (Kafka's KIP-74 rule, so a consumer can always progress).
//!
//! Finding the region costs an index look-up and a short walk over batch
//! headers at each end; record bytes are never read.

use std::rc::Rc;

use bytes::Bytes;

use crate::batch::BatchInfo;
use crate::error::{EngineError, Result};
use crate::log::PartitionLog;
use crate::record;
use crate::segment::Segment;
use crate::segment_reader::SegmentFile;
use crate::types::{Offset, TimestampMs};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeLimit {
    /// Never more than `max_bytes`.
    Strict,
    /// The first batch whole even when it is larger than `max_bytes`.
    AtLeastOneBatch,
}

/// Bytes of one segment file to send as they are.
#[derive(Clone)]
pub struct FileRegion {
    pub file: Rc<SegmentFile>,
    pub position: u64,
    pub len: u64,
    /// Where the batches the read could have returned end in this file
    /// (the read's upper bound, or the segment's end): a reader may read
    /// ahead up to here, and nothing there changes unless the log is
    /// truncated ([`crate::truncate::truncations_quiet`]).
    pub readable_to: u64,
    /// [`crate::truncate::truncations_quiet`] when the read began.
    pub truncations_quiet: Option<u64>,
}

impl std::fmt::Debug for FileRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}+{}", self.file.path().display(), self.position, self.len)
    }
}

#[derive(Clone, Debug)]
pub enum ReadRegion {
    Empty,
    File(FileRegion),
    Cached(Vec<Bytes>),
}

/// The result of a read: where the bytes are and which offsets they cover.
#[derive(Clone, Debug)]
pub struct LogRead {
    pub region: ReadRegion,
    /// Base offset of the first batch (the requested offset when empty).
    pub first_offset: Offset,
    /// Offset after the last batch (the requested offset when empty).
    pub next_offset: Offset,
    pub bytes: u64,
}

impl LogRead {
    fn empty(at: Offset) -> LogRead {
        LogRead {
            region: ReadRegion::Empty,
            first_offset: at,
            next_offset: at,
            bytes: 0,
        }
    }

    /// Copies the bytes out (tests, and readers that cannot sendfile).
    pub async fn to_vec(&self) -> Result<Vec<u8>> {
        match &self.region {
            ReadRegion::Empty => Ok(Vec::new()),
            ReadRegion::Cached(batches) => Ok(batches.iter().flat_map(|b| b.iter().copied()).collect()),
            ReadRegion::File(r) => {
                let v = r.file.read_at(r.position, r.len as usize).await?;
                if v.len() as u64 != r.len {
                    return Err(EngineError::BadFile {
                        path: r.file.path().to_path_buf(),
                        reason: format!("region {}+{} runs past the end of the file", r.position, r.len),
                    });
                }
                Ok(v)
            }
        }
    }
}

/// Longest a follower's read waits for the write of a reserved batch the
/// cache does not hold.
const UNCACHED_WAIT_MAX: std::time::Duration = std::time::Duration::from_millis(100);

/// Times a read looks a segment up again after the cleaner replaced it.
const REPLACED_RETRIES_MAX: u32 = 8;

/// Largest decompressed batch the timestamp look-up will inflate.
pub const DECOMPRESSED_BYTES_MAX: usize = 64 << 20;

/// The first record at or after a timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampHit {
    pub offset: Offset,
    pub timestamp: TimestampMs,
}

impl PartitionLog {
    /// Reads whole batches from the one holding `from`, below `upper`.
    pub async fn read(&self, from: Offset, max_bytes: usize, upper: Offset, limit: SizeLimit) -> Result<LogRead> {
        let end = self.check_readable(from, self.log_end_offset())?;
        let upper = self.below_damage(from, upper.min(end))?;
        if from >= upper {
            return Ok(LogRead::empty(from));
        }
        let at_least_one = limit == SizeLimit::AtLeastOneBatch;
        if let Some(hit) = self.cache.borrow().read(from, max_bytes, upper, at_least_one) {
            return Ok(LogRead {
                first_offset: hit.first_offset,
                next_offset: if hit.batches.is_empty() { from } else { hit.next_offset },
                bytes: hit.bytes as u64,
                region: if hit.batches.is_empty() {
                    ReadRegion::Empty
                } else {
                    ReadRegion::Cached(hit.batches)
                },
            });
        }
        self.read_segments(from, max_bytes, upper, at_least_one).await
    }

    /// Reads whole batches from the segment files, from the one holding
    /// `from`, below `upper` (the cache did not hold `from`).
    async fn read_segments(
        &self,
        from: Offset,
        max_bytes: usize,
        upper: Offset,
        at_least_one: bool,
    ) -> Result<LogRead> {
        let mut at = from;
        let mut replaced = 0;
        loop {
            let Some(segment) = self.segment_for(at) else {
                return Ok(LogRead::empty(from));
            };
            let read = match self.read_segment(&segment, at, max_bytes, upper, at_least_one).await {
                // The cleaner swapped it out since it was found: look again
                // (a few times: each swap puts a fresh segment in its place).
                Err(EngineError::SegmentReplaced { .. }) if replaced < REPLACED_RETRIES_MAX => {
                    replaced += 1;
                    continue;
                }
                other => other?,
            };
            match read {
                SegmentRead::Found(r) => return Ok(r),
                SegmentRead::NotHere => {
                    // Only when offsets have a gap past this segment's end.
                    let next = self.segment_after(segment.base());
                    match next {
                        Some(s) if s.base() < upper => at = s.base(),
                        _ => return Ok(LogRead::empty(from)),
                    }
                }
            }
        }
    }

    /// `from` lies in the log start ..= `limit`, or OFFSET_OUT_OF_RANGE
    /// (naming the log end). Returns the log end.
    fn check_readable(&self, from: Offset, limit: Offset) -> Result<Offset> {
        let (log_start, end) = {
            let o = self.offsets.borrow();
            (o.log_start(), o.end())
        };
        if from < log_start || from > limit {
            return Err(EngineError::OffsetOutOfRange {
                tp: self.tp.clone(),
                requested: from,
                log_start,
                log_end: end,
            });
        }
        Ok(end)
    }

    /// Reads for a follower: like [`PartitionLog::read`] up to the log end,
    /// and beyond it up to the reserved end from the cache, so that
    /// followers fetch a batch while the leader's own write of it is still
    /// under way (Kafka's leader hands followers what is in its page cache
    /// as soon as it is there; the follower's LEO, and so the HW, still
    /// counts only what the follower has written).
    pub async fn read_for_replica(&self, from: Offset, max_bytes: usize, limit: SizeLimit) -> Result<LogRead> {
        let reserved = self.reserved_end_offset();
        let end = self.check_readable(from, reserved)?;
        let reserved = self.below_damage(from, reserved)?;
        let at_least_one = limit == SizeLimit::AtLeastOneBatch;
        if let Some(hit) = self.cache.borrow().read(from, max_bytes, reserved, at_least_one) {
            // Empty: the batch at `from` is over `max_bytes` (strict), which
            // the files would not return either.
            if hit.batches.is_empty() {
                return Ok(LogRead::empty(from));
            }
            return Ok(LogRead {
                first_offset: hit.first_offset,
                next_offset: hit.next_offset,
                bytes: hit.bytes as u64,
                region: ReadRegion::Cached(hit.batches),
            });
        }
        if from >= end && from < reserved {
            // Reserved but not in the cache (a batch larger than the cache,
            // or evicted): it is being written; wait for that, briefly.
            self.wait_end_past(from, UNCACHED_WAIT_MAX).await;
        }
        let end = self.below_damage(from, self.log_end_offset())?;
        if from >= end {
            return Ok(LogRead::empty(from));
        }
        self.read_segments(from, max_bytes, end, at_least_one).await
    }

    /// Waits until the log end passes `offset`, or for `limit` at most (a
    /// failed write never moves it).
    async fn wait_end_past(&self, offset: Offset, limit: std::time::Duration) {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let seen = self.end_moved.generation();
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if self.log_end_offset() > offset || left.is_zero() || self.check_usable().is_err() {
                return;
            }
            futures_lite::future::or(self.end_moved.changed_since(seen), glommio::timer::sleep(left)).await;
        }
    }

    /// The segment whose base is the greatest at or below `offset`.
    pub(crate) fn segment_for(&self, offset: Offset) -> Option<Rc<Segment>> {
        let segs = self.segments.borrow();
        let n = segs.partition_point(|s| s.base() <= offset);
        n.checked_sub(1).map(|i| segs[i].clone())
    }

    pub(crate) fn segment_after(&self, base: Offset) -> Option<Rc<Segment>> {
        let segs = self.segments.borrow();
        let n = segs.partition_point(|s| s.base() <= base);
        segs.get(n).cloned()
    }

    async fn read_segment(
        &self,
        segment: &Segment,
        from: Offset,
        max_bytes: usize,
        upper: Offset,
        at_least_one: bool,
    ) -> Result<SegmentRead> {
        let truncations_quiet = crate::truncate::truncations_quiet();
        let file = segment.reader().await?;
        // In a segment holding a fenced damaged range, the walk over batch
        // headers stops where the damage starts: its header may be garbled
        // (a wrong length, or a base offset — which the CRC does not cover —
        // that would pass it off as another batch).
        let damaged_at = self.damage_in(segment);
        let seg_end = damaged_at.map_or(segment.readable_end(), |(pos, _)| pos);
        let (_, index_pos) = segment.index_lookup(from);
        let Some((start, first)) = file.find_offset(index_pos, from, seg_end).await? else {
            return Ok(SegmentRead::NotHere);
        };
        if first.next_offset() > upper {
            return Ok(SegmentRead::Found(LogRead::empty(from)));
        }
        let (upper_pos, upper_next) = self
            .position_below(segment, &file, upper, (seg_end, damaged_at.map(|(_, at)| at)))
            .await?;
        let first_end = start + first.size as u64;
        let limit = start.saturating_add(max_bytes as u64).min(upper_pos);
        let (stop, next) = if limit >= first_end {
            if limit == upper_pos {
                (upper_pos, upper_next)
            } else {
                self.boundary_before(segment, &file, start, first_end, first.next_offset(), limit, seg_end)
                    .await?
            }
        } else if at_least_one {
            (first_end, first.next_offset())
        } else {
            return Ok(SegmentRead::Found(LogRead::empty(from)));
        };
        Ok(SegmentRead::Found(LogRead {
            region: ReadRegion::File(crate::log_read::FileRegion {
                file,
                position: start,
                len: stop - start,
                readable_to: upper_pos,
                truncations_quiet,
            }),
            first_offset: first.base_offset,
            next_offset: next,
            bytes: stop - start,
        }))
    }

    /// Position (and offset) where the batches below `upper` end in this
    /// segment. `upper` is a batch boundary or beyond the segment.
    /// `(seg_end, damaged_next)`: where the walk stops, and the offset
    /// there when a damaged range cuts the segment short.
    async fn position_below(
        &self,
        segment: &Segment,
        file: &SegmentFile,
        upper: Offset,
        (seg_end, damaged_next): (u64, Option<Offset>),
    ) -> Result<(u64, Offset)> {
        let seg_next = match (damaged_next, segment.appender()) {
            (Some(at), _) => at,
            (None, Some(a)) => a.written_next(),
            (None, None) => segment.next_offset(),
        };
        if upper >= seg_next {
            return Ok((seg_end, seg_next));
        }
        let (_, pos) = segment.index_lookup(upper);
        match file.find_offset(pos, upper, seg_end).await? {
            // `upper` starts this batch, or falls inside it: stop before it.
            Some((p, info)) => Ok((p, info.base_offset)),
            None => Ok((seg_end, seg_next)),
        }
    }

    /// The last batch boundary at or before `limit`, walking from the
    /// nearest indexed batch (or from the first batch's end).
    #[allow(clippy::too_many_arguments)]
    async fn boundary_before(
        &self,
        segment: &Segment,
        file: &SegmentFile,
        start: u64,
        first_end: u64,
        first_next: Offset,
        limit: u64,
        seg_end: u64,
    ) -> Result<(u64, Offset)> {
        let (idx_offset, idx_pos) = segment.index_lookup_position(limit);
        let (walk_from, walk_next) = if idx_pos >= first_end {
            (idx_pos, idx_offset)
        } else {
            (first_end, first_next)
        };
        debug_assert!(walk_from > start);
        let (pos, next) = file.last_boundary_before(walk_from, limit, seg_end).await?;
        if pos == walk_from {
            Ok((walk_from, walk_next))
        } else {
            Ok((pos, next))
        }
    }

    /// The first record whose timestamp is at or after `target`, among
    /// batches below `upper`, found record by record inside the batch
    /// (decompressing it if needed; a batch that does not decode answers
    /// with its base offset).
    pub async fn offset_for_timestamp(&self, target: TimestampMs, upper: Offset) -> Result<Option<TimestampHit>> {
        let segments: Vec<Rc<Segment>> = self.segments.borrow().iter().cloned().collect();
        let log_start = self.log_start_offset();
        for segment in segments {
            if segment.largest_timestamp() < target {
                continue;
            }
            let file = segment.reader().await?;
            let seg_end = segment.readable_end();
            let (_, pos) = segment.time_lookup(target);
            let Some((batch_pos, info)) = file.find_timestamp(pos, target, seg_end).await? else {
                continue;
            };
            if info.next_offset() > upper {
                return Ok(None);
            }
            let hit = self.record_at_timestamp(&file, batch_pos, &info, target).await?;
            if hit.offset < log_start {
                return Ok(Some(TimestampHit {
                    offset: log_start,
                    timestamp: hit.timestamp,
                }));
            }
            return Ok(Some(hit));
        }
        Ok(None)
    }

    /// The largest timestamp in the log and the base offset of the batch
    /// that holds it (ListOffsets' max-timestamp query, at batch precision).
    pub fn max_timestamp(&self) -> Option<TimestampHit> {
        let log_start = self.log_start_offset();
        let end = self.log_end_offset();
        self.segments
            .borrow()
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| {
                let m = s.meta();
                TimestampHit {
                    offset: m.largest_timestamp_offset.max(log_start),
                    timestamp: m.largest_timestamp,
                }
            })
            .filter(|h| h.timestamp.0 >= 0 && h.offset < end)
            .max_by_key(|h| (h.timestamp, std::cmp::Reverse(h.offset)))
    }

    async fn record_at_timestamp(
        &self,
        file: &SegmentFile,
        batch_pos: u64,
        info: &BatchInfo,
        target: TimestampMs,
    ) -> Result<TimestampHit> {
        let batch_level = TimestampHit {
            offset: info.base_offset,
            timestamp: info.max_timestamp,
        };
        if info.timestamp_type == crate::batch::TimestampType::LogAppendTime {
            // Every record carries the batch's append time.
            return Ok(batch_level);
        }
        let bytes = file.read_at(batch_pos, info.size).await?;
        let body = &bytes[crate::batch::HEADER_BYTES..];
        let plain = match crate::compression::decompress(info.compression, body, DECOMPRESSED_BYTES_MAX) {
            Ok(p) => p,
            Err(_) => return Ok(batch_level),
        };
        let Ok(records) = record::decode_records(&plain, info.record_count) else {
            return Ok(batch_level);
        };
        for r in records {
            let ts = TimestampMs(info.base_timestamp.0.saturating_add(r.timestamp_delta));
            if ts >= target {
                return Ok(TimestampHit {
                    offset: info.base_offset.plus(i64::from(r.offset_delta)),
                    timestamp: ts,
                });
            }
        }
        Ok(batch_level)
    }
}

enum SegmentRead {
    Found(LogRead),
    NotHere,
}
impl PartitionLog {
    /// The first offset of the oldest open transaction: `read_committed`
    /// readers see nothing from there on (nor past the high watermark).
    pub fn first_unstable_offset(&self) -> Option<Offset> {
        let first = self.producers.borrow().txns().first_unstable();
        first.map(|f| f.max(self.log_start_offset()))
    }

    /// Whether `producer_id` has a transaction open here.
    pub fn txn_open(&self, producer_id: crate::types::ProducerId) -> bool {
        self.producers.borrow().txns().open_since(producer_id).is_some()
    }

    /// The producers this partition knows (DescribeProducers).
    pub fn active_producers(&self) -> Vec<crate::producer_state::ActiveProducer> {
        self.producers.borrow().active()
    }

    /// The aborted transactions a `read_committed` read of `[from, upper)`
    /// reports, as `(producer id, first offset)`: from the transaction
    /// indexes of the segment holding `from` and those after it, until an
    /// entry shows no later one can overlap the read.
    pub fn aborted_transactions(&self, from: Offset, upper: Offset) -> Vec<(crate::types::ProducerId, Offset)> {
        let mut found = Vec::new();
        let segments = self.segments.borrow();
        let first = segments.partition_point(|s| s.next_offset() <= from);
        for s in segments.range(first..) {
            if crate::txn_index::collect(&s.meta().txn_index, from, upper, &mut found) {
                break;
            }
        }
        found.into_iter().map(|a| (a.producer_id, a.first_offset)).collect()
    }

    /// Every transaction that ended in an abort with its marker in the
    /// log, in marker order.
    pub fn aborted_all(&self) -> Vec<crate::txn_state::AbortedTxn> {
        let segments = self.segments.borrow();
        segments
            .iter()
            .flat_map(|s| s.meta().txn_index.entries().to_vec())
            .collect()
    }
}
