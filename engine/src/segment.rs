//! One segment: a `.log` file of batches plus its offset and time indexes.
//!
//! # Files
//!
//! A segment based at offset B is three files in the partition directory,
//! named after B in 20 zero-padded digits, as in Kafka:
//! `00000000000000000000.log` (batches, back to back, see [`crate::batch`]),
//! `.index` ([`crate::offset_index`]) and `.timeindex` ([`crate::time_index`]),
//! and once it holds an ABORT marker `.txnindex` ([`crate::txn_index`]).
//!
//! The *active* segment (the last) has an appender; all others are *sealed*:
//! read-only, their indexes persisted and complete.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use glommio::sync::Semaphore;

use crate::batch::BatchInfo;
use crate::error::{EngineError, Result};
use crate::file_cache::{FileCache, FileSlot};
use crate::index::{self, IndexEntry};
use crate::offset_index::{self, OffsetEntry, OffsetIndex};
use crate::segment_appender::SegmentAppender;
use crate::segment_reader::SegmentFile;
use crate::time_index::{self, TimeEntry, TimeIndex};
use crate::txn_index::{self, TxnIndex};
use crate::types::{Offset, TimestampMs};
use crate::write_mode::WriteMode;

/// File name stem of a segment: its base offset in 20 digits.
pub fn file_stem(base: Offset) -> String {
    format!("{:020}", base.0)
}

/// Parses `<20 digits>.<ext>` back into a base offset.
pub fn parse_file_name(name: &str, ext: &str) -> Option<Offset> {
    let stem = name.strip_suffix(ext)?.strip_suffix('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok().map(Offset)
}

#[derive(Clone, Debug)]
pub struct SegmentPaths {
    pub log: PathBuf,
    pub index: PathBuf,
    pub time_index: PathBuf,
    pub txn_index: PathBuf,
}

impl SegmentPaths {
    pub fn new(dir: &Path, base: Offset) -> SegmentPaths {
        let stem = file_stem(base);
        SegmentPaths {
            log: dir.join(format!("{stem}.log")),
            index: dir.join(format!("{stem}.index")),
            time_index: dir.join(format!("{stem}.timeindex")),
            txn_index: dir.join(format!("{stem}.{}", txn_index::EXTENSION)),
        }
    }

    /// Every file of the segment (the transaction index may not exist).
    pub fn all(&self) -> [&PathBuf; 4] {
        [&self.log, &self.index, &self.time_index, &self.txn_index]
    }
}

/// What a segment knows about its contents.
#[derive(Debug)]
pub struct SegmentMeta {
    /// Logical size: bytes of whole batches, including reserved ones.
    pub size: u64,
    /// Offset after the last batch.
    pub next_offset: Offset,
    /// Largest batch max timestamp, and the base offset of the batch where it
    /// first appeared.
    pub largest_timestamp: TimestampMs,
    pub largest_timestamp_offset: Offset,
    pub bytes_since_index: u64,
    /// When the first batch was appended in this run (for `segment.ms`).
    pub first_append: Option<TimestampMs>,
    /// Bytes known to be on the device.
    pub synced_size: u64,
    /// The index files on the device match what was last persisted.
    pub indexes_durable: bool,
    /// The log file's length on the device is its logical size: false once
    /// sealing cut the file (the zero padding of direct writes, a
    /// preallocated tail), until an fdatasync has made the cut durable. A
    /// cut lost to a power failure would leave zeros below the recovery
    /// point, which recovery refuses.
    pub length_durable: bool,
    pub offset_index: OffsetIndex,
    pub time_index: TimeIndex,
    pub txn_index: TxnIndex,
    /// The transaction index file on the device matches memory (written
    /// and fsynced): required before a producer-state snapshot covers it.
    pub txn_index_durable: bool,
}

impl SegmentMeta {
    fn empty(base: Offset, paths: &SegmentPaths) -> SegmentMeta {
        SegmentMeta {
            size: 0,
            next_offset: base,
            largest_timestamp: TimestampMs::NONE,
            largest_timestamp_offset: base,
            bytes_since_index: 0,
            first_append: None,
            synced_size: 0,
            indexes_durable: false,
            length_durable: true,
            offset_index: OffsetIndex::new(paths.index.clone()),
            time_index: TimeIndex::new(paths.time_index.clone()),
            txn_index: TxnIndex::new(paths.txn_index.clone()),
            txn_index_durable: true,
        }
    }

    /// Records a transaction that ended in an abort with its marker here.
    pub fn push_aborted(&mut self, aborted: crate::txn_state::AbortedTxn) {
        assert!(aborted.last_offset < self.next_offset, "marker past the segment's end");
        self.txn_index.push(aborted);
        self.txn_index_durable = false;
    }

    /// Cuts the transaction index's entries of markers at or past `offset`.
    pub fn cut_aborted_from(&mut self, offset: Offset) {
        let before = self.txn_index.entries().len();
        txn_index::cut_from(&mut self.txn_index, offset);
        if self.txn_index.entries().len() != before {
            self.txn_index_durable = false;
        }
    }

    /// Accounts for one batch at `position` (appended or found by a scan):
    /// offsets, timestamps, and an index entry when `interval` bytes have
    /// passed since the last one.
    pub fn note_batch(&mut self, base: Offset, info: &BatchInfo, position: u64, interval: u64) {
        assert!(
            position == self.size,
            "batch at {position} but segment ends at {}",
            self.size
        );
        assert!(info.base_offset >= self.next_offset, "batch offsets go backwards");
        if info.max_timestamp > self.largest_timestamp {
            self.largest_timestamp = info.max_timestamp;
            self.largest_timestamp_offset = info.base_offset;
        }
        if self.bytes_since_index > interval {
            self.offset_index.push(OffsetEntry {
                relative_offset: offset_index::relative(base, info.base_offset),
                position: u32::try_from(position).unwrap_or(u32::MAX),
            });
            self.push_time_entry(base);
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += info.size as u64;
        self.size += info.size as u64;
        self.next_offset = info.next_offset();
    }

    /// Adds a time index entry for the largest timestamp if it grew.
    pub fn push_time_entry(&mut self, base: Offset) {
        let grew = match time_index::largest(&self.time_index) {
            Some(ts) => self.largest_timestamp > ts,
            None => self.largest_timestamp.0 >= 0,
        };
        if grew {
            self.time_index.push(TimeEntry {
                timestamp: self.largest_timestamp,
                relative_offset: offset_index::relative(base, self.largest_timestamp_offset),
            });
        }
    }

    pub fn index_bytes(&self) -> u64 {
        (self.offset_index.entries().len() * OffsetEntry::BYTES) as u64
    }
}

pub struct Segment {
    base: Offset,
    paths: SegmentPaths,
    /// The `.log` file's read descriptor, opened on demand by the shard's
    /// file cache.
    reader: FileSlot<SegmentFile>,
    appender: RefCell<Option<Rc<SegmentAppender>>>,
    meta: RefCell<SegmentMeta>,
    /// Serialises index-file writes (persist, truncate).
    index_lock: Semaphore,
    /// The cleaner put another segment in this one's place: its path now
    /// names that segment's file, so this one never opens it.
    retired: std::cell::Cell<bool>,
    /// Its files are being (or were) deleted.
    deleted: std::cell::Cell<bool>,
}

impl Segment {
    /// Creates a new, empty, active segment.
    pub async fn create(dir: &Path, base: Offset, mode: WriteMode, files: &Rc<FileCache>) -> Result<Segment> {
        let paths = SegmentPaths::new(dir, base);
        for p in paths.all() {
            if p.exists() {
                return Err(EngineError::BadFile {
                    path: p.clone(),
                    reason: "segment file already exists".into(),
                });
            }
        }
        let appender = SegmentAppender::create(&paths.log, mode, base, files).await?;
        // Empty index files from the start: a segment whose index file is
        // missing later is known to need a rebuild.
        for p in [&paths.index, &paths.time_index] {
            let f = index::open_for_write(p).await?;
            f.close().await.map_err(|e| EngineError::io("close index", p, e))?;
        }
        let reader = FileSlot::closed(files.clone(), &paths.log, SegmentFile::open_boxed);
        let meta = SegmentMeta::empty(base, &paths);
        Ok(Segment::assemble(base, paths, reader, Some(appender), meta))
    }

    /// Wraps files found on disk, with metadata from recovery or from the
    /// persisted indexes. `appender` is set for the active segment.
    pub fn assemble(
        base: Offset,
        paths: SegmentPaths,
        reader: FileSlot<SegmentFile>,
        appender: Option<SegmentAppender>,
        meta: SegmentMeta,
    ) -> Segment {
        Segment {
            base,
            paths,
            reader,
            appender: RefCell::new(appender.map(Rc::new)),
            meta: RefCell::new(meta),
            index_lock: Semaphore::new(1),
            retired: std::cell::Cell::new(false),
            deleted: std::cell::Cell::new(false),
        }
    }

    /// Fresh metadata for a segment at `base`, to be filled by a scan.
    pub fn empty_meta(base: Offset, paths: &SegmentPaths) -> SegmentMeta {
        SegmentMeta::empty(base, paths)
    }

    pub fn base(&self) -> Offset {
        self.base
    }

    pub fn paths(&self) -> &SegmentPaths {
        &self.paths
    }

    /// The read descriptor, reopened if the file cache closed it. Holding
    /// the `Rc` keeps it open.
    pub async fn reader(&self) -> Result<Rc<SegmentFile>> {
        let replaced = || EngineError::SegmentReplaced {
            path: self.paths.log.clone(),
        };
        if self.retired.get() {
            return Err(replaced());
        }
        let file = self.reader.get().await?;
        // Retired while the open ran: it may have opened the cleaned file
        // now at this path, which this segment's positions do not fit.
        if self.retired.get() {
            self.reader.close();
            return Err(replaced());
        }
        Ok(file)
    }

    /// Takes the segment out of service for a cleaned one at its path:
    /// its descriptor closes (readers holding it keep it) and it never
    /// opens its path again.
    pub fn retire(&self) {
        self.retired.set(true);
        self.reader.close();
    }

    pub fn appender(&self) -> Option<Rc<SegmentAppender>> {
        self.appender.borrow().clone()
    }

    /// Makes a sealed segment active again (after a truncation into it).
    pub fn set_appender(&self, appender: SegmentAppender) {
        *self.appender.borrow_mut() = Some(Rc::new(appender));
    }

    /// Bytes readers may see: what is in the kernel.
    pub fn readable_end(&self) -> u64 {
        match self.appender() {
            Some(a) => a.written_end(),
            None => self.size(),
        }
    }

    pub fn meta(&self) -> std::cell::Ref<'_, SegmentMeta> {
        self.meta.borrow()
    }

    pub fn meta_mut(&self) -> std::cell::RefMut<'_, SegmentMeta> {
        self.meta.borrow_mut()
    }

    pub fn size(&self) -> u64 {
        self.meta.borrow().size
    }

    pub fn next_offset(&self) -> Offset {
        self.meta.borrow().next_offset
    }

    pub fn largest_timestamp(&self) -> TimestampMs {
        self.meta.borrow().largest_timestamp
    }

    pub fn is_empty(&self) -> bool {
        self.size() == 0
    }

    /// Offset → `(offset, position)` of the nearest indexed batch at or before it.
    pub fn index_lookup(&self, target: Offset) -> (Offset, u64) {
        offset_index::lookup(&self.meta.borrow().offset_index, self.base, target)
    }

    pub fn index_lookup_position(&self, position: u64) -> (Offset, u64) {
        offset_index::lookup_position(&self.meta.borrow().offset_index, self.base, position)
    }

    /// Where to start walking for a timestamp: `(offset, position)`.
    pub fn time_lookup(&self, target: TimestampMs) -> (Offset, u64) {
        let start = time_index::lookup(&self.meta.borrow().time_index, self.base, target);
        self.index_lookup(start)
    }

    /// Makes this segment read-only: writes what is reserved, trims the file,
    /// records the final time index entry and persists both indexes.
    pub async fn seal(&self) -> Result<()> {
        // Readers go by the appender's written end until it is gone, so it
        // is dropped only once everything is written.
        if let Some(appender) = self.appender() {
            let end = appender.seal().await?;
            assert!(end == self.size(), "sealed size differs from the segment's size");
            self.meta.borrow_mut().length_durable = false;
            self.appender.borrow_mut().take();
        }
        self.meta.borrow_mut().push_time_entry(self.base);
        self.persist_indexes().await
    }

    /// Writes the index entries the files lack (and cuts them after a
    /// truncation). No fsync. The log never truncates a segment's indexes
    /// while this runs (both happen under its flush lock).
    pub async fn persist_indexes(&self) -> Result<()> {
        let _permit = self
            .index_lock
            .acquire_permit(1)
            .await
            .map_err(|e| EngineError::io("wait for index lock", &self.paths.index, e))?;
        let plan = self.meta.borrow().offset_index.plan_persist();
        if let Some(plan) = plan {
            self.meta.borrow_mut().indexes_durable = false;
            index::write_plan(&self.paths.index, &plan).await?;
            self.meta.borrow_mut().offset_index.mark_persisted(&plan);
        }
        let plan = self.meta.borrow().time_index.plan_persist();
        if let Some(plan) = plan {
            self.meta.borrow_mut().indexes_durable = false;
            index::write_plan(&self.paths.time_index, &plan).await?;
            self.meta.borrow_mut().time_index.mark_persisted(&plan);
        }
        self.persist_txn_index().await
    }

    /// The segment left the log: the cleaner put another in its place, or
    /// its files are deleted. Its paths may name another segment's files,
    /// or none.
    fn gone(&self) -> bool {
        self.retired.get() || self.deleted.get()
    }

    /// Brings the transaction index file in line with memory (the caller
    /// holds the index lock). A producer-state snapshot syncs these files
    /// without the flush lock, so a cleaner swap or a deletion may run
    /// while it waits: nothing is written once the segment is gone. Both
    /// retire (after its renames) and deletion (before its unlinks) mark the
    /// segment without awaiting, so a file opened while it was still in
    /// the log is its own (or an unlinked one).
    async fn persist_txn_index(&self) -> Result<()> {
        let plan = self.meta.borrow().txn_index.plan_persist();
        let Some(plan) = plan else { return Ok(()) };
        if self.gone() {
            return Ok(());
        }
        let path = &self.paths.txn_index;
        self.meta.borrow_mut().txn_index_durable = false;
        let file = index::open_for_write(path).await?;
        if self.gone() {
            let _ = file.close().await;
            if self.deleted.get() {
                // Opened after the unlink, it created an orphan.
                crate::sys::remove_if_present(path, "remove transaction index")?;
            }
            return Ok(());
        }
        index::write_plan_to(file, path, &plan).await?;
        self.meta.borrow_mut().txn_index.mark_persisted(&plan);
        Ok(())
    }

    /// Writes and fsyncs the transaction index if the device lacks some of
    /// it (before a producer-state snapshot that covers its entries).
    pub async fn sync_txn_index(&self) -> Result<()> {
        if self.meta.borrow().txn_index_durable {
            return Ok(());
        }
        {
            let _permit = self
                .index_lock
                .acquire_permit(1)
                .await
                .map_err(|e| EngineError::io("wait for index lock", &self.paths.txn_index, e))?;
            self.persist_txn_index().await?;
        }
        self.sync_txn_file().await
    }

    async fn sync_txn_file(&self) -> Result<()> {
        let p = &self.paths.txn_index;
        if self.gone() {
            return Ok(());
        }
        let opened = glommio::io::OpenOptions::new().write(true).buffered_open(p).await;
        match opened {
            Ok(f) if !self.gone() => {
                f.fdatasync()
                    .await
                    .map_err(|e| EngineError::io("fdatasync transaction index", p, e))?;
                f.close()
                    .await
                    .map_err(|e| EngineError::io("close transaction index", p, e))?;
            }
            Ok(f) => {
                let _ = f.close().await;
                return Ok(());
            }
            Err(e) => {
                let e: std::io::Error = e.into();
                // No file: an index with no entry yet.
                if e.kind() != std::io::ErrorKind::NotFound {
                    return Err(EngineError::io("open transaction index", p, e));
                }
            }
        }
        self.meta.borrow_mut().txn_index_durable = true;
        Ok(())
    }

    /// fdatasync of the log file. Returns the size now on the device: what
    /// was in the kernel when the sync started.
    pub async fn sync_data(&self) -> Result<u64> {
        let size = match self.appender() {
            Some(a) => a.written_end(),
            None => self.size(),
        };
        // A cut made while this sync runs is not covered by it.
        let cut_before = !self.meta.borrow().length_durable;
        self.reader().await?.sync().await?;
        let mut m = self.meta.borrow_mut();
        m.synced_size = m.synced_size.max(size);
        if cut_before {
            m.length_durable = true;
        }
        Ok(size)
    }

    /// True when a sealed segment still has data or index bytes that are not
    /// on the device.
    pub fn needs_sync(&self) -> bool {
        let m = self.meta.borrow();
        m.synced_size < m.size || !m.indexes_durable || !m.length_durable || !m.txn_index_durable
    }

    /// Persists the indexes, then fdatasyncs the log file and the index files.
    pub async fn sync_all(&self) -> Result<u64> {
        self.persist_indexes().await?;
        let size = self.sync_data().await?;
        for p in [&self.paths.index, &self.paths.time_index] {
            let f = index::open_for_write(p).await?;
            f.fdatasync()
                .await
                .map_err(|e| EngineError::io("fdatasync index", p, e))?;
            f.close().await.map_err(|e| EngineError::io("close index", p, e))?;
        }
        self.sync_txn_file().await?;
        self.meta.borrow_mut().indexes_durable = true;
        Ok(size)
    }

    /// Removes the segment's files. Readers holding the `SegmentFile` keep
    /// reading until they drop it.
    pub async fn delete_files(&self) -> Result<()> {
        self.deleted.set(true);
        self.reader.close();
        if let Some(a) = self.appender() {
            a.close_file();
        }
        for p in self.paths.all() {
            crate::sys::remove_if_present(p, "delete segment file")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_round_trip() {
        assert_eq!(file_stem(Offset(42)), "00000000000000000042");
        assert_eq!(parse_file_name("00000000000000000042.log", "log"), Some(Offset(42)));
        assert_eq!(parse_file_name("00000000000000000042.index", "log"), None);
        assert_eq!(parse_file_name("0000000000000000042.log", "log"), None);
        assert_eq!(parse_file_name("0000000000000000004x.log", "log"), None);
    }

    /// Sealing cuts the file (here the preallocated tail): the segment then
    /// needs an fdatasync even though its data and indexes were synced.
    #[test]
    fn a_sealed_cut_needs_a_sync() {
        let dir = tempfile::tempdir().expect("tempdir");
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .make()
            .expect("executor")
            .run(async {
                let seg = Segment::create(
                    dir.path(),
                    Offset(0),
                    WriteMode::DirectPreallocated,
                    &FileCache::unbounded(),
                )
                .await
                .expect("create");
                let appender = seg.appender().expect("active");
                let end = appender.reserve(bytes::Bytes::from(vec![7u8; 1000]), Offset(1));
                appender.write_through(end).await.expect("write");
                seg.meta_mut().size = end;
                seg.sync_all().await.expect("sync");
                assert!(!seg.needs_sync(), "data and indexes synced");
                let on_disk = std::fs::metadata(&seg.paths().log).expect("stat").len();
                assert!(on_disk > end, "preallocated beyond the data");
                seg.seal().await.expect("seal");
                assert_eq!(std::fs::metadata(&seg.paths().log).expect("stat").len(), end);
                assert!(seg.needs_sync(), "the cut is not durable yet");
                seg.sync_all().await.expect("sync");
                assert!(!seg.needs_sync());
            });
    }
}
