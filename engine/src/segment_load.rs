//! Bringing one segment back from disk: either trust its persisted indexes
//! (after a clean shutdown, or for segments wholly below the recovery point),
//! or scan it with CRC checks and rebuild them.

use std::path::Path;
use std::rc::Rc;

use crate::error::{EngineError, Result};
use crate::index::IndexEntry;
use crate::leader_epoch::LeaderEpochCache;
use crate::offset_index::{OffsetEntry, OffsetIndex};
use crate::scan::{ScanStop, Scanner};
use crate::segment::{Segment, SegmentMeta, SegmentPaths};
use crate::segment_reader::SegmentFile;
use crate::time_index::{TimeEntry, TimeIndex};
use crate::txn_index::{self, TxnIndex};
use crate::types::Offset;

/// Bytes read per request while scanning. Large reads keep io_uring
/// overhead negligible next to the CRC (see the recovery-scan benchmark).
pub const SCAN_CHUNK_BYTES: usize = 4 << 20;

/// Largest index file accepted on load; bigger ones are rebuilt. A 2 GiB
/// segment with an entry every 4 KiB has 4 MiB of offset index.
const INDEX_FILE_BYTES_MAX: u64 = 256 << 20;

/// Loads a segment's metadata from its index files, checking them against
/// the log file and walking the batch headers after the last entry. `None`
/// when the indexes are missing, broken or disagree with the log: the caller
/// then scans.
pub async fn load_from_indexes(
    base: Offset,
    paths: &SegmentPaths,
    reader: &SegmentFile,
) -> Result<Option<SegmentMeta>> {
    let size = reader.size().await?;
    let Ok(offsets) = OffsetIndex::load(paths.index.clone(), INDEX_FILE_BYTES_MAX).await? else {
        return Ok(None);
    };
    let Ok(times) = TimeIndex::load(paths.time_index.clone(), INDEX_FILE_BYTES_MAX).await? else {
        return Ok(None);
    };
    if offsets.last().is_some_and(|e| u64::from(e.position) >= size) {
        return Ok(None);
    }
    let (walk_offset, walk_pos) = match offsets.last() {
        Some(e) => (base.plus(i64::from(e.relative_offset)), u64::from(e.position)),
        None => (base, 0),
    };
    let mut meta = Segment::empty_meta(base, paths);
    meta.offset_index = offsets;
    meta.time_index = times;
    if let Some(e) = meta.time_index.last() {
        meta.largest_timestamp = e.timestamp;
        meta.largest_timestamp_offset = base.plus(i64::from(e.relative_offset));
    }
    meta.size = walk_pos;
    meta.next_offset = walk_offset;
    let mut pos = walk_pos;
    loop {
        let info = match reader.batch_at(pos, size).await {
            Ok(Some(info)) => info,
            Ok(None) => break,
            Err(EngineError::BadFile { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        if info.base_offset < meta.next_offset {
            return Ok(None);
        }
        if info.max_timestamp > meta.largest_timestamp {
            meta.largest_timestamp = info.max_timestamp;
            meta.largest_timestamp_offset = info.base_offset;
        }
        meta.bytes_since_index += info.size as u64;
        meta.size += info.size as u64;
        meta.next_offset = info.next_offset();
        pos += info.size as u64;
    }
    let time_ok = meta
        .time_index
        .last()
        .is_none_or(|e| base.plus(i64::from(e.relative_offset)) < meta.next_offset.max(base.plus(1)));
    if meta.size != size || !time_ok {
        return Ok(None);
    }
    meta.synced_size = size;
    meta.indexes_durable = true;
    Ok(Some(meta))
}

/// Loads a segment's transaction index file (a missing one is empty).
/// Returns false, leaving the index empty and its file to be cut, when the
/// file does not parse or names a marker outside the segment (past its
/// end only the last segment may: a torn tail, cut when the log opens).
/// After an unclean shutdown (`clean` false) a file read back may be only
/// in the page cache: it is fsynced before the next producer-state
/// snapshot.
pub async fn load_txn_index(segment: &Segment, last: bool, clean: bool) -> Result<bool> {
    let path = segment.paths().txn_index.clone();
    let reason = match crate::index::read_whole(&path, txn_index::FILE_BYTES_MAX).await {
        Ok(None) => return Ok(true),
        Ok(Some(bytes)) => match TxnIndex::decode(path.clone(), &bytes) {
            Ok(index) => {
                let (base, next) = (segment.base(), segment.next_offset());
                let outside = index
                    .entries()
                    .iter()
                    .find(|a| a.last_offset < base || (!last && a.last_offset >= next));
                match outside {
                    None => {
                        let mut meta = segment.meta_mut();
                        meta.txn_index = index;
                        meta.txn_index_durable = clean;
                        return Ok(true);
                    }
                    Some(a) => format!("marker at {} outside the segment [{base}, {next})", a.last_offset),
                }
            }
            Err(reason) => reason,
        },
        Err(EngineError::BadFile { reason, .. }) => reason,
        Err(e) => return Err(e),
    };
    tracing::warn!(path = %path.display(), %reason, "unreadable transaction index: rebuilt from the log");
    let mut meta = segment.meta_mut();
    meta.txn_index = TxnIndex::rebuilding(path);
    meta.txn_index_durable = false;
    Ok(false)
}

/// What scanning a segment found.
pub struct Scanned {
    pub meta: SegmentMeta,
    pub stop: ScanStop,
    /// Size of the file as found (before any truncation).
    pub file_size: u64,
}

/// Scans a segment from its start, validating every batch, and rebuilds its
/// metadata and indexes for the valid prefix. Memory use does not depend on
/// what the file claims.
///
/// The file is read with O_DIRECT in `SCAN_CHUNK_BYTES` requests, the next
/// one in flight while the current one is checked: after direct-mode writes
/// the page cache is cold, and buffered reads of it ran at a quarter of the
/// disk's speed (see `docs/benchmarks.md`).
///
/// Every valid batch is also recorded in `epochs` (its epoch starting at its
/// base offset, see [`LeaderEpochCache::assign`]).
pub async fn scan_segment(
    base: Offset,
    paths: &SegmentPaths,
    reader: &SegmentFile,
    interval: u64,
    epochs: &mut LeaderEpochCache,
) -> Result<Scanned> {
    let file_size = reader.size().await?;
    let mut meta = Segment::empty_meta(base, paths);
    meta.offset_index = OffsetIndex::rebuilding(paths.index.clone());
    meta.time_index = TimeIndex::rebuilding(paths.time_index.clone());
    let mut scanner = Scanner::new(0, base);
    let file = Rc::new(
        glommio::io::DmaFile::open(&paths.log)
            .await
            .map_err(|e| EngineError::io("open segment for scanning", &paths.log, e))?,
    );
    let read = |pos: u64| {
        let file = file.clone();
        glommio::spawn_local(async move { file.read_at_aligned(pos, SCAN_CHUNK_BYTES).await })
    };
    let mut pos = 0u64;
    let mut next = (file_size > 0).then(|| read(0));
    while let Some(task) = next.take() {
        let chunk = match task.await {
            Ok(chunk) => chunk,
            Err(e) => {
                let refused = matches!(&e, glommio::GlommioError::EnhancedIoError { source, .. }
                    if source.raw_os_error() == Some(libc::EOPNOTSUPP));
                if !refused {
                    return Err(EngineError::io("read segment for scanning", &paths.log, e));
                }
                // glommio chose a polled ring for this file on a device
                // without poll queues (see `sys::prime_dma_probe`): read the
                // rest through the page cache.
                scan_buffered(reader, pos, file_size, &mut scanner, &mut meta, base, interval, epochs).await?;
                break;
            }
        };
        let ahead = pos + SCAN_CHUNK_BYTES as u64;
        if ahead < file_size && !scanner.is_stopped() {
            next = Some(read(ahead));
        }
        let wanted = SCAN_CHUNK_BYTES.min((file_size - pos) as usize);
        let valid = chunk.len().min(wanted);
        scanner.feed(&chunk[..valid], &mut |at, info| {
            meta.note_batch(base, info, at, interval);
            epochs.assign(info.leader_epoch, info.base_offset);
        });
        if valid < wanted {
            // A short read before the end of the file: finish through the
            // page cache rather than take the rest for a torn tail.
            drop(next.take());
            scan_buffered(
                reader,
                pos + valid as u64,
                file_size,
                &mut scanner,
                &mut meta,
                base,
                interval,
                epochs,
            )
            .await?;
            break;
        }
        pos = ahead;
    }
    let stop = scanner.finish();
    Ok(Scanned { meta, stop, file_size })
}

/// Feeds `scanner` the file from `pos` to `file_size` with buffered reads.
#[allow(clippy::too_many_arguments)]
async fn scan_buffered(
    reader: &SegmentFile,
    mut pos: u64,
    file_size: u64,
    scanner: &mut Scanner,
    meta: &mut SegmentMeta,
    base: Offset,
    interval: u64,
    epochs: &mut LeaderEpochCache,
) -> Result<()> {
    while pos < file_size && !scanner.is_stopped() {
        let want = SCAN_CHUNK_BYTES.min((file_size - pos) as usize);
        // Start the kernel reading the next chunks while this one is checked.
        // SAFETY: posix_fadvise takes no pointers; a failure only loses the hint.
        unsafe {
            libc::posix_fadvise(
                reader.fd(),
                (pos + want as u64) as libc::off_t,
                (2 * SCAN_CHUNK_BYTES) as libc::off_t,
                libc::POSIX_FADV_WILLNEED,
            )
        };
        let chunk = reader.read_at(pos, want).await?;
        if chunk.is_empty() {
            break;
        }
        scanner.feed(&chunk, &mut |at, info| {
            meta.note_batch(base, info, at, interval);
            epochs.assign(info.leader_epoch, info.base_offset);
        });
        pos += chunk.len() as u64;
    }
    Ok(())
}

/// Bytes read per request when checking a file's tail for zeros.
const ZERO_CHECK_CHUNK_BYTES: usize = 1 << 20;

/// Whether every byte of the file from `pos` to `file_size` is zero: what
/// an active segment written in direct mode holds after its last batch (its
/// last block is written whole, and a preallocated file is extended ahead).
pub async fn zeros_to_end(reader: &SegmentFile, pos: u64, file_size: u64) -> Result<bool> {
    let mut at = pos;
    while at < file_size {
        let want = ZERO_CHECK_CHUNK_BYTES.min((file_size - at) as usize);
        let chunk = reader.read_at(at, want).await?;
        if chunk.is_empty() {
            return Ok(false);
        }
        if chunk.iter().any(|&b| b != 0) {
            return Ok(false);
        }
        at += chunk.len() as u64;
    }
    Ok(true)
}

/// Cuts a segment's log file at `len` and makes the cut durable.
pub async fn truncate_file(path: &Path, len: u64) -> Result<()> {
    let f = glommio::io::OpenOptions::new()
        .write(true)
        .buffered_open(path)
        .await
        .map_err(|e| EngineError::io("open segment to truncate", path, e))?;
    crate::sys::truncate_fd(std::os::unix::io::AsRawFd::as_raw_fd(&f), len, path)?;
    f.fdatasync()
        .await
        .map_err(|e| EngineError::io("fdatasync truncated segment", path, e))?;
    f.close().await.map_err(|e| EngineError::io("close segment", path, e))
}

// The loaders rely on these entry sizes when bounding index files.
const _: () = assert!(OffsetEntry::BYTES == 8);
const _: () = assert!(TimeEntry::BYTES == 12);
const _: () = assert!(<crate::txn_state::AbortedTxn as IndexEntry>::BYTES == 34);
