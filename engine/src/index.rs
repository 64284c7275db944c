//! A sparse, sorted, fixed-width index kept in memory and mirrored to a file.
//!
//! A segment's indexes (`.index`, `.timeindex`, `.txnindex`) are instances:
//! a file of fixed-size big-endian entries with no header and no checksum,
//! sorted. No checksum is needed because an index is derived data: after an
//! unclean shutdown the offset and time indexes of every segment that
//! recovery scans are rebuilt from the log, and any that fails the sanity
//! checks on open (size not a multiple of the entry size, not sorted, an
//! entry past the end of the log file) is rebuilt the same way. (The
//! transaction index is rebuilt with the producer state instead: see
//! [`crate::txn_index`].)
//!
//! The file is append-only between truncations: entries are written when a
//! segment is flushed, sealed or closed, so the file is always a prefix of the
//! in-memory entries (`persisted` counts that prefix).

use std::path::{Path, PathBuf};

use glommio::io::{BufferedFile, OpenOptions};

use crate::error::{EngineError, Result};

/// One fixed-width entry of an index file.
pub trait IndexEntry: Copy + std::fmt::Debug {
    /// Encoded size in bytes.
    const BYTES: usize;
    fn encode(&self, out: &mut Vec<u8>);
    /// Decodes exactly `Self::BYTES` bytes; `Err` says why an entry that
    /// cannot be is refused.
    fn decode(bytes: &[u8]) -> std::result::Result<Self, String>;
    /// True when `next` may follow `self` in a sorted index.
    fn precedes(&self, next: &Self) -> bool;
}

#[derive(Debug)]
pub struct SparseIndex<E: IndexEntry> {
    entries: Vec<E>,
    /// How many leading entries are in the file, identical to memory.
    persisted: usize,
    /// How many entries the file holds (`None`: unknown, cut it to `persisted`).
    file_entries: Option<usize>,
    path: PathBuf,
}

/// The file writes that bring an index file in line with memory.
#[derive(Debug)]
pub struct PersistPlan {
    /// Cut the file to this many bytes first.
    pub truncate_bytes: Option<u64>,
    pub write_pos: u64,
    pub bytes: Vec<u8>,
    /// Entries in the file once the plan is carried out.
    pub entries_after: usize,
}

impl<E: IndexEntry> SparseIndex<E> {
    pub fn new(path: PathBuf) -> SparseIndex<E> {
        SparseIndex {
            entries: Vec::new(),
            persisted: 0,
            file_entries: Some(0),
            path,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn entries(&self) -> &[E] {
        &self.entries
    }

    pub fn last(&self) -> Option<&E> {
        self.entries.last()
    }

    pub fn push(&mut self, entry: E) {
        if let Some(last) = self.entries.last() {
            assert!(last.precedes(&entry), "index {:?}: {entry:?} after {last:?}", self.path);
        }
        self.entries.push(entry);
    }

    /// The last entry for which `is_at_or_before` holds, given that it holds
    /// for a prefix of the entries.
    pub fn floor_by(&self, is_at_or_before: impl Fn(&E) -> bool) -> Option<&E> {
        let n = self.entries.partition_point(is_at_or_before);
        n.checked_sub(1).map(|i| &self.entries[i])
    }

    /// Keeps only the entries for which `keep` holds, given that it holds for
    /// a prefix of them. The file is cut on the next persist.
    pub fn truncate_by(&mut self, keep: impl Fn(&E) -> bool) {
        let n = self.entries.partition_point(keep);
        self.entries.truncate(n);
        self.persisted = self.persisted.min(n);
    }

    /// Parses an index file's bytes, checking sortedness.
    pub fn decode(path: PathBuf, bytes: &[u8]) -> std::result::Result<SparseIndex<E>, String> {
        if bytes.len() % E::BYTES != 0 {
            return Err(format!("size {} is not a multiple of {}", bytes.len(), E::BYTES));
        }
        let mut entries: Vec<E> = Vec::with_capacity(bytes.len() / E::BYTES);
        for chunk in bytes.chunks_exact(E::BYTES) {
            let e = E::decode(chunk).map_err(|reason| format!("entry {}: {reason}", entries.len()))?;
            if let Some(last) = entries.last() {
                if !last.precedes(&e) {
                    return Err(format!("entry {} ({e:?}) is out of order", entries.len()));
                }
            }
            entries.push(e);
        }
        let persisted = entries.len();
        Ok(SparseIndex {
            entries,
            persisted,
            file_entries: Some(persisted),
            path,
        })
    }

    /// Reads the index file at `path`. The inner error says why the file
    /// was refused (missing — segments create theirs when they are created —
    /// or malformed).
    pub async fn load(path: PathBuf, bytes_max: u64) -> Result<std::result::Result<SparseIndex<E>, String>> {
        let data = match read_whole(&path, bytes_max).await {
            Ok(Some(d)) => d,
            Ok(None) => return Ok(Err("missing".into())),
            Err(EngineError::BadFile { reason, .. }) => return Ok(Err(reason)),
            Err(e) => return Err(e),
        };
        Ok(SparseIndex::decode(path, &data))
    }

    /// An empty index whose file content is to be discarded on the next
    /// persist (after the file was found broken and is being rebuilt).
    pub fn rebuilding(path: PathBuf) -> SparseIndex<E> {
        SparseIndex {
            entries: Vec::new(),
            persisted: 0,
            file_entries: None,
            path,
        }
    }

    /// What to write so that the file matches memory. The caller carries it
    /// out with [`write_plan`] and then calls [`SparseIndex::mark_persisted`];
    /// it must not truncate this index in between.
    pub fn plan_persist(&self) -> Option<PersistPlan> {
        let truncate_bytes = match self.file_entries {
            Some(n) if n == self.persisted => None,
            _ => Some((self.persisted * E::BYTES) as u64),
        };
        if truncate_bytes.is_none() && self.persisted == self.entries.len() {
            return None;
        }
        let mut bytes = Vec::with_capacity((self.entries.len() - self.persisted) * E::BYTES);
        for e in &self.entries[self.persisted..] {
            e.encode(&mut bytes);
        }
        Some(PersistPlan {
            truncate_bytes,
            write_pos: (self.persisted * E::BYTES) as u64,
            bytes,
            entries_after: self.entries.len(),
        })
    }

    pub fn mark_persisted(&mut self, plan: &PersistPlan) {
        assert!(
            plan.entries_after <= self.entries.len(),
            "index truncated during persist"
        );
        self.persisted = plan.entries_after;
        self.file_entries = Some(plan.entries_after);
    }
}

/// Carries out a [`PersistPlan`] on the file at `path`. No fsync.
pub async fn write_plan(path: &Path, plan: &PersistPlan) -> Result<()> {
    let file = open_for_write(path).await?;
    write_plan_to(file, path, plan).await
}

/// Carries out a [`PersistPlan`] on `file` (opened at `path`) and closes
/// it. No fsync.
pub async fn write_plan_to(file: BufferedFile, path: &Path, plan: &PersistPlan) -> Result<()> {
    if let Some(len) = plan.truncate_bytes {
        crate::sys::truncate_fd(std::os::unix::io::AsRawFd::as_raw_fd(&file), len, path)?;
    }
    if !plan.bytes.is_empty() {
        write_all(&file, path, &plan.bytes, plan.write_pos).await?;
    }
    file.close().await.map_err(|e| EngineError::io("close index", path, e))
}

/// Opens (creating if needed) a file for index writes.
pub async fn open_for_write(path: &Path) -> Result<BufferedFile> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .buffered_open(path)
        .await
        .map_err(|e| EngineError::io("open index", path, e))
}

/// Writes all of `buf` at `pos`, looping over short writes. Each attempt
/// hands glommio its own copy (it takes ownership of the buffer while the
/// kernel has it); this is for small metadata files, not for segment data.
pub async fn write_all(file: &BufferedFile, path: &Path, buf: &[u8], pos: u64) -> Result<()> {
    let mut written = 0usize;
    while written < buf.len() {
        let n = file
            .write_at(buf[written..].to_vec(), pos + written as u64)
            .await
            .map_err(|e| EngineError::io("write", path, e))?;
        if n == 0 {
            return Err(EngineError::io(
                "write",
                path,
                std::io::Error::from(std::io::ErrorKind::WriteZero),
            ));
        }
        written += n;
    }
    Ok(())
}

/// Reads a whole small file, refusing files over `bytes_max`. `None` when it
/// does not exist.
pub async fn read_whole(path: &Path, bytes_max: u64) -> Result<Option<Vec<u8>>> {
    let file = match OpenOptions::new().read(true).buffered_open(path).await {
        Ok(f) => f,
        Err(e) => {
            let e: std::io::Error = e.into();
            if e.kind() == std::io::ErrorKind::NotFound {
                return Ok(None);
            }
            return Err(EngineError::io("open", path, e));
        }
    };
    let size = file.file_size().await.map_err(|e| EngineError::io("stat", path, e))?;
    if size > bytes_max {
        return Err(EngineError::BadFile {
            path: path.to_path_buf(),
            reason: format!("{size} bytes, more than the {bytes_max} expected"),
        });
    }
    let mut out = Vec::with_capacity(size as usize);
    while (out.len() as u64) < size {
        let chunk = file
            .read_at(out.len() as u64, (size as usize - out.len()).min(1 << 20))
            .await
            .map_err(|e| EngineError::io("read", path, e))?;
        if chunk.is_empty() {
            break;
        }
        out.extend_from_slice(&chunk);
    }
    // Read-only descriptor: a failed close cannot lose data.
    let _ = file.close().await;
    Ok(Some(out))
}
