//! Opening a partition's log, and recovering it after an unclean shutdown.
//!
//! The checkpoint file ([`crate::checkpoint`]) says whether the log was
//! closed cleanly and where its recovery point is: the last position known to
//! be on the device.
//!
//! - **Clean shutdown**: every segment is loaded from its persisted indexes,
//!   checked against the log file, and only the headers after the last index
//!   entry are walked. Nothing is CRC-scanned.
//! - **Unclean shutdown**: segments wholly below the recovery point load as
//!   above. The segment holding the recovery point and every later one are
//!   scanned from their start, CRC by CRC, and their indexes rebuilt. The
//!   first invalid batch ends the log:
//!   - at or after the recovery point it is a torn write: the file is cut
//!     there and later segments are deleted;
//!   - before it, the bytes had been fsynced, so this is corruption, not a
//!     torn write: the partition is refused with an error naming the file
//!     and position, unless the operator asked for [`Repair::Truncate`].
//!
//!   Zeros from the first invalid batch to the end of the last segment's
//!   file (at most [`PADDING_BYTES_MAX`]) are the padding of direct writes,
//!   not damage: the file keeps them and its appender writes over them.
//!
//! When recovery changed nothing (no cut, no segment deleted or created) it
//! writes nothing either: the checkpoint and its recovery point stay as they
//! were, and the bytes after that point (in the kernel, since the process
//! died and not the machine) are synced by the next flush — at the latest
//! the log manager's next checkpoint round, which flushes every log with
//! such a tail — or scanned again by the next recovery. Otherwise recovery fsyncs what it kept, so the
//! recovery point moves to the end. Any index that fails its checks is
//! rebuilt by a scan, in either case; a scanned segment's rebuilt indexes
//! are written when it is next synced (a flush, a roll, a clean close).
//!
//! The leader-epoch cache ([`crate::leader_epoch`]) is loaded from its file.
//! An unclean recovery drops the entries from the first scanned segment on
//! and rebuilds them from the batches the scan validates (the file is kept
//! ahead of the recovery point, so the entries below it are all there).
//! The cache is then cut to the recovered log end and log start. A file
//! that does not parse does not stop the partition from opening: a warning
//! is logged and the cache is rebuilt by walking the batch headers of every
//! segment, as it is when the file is missing from a log that holds data (a
//! directory from before the file existed). The file is rewritten whenever
//! open changed the cache.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use glommio::sync::Semaphore;

use crate::batch_cache::BatchCache;
use crate::checkpoint::{self, Checkpoint, RecoveryPoint, Shutdown};
use crate::clock::Clock;
use crate::error::{EngineError, Result};
use crate::file_cache::{FileCache, FileSlot};
use crate::leader_epoch::LeaderEpochCache;
use crate::log::{FlushState, PartitionLog};
use crate::log_config::LogConfig;
use crate::offsets::LogOffsets;
use crate::scan::ScanStop;
use crate::segment::{self, Segment, SegmentPaths};
use crate::segment_appender::SegmentAppender;
use crate::segment_load::{self, Scanned};
use crate::segment_reader::SegmentFile;
use crate::types::{Offset, TopicPartition};
use crate::write_mode::WriteMode;

/// The most zero bytes after the last batch that recovery leaves in place
/// (direct writes pad the last block; 4 KiB on most devices). A longer run
/// of zeros (a preallocated tail) is cut instead: reading it would cost more
/// than the cut.
pub const PADDING_BYTES_MAX: u64 = 64 << 10;

/// What to do with corruption below the recovery point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repair {
    /// Refuse to open the partition (the default).
    Refuse,
    /// Cut the log at the corruption, losing what follows (`log.recovery.repair=true`).
    Truncate,
}

pub struct OpenParams {
    pub tp: TopicPartition,
    pub dir: PathBuf,
    pub config: LogConfig,
    pub mode: WriteMode,
    pub clock: Rc<dyn Clock>,
    pub repair: Repair,
    /// The shard's budget of cached batches the log's cache shares.
    pub cache_budget: Rc<crate::batch_cache::CacheBudget>,
    /// The shard's open-file cache the log's segment files go through.
    pub file_cache: Rc<FileCache>,
}

/// How much of a segment is known to be on the device.
#[derive(Clone, Copy, Debug)]
enum Durable {
    Whole,
    Below(u64),
}

/// How the log was found, for logs and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenReport {
    pub shutdown: Shutdown,
    pub segments_scanned: usize,
    pub truncated_at: Option<(PathBuf, u64)>,
    pub segments_deleted: usize,
    /// The leader-epoch cache was rebuilt from the segments' batch headers
    /// (its file was missing from a log with data, or did not parse).
    pub epochs_rebuilt: bool,
    /// Zeros found after the last batch of the last segment (the padding of
    /// direct writes, or an extension whose data never came), left in place.
    pub padding_bytes: u64,
    /// Nothing was written: the log was found as its checkpoint describes,
    /// so the recovery point and the checkpoint stay as they were.
    pub untouched: bool,
}

impl PartitionLog {
    /// Opens (creating if needed) the log in `params.dir`.
    pub async fn open(params: OpenParams) -> Result<Rc<PartitionLog>> {
        Ok(PartitionLog::open_with_report(params).await?.0)
    }

    pub async fn open_with_report(params: OpenParams) -> Result<(Rc<PartitionLog>, OpenReport)> {
        let dir = params.dir.clone();
        std::fs::create_dir_all(&dir).map_err(|e| EngineError::io("create partition directory", &dir, e))?;
        crate::sys::prime_dma_probe(&dir).await?;
        crate::clean_swap::finish_interrupted(&dir).await?;
        let bases = list_segments(&dir)?;
        let cp = Checkpoint::load(&dir).await?;
        let first_base = bases.first().copied().unwrap_or(Offset::ZERO);
        let cp = cp.unwrap_or(Checkpoint {
            log_start: first_base,
            recovery: RecoveryPoint {
                offset: first_base,
                segment_base: first_base,
                position: 0,
            },
            shutdown: Shutdown::Unclean,
        });
        let mut report = OpenReport {
            shutdown: cp.shutdown,
            segments_scanned: 0,
            truncated_at: None,
            segments_deleted: 0,
            epochs_rebuilt: false,
            padding_bytes: 0,
            untouched: false,
        };
        check_recovery_segment_present(&dir, &bases, &cp, params.repair)?;
        let (on_disk, mut epoch_file_ok) = match LeaderEpochCache::load(&dir).await {
            Ok(c) => (c, true),
            Err(e @ EngineError::BadLeaderEpochFile { .. }) => {
                tracing::warn!(tp = %params.tp, error = %e, "unreadable leader-epoch checkpoint: rebuilding it from the segments");
                (None, false)
            }
            Err(e) => return Err(e),
        };
        let mut epochs = on_disk.clone().unwrap_or_default();
        let mut segments = load_segments(&params, &bases, &cp, &mut report, &mut epochs).await?;
        let log_start = cp
            .log_start
            .max(segments.front().map(|s| s.base()).unwrap_or(cp.log_start));
        let end_of = |segs: &VecDeque<Rc<Segment>>| segs.back().map(|s| s.next_offset());
        let mut created = false;
        if segments.is_empty() || end_of(&segments).is_some_and(|end| end < log_start) {
            for s in segments.drain(..) {
                s.delete_files().await?;
                report.segments_deleted += 1;
            }
            segments.push_back(Rc::new(
                Segment::create(&dir, log_start, params.mode, &params.file_cache).await?,
            ));
            created = true;
        }
        activate_last(&segments, params.mode, &params.file_cache).await?;
        let active = segments.back().cloned().unwrap_or_else(|| unreachable!());
        let end = active.next_offset();
        let changed = created || report.truncated_at.is_some() || report.segments_deleted > 0;
        let kept = match cp.shutdown {
            Shutdown::Unclean if !changed => kept_recovery_point(&cp.recovery, &segments),
            _ => None,
        };
        if kept.is_none() {
            let mut synced = false;
            for s in segments.iter() {
                if s.needs_sync() {
                    s.sync_all().await?;
                    synced = true;
                }
            }
            if changed || synced {
                checkpoint::sync_dir(&dir).await?;
            }
        }
        let recovery_point = kept.unwrap_or(RecoveryPoint {
            offset: end,
            segment_base: active.base(),
            position: active.size(),
        });
        let durable = recovery_point.offset.max(log_start).min(end);
        if on_disk.is_none() && segments.iter().any(|s| s.size() > 0) {
            if epoch_file_ok {
                tracing::warn!(tp = %params.tp, "no leader-epoch checkpoint for a log with data: rebuilding it from the segments");
            }
            epoch_file_ok = false;
        }
        if !epoch_file_ok {
            epochs = rebuild_epochs(&segments).await?;
            report.epochs_rebuilt = true;
        }
        epochs.truncate_from_end(end);
        epochs.truncate_from_start(log_start);
        if on_disk.as_ref() != Some(&epochs) {
            epochs.store(&dir).await?;
        }
        let mut txn_indexes = crate::producer_scan::TxnIndexes::Loaded;
        for (i, s) in segments.iter().enumerate() {
            let clean = cp.shutdown == Shutdown::Clean;
            if !segment_load::load_txn_index(s, i + 1 == segments.len(), clean).await? {
                txn_indexes = crate::producer_scan::TxnIndexes::Broken;
            }
        }
        let producers = crate::producer_scan::rebuild(&dir, &segments, end, txn_indexes).await?;
        let log = Rc::new(PartitionLog {
            tp: params.tp,
            dir,
            cache: BatchCache::new(params.config.cache_bytes_max, params.cache_budget.clone()),
            config: std::cell::RefCell::new(params.config),
            mode: params.mode,
            file_cache: params.file_cache.clone(),
            flush_state: std::cell::RefCell::new(FlushState {
                appended_records: 0,
                flushed_records: 0,
                last_flush: params.clock.mono_ms(),
                dir_dirty: false,
                rounds: 0,
            }),
            clock: params.clock,
            segments: std::cell::RefCell::new(segments),
            offsets: std::cell::RefCell::new(LogOffsets::new(log_start, durable, end)),
            recovery_point: std::cell::Cell::new(recovery_point),
            poison: std::cell::RefCell::new(None),
            damage: std::cell::RefCell::new(None),
            truncations: std::cell::Cell::new(0),
            closed: std::cell::Cell::new(false),
            turns: crate::fifo::TurnOrder::new(),
            flush_lock: Semaphore::new(1),
            checkpoint_lock: Semaphore::new(1),
            last_checkpoint: std::cell::Cell::new(None),
            epochs: std::cell::RefCell::new(epochs),
            epochs_dirty: std::cell::Cell::new(false),
            retention_limit: std::cell::Cell::new(None),
            epoch_file_lock: Semaphore::new(1),
            recovered_tail: std::cell::Cell::new(durable < end),
            producers: std::cell::RefCell::new(producers),
            end_moved: crate::notify::Notify::new(),
            reserved_moved: crate::notify::Notify::new(),
            cleaner: std::cell::RefCell::new(Default::default()),
        });
        if kept.is_some() && cp.log_start == log_start {
            // The file already says what would be written (a kept recovery
            // point comes only from an unclean checkpoint).
            log.last_checkpoint.set(Some(cp));
            report.untouched = true;
        } else {
            log.write_checkpoint(Shutdown::Unclean).await?;
        }
        tracing::info!(tp = %log.tp, ?report, log_start = %log_start, log_end = %end, "opened log");
        Ok((log, report))
    }
}

/// Base offsets of the `.log` files in `dir`, ascending. Removes leftovers
/// of interrupted operations (a checkpoint temp file, index files whose log
/// is gone).
fn list_segments(dir: &Path) -> Result<Vec<Offset>> {
    let entries = std::fs::read_dir(dir).map_err(|e| EngineError::io("list partition directory", dir, e))?;
    let mut bases = Vec::new();
    let mut indexes = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| EngineError::io("list partition directory", dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(base) = segment::parse_file_name(&name, "log") {
            bases.push(base);
        } else if let Some(base) = ["index", "timeindex", crate::txn_index::EXTENSION]
            .iter()
            .find_map(|ext| segment::parse_file_name(&name, ext))
        {
            indexes.push((base, entry.path()));
        } else if name.ends_with(".tmp") {
            crate::sys::remove_if_present(&entry.path(), "remove leftover file")?;
        }
    }
    bases.sort();
    for (base, path) in indexes {
        if bases.binary_search(&base).is_err() {
            crate::sys::remove_if_present(&path, "remove leftover file")?;
        }
    }
    Ok(bases)
}

/// A segment at or below the recovery point must exist: it was fsynced,
/// directory entry included. Exceptions: one below the first segment was
/// removed by retention after the checkpoint was written, and a recovery
/// point at position 0 claims no bytes of its segment (a truncation that
/// restarts the log writes one before creating that segment).
fn check_recovery_segment_present(dir: &Path, bases: &[Offset], cp: &Checkpoint, repair: Repair) -> Result<()> {
    let rp = cp.recovery;
    if rp.position == 0 {
        return Ok(());
    }
    let Some(first) = bases.first() else {
        if rp.position > 0 && repair == Repair::Refuse {
            return Err(EngineError::CorruptBelowRecoveryPoint {
                path: SegmentPaths::new(dir, rp.segment_base).log,
                position: 0,
                reason: "the segment holding the recovery point is missing".into(),
            });
        }
        return Ok(());
    };
    if rp.segment_base >= *first && bases.binary_search(&rp.segment_base).is_err() && repair == Repair::Refuse {
        return Err(EngineError::CorruptBelowRecoveryPoint {
            path: SegmentPaths::new(dir, rp.segment_base).log,
            position: 0,
            reason: "the segment holding the recovery point is missing".into(),
        });
    }
    Ok(())
}

/// Loads or scans every segment in order, cutting the log at the first
/// invalid batch.
async fn load_segments(
    params: &OpenParams,
    bases: &[Offset],
    cp: &Checkpoint,
    report: &mut OpenReport,
    epochs: &mut LeaderEpochCache,
) -> Result<VecDeque<Rc<Segment>>> {
    let interval = params.config.index_interval_bytes;
    let mut segments = VecDeque::new();
    let mut epochs_cut = false;
    for (i, &base) in bases.iter().enumerate() {
        let paths = SegmentPaths::new(&params.dir, base);
        let reader = SegmentFile::open(&paths.log).await?;
        let durable = match cp.shutdown {
            Shutdown::Clean => Durable::Whole,
            Shutdown::Unclean if base < cp.recovery.segment_base => Durable::Whole,
            Shutdown::Unclean if base == cp.recovery.segment_base => Durable::Below(cp.recovery.position),
            Shutdown::Unclean => Durable::Below(0),
        };
        let trusted = match durable {
            Durable::Whole => segment_load::load_from_indexes(base, &paths, &reader).await?,
            Durable::Below(_) => None,
        };
        let meta = match trusted {
            Some(meta) => meta,
            None => {
                report.segments_scanned += 1;
                if matches!(durable, Durable::Below(_)) && !epochs_cut {
                    // From here on every batch is scanned: the entries of
                    // these segments are rebuilt from what survives.
                    epochs.truncate_from_end(base);
                    epochs_cut = true;
                }
                let scanned = segment_load::scan_segment(base, &paths, &reader, interval, epochs).await?;
                let last = i + 1 == bases.len();
                match settle_scan(params, &paths, &reader, scanned, durable, last, report).await? {
                    (meta, Continue::Yes) => meta,
                    (meta, Continue::No) => {
                        let reader =
                            FileSlot::with_open(params.file_cache.clone(), &paths.log, SegmentFile::open_boxed, reader);
                        segments.push_back(Rc::new(Segment::assemble(base, paths, reader, None, meta)));
                        for &later in &bases[i + 1..] {
                            delete_segment(&params.dir, later).await?;
                            report.segments_deleted += 1;
                        }
                        return Ok(segments);
                    }
                }
            }
        };
        let reader = FileSlot::with_open(params.file_cache.clone(), &paths.log, SegmentFile::open_boxed, reader);
        segments.push_back(Rc::new(Segment::assemble(base, paths, reader, None, meta)));
    }
    Ok(segments)
}

enum Continue {
    Yes,
    No,
}

/// Decides what a scan's stop means: corruption below the durable bound is
/// refused (or repaired); zeros from the stop to the end of the last
/// segment's file are the padding of direct writes (the file is left as it
/// is: its appender writes over them); anything else cuts the file there.
async fn settle_scan(
    params: &OpenParams,
    paths: &SegmentPaths,
    reader: &SegmentFile,
    scanned: Scanned,
    durable: Durable,
    last: bool,
    report: &mut OpenReport,
) -> Result<(crate::segment::SegmentMeta, Continue)> {
    let Scanned { meta, stop, file_size } = scanned;
    let bound = match durable {
        Durable::Whole => file_size,
        Durable::Below(p) => p,
    };
    if let Durable::Below(p) = durable {
        if file_size < p && params.repair == Repair::Refuse {
            return Err(EngineError::CorruptBelowRecoveryPoint {
                path: paths.log.clone(),
                position: file_size,
                reason: format!("file ends at {file_size}, before the recovery point at {p}"),
            });
        }
    }
    match stop {
        ScanStop::End => Ok((meta, Continue::Yes)),
        ScanStop::Invalid { position, reason } => {
            // Only the last segment: a sealed one is cut to its logical
            // size, and a later load checks that its file ends there.
            let padding = last && position >= bound && file_size - position <= PADDING_BYTES_MAX;
            if padding && segment_load::zeros_to_end(reader, position, file_size).await? {
                tracing::debug!(tp = %params.tp, path = %paths.log.display(), position, file_size,
                    "zero padding after the last batch");
                report.padding_bytes = file_size - position;
                return Ok((meta, Continue::Yes));
            }
            if position < bound && params.repair == Repair::Refuse {
                return Err(EngineError::CorruptBelowRecoveryPoint {
                    path: paths.log.clone(),
                    position,
                    reason,
                });
            }
            if position < bound {
                tracing::warn!(tp = %params.tp, path = %paths.log.display(), position, %reason,
                    "repairing corruption below the recovery point: truncating");
            } else {
                tracing::info!(tp = %params.tp, path = %paths.log.display(), position, %reason,
                    "truncating torn tail");
            }
            segment_load::truncate_file(&paths.log, position).await?;
            report.truncated_at = Some((paths.log.clone(), position));
            Ok((meta, Continue::No))
        }
    }
}

async fn delete_segment(dir: &Path, base: Offset) -> Result<()> {
    let paths = SegmentPaths::new(dir, base);
    for p in paths.all() {
        crate::sys::remove_if_present(p, "delete segment file")?;
    }
    Ok(())
}

/// The leader-epoch cache of `segments`, from their batch headers (every
/// batch's epoch and base offset; no CRC checks, these were loaded or
/// scanned already).
async fn rebuild_epochs(segments: &VecDeque<Rc<Segment>>) -> Result<LeaderEpochCache> {
    let mut epochs = LeaderEpochCache::new();
    for s in segments {
        let reader = s.reader().await?;
        let size = s.size();
        let mut pos = 0u64;
        while let Some(info) = reader.batch_at(pos, size).await? {
            epochs.assign(info.leader_epoch, info.base_offset);
            pos += info.size as u64;
        }
    }
    Ok(epochs)
}

/// After an unclean shutdown that recovery had nothing to repair: the
/// checkpoint's recovery point, when it still lies within the log (its
/// segment is there and holds that many bytes). The bytes after it are in
/// the kernel (the process died, not the machine) but not known to be on the
/// device: they stay after the recovery point, to be synced by the next
/// flush or scanned again by the next recovery, instead of being synced
/// here, which for thousands of partitions was most of a restart's time.
fn kept_recovery_point(rp: &RecoveryPoint, segments: &VecDeque<Rc<Segment>>) -> Option<RecoveryPoint> {
    let segment = segments.iter().find(|s| s.base() == rp.segment_base)?;
    let within = segment.size() >= rp.position && segment.base() <= rp.offset && rp.offset <= segment.next_offset();
    within.then_some(*rp)
}

/// Gives the last segment an appender.
async fn activate_last(segments: &VecDeque<Rc<Segment>>, mode: WriteMode, files: &Rc<FileCache>) -> Result<()> {
    let last = segments.back().unwrap_or_else(|| unreachable!());
    if last.appender().is_none() {
        let appender = SegmentAppender::open(&last.paths().log, mode, last.size(), last.next_offset(), files).await?;
        last.set_appender(appender);
    }
    Ok(())
}
