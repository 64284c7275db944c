//! The read side of a segment: a read-only descriptor shared by the log and
//! by every in-flight fetch (`Rc`), and the header walks that turn offsets
//! into byte positions without reading record data.
//!
//! A fetch keeps its `Rc<SegmentFile>` until its bytes are sent, so a segment
//! deleted by retention meanwhile stays readable: the file is unlinked, and the
//! descriptor lives until the last reader drops it.

use std::os::unix::io::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

use glommio::io::{BufferedFile, OpenOptions};

use crate::batch::{self, BatchInfo, HEADER_BYTES};
use crate::error::{EngineError, Result};
use crate::types::{Offset, TimestampMs};

#[cfg(test)]
thread_local! {
    /// Fault injection for unit tests: the next segment fdatasync on this
    /// thread fails with EIO.
    pub(crate) static FAIL_NEXT_SYNC: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

pub struct SegmentFile {
    file: BufferedFile,
    path: PathBuf,
}

impl SegmentFile {
    pub async fn open(path: &Path) -> Result<SegmentFile> {
        let file = OpenOptions::new()
            .read(true)
            .buffered_open(path)
            .await
            .map_err(|e| EngineError::io("open segment for reads", path, e))?;
        Ok(SegmentFile {
            file,
            path: path.to_path_buf(),
        })
    }

    /// [`SegmentFile::open`] in the shape a [`crate::file_cache::FileSlot`] takes.
    pub fn open_boxed(path: PathBuf) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<SegmentFile>>>> {
        Box::pin(async move { SegmentFile::open(&path).await })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The descriptor to `sendfile` from. Valid while this `SegmentFile` lives.
    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    pub async fn size(&self) -> Result<u64> {
        self.file
            .file_size()
            .await
            .map_err(|e| EngineError::io("stat segment", &self.path, e))
    }

    /// Reads up to `len` bytes at `pos` (fewer at the end of the file).
    pub async fn read_at(&self, pos: u64, len: usize) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let got = self
                .file
                .read_at(pos + out.len() as u64, len - out.len())
                .await
                .map_err(|e| EngineError::io("read segment", &self.path, e))?;
            if got.is_empty() {
                break;
            }
            out.extend_from_slice(&got);
        }
        Ok(out)
    }

    /// fdatasync through the read descriptor: it flushes the file's dirty
    /// pages whichever descriptor wrote them.
    pub async fn sync(&self) -> Result<()> {
        #[cfg(test)]
        if FAIL_NEXT_SYNC.with(|f| f.replace(false)) {
            return Err(EngineError::io(
                "fdatasync segment",
                &self.path,
                std::io::Error::from_raw_os_error(libc::EIO),
            ));
        }
        self.file
            .fdatasync()
            .await
            .map_err(|e| EngineError::io("fdatasync segment", &self.path, e))
    }

    /// The header facts of the batch at `pos`, if a whole batch lies before
    /// `end`. A batch that does not parse or runs past `end` is an error: the
    /// region below `end` was validated when it was written or recovered.
    pub async fn batch_at(&self, pos: u64, end: u64) -> Result<Option<BatchInfo>> {
        if pos >= end {
            return Ok(None);
        }
        let head = self.read_at(pos, HEADER_BYTES.min((end - pos) as usize)).await?;
        let info = batch::peek(&head).map_err(|e| self.bad(pos, e.to_string()))?;
        if pos + info.size as u64 > end {
            return Err(self.bad(pos, format!("batch of {} bytes runs past the end {end}", info.size)));
        }
        Ok(Some(info))
    }

    fn bad(&self, pos: u64, reason: String) -> EngineError {
        EngineError::BadFile {
            path: self.path.clone(),
            reason: format!("at byte {pos}: {reason}"),
        }
    }

    /// Walks batch headers from `pos` (a batch boundary) to the first batch
    /// whose last offset is at or after `target`. Returns its position and
    /// facts, or `None` when every batch before `end` is below `target`.
    pub async fn find_offset(&self, mut pos: u64, target: Offset, end: u64) -> Result<Option<(u64, BatchInfo)>> {
        while let Some(info) = self.batch_at(pos, end).await? {
            if info.last_offset() >= target {
                return Ok(Some((pos, info)));
            }
            pos += info.size as u64;
        }
        Ok(None)
    }

    /// Walks from `pos` to the first batch whose max timestamp is at or after
    /// `target`.
    pub async fn find_timestamp(
        &self,
        mut pos: u64,
        target: TimestampMs,
        end: u64,
    ) -> Result<Option<(u64, BatchInfo)>> {
        while let Some(info) = self.batch_at(pos, end).await? {
            if info.max_timestamp >= target {
                return Ok(Some((pos, info)));
            }
            pos += info.size as u64;
        }
        Ok(None)
    }

    /// The end of the last whole batch that starts at or after `pos` and ends
    /// at or before `limit` — walking headers from `pos`, a batch boundary.
    /// Returns `pos` itself when the first batch does not fit.
    pub async fn last_boundary_before(&self, mut pos: u64, limit: u64, end: u64) -> Result<(u64, Offset)> {
        let mut next_offset = Offset(-1);
        while let Some(info) = self.batch_at(pos, end).await? {
            if pos + info.size as u64 > limit {
                break;
            }
            pos += info.size as u64;
            next_offset = info.next_offset();
        }
        Ok((pos, next_offset))
    }
}
