//! The steps of one cleaning of one log that run off the shard (on its
//! blocking pool), so that the shard never waits on them: reading the
//! sealed segments it was given, building the key map from the dirty ones
//! ([`build_map`]) and writing each group of segments ([`groups`]),
//! cleaned, to `.cleaned` files beside them ([`clean_group`]) ([`crate::clean_swap`] names them). It
//! changes nothing the log uses; the shard swaps the results in
//! ([`crate::cleaner`]).
//!
//! Which records a key's latest record makes obsolete: every earlier record
//! of that key, in the clean and the dirty part alike; keyless records
//! (a compacted topic refuses them, but a topic switched from `delete` may
//! hold some) go too, as in Kafka.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::batch::{self, BatchInfo, Validation};
use crate::clean_filter::{self, Kept, WhenEmpty};
use crate::clean_map::KeyMap;
use crate::clean_swap;
use crate::clean_txn::{CleanTxns, MarkerFate};
use crate::error::{EngineError, Result};
use crate::segment::{SegmentMeta, SegmentPaths};
use crate::txn_state::AbortedTxn;
use crate::types::{Offset, ProducerId, TimestampMs};

/// Bytes of file read or written per system call.
const IO_BUFFER_BYTES: usize = 1 << 20;

/// A sealed segment the job reads.
#[derive(Clone, Debug)]
pub struct JobSegment {
    pub base: Offset,
    pub path: PathBuf,
    pub size: u64,
    pub next_offset: Offset,
    /// Its transaction index's entries: the cleaned segment keeps those
    /// whose marker it keeps.
    pub aborted: Vec<AbortedTxn>,
}

/// Everything the job needs, owned (it runs on another thread).
#[derive(Debug)]
pub struct CleanJob {
    pub dir: PathBuf,
    /// Sealed segments from the log start to the end of the cleanable
    /// range, in order.
    pub segments: Vec<JobSegment>,
    /// The first offset not yet cleaned.
    pub dirty_from: Offset,
    pub now: TimestampMs,
    pub delete_retention_ms: i64,
    pub entries_max: usize,
    /// Largest group of segments merged into one (`segment.bytes`).
    pub group_bytes_max: u64,
    pub index_interval_bytes: u64,
    /// Each idempotent producer's last offset: its batch keeps a header.
    pub producer_last: HashMap<ProducerId, Offset>,
    /// Each producer's current epoch: a marker of that epoch after the
    /// producer's last data batch stays (it is what says the epoch, which
    /// fences the producer's older instances, once the state is rebuilt
    /// from the log), as Kafka's cleaner keeps it.
    pub producer_epochs: HashMap<ProducerId, i16>,
    /// `log.cleaner.io.max.bytes.per.second`; `None`: unpaced.
    pub bytes_per_second: Option<u64>,
    /// The log's aborted transactions (every segment's transaction index):
    /// their batches are not mapped, and removed ([`crate::clean_txn`]).
    pub aborted: Vec<AbortedTxn>,
}

/// One group of segments written as one cleaned segment.
#[derive(Debug)]
pub struct CleanedGroup {
    /// The group's first segment's base: the cleaned segment's.
    pub base: Offset,
    /// Bases of every segment it replaces (`base` first).
    pub replaces: Vec<Offset>,
    pub meta: SegmentMeta,
}

/// What writing one group did.
#[derive(Debug, Default, Clone, Copy)]
pub struct GroupStats {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_removed: u64,
}

/// Fills the key map from the dirty segments, stopping after the batch
/// with which it is full. Returns the map and where it ends: the part
/// cleaned by this pass (records after it are judged by the map too, and
/// kept unless it holds a later record of their key, which it cannot).
pub fn build_map(job: &CleanJob, pace: &mut Pace) -> Result<(KeyMap, Offset)> {
    let mut map = KeyMap::new(job.entries_max);
    let mut end = job.dirty_from;
    for (i, seg) in job.segments.iter().enumerate() {
        if seg.next_offset <= job.dirty_from {
            continue;
        }
        let mut batches = BatchFile::open(seg)?;
        while let Some((bytes, info)) = batches.next_batch()? {
            pace.spent(bytes.len() as u64);
            if info.next_offset() <= job.dirty_from || in_aborted_txn(&job.aborted, &info) {
                continue;
            }
            let mut scratch = Vec::new();
            let records = clean_filter::records_of(&bytes, &info, &mut scratch, clean_filter::DECOMPRESSED_BYTES_MAX)
                .map_err(|e| batches.bad(e))?;
            for r in records.iter().flatten() {
                let offset = info.base_offset.plus(i64::from(r.offset_delta));
                if let (Some(key), true) = (r.key, offset >= job.dirty_from) {
                    map.put(key, offset);
                }
            }
            end = info.next_offset();
            if map.is_full() {
                return Ok((map, end));
            }
        }
        end = job.segments.get(i + 1).map_or(seg.next_offset, |next| next.base);
    }
    Ok((map, end))
}

/// The segments below `cleaned_to`, in groups merged while their bytes fit
/// `bytes_max` and their offsets fit the offset index's 32-bit relative
/// offsets.
pub fn groups(segments: &[JobSegment], cleaned_to: Offset, bytes_max: u64) -> Vec<Vec<JobSegment>> {
    let mut out: Vec<Vec<JobSegment>> = Vec::new();
    for s in segments.iter().filter(|s| s.base < cleaned_to).cloned() {
        let fits = out.last().is_some_and(|g| {
            let bytes: u64 = g.iter().map(|x| x.size).sum::<u64>() + s.size;
            bytes <= bytes_max && s.next_offset.0 - g[0].base.0 <= i64::from(i32::MAX)
        });
        match out.last_mut() {
            Some(g) if fits => g.push(s),
            _ => out.push(vec![s]),
        }
    }
    out
}

/// Writes one group, cleaned, to its `.cleaned` files (removed again if
/// this fails).
/// Records at or after `cleaned_to` (the end of what `map` covers) are kept
/// as they are. `txns` is the pass's walk through the transactions, the
/// groups given in order.
pub fn clean_group(
    job: &CleanJob,
    group: &[JobSegment],
    (map, cleaned_to): (&KeyMap, Offset),
    pace: &mut Pace,
    txns: &mut CleanTxns,
) -> Result<(CleanedGroup, GroupStats)> {
    let base = group[0].base;
    let mut stats = GroupStats::default();
    let written = write_group(job, group, (map, cleaned_to), (pace, txns), &mut stats);
    if written.is_err() {
        clean_swap::remove_cleaned(&job.dir, base);
    }
    Ok((written?, stats))
}

fn write_group(
    job: &CleanJob,
    group: &[JobSegment],
    (map, cleaned_to): (&KeyMap, Offset),
    (pace, txns): (&mut Pace, &mut CleanTxns),
    outcome: &mut GroupStats,
) -> Result<CleanedGroup> {
    let base = group[0].base;
    let final_paths = SegmentPaths::new(&job.dir, base);
    let cleaned = clean_swap::cleaned_paths(&job.dir, base);
    let mut meta = crate::segment::Segment::empty_meta(base, &final_paths);
    // Control batches written, in offset order.
    let mut kept_controls = Vec::new();
    let file = File::create(&cleaned.log).map_err(|e| EngineError::io("create cleaned segment", &cleaned.log, e))?;
    let mut out = BufWriter::with_capacity(IO_BUFFER_BYTES, file);
    let horizon = TimestampMs(job.now.0.saturating_add(job.delete_retention_ms));
    for seg in group {
        let mut batches = BatchFile::open(seg)?;
        while let Some((bytes, info)) = batches.next_batch()? {
            pace.spent(bytes.len() as u64);
            outcome.bytes_read += bytes.len() as u64;
            let (kept, removed) =
                judge(job, (map, cleaned_to), txns, horizon, &bytes, &info).map_err(|e| batches.bad(e))?;
            outcome.records_removed += removed;
            let written: &[u8] = match &kept {
                Kept::Whole => &bytes,
                Kept::Rebuilt(b) => b,
                Kept::Dropped => continue,
            };
            let info = batch::validate(written, written.len(), Validation::Stored).map_err(|e| batches.bad(e))?;
            let position = meta.size;
            meta.note_batch(base, &info, position, job.index_interval_bytes);
            if info.is_control {
                kept_controls.push(info.base_offset);
            }
            out.write_all(written)
                .map_err(|e| EngineError::io("write cleaned segment", &cleaned.log, e))?;
            pace.spent(written.len() as u64);
            outcome.bytes_written += written.len() as u64;
        }
    }
    let file = out
        .into_inner()
        .map_err(|e| EngineError::io("write cleaned segment", &cleaned.log, e.into_error()))?;
    file.sync_all()
        .map_err(|e| EngineError::io("fdatasync cleaned segment", &cleaned.log, e))?;
    meta.push_time_entry(base);
    // An aborted transaction stays listed while its marker stays: the
    // cleaner drops the marker only once no batch of the transaction is
    // left, and a consumer told of an abort skips the producer's batches
    // until it meets the marker.
    for a in group.iter().flat_map(|s| &s.aborted) {
        if kept_controls.binary_search(&a.last_offset).is_ok() {
            meta.push_aborted(*a);
        }
    }
    clean_swap::write_indexes(&cleaned, &mut meta)?;
    meta.synced_size = meta.size;
    meta.indexes_durable = true;
    meta.length_durable = true;
    Ok(CleanedGroup {
        base,
        replaces: group.iter().map(|s| s.base).collect(),
        meta,
    })
}

/// What becomes of one batch, and how many records it loses. A batch of an
/// aborted transaction loses all of them; a marker is kept, stamped or
/// removed as [`crate::clean_txn`] says.
fn judge(
    job: &CleanJob,
    (map, cleaned_to): (&KeyMap, Offset),
    txns: &mut CleanTxns,
    horizon: TimestampMs,
    bytes: &[u8],
    info: &BatchInfo,
) -> std::result::Result<(Kept, u64), crate::error::BatchError> {
    if info.is_control {
        let marker = crate::txn_state::marker_if_control(bytes, info);
        let fate = match txns.on_marker(info, marker, job.now) {
            MarkerFate::StampHorizon | MarkerFate::Remove if says_current_epoch(job, info) => MarkerFate::Keep,
            fate => fate,
        };
        return Ok(match fate {
            MarkerFate::Keep => (Kept::Whole, 0),
            MarkerFate::StampHorizon => (Kept::Rebuilt(clean_filter::stamp_control(bytes, info, horizon)?), 0),
            MarkerFate::Remove => (Kept::Dropped, u64::from(info.record_count.max(0) as u32)),
        });
    }
    let aborted = txns.on_data(info);
    let when_empty = match job.producer_last.get(&info.producer_id) {
        Some(last) if *last == info.last_offset() => WhenEmpty::KeepHeader,
        _ => WhenEmpty::Drop,
    };
    let mut removed = 0u64;
    let kept = clean_filter::filter_batch(bytes, info, horizon, when_empty, cleaned_to, &mut |r| {
        let keep = !aborted && retains(map, job.now, info, r);
        removed += u64::from(!keep);
        keep
    })?;
    Ok((kept, removed))
}

/// Whether the marker `info` carries its producer's current epoch with no
/// data batch of the producer after it.
fn says_current_epoch(job: &CleanJob, info: &BatchInfo) -> bool {
    job.producer_epochs.get(&info.producer_id) == Some(&info.producer_epoch)
        && job
            .producer_last
            .get(&info.producer_id)
            .is_none_or(|last| *last < info.base_offset)
}

/// Whether `info` is a data batch of a transaction that ended in an abort.
fn in_aborted_txn(aborted: &[AbortedTxn], info: &BatchInfo) -> bool {
    info.is_transactional
        && !info.is_control
        && aborted.iter().any(|a| {
            a.producer_id == info.producer_id && a.first_offset <= info.base_offset && info.base_offset < a.last_offset
        })
}

/// Whether a record stays: the latest of its key, and not a tombstone past
/// its batch's delete horizon.
fn retains(map: &KeyMap, now: TimestampMs, info: &BatchInfo, r: &clean_filter::RecordView<'_>) -> bool {
    let Some(key) = r.key else { return false };
    if map.get(key).is_some_and(|latest| latest > r.offset) {
        return false;
    }
    !(r.is_tombstone && info.delete_horizon().is_some_and(|h| h <= now))
}

/// The batches of one sealed segment file, in order, each checked.
struct BatchFile<'a> {
    seg: &'a JobSegment,
    reader: BufReader<File>,
    position: u64,
}

impl<'a> BatchFile<'a> {
    fn open(seg: &'a JobSegment) -> Result<BatchFile<'a>> {
        let file = File::open(&seg.path).map_err(|e| EngineError::io("open segment to clean", &seg.path, e))?;
        Ok(BatchFile {
            seg,
            reader: BufReader::with_capacity(IO_BUFFER_BYTES, file),
            position: 0,
        })
    }

    fn bad(&self, e: crate::error::BatchError) -> EngineError {
        EngineError::BadFile {
            path: self.seg.path.clone(),
            reason: format!("cleaning, at byte {}: {e}", self.position),
        }
    }

    /// The next batch, CRC-checked; `None` at the segment's end.
    fn next_batch(&mut self) -> Result<Option<(Vec<u8>, BatchInfo)>> {
        let left = self.seg.size - self.position;
        if left == 0 {
            return Ok(None);
        }
        let mut head = [0u8; batch::LOG_OVERHEAD_BYTES];
        self.read(&mut head)?;
        let size = batch::claimed_size(&head).map_err(|e| self.bad(e))?;
        if size as u64 > left || size < batch::HEADER_BYTES {
            return Err(self.bad(crate::error::BatchError::Invalid {
                reason: "a batch runs past the segment's end",
            }));
        }
        let mut bytes = vec![0u8; size];
        bytes[..head.len()].copy_from_slice(&head);
        self.read(&mut bytes[head.len()..])?;
        let info = batch::validate(&bytes, size, Validation::Stored).map_err(|e| self.bad(e))?;
        self.position += size as u64;
        Ok(Some((bytes, info)))
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<()> {
        self.reader
            .read_exact(buf)
            .map_err(|e| EngineError::io("read segment to clean", &self.seg.path, e))
    }
}

/// Holds the job to `log.cleaner.io.max.bytes.per.second`, reads and
/// writes together, as Kafka's throttler does.
#[derive(Debug)]
pub struct Pace {
    bytes_per_second: Option<u64>,
    started: Instant,
    bytes: u64,
}

impl Pace {
    pub fn new(bytes_per_second: Option<u64>) -> Pace {
        Pace {
            bytes_per_second,
            started: Instant::now(),
            bytes: 0,
        }
    }

    fn spent(&mut self, bytes: u64) {
        let Some(rate) = self.bytes_per_second else { return };
        self.bytes += bytes;
        let due = Duration::from_secs_f64(self.bytes as f64 / rate.max(1) as f64);
        let elapsed = self.started.elapsed();
        if due > elapsed {
            std::thread::sleep(due - elapsed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(base: i64, size: u64, next: i64) -> JobSegment {
        JobSegment {
            base: Offset(base),
            path: PathBuf::new(),
            size,
            next_offset: Offset(next),
            aborted: Vec::new(),
        }
    }

    #[test]
    fn groups_merge_while_bytes_fit() {
        let segs = [seg(0, 40, 10), seg(10, 40, 20), seg(20, 40, 30), seg(30, 10, 40)];
        let g = groups(&segs, Offset(40), 100);
        let bases: Vec<Vec<i64>> = g.iter().map(|g| g.iter().map(|s| s.base.0).collect()).collect();
        assert_eq!(bases, vec![vec![0, 10], vec![20, 30]]);
        assert_eq!(
            groups(&segs, Offset(40), 10).len(),
            4,
            "a segment larger than the limit stands alone"
        );
        assert_eq!(
            groups(&segs, Offset(15), 100).len(),
            1,
            "only segments starting below the cleaned part"
        );
    }
}
