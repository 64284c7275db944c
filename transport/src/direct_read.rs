//! Sending a response's file regions that are not in the page cache: read
//! with O_DIRECT on the shard's own io_uring ring, several pieces ahead,
//! and sent from memory.
//!
//! Segments are written with O_DIRECT, so a consumer that falls behind the
//! batch cache reads regions the page cache has never held. `sendfile`
//! would fill the page cache first, one region after another on a blocking
//! thread; on the machine measured in `docs/benchmarks.md` filling the page
//! cache ran at a third of the disk's O_DIRECT speed, and the client's
//! copy out of freshly filled pages cost it five times its warm CPU.
//!
//! Which path a region takes is decided on the shard that owns its
//! partition, when the fetch reads it (`path_for`): `cachestat(2)` tells
//! whether every page of it is cached (then `sendfile`, zero-copy, on the
//! sending shard's own thread: `SendPath::Inline`). If
//! not, a region read for the first time goes directly; one this shard
//! read directly before goes through the page cache, so that the readers
//! after a second one find it there (`ReadOnce`). Where `cachestat` is
//! missing (before Linux 6.5), with `ferrite.fetch.cold.reads=sendfile`,
//! or when the sending shard's read memory (`DIRECT_READ_BYTES_MAX`) is
//! taken, the region goes by `sendfile`. The direct reads of one response
//! run up to `PIECES_AHEAD` pieces of `PIECE_BYTES` ahead of the socket,
//! across the response's regions, so the next region's read overlaps this
//! one's send; once a region is sent, what follows it is read ahead for
//! the reader's next fetch (`read_ahead.rs`).

use std::cell::Cell;
use std::collections::VecDeque;
use std::os::fd::AsRawFd;

use futures_lite::AsyncWriteExt;
use std::rc::Rc;

use glommio::io::{DmaFile, ReadResult};

pub use ferrite_protocol::response::SendPath;
use ferrite_protocol::response::{Chunk, FileChunk};

/// One direct read.
pub const PIECE_BYTES: u64 = 512 << 10;
/// Direct reads a response keeps in flight ahead of its send.
pub const PIECES_AHEAD: usize = 4;
/// Memory a shard's direct reads hold at once (read, not yet sent); a
/// response whose reads find it taken still keeps one piece in flight.
pub const DIRECT_READ_BYTES_MAX: u64 = 32 << 20;

const _: () = assert!(PIECE_BYTES % 4096 == 0);
const _: () = assert!(PIECE_BYTES * PIECES_AHEAD as u64 <= DIRECT_READ_BYTES_MAX);

thread_local! {
    /// Bytes this shard's direct reads hold.
    static HELD: Cell<u64> = const { Cell::new(0) };
    /// Set when a direct read failed on this shard: no more are tried.
    static BROKEN: Cell<bool> = const { Cell::new(false) };
}

/// The cached page count of `[pos, pos + len)` of `fd` against its page
/// count: `None` when the kernel cannot say.
fn cached_pages(fd: i32, pos: u64, len: u64) -> Option<(u64, u64)> {
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Stat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    const SYS_CACHESTAT: libc::c_long = 451;
    let page = 4096u64;
    let first = pos / page;
    let last = (pos + len).div_ceil(page);
    let range = Range {
        off: first * page,
        len: (last - first) * page,
    };
    let mut stat = Stat::default();
    // SAFETY: cachestat(2) reads `range` and writes `stat`, both locals of
    // the layout the kernel defines; `fd` is open for this call.
    let rc = unsafe { libc::syscall(SYS_CACHESTAT, fd, &range as *const Range, &mut stat as *mut Stat, 0u32) };
    (rc == 0).then_some((stat.nr_cache, last - first))
}

/// How the region `[pos, pos + len)` of `fd` should go, judged on the
/// shard that owns its partition (so that every reader of the partition
/// meets the same memory of what was read): directly when some of it is
/// not cached and it was not read directly before.
/// With `cold` at `Sendfile` (`ferrite.fetch.cold.reads=sendfile`), always
/// `Sendfile`.
pub fn path_for(cold: SendPath, fd: i32, pos: u64, len: u64) -> SendPath {
    if len == 0 || cold == SendPath::Sendfile {
        return SendPath::Sendfile;
    }
    match cached_pages(fd, pos, len) {
        Some((cached, pages)) if cached < pages => {
            let Some(file) = file_id(fd) else {
                return SendPath::Sendfile;
            };
            // A region read directly before goes through the page cache
            // this time, so that the readers after it find it there.
            if READ_ONCE.with_borrow_mut(|seen| seen.first_read(file, pos, len)) {
                SendPath::Direct
            } else {
                SendPath::Sendfile
            }
        }
        // Every page cached, and the last one read already (a page the
        // kernel's own read-ahead added is cached while its read is still
        // under way): sent from the page cache without leaving the shard's
        // thread.
        Some(_) if last_byte_ready(fd, pos + len - 1) => SendPath::Inline,
        Some(_) => SendPath::Sendfile,
        None => SendPath::Sendfile,
    }
}

/// Whether this shard's direct reads can take one more piece within
/// `DIRECT_READ_BYTES_MAX`.
pub(crate) fn room_for_a_piece() -> bool {
    HELD.with(|h| h.get()) + PIECE_BYTES <= DIRECT_READ_BYTES_MAX
}

/// Whether the byte at `at` of `fd` can be read from the page cache
/// without waiting (`preadv2` with `RWF_NOWAIT`).
fn last_byte_ready(fd: i32, at: u64) -> bool {
    let mut byte = 0u8;
    let iov = libc::iovec {
        iov_base: (&mut byte as *mut u8).cast(),
        iov_len: 1,
    };
    // SAFETY: one iovec over a local byte; `fd` is open for the call.
    let n = unsafe { libc::preadv2(fd, &iov, 1, at as libc::off_t, libc::RWF_NOWAIT) };
    n == 1
}

/// A file, by device and inode.
pub(crate) type FileId = (u64, u64);

fn file_id(fd: i32) -> Option<FileId> {
    // SAFETY: fstat of an open descriptor into a zeroed local.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let rc = unsafe { libc::fstat(fd, &mut st) };
    (rc == 0).then_some((st.st_dev, st.st_ino))
}

/// The regions of files this shard has read directly, by
/// `REMEMBERED_BLOCK_BYTES` blocks, the oldest forgotten first past
/// `REMEMBERED_BLOCKS_MAX`: a first read of a region (a consumer catching
/// up) bypasses the page cache, a second one (another group reading the
/// same backlog) fills it for the rest. So one catch-up reader does not
/// push the tailing readers' pages out either.
#[derive(Default)]
struct ReadOnce {
    blocks: std::collections::HashSet<(FileId, u64)>,
    order: VecDeque<(FileId, u64)>,
}

/// The granularity at which direct reads are remembered.
pub const REMEMBERED_BLOCK_BYTES: u64 = 256 << 10;
/// Blocks remembered (16 GiB of segments at 256 KiB; about 3 MiB of
/// memory when full).
pub const REMEMBERED_BLOCKS_MAX: usize = 65_536;

impl ReadOnce {
    /// Whether `[pos, pos + len)` of `file` is read for the first time:
    /// the last block it touches was not read before (a sequential
    /// reader's next region ends past the block this one ended in).
    /// Remembers every block it touches.
    fn first_read(&mut self, file: FileId, pos: u64, len: u64) -> bool {
        let first = pos / REMEMBERED_BLOCK_BYTES;
        let last = (pos + len.max(1) - 1) / REMEMBERED_BLOCK_BYTES;
        let unseen = !self.blocks.contains(&(file, last));
        for block in first..=last {
            if self.blocks.insert((file, block)) {
                self.order.push_back((file, block));
            }
        }
        while self.order.len() > REMEMBERED_BLOCKS_MAX {
            if let Some(old) = self.order.pop_front() {
                self.blocks.remove(&old);
            }
        }
        unseen
    }
}

thread_local! {
    static READ_ONCE: std::cell::RefCell<ReadOnce> = std::cell::RefCell::new(ReadOnce::default());
}

/// Memory a piece holds while it is read and until it is sent.
struct Held(u64);

impl Held {
    fn take(bytes: u64) -> Held {
        HELD.with(|h| h.set(h.get() + bytes));
        Held(bytes)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        HELD.with(|h| h.set(h.get() - self.0));
    }
}

/// A piece read (or failed), holding its share of the shard's read memory.
pub struct Piece {
    pub bytes: ReadResult,
    _held: Held,
}

impl Piece {
    /// The piece's first `len` bytes (a piece read ahead may hold more
    /// than the region that takes it).
    fn cut_to(self, len: u64) -> std::io::Result<Piece> {
        if self.bytes.len() as u64 == len {
            return Ok(self);
        }
        let bytes = ReadResult::slice(&self.bytes, 0, len as usize)
            .ok_or_else(|| std::io::Error::other("a piece shorter than its region"))?;
        Ok(Piece {
            bytes,
            _held: self._held,
        })
    }
}

/// A piece's read, started with its memory taken.
pub(crate) fn start_piece(file: Rc<DmaFile>, pos: u64, len: u64) -> glommio::task::JoinHandle<std::io::Result<Piece>> {
    let held = Held::take(len);
    glommio::spawn_local(async move {
        let bytes = read_exactly(&file, pos, len).await?;
        Ok(Piece { bytes, _held: held })
    })
    .detach()
}

type PieceRead = glommio::task::JoinHandle<std::io::Result<Piece>>;

/// A piece of a response not started yet: to read, or read ahead already.
enum Pending {
    Read(Rc<DmaFile>, u64, u64),
    Ready(u64, u64, PieceRead),
}

/// What to read ahead once a direct chunk is sent: its file, where it ends,
/// how far reading may go, and the truncation count it was read at.
struct AfterChunk {
    file: Rc<DmaFile>,
    id: FileId,
    end: u64,
    len: u64,
    readable_to: u64,
    truncations_quiet: Option<u64>,
}

impl AfterChunk {
    fn read_ahead(&self) {
        if BROKEN.with(|b| b.get()) {
            return;
        }
        if let Some(mark) = self.truncations_quiet {
            crate::read_ahead::start(&self.file, self.id, (self.end, self.len), self.readable_to, mark);
        }
    }
}

/// The direct reads of one response: its regions' pieces, read in order,
/// a few ahead of the one being sent.
pub struct DirectReads {
    /// Which of the response's chunks go directly (by index; empty when
    /// none does).
    direct: Vec<bool>,
    /// Pieces still to start, in order.
    waiting: VecDeque<Pending>,
    /// Pieces read or being read: (position, length, read).
    started: VecDeque<(u64, u64, PieceRead)>,
    /// Per direct chunk, in order: what to read ahead once it is sent
    /// (`None`: read ahead already).
    after: VecDeque<Option<AfterChunk>>,
}

impl DirectReads {
    /// Picks the file chunks of `chunks` that go directly (judged so by
    /// their partition's shard, read ahead already or with room to read),
    /// opens each for O_DIRECT reads (through `/proc/self/fd`, so a
    /// segment deleted meanwhile still reads; one that cannot be opened
    /// goes by `sendfile`), takes the pieces read ahead for it
    /// (`read_ahead.rs`) and starts the first others.
    pub async fn start(chunks: &[Chunk]) -> DirectReads {
        let mut reads = DirectReads::none();
        for (i, chunk) in chunks.iter().enumerate() {
            let Chunk::File(chunk) = chunk else { continue };
            if chunk.path != SendPath::Direct || BROKEN.with(|b| b.get()) {
                continue;
            }
            let Some(id) = file_id(chunk.fd.as_raw_fd()) else {
                continue;
            };
            // Read ahead already, or room to read.
            if !crate::read_ahead::has(id, chunk.position) && !room_for_a_piece() {
                continue;
            }
            let path = format!("/proc/self/fd/{}", chunk.fd.as_raw_fd());
            let Ok(file) = DmaFile::open(&path).await else {
                continue;
            };
            let file = Rc::new(file);
            let end = chunk.position + chunk.len;
            let mut at = chunk.position;
            let mut all_ahead = true;
            while at < end {
                let len = (end - at).min(PIECE_BYTES);
                reads.waiting.push_back(match crate::read_ahead::take(id, at, len) {
                    Some(read) => {
                        crate::metrics::read_ahead_used(len);
                        Pending::Ready(at, len, read)
                    }
                    None => {
                        all_ahead = false;
                        Pending::Read(file.clone(), at, len)
                    }
                });
                at += len;
            }
            let after = AfterChunk {
                file,
                id,
                end,
                len: chunk.len,
                readable_to: chunk.readable_to,
                truncations_quiet: chunk.truncations_quiet,
            };
            // A reader the read-ahead keeps up with: the disk has nothing
            // to do for this response, so the next region is read now,
            // while this one is sent. Otherwise once this one is sent, so
            // that its own reads go first.
            if all_ahead {
                after.read_ahead();
                reads.after.push_back(None);
            } else {
                reads.after.push_back(Some(after));
            }
            reads.direct.resize(chunks.len(), false);
            reads.direct[i] = true;
        }
        reads.refill();
        reads
    }

    /// No direct reads (a response that does not go to its socket as is:
    /// through a TLS session).
    pub fn none() -> DirectReads {
        DirectReads {
            direct: Vec::new(),
            waiting: VecDeque::new(),
            started: VecDeque::new(),
            after: VecDeque::new(),
        }
    }

    /// Whether chunk `i` of the response goes directly.
    pub fn is_direct(&self, i: usize) -> bool {
        self.direct.get(i).copied().unwrap_or(false)
    }

    /// Starts pieces until `PIECES_AHEAD` are in flight (or the shard's
    /// read memory is taken, keeping one at least).
    fn refill(&mut self) {
        while self.started.len() < PIECES_AHEAD {
            let must_read = matches!(self.waiting.front(), Some(Pending::Read(..)));
            if must_read && !room_for_a_piece() && !self.started.is_empty() {
                return;
            }
            match self.waiting.pop_front() {
                None => return,
                Some(Pending::Ready(pos, len, read)) => self.started.push_back((pos, len, read)),
                Some(Pending::Read(file, pos, len)) => {
                    self.started.push_back((pos, len, start_piece(file, pos, len)));
                }
            }
        }
    }

    /// The next piece, in order: its position and length, and its bytes
    /// (cut to its length: a piece read ahead may be longer).
    async fn next(&mut self) -> Option<(u64, u64, std::io::Result<Piece>)> {
        let (pos, len, task) = self.started.pop_front()?;
        let piece = task
            .await
            .unwrap_or_else(|| Err(std::io::Error::other("direct read cancelled")))
            .and_then(|p| p.cut_to(len));
        self.refill();
        Some((pos, len, piece))
    }

    /// Sends `chunk` (the next of the response's direct chunks) on `sock`,
    /// the descriptor of `w`, from the pieces read, then reads ahead what
    /// follows it. A piece whose read failed goes by `sendfile`; if it
    /// failed because the filesystem does not take O_DIRECT reads
    /// (EINVAL), the shard reads no more directly.
    pub async fn send<W: futures_lite::AsyncWrite + Unpin>(
        &mut self,
        w: &mut W,
        sock: i32,
        chunk: &FileChunk,
    ) -> std::io::Result<()> {
        for _ in 0..chunk.len.div_ceil(PIECE_BYTES) {
            let Some((pos, len, piece)) = self.next().await else {
                return Err(std::io::Error::other("a direct read is missing"));
            };
            match piece {
                Ok(piece) => {
                    send_within_stall_limit(w, sock, &piece.bytes).await?;
                    crate::metrics::file_sent(SendPath::Direct, len);
                }
                Err(e) => {
                    // EINVAL: the filesystem does not take O_DIRECT reads.
                    if e.kind() == std::io::ErrorKind::InvalidInput && !BROKEN.with(|b| b.replace(true)) {
                        tracing::warn!(error = %e, "a direct read failed; this shard sends file regions by sendfile from now on");
                    }
                    w.flush().await?;
                    crate::sendfile::send_region(sock, chunk.fd.as_raw_fd(), pos, len).await?;
                    crate::metrics::file_sent(SendPath::Sendfile, len);
                }
            }
        }
        if let Some(Some(after)) = self.after.pop_front() {
            after.read_ahead();
        }
        Ok(())
    }
}

/// Sends `bytes` on `sock` (the descriptor of `w`), giving up on a client
/// that takes none of them for `SEND_STALL_MS_MAX`, as `sendfile` does.
async fn send_within_stall_limit<W: futures_lite::AsyncWrite + Unpin>(
    w: &mut W,
    sock: i32,
    bytes: &[u8],
) -> std::io::Result<()> {
    let stall = std::time::Duration::from_millis(crate::sendfile::SEND_STALL_MS_MAX);
    futures_lite::future::or(crate::gather::send_all(w, sock, &[bytes]), async {
        glommio::timer::sleep(stall).await;
        Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "client stopped reading",
        ))
    })
    .await
}

/// Reads `[pos, pos + len)` of `file` with aligned O_DIRECT reads: all of
/// it, or an error (a file cut short meanwhile reads short, and what the
/// buffer holds past the read is not the file's).
async fn read_exactly(file: &DmaFile, pos: u64, len: u64) -> std::io::Result<ReadResult> {
    let start = file.align_down(pos);
    let skip = (pos - start) as usize;
    let size = file.align_up(pos + len - start) as usize;
    let read = file.read_at_aligned(start, size).await.map_err(std::io::Error::from)?;
    if read.len() < skip + len as usize {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "file region ends before its length",
        ));
    }
    ReadResult::slice(&read, skip, len as usize).ok_or_else(|| std::io::Error::other("direct read slice"))
}

/// Cancels the reads of a response whose send failed.
impl Drop for DirectReads {
    fn drop(&mut self) {
        for (_, _, t) in self.started.drain(..) {
            t.cancel();
        }
        for p in self.waiting.drain(..) {
            if let Pending::Ready(_, _, t) = p {
                t.cancel();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: u64 = REMEMBERED_BLOCK_BYTES;

    #[test]
    fn a_sequential_reader_reads_directly_and_a_second_one_through_the_cache() {
        let mut seen = ReadOnce::default();
        let file = (1, 7);
        // Regions that do not start or end on blocks, one after another.
        let regions: Vec<(u64, u64)> = (0..40u64).map(|i| (i * (B * 4 - 100), B * 4 - 100)).collect();
        for (pos, len) in &regions {
            assert!(seen.first_read(file, *pos, *len), "first read at {pos}");
        }
        for (pos, len) in &regions {
            assert!(!seen.first_read(file, *pos, *len), "second read at {pos}");
        }
        assert!(seen.first_read((1, 8), 0, B * 4), "another file is new");
        // Small regions inside one block: the first is new, the next (or
        // the same again) not.
        assert!(seen.first_read((2, 1), 10, 100));
        assert!(!seen.first_read((2, 1), 10, 100));
        assert!(!seen.first_read((2, 1), 110, 100));
        // A region shorter than a block that ends in the next one is new.
        assert!(seen.first_read((2, 1), B - 50, 100));
    }

    #[test]
    fn the_oldest_blocks_are_forgotten_past_the_bound() {
        let mut seen = ReadOnce::default();
        let per = 4;
        let regions = REMEMBERED_BLOCKS_MAX as u64 / per + 1;
        for i in 0..regions {
            assert!(seen.first_read((1, 1), i * per * B, per * B));
        }
        assert!(seen.order.len() <= REMEMBERED_BLOCKS_MAX);
        assert_eq!(seen.blocks.len(), seen.order.len());
        assert!(seen.first_read((1, 1), 0, per * B), "the first region was forgotten");
        assert!(
            !seen.first_read((1, 1), (regions - 1) * per * B, per * B),
            "the last one is remembered"
        );
    }
}
