//! Writes a segment's bytes through glommio's io_uring file API, in groups.
//!
//! # Concurrency contract
//!
//! `reserve` is synchronous and must be called in log order (the log calls it
//! under its append lock). Any number of tasks may then await
//! `write_through(end)` concurrently; at most one write is in flight at a
//! time. A task that finds its bytes already written by an earlier group
//! returns at once; otherwise it writes *everything* reserved so far in one
//! request. Under load this coalesces many small batches into one large write,
//! which is what makes io_uring writes fast (measured in `docs/benchmarks.md`:
//! 16 KiB writes one at a time reach a fraction of the throughput of 1 MiB
//! writes). When `write_through` returns, the bytes are in the kernel: in the
//! page cache ([`WriteMode::Buffered`]) or on the device ([`WriteMode::Direct`]).
//!
//! # Direct mode
//!
//! O_DIRECT writes must start and end on the device's block boundaries. Each
//! write starts at the block holding the first unwritten byte, re-writing the
//! bytes of that partial block that earlier writes already covered (kept in
//! `tail`), and is zero-padded up to the next boundary. Writes never overlap in
//! time, so a later write always lands after the one it partly overwrites.
//! The file therefore may end with up to one block of zeros past the logical
//! end; `seal` cuts it off, and recovery treats it like any torn tail.

use std::cell::RefCell;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use glommio::io::{BufferedFile, DmaFile, OpenOptions};
use glommio::sync::Semaphore;

use crate::error::{EngineError, Result};
use crate::types::Offset;

/// How segment data reaches the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteMode {
    /// O_DIRECT writes from aligned buffers: acknowledged bytes are on the
    /// device, and the page cache is left to readers.
    Direct,
    /// Writes into the page cache, as Kafka does.
    Buffered,
}

impl WriteMode {
    pub fn parse(s: &str) -> Option<WriteMode> {
        match s {
            "direct" => Some(WriteMode::Direct),
            "buffered" => Some(WriteMode::Buffered),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            WriteMode::Direct => "direct",
            WriteMode::Buffered => "buffered",
        }
    }
}

/// Largest single write request; a longer backlog is written in several.
pub const WRITE_BYTES_MAX: usize = 4 << 20;

enum WriteFile {
    Direct { file: DmaFile, alignment: u64 },
    Buffered(BufferedFile),
}

#[derive(Default)]
struct State {
    /// Reserved batches not yet handed to the kernel, in order, each with
    /// the offset that follows it.
    pending: std::collections::VecDeque<(Bytes, Offset)>,
    /// Logical end of everything reserved.
    reserved_end: u64,
    /// Logical end of what is in the kernel, and the offset there.
    written_end: u64,
    written_next: Offset,
    /// Direct mode: the bytes of the block that holds `written_end`, from
    /// the block's start up to `written_end`.
    tail: Vec<u8>,
    /// Set when a write failed; every later call fails with it.
    failed: Option<String>,
}

pub struct SegmentAppender {
    file: WriteFile,
    path: PathBuf,
    state: RefCell<State>,
    write_lock: Semaphore,
}

impl SegmentAppender {
    /// Opens `path` for appending at logical size `size` (the bytes already
    /// there and valid; anything after is overwritten), where the log's next
    /// offset is `next`.
    pub async fn open(path: &Path, mode: WriteMode, size: u64, next: Offset) -> Result<SegmentAppender> {
        let mut opts = OpenOptions::new();
        opts.read(true).write(true).create(true);
        let (file, tail) = match mode {
            WriteMode::Direct => {
                let file = opts
                    .dma_open(path)
                    .await
                    .map_err(|e| EngineError::io("open segment for direct writes", path, e))?;
                let alignment = file.alignment();
                let tail = read_tail(path, size, alignment).await?;
                (WriteFile::Direct { file, alignment }, tail)
            }
            WriteMode::Buffered => {
                let file = opts
                    .buffered_open(path)
                    .await
                    .map_err(|e| EngineError::io("open segment for writes", path, e))?;
                (WriteFile::Buffered(file), Vec::new())
            }
        };
        Ok(SegmentAppender {
            file,
            path: path.to_path_buf(),
            state: RefCell::new(State {
                reserved_end: size,
                written_end: size,
                written_next: next,
                tail,
                ..State::default()
            }),
            write_lock: Semaphore::new(1),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues `bytes` (whole batches, ending before offset `next`) after
    /// everything reserved before; returns the logical end position they
    /// will occupy.
    pub fn reserve(&self, bytes: Bytes, next: Offset) -> u64 {
        let mut s = self.state.borrow_mut();
        s.reserved_end += bytes.len() as u64;
        s.pending.push_back((bytes, next));
        s.reserved_end
    }

    /// The offset after the last batch in the kernel.
    pub fn written_next(&self) -> Offset {
        self.state.borrow().written_next
    }

    pub fn reserved_end(&self) -> u64 {
        self.state.borrow().reserved_end
    }

    pub fn written_end(&self) -> u64 {
        self.state.borrow().written_end
    }

    fn check_failed(&self) -> Result<()> {
        match &self.state.borrow().failed {
            Some(cause) => Err(EngineError::io(
                "write segment (earlier failure)",
                &self.path,
                std::io::Error::other(cause.clone()),
            )),
            None => Ok(()),
        }
    }

    /// Returns once every byte up to `end` is in the kernel.
    pub async fn write_through(&self, end: u64) -> Result<()> {
        loop {
            self.check_failed()?;
            if self.state.borrow().written_end >= end {
                return Ok(());
            }
            let _permit = self
                .write_lock
                .acquire_permit(1)
                .await
                .map_err(|e| EngineError::io("wait for segment write", &self.path, e))?;
            self.check_failed()?;
            if self.state.borrow().written_end >= end {
                return Ok(());
            }
            if let Err(e) = self.write_group().await {
                self.state.borrow_mut().failed = Some(e.to_string());
                return Err(e);
            }
        }
    }

    /// Takes reserved batches (up to `WRITE_BYTES_MAX`, at least one) and
    /// writes them. Caller holds the write lock.
    async fn write_group(&self) -> Result<()> {
        let (group, group_bytes, group_next) = {
            let mut s = self.state.borrow_mut();
            let mut group = Vec::new();
            let mut bytes = 0usize;
            let mut next = s.written_next;
            while let Some((b, _)) = s.pending.front() {
                if !group.is_empty() && bytes + b.len() > WRITE_BYTES_MAX {
                    break;
                }
                bytes += b.len();
                if let Some((b, n)) = s.pending.pop_front() {
                    group.push(b);
                    next = n;
                }
            }
            (group, bytes, next)
        };
        assert!(!group.is_empty(), "write_group with nothing reserved");
        let start = self.state.borrow().written_end;
        match &self.file {
            WriteFile::Buffered(file) => self.write_buffered(file, &group, group_bytes, start).await?,
            WriteFile::Direct { file, alignment } => {
                self.write_direct(file, *alignment, &group, group_bytes, start).await?
            }
        }
        let mut s = self.state.borrow_mut();
        assert!(s.written_end == start, "concurrent segment writes");
        s.written_end = start + group_bytes as u64;
        s.written_next = group_next;
        Ok(())
    }

    async fn write_buffered(&self, file: &BufferedFile, group: &[Bytes], group_bytes: usize, start: u64) -> Result<()> {
        let mut buf = Vec::with_capacity(group_bytes);
        for b in group {
            buf.extend_from_slice(b);
        }
        crate::index::write_all(file, &self.path, &buf, start).await
    }

    async fn write_direct(
        &self,
        file: &DmaFile,
        alignment: u64,
        group: &[Bytes],
        group_bytes: usize,
        start: u64,
    ) -> Result<()> {
        let tail = std::mem::take(&mut self.state.borrow_mut().tail);
        let block_start = start - tail.len() as u64;
        assert!(block_start % alignment == 0, "tail does not start on a block");
        let content = tail.len() + group_bytes;
        let padded = (content as u64).div_ceil(alignment) * alignment;
        let mut buf = file.alloc_dma_buffer(padded as usize);
        let out = buf.as_bytes_mut();
        out[..tail.len()].copy_from_slice(&tail);
        let mut at = tail.len();
        for b in group {
            out[at..at + b.len()].copy_from_slice(b);
            at += b.len();
        }
        out[content..].fill(0);
        let new_tail_start = content - content % alignment as usize;
        let new_tail = out[new_tail_start..content].to_vec();
        let n = file.write_at(buf, block_start).await;
        let n = match n {
            Ok(n) => n,
            Err(e) => {
                self.state.borrow_mut().tail = tail;
                return Err(EngineError::io("direct write", &self.path, e));
            }
        };
        if (n as u64) < padded {
            self.state.borrow_mut().tail = tail;
            return Err(EngineError::io(
                "direct write",
                &self.path,
                std::io::Error::new(std::io::ErrorKind::WriteZero, format!("short write: {n} of {padded} bytes")),
            ));
        }
        self.state.borrow_mut().tail = new_tail;
        Ok(())
    }

    /// Writes everything reserved and cuts the file to its logical size
    /// (direct mode pads the last block). The descriptor closes when the
    /// last holder drops the appender.
    pub async fn seal(&self) -> Result<u64> {
        let end = self.reserved_end();
        self.write_through(end).await?;
        self.truncate(end).await?;
        Ok(end)
    }

    /// Cuts the file at `len`, which must not be above what is written, and
    /// drops anything reserved beyond it. Used by seal and by log truncation.
    pub async fn truncate(&self, len: u64) -> Result<()> {
        let _permit = self
            .write_lock
            .acquire_permit(1)
            .await
            .map_err(|e| EngineError::io("wait for segment write", &self.path, e))?;
        {
            let s = self.state.borrow();
            assert!(s.pending.is_empty(), "truncate with writes pending");
            assert!(len <= s.written_end, "truncate above the written end");
        }
        let fd = match &self.file {
            WriteFile::Direct { file, .. } => file.as_raw_fd(),
            WriteFile::Buffered(file) => file.as_raw_fd(),
        };
        crate::sys::truncate_fd(fd, len, &self.path)
    }

    /// After a log truncation: restarts the appender at `len` / `next`,
    /// reloading the direct-mode tail block from the file.
    pub async fn reset_to(&self, len: u64, next: Offset) -> Result<()> {
        self.truncate(len).await?;
        let tail = match &self.file {
            WriteFile::Direct { alignment, .. } => read_tail(&self.path, len, *alignment).await?,
            WriteFile::Buffered(_) => Vec::new(),
        };
        let mut s = self.state.borrow_mut();
        s.reserved_end = len;
        s.written_end = len;
        s.written_next = next;
        s.tail = tail;
        Ok(())
    }
}

/// The bytes of the block holding logical position `size`, from the block's
/// start up to `size` (direct mode rewrites them with the next write). Read
/// through the page cache: unaligned O_DIRECT reads are not supported.
async fn read_tail(path: &Path, size: u64, alignment: u64) -> Result<Vec<u8>> {
    let block_start = size - size % alignment;
    if block_start == size {
        return Ok(Vec::new());
    }
    let reader = crate::segment_reader::SegmentFile::open(path).await?;
    let tail = reader.read_at(block_start, (size - block_start) as usize).await?;
    if tail.len() as u64 != size - block_start {
        return Err(EngineError::BadFile {
            path: path.to_path_buf(),
            reason: format!("shorter than its logical size {size}"),
        });
    }
    Ok(tail)
}
