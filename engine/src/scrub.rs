//! The scrubber: re-checks the closed segments of a log for bit rot.
//!
//! A segment closed cleanly is not scanned when the broker opens it (that
//! would make every start read every byte), and reads send its bytes to
//! consumers and followers without looking at them. A byte that changes on
//! the device afterwards would be served as it is. The scrubber reads every
//! closed segment again, at a bounded rate, and runs each batch through the
//! same checks recovery uses ([`crate::scan`]: header, CRC-32C, offsets in
//! order), from the segment's first byte to its end.
//!
//! The first damaged batch found fences the log's range from that batch's
//! offset to the end of its segment ([`Damage`]): a read that starts inside
//! the range fails with [`EngineError::Damaged`] (KAFKA_STORAGE_ERROR at the
//! protocol edge), and a read from below stops before it. Nothing is
//! rewritten here. A follower heals by truncating its log to the damaged
//! offset ([`PartitionLog::truncate_to`] cuts at the damage's known position
//! even when the damaged header no longer parses) and fetching the range
//! again from its leader; truncation, or retention removing the segment,
//! lifts the fence. The fence is kept in memory only: after a restart the
//! next pass finds the damage again.
//!
//! Reads go around the page cache (O_DIRECT) where the device allows it, so
//! that what is checked is what the device holds, and a pass does not evict
//! the consumers' hot data; through the page cache otherwise.

use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::error::{EngineError, Result};
use crate::log::PartitionLog;
use crate::scan::{ScanStop, Scanner};
use crate::segment::Segment;
use crate::segment_reader::SegmentFile;
use crate::types::Offset;

/// Bytes read per request.
pub const SCRUB_CHUNK_BYTES: usize = 1 << 20;

/// A damaged range of a log: from the first batch that fails its checks to
/// the end of the segment holding it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// Base offset of the first damaged batch (the offset after the last
    /// good one: the damaged header may not say it).
    pub offset: Offset,
    /// The offset after the damaged segment (its successor's base).
    pub end: Offset,
    /// The segment holding the damage.
    pub segment_base: Offset,
    /// Byte position of the damaged batch in the segment file.
    pub position: u64,
    pub path: PathBuf,
    pub reason: String,
}

impl Damage {
    pub fn covers(&self, offset: Offset) -> bool {
        self.offset <= offset && offset < self.end
    }
}

/// Spaces reads so that a shard's scrubbing stays at `bytes_per_second`.
pub struct ScrubPacer {
    bytes_per_second: u64,
    started: Instant,
    bytes: u64,
}

impl ScrubPacer {
    pub fn new(bytes_per_second: u64) -> ScrubPacer {
        assert!(bytes_per_second > 0, "a scrub rate of zero scrubs nothing");
        ScrubPacer {
            bytes_per_second,
            started: Instant::now(),
            bytes: 0,
        }
    }

    /// Counts `bytes` read and waits until the rate allows the next read.
    pub async fn spent(&mut self, bytes: u64) {
        self.bytes += bytes;
        let due = Duration::from_secs_f64(self.bytes as f64 / self.bytes_per_second as f64);
        let elapsed = self.started.elapsed();
        if due > elapsed {
            glommio::timer::sleep(due - elapsed).await;
        }
    }
}

/// What one pass over a log found.
#[derive(Debug, Default)]
pub struct ScrubOutcome {
    pub bytes_verified: u64,
    /// Damage found in this pass (none while an earlier find still fences
    /// the log: a log is fenced for one range at a time).
    pub damage: Option<Damage>,
}

impl PartitionLog {
    /// The damaged range that fences reads, if the scrubber found one.
    pub fn damage(&self) -> Option<Damage> {
        self.damage.borrow().clone()
    }

    /// Whether the scrubber fenced a damaged range (cheap: a follower's
    /// fetcher asks every round).
    pub fn is_damaged(&self) -> bool {
        self.damage.borrow().is_some()
    }

    /// Checks every closed segment (all but the active one), pacing reads
    /// with `pacer`, and fences the first damage found.
    pub async fn scrub(&self, pacer: &mut ScrubPacer) -> Result<ScrubOutcome> {
        let mut outcome = ScrubOutcome::default();
        if self.damage.borrow().is_some() {
            return Ok(outcome);
        }
        let closed: Vec<Rc<Segment>> = {
            let segs = self.segments.borrow();
            segs.iter().take(segs.len().saturating_sub(1)).cloned().collect()
        };
        for segment in closed {
            if self.check_usable().is_err() || !self.holds(&segment) {
                continue;
            }
            let truncations = self.truncations.get();
            let (verified, found) = match verify_segment(&segment, pacer).await {
                // Cleaned meanwhile: the cleaned segment is checked next pass.
                Err(EngineError::SegmentReplaced { .. }) => continue,
                other => other?,
            };
            outcome.bytes_verified += verified;
            let Some(found) = found else { continue };
            // The log may have moved on while the segment was read (a
            // truncation rewrites positions): only damage in a segment it
            // still holds, closed, and read while no truncation ran, counts.
            let end = self.segment_after(segment.base()).map(|s| s.base());
            let undisturbed = self.truncations.get() == truncations;
            let (Some(end), true, true) = (end, self.holds(&segment), undisturbed) else {
                continue;
            };
            let damage = Damage { end, ..found };
            tracing::error!(
                tp = %self.tp,
                offset = %damage.offset,
                end = %damage.end,
                path = %damage.path.display(),
                position = damage.position,
                reason = %damage.reason,
                "scrub found damage: the range is no longer served"
            );
            *self.damage.borrow_mut() = Some(damage.clone());
            outcome.damage = Some(damage);
            break;
        }
        Ok(outcome)
    }

    /// Whether `segment` is still one of this log's segments.
    fn holds(&self, segment: &Rc<Segment>) -> bool {
        self.segments.borrow().iter().any(|s| Rc::ptr_eq(s, segment))
    }

    /// Lifts the fence if the damaged segment is gone or was cut below the
    /// damage (truncation, retention).
    pub(crate) fn forget_damage_if_gone(&self) {
        let gone = match self.damage.borrow().as_ref() {
            None => false,
            Some(d) => match self.segment_for(d.segment_base) {
                Some(s) if s.base() == d.segment_base => s.readable_end() <= d.position,
                _ => true,
            },
        };
        if gone {
            tracing::info!(tp = %self.tp, "the damaged range is gone from the log");
            *self.damage.borrow_mut() = None;
        }
    }

    /// Where the fenced damage starts in `segment` (byte position, offset),
    /// if it lies there.
    pub(crate) fn damage_in(&self, segment: &Segment) -> Option<(u64, Offset)> {
        let damage = self.damage.borrow();
        let d = damage.as_ref()?;
        (d.segment_base == segment.base()).then_some((d.position, d.offset))
    }

    /// `upper` lowered to the damaged range's start when a read from `from`
    /// would reach it; an error when `from` lies inside it.
    pub(crate) fn below_damage(&self, from: Offset, upper: Offset) -> Result<Offset> {
        let damage = self.damage.borrow();
        let Some(d) = damage.as_ref() else {
            return Ok(upper);
        };
        if d.covers(from) {
            return Err(EngineError::Damaged {
                tp: self.tp.clone(),
                offset: d.offset,
                path: d.path.clone(),
                reason: d.reason.clone(),
            });
        }
        Ok(if from < d.offset { upper.min(d.offset) } else { upper })
    }
}

/// Reads a closed segment whole and checks its batches; returns the bytes
/// read and the first damage (its `end` still to be filled in).
async fn verify_segment(segment: &Segment, pacer: &mut ScrubPacer) -> Result<(u64, Option<Damage>)> {
    let end = segment.readable_end();
    let path = segment.paths().log.clone();
    let mut scanner = Scanner::new(0, segment.base());
    let mut chunks = ChunkReader::open(segment).await?;
    let mut pos = 0u64;
    while pos < end && !scanner.is_stopped() {
        let want = SCRUB_CHUNK_BYTES.min((end - pos) as usize);
        let chunk = chunks.read(pos, want).await?;
        if chunk.is_empty() {
            break;
        }
        let got = chunk.len().min(want);
        scanner.feed(&chunk[..got], &mut |_, _| {});
        pos += got as u64;
        pacer.spent(got as u64).await;
    }
    let offset = scanner.next_offset();
    let valid_end = scanner.valid_end();
    let reason = match scanner.finish() {
        ScanStop::Invalid { reason, .. } => reason,
        ScanStop::End if valid_end < end => format!("the file ends at byte {pos} of {end}, inside a batch"),
        ScanStop::End => return Ok((pos, None)),
    };
    let damage = Damage {
        offset,
        end: offset,
        segment_base: segment.base(),
        position: valid_end,
        path,
        reason,
    };
    Ok((pos, Some(damage)))
}

/// Reads a segment file with O_DIRECT, or through the page cache where the
/// device or file system refuses direct reads.
enum ChunkReader {
    Direct(glommio::io::DmaFile, Rc<SegmentFile>),
    Buffered(Rc<SegmentFile>),
}

impl ChunkReader {
    async fn open(segment: &Segment) -> Result<ChunkReader> {
        let reader = segment.reader().await?;
        Ok(match glommio::io::DmaFile::open(&segment.paths().log).await {
            Ok(f) => ChunkReader::Direct(f, reader),
            Err(_) => ChunkReader::Buffered(reader),
        })
    }

    async fn read(&mut self, pos: u64, len: usize) -> Result<Vec<u8>> {
        if let ChunkReader::Direct(file, reader) = self {
            match file.read_at_aligned(pos, len.next_multiple_of(4096)).await {
                Ok(chunk) => return Ok(chunk[..chunk.len().min(len)].to_vec()),
                Err(_) => {
                    // A device without direct reads (see `sys::prime_dma_probe`).
                    let reader = reader.clone();
                    *self = ChunkReader::Buffered(reader);
                }
            }
        }
        let (ChunkReader::Direct(_, reader) | ChunkReader::Buffered(reader)) = self;
        reader.read_at(pos, len).await
    }
}
