//! Writes a segment's bytes through glommio's io_uring file API, in
//! pipelined groups.
//!
//! # Concurrency contract
//!
//! `reserve` is synchronous and must be called in log order (the log calls it
//! under its append lock). Any number of tasks may then await
//! `write_through(end)`. A task whose bytes are not yet submitted, when fewer
//! than [`WRITES_IN_FLIGHT_MAX`] groups are in flight (behind another, once
//! enough is waiting: [`BEHIND_SHARE`]), submits what is reserved so far as
//! one group (see `group_end`); the others wait for progress. Under load
//! this coalesces many small batches into few large writes, and the second
//! group keeps the device busy while the first one's completion travels
//! back and the shard prepares the next (measured in
//! `docs/benchmarks.md`). When `write_through(end)` returns, every byte up to
//! `end` is in the kernel: in the page cache ([`WriteMode::Buffered`]) or on
//! the device ([`WriteMode::Direct`]). Groups may complete out of order; the
//! written end only advances over a completed prefix, and only to the end
//! of a whole batch: a group may end inside one, and readers must never see
//! half a batch.
//!
//! # Direct mode
//!
//! O_DIRECT writes must start and end on the device's block boundaries
//! (`alignment`). A group submitted while another is in flight ends on a
//! block boundary: its partial last block goes out with the next group.
//! Under load, then, every group starts aligned. A group submitted alone
//! takes everything (one write for a lone append), and the group after it
//! starts inside a block `P`, which it rewrites whole: the bytes earlier
//! groups put there (kept in `tail`) followed by its own first ones.
//!
//! - If every earlier group has completed when it is planned (always so
//!   for a follower, which appends one fetch at a time), `P` is the start
//!   of its one write (`Head::Joined`), except in preallocated mode (below).
//! - Otherwise it is split in two writes: the *body*, from the next block
//!   boundary on, zero-padded to a boundary, which overlaps no earlier
//!   write and is submitted at once; and the *head*, block `P`, submitted
//!   only once every earlier group has completed, so that it lands after
//!   the write that put the zero padding in `P`.
//!
//! Each write costs the kernel a submission to the device (in a VM, an
//! exit to the hypervisor), so joining them matters: in an RF 3 run on
//! the development machine, the separate heads were 10,000 of the 22,000
//! device writes a second (`docs/benchmarks.md`).
//!
//! The block is the larger of the device's O_DIRECT alignment and the file
//! system's block (`st_blksize`, 4 KiB on ext4): the kernel zeroes the
//! rest of a newly allocated file-system block that a direct write covers
//! only in part, and ext4 serialises such unaligned writes. In an RF 3
//! acks=all run on the development machine, aligning to 4 KiB instead of
//! 512 bytes raised throughput by 8-16 % (`docs/benchmarks.md`).
//!
//! # Preallocation ([`WriteMode::DirectPreallocated`], `log.preallocate`)
//!
//! On ext4, an O_DIRECT write that extends the file cannot be issued
//! without blocking, so io_uring hands every such write to an io-wq worker
//! thread: two context switches per write, and the inode journalled twice.
//! Preallocated, the file is extended with `fallocate` (file size included)
//! [`PREALLOCATE_BYTES`](crate::write_mode::PREALLOCATE_BYTES) at a time
//! ahead of the writes, which then land in allocated (unwritten) extents
//! and are issued from the shard itself. That holds only for a write that
//! stays within extents of one kind, so heads are never joined in this
//! mode: the block a group starts in is already written, the rest is not,
//! and one write across both goes to io-wq again.
//!
//! Measured on the development machine (`docs/benchmarks.md`): in the
//! 3-broker matrix, io-wq hand-offs fell from 10,000 a second to about
//! 130, RF 1 acks=1 gained 13-25 % and RF 3 acks=all 1-13 %; but a single
//! partition writing as fast as the device takes it fell to 0.65-0.71 of
//! the raw writer, the device idle half the time and the shard too: the
//! likely cause is that completing a write into unwritten extents converts
//! them first, which adds to every write's latency. So it is off by
//! default, as in Kafka.
//!
//! The file therefore may end with zeros past the logical end: up to one
//! block of padding, and the preallocated space. `seal` and a clean close
//! cut them off, and recovery treats them like any torn tail.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::task::{Poll, Waker};

use bytes::Bytes;
use glommio::io::{BufferedFile, DmaBuffer, DmaFile, OpenOptions};

use crate::block_layout::{layout_direct, Head, Pieces};
use crate::error::{EngineError, Result};
use crate::file_cache::{FileCache, FileSlot, OpenFn};
use crate::notify::Notify;
use crate::types::Offset;
use crate::write_mode::{direct_block_bytes, preallocation, read_tail, WriteMode};

/// Largest single group, whatever the shard's registered pool
/// ([`crate::io_memory`] may set a smaller one); a longer backlog is written
/// as several.
pub const WRITE_BYTES_MAX: usize = 4 << 20;
/// While a group is in flight, the next is submitted once the bytes
/// waiting reach this share of the bytes in flight, and at least
/// [`GROUP_BYTES_MIN`]. Every write has a fixed cost in the kernel (on ext4
/// an extending O_DIRECT write goes to an io-wq worker, which runs the
/// writes of a file one after the other), so a small second group wastes
/// the device's time; but any fixed minimum suited one load only (512 KiB:
/// 0.78-0.88 of the raw writer with 256 appends in flight, 1.08 with 128;
/// 2 MiB: 1.04-1.08 and 0.56-0.63). Following the group in flight keeps the
/// two comparable: 0.81-1.18 from 32 to 512 appends in flight
/// (`docs/benchmarks.md`).
pub const BEHIND_SHARE: (u64, u64) = (3, 4);
/// The least a group submitted behind another carries.
pub const GROUP_BYTES_MIN: u64 = 64 << 10;

/// Groups in flight at once. With one, the device idled while a completion
/// reached the shard and the next group was prepared, and every other group
/// was a one-batch write; with two (and partial blocks held back), the
/// engine benchmark went from 0.64-0.72 to 0.76-0.91 of the raw O_DIRECT
/// writer (`docs/benchmarks.md`).
pub const WRITES_IN_FLIGHT_MAX: usize = 2;

/// The write descriptor: O_DIRECT, or through the page cache.
pub enum WriteFile {
    Direct(DmaFile),
    Buffered(BufferedFile),
}

impl WriteFile {
    fn raw_fd(&self) -> std::os::unix::io::RawFd {
        match self {
            WriteFile::Direct(file) => file.as_raw_fd(),
            WriteFile::Buffered(file) => file.as_raw_fd(),
        }
    }

    async fn open(path: &Path, mode: WriteMode, create: bool) -> Result<WriteFile> {
        let mut opts = OpenOptions::new();
        opts.read(true).write(true).create(create);
        match mode {
            WriteMode::Direct | WriteMode::DirectPreallocated => opts
                .dma_open(path)
                .await
                .map(WriteFile::Direct)
                .map_err(|e| EngineError::io("open segment for direct writes", path, e)),
            WriteMode::Buffered => opts
                .buffered_open(path)
                .await
                .map(WriteFile::Buffered)
                .map_err(|e| EngineError::io("open segment for writes", path, e)),
        }
    }

    /// How the file cache reopens a closed descriptor: never creating the
    /// file (a segment whose file is gone must fail, not start empty).
    fn reopen_fn(mode: WriteMode) -> OpenFn<WriteFile> {
        match mode {
            WriteMode::Direct | WriteMode::DirectPreallocated => {
                |path| Box::pin(async move { WriteFile::open(&path, WriteMode::Direct, false).await })
            }
            WriteMode::Buffered => {
                |path| Box::pin(async move { WriteFile::open(&path, WriteMode::Buffered, false).await })
            }
        }
    }
}

/// A submitted group, in log order.
struct InFlight {
    /// Where its bytes end (a group may end inside a batch).
    end: u64,
    /// The end of the last whole batch it completes, and the offset there.
    batch_end: u64,
    next: Offset,
    done: bool,
}

#[derive(Default)]
struct State {
    /// Reserved bytes not yet submitted, in order, each piece with the
    /// offset that follows it. The front piece may be the rest of a batch
    /// whose start is already submitted.
    pending: VecDeque<(Bytes, Offset)>,
    /// Logical end of everything reserved.
    reserved_end: u64,
    /// Logical end of everything submitted (possibly inside a batch).
    submitted_end: u64,
    /// End of the last whole batch submitted, and the offset there.
    submitted_batch_end: u64,
    submitted_next: Offset,
    /// End of the completed prefix of the submitted bytes.
    completed_end: u64,
    /// End of the last whole batch in the completed prefix (in the
    /// kernel), and the offset there.
    written_end: u64,
    written_next: Offset,
    inflight: VecDeque<InFlight>,
    /// Direct mode: the bytes of the block that holds `submitted_end`, from
    /// the block's start up to `submitted_end`.
    tail: Vec<u8>,
    /// Set when a write failed; every later call fails with it.
    failed: Option<String>,
    /// Preallocated direct mode: the file's size as extended ahead of the
    /// writes; `None` when not preallocating (or after `fallocate` failed).
    allocated_end: Option<u64>,
}

/// What one group writes.
struct GroupPlan {
    start: u64,
    end: u64,
    /// Direct: extend the file to this size before writing.
    preallocate: Option<u64>,
    /// Direct: the rewritten first block (position, one aligned block).
    head: Option<(u64, DmaBuffer)>,
    /// The rest, at its position.
    body: Option<(u64, Body)>,
}

enum Body {
    Buffered(Vec<u8>),
    /// Padded to a block.
    Direct(DmaBuffer),
}

pub struct SegmentAppender {
    /// Opened on demand by the shard's file cache, which may close it
    /// while the segment is idle.
    file: FileSlot<WriteFile>,
    /// Direct mode: the block writes are aligned to; `None` when buffered.
    alignment: Option<u64>,
    path: PathBuf,
    state: RefCell<State>,
    /// Fires whenever a group completes or fails (head writes, quiesce).
    progress: Notify,
    /// Tasks in `write_through`, by the end they wait for. Woken only when
    /// their bytes are written, or to submit the next group — waking all
    /// of them on every completion cost more CPU than the writes.
    waiters: RefCell<Vec<(u64, Waker)>>,
}

impl SegmentAppender {
    /// Opens `path` for appending at logical size `size` (the bytes already
    /// there and valid; anything after is overwritten), where the log's next
    /// offset is `next`.
    pub async fn open(
        path: &Path,
        mode: WriteMode,
        size: u64,
        next: Offset,
        files: &Rc<FileCache>,
    ) -> Result<SegmentAppender> {
        SegmentAppender::open_file(path, mode, size, next, files, false).await
    }

    /// Creates the empty file of a new segment at `base` and opens it.
    pub async fn create(path: &Path, mode: WriteMode, base: Offset, files: &Rc<FileCache>) -> Result<SegmentAppender> {
        SegmentAppender::open_file(path, mode, 0, base, files, true).await
    }

    async fn open_file(
        path: &Path,
        mode: WriteMode,
        size: u64,
        next: Offset,
        files: &Rc<FileCache>,
        create: bool,
    ) -> Result<SegmentAppender> {
        let file = WriteFile::open(path, mode, create).await?;
        let (alignment, tail) = match &file {
            WriteFile::Direct(file) => {
                let alignment = direct_block_bytes(file.alignment(), path)?;
                (Some(alignment), read_tail(path, size, alignment).await?)
            }
            WriteFile::Buffered(_) => (None, Vec::new()),
        };
        Ok(SegmentAppender {
            file: FileSlot::with_open(files.clone(), path, WriteFile::reopen_fn(mode), file),
            alignment,
            path: path.to_path_buf(),
            state: RefCell::new(State {
                reserved_end: size,
                submitted_end: size,
                submitted_batch_end: size,
                submitted_next: next,
                completed_end: size,
                written_end: size,
                written_next: next,
                tail,
                allocated_end: (mode == WriteMode::DirectPreallocated).then_some(size),
                ..State::default()
            }),
            progress: Notify::new(),
            waiters: RefCell::new(Vec::new()),
        })
    }

    /// Closes the write descriptor now (before the file is deleted); a
    /// later write reopens it.
    pub fn close_file(&self) {
        self.file.close();
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

    pub fn reserved_end(&self) -> u64 {
        self.state.borrow().reserved_end
    }

    pub fn written_end(&self) -> u64 {
        self.state.borrow().written_end
    }

    /// The offset after the last batch in the kernel.
    pub fn written_next(&self) -> Offset {
        self.state.borrow().written_next
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
        // Held while this task submits, so that the cache cannot close it
        // between opening and writing.
        let mut file: Option<Rc<WriteFile>> = None;
        loop {
            self.check_failed()?;
            let (written, can_submit) = {
                let s = self.state.borrow();
                let backlog = self.group_end(&s) - s.submitted_end;
                let worth_it = s.inflight.is_empty() || backlog >= behind_bytes_min(&s);
                let room = s.inflight.len() < WRITES_IN_FLIGHT_MAX;
                let can = s.submitted_end < end && backlog > 0 && room && worth_it;
                (s.written_end, can)
            };
            if written >= end {
                return Ok(());
            }
            if can_submit {
                match file.clone().or_else(|| self.file.try_get()) {
                    Some(f) => {
                        self.write_group(&f).await?;
                        file = Some(f);
                    }
                    // Opening awaits: decide again once it is open.
                    None => file = Some(self.file.get().await?),
                }
            } else {
                self.wait_for(end).await;
            }
        }
    }

    /// Sleeps until woken by `wake_waiters` (bytes up to `end` written, a
    /// group to submit, or a failure).
    async fn wait_for(&self, end: u64) {
        let mut registered = false;
        std::future::poll_fn(|cx| {
            if registered {
                return Poll::Ready(());
            }
            registered = true;
            self.waiters.borrow_mut().push((end, cx.waker().clone()));
            Poll::Pending
        })
        .await
    }

    /// After a completion: wakes the waiters whose bytes are written, and the
    /// first one with unsubmitted bytes if another group may start.
    fn wake_waiters(&self) {
        let (written, submitted, failed, room) = {
            let s = self.state.borrow();
            let room = s.inflight.len() < WRITES_IN_FLIGHT_MAX && self.group_end(&s) > s.submitted_end;
            (s.written_end, s.submitted_end, s.failed.is_some(), room)
        };
        let mut to_wake = Vec::new();
        {
            let mut waiters = self.waiters.borrow_mut();
            let mut i = 0;
            while i < waiters.len() {
                if failed || waiters[i].0 <= written {
                    to_wake.push(waiters.swap_remove(i).1);
                } else {
                    i += 1;
                }
            }
            if room {
                let first = waiters
                    .iter()
                    .enumerate()
                    .filter(|(_, (end, _))| *end > submitted)
                    .min_by_key(|(_, (end, _))| *end)
                    .map(|(i, _)| i);
                if let Some(i) = first {
                    to_wake.push(waiters.swap_remove(i).1);
                }
            }
        }
        for w in to_wake {
            w.wake();
        }
    }

    /// Submits everything pending (up to `WRITE_BYTES_MAX`) as one group and
    /// waits for it.
    async fn write_group(&self, file: &WriteFile) -> Result<()> {
        let plan = self.plan_group(file);
        let (start, end) = (plan.start, plan.end);
        let result = match file {
            WriteFile::Buffered(file) => match &plan.body {
                Some((pos, Body::Buffered(bytes))) => crate::index::write_all(file, &self.path, bytes, *pos).await,
                _ => Ok(()),
            },
            WriteFile::Direct(file) => {
                if let Some(size) = plan.preallocate {
                    self.preallocate(file, size).await;
                }
                self.write_direct(file, start, plan.head, plan.body).await
            }
        };
        let mut s = self.state.borrow_mut();
        match result {
            Ok(()) => {
                if let Some(g) = s.inflight.iter_mut().find(|g| g.end == end) {
                    g.done = true;
                }
                while s.inflight.front().is_some_and(|g| g.done) {
                    if let Some(g) = s.inflight.pop_front() {
                        assert!(g.batch_end >= s.written_end, "written end goes backwards");
                        assert!(g.batch_end <= g.end, "a group completes a batch beyond its bytes");
                        s.completed_end = g.end;
                        s.written_end = g.batch_end;
                        s.written_next = g.next;
                    }
                }
                drop(s);
                self.progress.notify_all();
                self.wake_waiters();
                Ok(())
            }
            Err(e) => {
                s.failed = Some(e.to_string());
                drop(s);
                self.progress.notify_all();
                self.wake_waiters();
                Err(e)
            }
        }
    }

    /// Where a group planned now would end ([`group_end`]).
    fn group_end(&self, s: &State) -> u64 {
        group_end(s.submitted_end, s.reserved_end, self.alignment, !s.inflight.is_empty())
    }

    /// Takes the pending bytes for one group, records it in flight, and
    /// lays out its writes. Synchronous: groups are planned in log order.
    fn plan_group(&self, file: &WriteFile) -> GroupPlan {
        let mut s = self.state.borrow_mut();
        let start = s.submitted_end;
        let end = self.group_end(&s);
        assert!(end > start, "group planned with nothing to submit");
        let mut pieces = Vec::new();
        let mut at = start;
        let (mut batch_end, mut next) = (s.submitted_batch_end, s.submitted_next);
        while at < end {
            let Some((b, n)) = s.pending.pop_front() else {
                unreachable!("reserved bytes missing from pending");
            };
            let take = (end - at).min(b.len() as u64) as usize;
            at += take as u64;
            if take == b.len() {
                batch_end = at;
                next = n;
                pieces.push(b);
            } else {
                pieces.push(b.slice(..take));
                s.pending.push_front((b.slice(take..), n));
            }
        }
        let len = (end - start) as usize;
        // Nothing in flight: no earlier write can land after this group's.
        // Preallocated, a joined write would span written and unwritten
        // extents (module doc).
        let head = if s.inflight.is_empty() && s.allocated_end.is_none() {
            Head::Joined
        } else {
            Head::Separate
        };
        if head == Head::Joined {
            assert!(
                s.completed_end == start,
                "a joined head with an earlier write outstanding"
            );
        }
        s.submitted_end = end;
        s.submitted_batch_end = batch_end;
        s.submitted_next = next;
        s.inflight.push_back(InFlight {
            end,
            batch_end,
            next,
            done: false,
        });
        let data = Pieces { pieces: &pieces, len };
        match file {
            WriteFile::Buffered(_) => {
                let mut bytes = vec![0u8; len];
                data.copy_range(0, &mut bytes);
                GroupPlan {
                    start,
                    end,
                    preallocate: None,
                    head: None,
                    body: Some((start, Body::Buffered(bytes))),
                }
            }
            WriteFile::Direct(file) => {
                let alignment = self
                    .alignment
                    .unwrap_or_else(|| unreachable!("a direct file has an alignment"));
                let (head, body, end) = layout_direct(file, &mut s.tail, start, &data, alignment, head);
                let padded_end = end.div_ceil(alignment) * alignment;
                let preallocate = preallocation(&mut s.allocated_end, padded_end);
                GroupPlan {
                    start,
                    end,
                    preallocate,
                    head: head.map(|(p, b)| (p, b.0)),
                    body: body.map(|(p, b)| (p, Body::Direct(b.0))),
                }
            }
        }
    }

    /// Extends the file to `size` ahead of the writes. A failure (a file
    /// system without `fallocate`, no space) only costs speed: the writes
    /// then extend the file themselves, and preallocation stops.
    async fn preallocate(&self, file: &DmaFile, size: u64) {
        if let Err(e) = file.pre_allocate(size, false).await {
            tracing::warn!(path = %self.path.display(), size, error = %e,
                "preallocating a segment failed; writes extend the file instead");
            self.state.borrow_mut().allocated_end = None;
        }
    }

    async fn write_direct(
        &self,
        file: &DmaFile,
        start: u64,
        head: Option<(u64, DmaBuffer)>,
        body: Option<(u64, Body)>,
    ) -> Result<()> {
        let body = async {
            match body {
                Some((pos, Body::Direct(buf))) => self.dma_write(file, pos, buf).await,
                _ => Ok(()),
            }
        };
        let head = async {
            let Some((pos, block)) = head else {
                return Ok(());
            };
            // The head rewrites the block an earlier group padded: wait
            // until every earlier group is done.
            loop {
                self.check_failed()?;
                let seen = self.progress.generation();
                if self.state.borrow().completed_end >= start {
                    break;
                }
                self.progress.changed_since(seen).await;
            }
            self.dma_write(file, pos, block).await
        };
        let (b, h) = futures_lite::future::zip(body, head).await;
        b.and(h)
    }

    async fn dma_write(&self, file: &DmaFile, pos: u64, buf: DmaBuffer) -> Result<()> {
        let len = buf.len();
        let n = file
            .write_at(buf, pos)
            .await
            .map_err(|e| EngineError::io("direct write", &self.path, e))?;
        if n < len {
            return Err(EngineError::io(
                "direct write",
                &self.path,
                std::io::Error::new(
                    std::io::ErrorKind::WriteZero,
                    format!("short write: {n} of {len} bytes"),
                ),
            ));
        }
        Ok(())
    }

    /// Waits until nothing is in flight or pending.
    async fn quiesce(&self) -> Result<()> {
        loop {
            self.check_failed()?;
            let seen = self.progress.generation();
            {
                let s = self.state.borrow();
                if s.inflight.is_empty() && s.pending.is_empty() {
                    return Ok(());
                }
            }
            self.progress.changed_since(seen).await;
        }
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

    /// Cuts the file at `len`, which must not be above what is written.
    /// Waits for writes in flight; nothing may be reserved beyond them.
    pub async fn truncate(&self, len: u64) -> Result<()> {
        let file = self.file.get().await?;
        self.quiesce().await?;
        // No await from here on: no write can start meanwhile.
        assert!(len <= self.state.borrow().written_end, "truncate above the written end");
        crate::sys::truncate_fd(file.raw_fd(), len, &self.path)?;
        let mut s = self.state.borrow_mut();
        if s.allocated_end.is_some() {
            s.allocated_end = Some(len);
        }
        Ok(())
    }

    /// After a log truncation: restarts the appender at `len` / `next`,
    /// reloading the direct-mode tail block from the file.
    pub async fn reset_to(&self, len: u64, next: Offset) -> Result<()> {
        self.truncate(len).await?;
        let tail = match self.alignment {
            Some(alignment) => read_tail(&self.path, len, alignment).await?,
            None => Vec::new(),
        };
        let mut s = self.state.borrow_mut();
        s.reserved_end = len;
        s.submitted_end = len;
        s.submitted_batch_end = len;
        s.submitted_next = next;
        s.completed_end = len;
        s.written_end = len;
        s.written_next = next;
        s.tail = tail;
        Ok(())
    }
}

/// Where a group submitted now, from `start`, would end; `start` when
/// there is nothing to submit yet. A group takes everything reserved (up to
/// `reserved_end`), at most the shard's largest group
/// ([`crate::io_memory`]: `WRITE_BYTES_MAX` or less), and may end inside a batch.
/// In direct mode (`alignment`) it ends on a block boundary when cut short,
/// and also while another group is in flight (`behind_another`): the
/// partial last block then goes out with the next group, which starts
/// aligned and needs no head rewrite; the completion of the group in flight
/// wakes a task to submit it. Alone, a group takes everything, so that a
/// lone append is written by one write.
fn group_end(start: u64, reserved_end: u64, alignment: Option<u64>, behind_another: bool) -> u64 {
    group_end_within(
        start,
        reserved_end,
        alignment,
        behind_another,
        crate::io_memory::group_bytes_max(),
    )
}

/// [`group_end`] with the largest group given.
fn group_end_within(start: u64, reserved_end: u64, alignment: Option<u64>, behind_another: bool, max: usize) -> u64 {
    let end = reserved_end.min(start + max as u64);
    let Some(alignment) = alignment else {
        return end;
    };
    if end == reserved_end && !behind_another {
        return end;
    }
    let aligned = end - end % alignment;
    if aligned > start {
        aligned
    } else if behind_another {
        start
    } else {
        end
    }
}

/// How many bytes must wait before a group is submitted behind the ones in
/// flight ([`BEHIND_SHARE`]).
fn behind_bytes_min(s: &State) -> u64 {
    let in_flight = s.submitted_end - s.completed_end;
    (in_flight * BEHIND_SHARE.0 / BEHIND_SHARE.1).max(GROUP_BYTES_MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_end_on_block_boundaries_except_a_lone_group() {
        const MAX: usize = 1 << 20;
        let max = MAX as u64;
        // Buffered: everything, at most the maximum, anywhere.
        assert_eq!(group_end_within(100, 700, None, true, MAX), 700);
        assert_eq!(group_end_within(100, 100 + max + 5, None, false, MAX), 100 + max);
        // Direct, alone: everything, so that one write carries it.
        assert_eq!(group_end_within(100, 700, Some(512), false, MAX), 700);
        // Direct, behind another group: the partial last block waits.
        assert_eq!(group_end_within(100, 700, Some(512), true, MAX), 512);
        assert_eq!(group_end_within(512, 1024, Some(512), true, MAX), 1024);
        // ... and with no whole block past the start, nothing goes yet.
        assert_eq!(group_end_within(100, 500, Some(512), true, MAX), 100);
        assert_eq!(group_end_within(512, 700, Some(512), true, MAX), 512);
        // Cut short by the maximum: on a block boundary.
        assert_eq!(group_end_within(100, 100 + 2 * max, Some(512), false, MAX), max);
        assert_eq!(group_end_within(100, 100 + 2 * max, Some(512), true, MAX), max);
    }
}
