//! Reading ahead of a sequential cold reader: when a region read directly
//! (`direct_read.rs`) has been sent, the bytes after it in the same file
//! are read the same way, so that the reader's next fetch, which asks for
//! exactly those bytes, finds them read.
//!
//! A consumer (librdkafka, the Java client) keeps one fetch in flight per
//! broker: without this, the disk idles while the response crosses the
//! socket and the client parses it and asks again, and the next fetch
//! starts cold. With it, the next response's reads overlap this one's
//! send and the client's turn.
//!
//! What is read ahead stays the file's bytes: it goes no further than the
//! region's `readable_to` (the batches the fetch could have returned,
//! below the high watermark for a consumer: nothing there is rewritten but
//! by a truncation), an entry is used only if no truncation ran when the
//! region was read and none began since, an entry holds its file
//! open (so its device and inode name no other file), and an entry not
//! taken within `READ_AHEAD_AGE_MS_MAX` is dropped. Its memory counts
//! against the shard's direct-read memory (`DIRECT_READ_BYTES_MAX`).
//!
//! Entries are kept per shard, by (device, inode, position): a client's
//! connection stays on one shard, so its next fetch is sent from the shard
//! that read ahead for it.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

use glommio::io::DmaFile;
use glommio::task::JoinHandle;

use crate::direct_read::{FileId, Piece, PIECE_BYTES};

/// Bytes read ahead after one region, at most (a fetch's region is as
/// long as its partition's limit allows: 1 MiB by the clients' default).
pub const READ_AHEAD_BYTES_MAX: u64 = 2 << 20;
/// Bytes a shard keeps read ahead, at most: half its direct-read memory,
/// so the reads of the responses being sent always have room.
pub const READ_AHEAD_BYTES_PER_SHARD_MAX: u64 = crate::direct_read::DIRECT_READ_BYTES_MAX / 2;

const _: () = assert!(READ_AHEAD_BYTES_MAX <= READ_AHEAD_BYTES_PER_SHARD_MAX);
/// How long an entry waits for its reader.
pub const READ_AHEAD_AGE_MS_MAX: u64 = 2_000;

/// A piece read ahead: where, how long, its read.
struct Entry {
    file: FileId,
    pos: u64,
    len: u64,
    truncations_mark: u64,
    started: Instant,
    read: JoinHandle<std::io::Result<Piece>>,
    /// Keeps the inode (and so the entry's key) from being reused.
    _open: Rc<DmaFile>,
}

thread_local! {
    static AHEAD: RefCell<VecDeque<Entry>> = const { RefCell::new(VecDeque::new()) };
    /// Whether this shard's age-out task runs (one at most).
    static AGING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Reads ahead `[from, to)` of `file` (`id`), at most
/// `READ_AHEAD_BYTES_MAX`, in pieces on the same grid a fetch of a region
/// starting at `from` reads, as long as the shard has read memory free.
/// `truncations_mark`: the engine's mark of no truncation running when the
/// region before was read ([`ferrite_engine::truncate::truncations_quiet`]).
/// `len`: how much to read (the region before's length: what the same
/// reader's next fetch asks, within `READ_AHEAD_BYTES_MAX`).
pub fn start(file: &Rc<DmaFile>, id: FileId, (from, len): (u64, u64), to: u64, truncations_mark: u64) {
    if ferrite_engine::truncate::truncations_since(truncations_mark) {
        return;
    }
    let to = to.min(from.saturating_add(len.min(READ_AHEAD_BYTES_MAX)));
    AHEAD.with_borrow_mut(|ahead| {
        drop_old(ahead);
        if from < to && !AGING.with(|a| a.replace(true)) {
            age_out_later();
        }
        let mut at = from;
        while at < to && crate::direct_read::room_for_a_piece() {
            let len = (to - at).min(PIECE_BYTES);
            if !ahead.iter().any(|e| e.file == id && e.pos == at) {
                while bytes_held(ahead) + len > READ_AHEAD_BYTES_PER_SHARD_MAX {
                    drop_entry(ahead.pop_front());
                }
                let read = crate::direct_read::start_piece(file.clone(), at, len);
                ahead.push_back(Entry {
                    file: id,
                    pos: at,
                    len,
                    truncations_mark,
                    started: Instant::now(),
                    read,
                    _open: file.clone(),
                });
            }
            at += len;
        }
    });
}

/// The read ahead of `[pos, pos + len)` of file `id`, if one covers it
/// from `pos` and is still good; taken out of the shard's entries.
pub fn take(id: FileId, pos: u64, len: u64) -> Option<JoinHandle<std::io::Result<Piece>>> {
    AHEAD.with_borrow_mut(|ahead| {
        drop_old(ahead);
        let i = ahead.iter().position(|e| e.file == id && e.pos == pos)?;
        let entry = ahead.remove(i)?;
        if entry.len < len || ferrite_engine::truncate::truncations_since(entry.truncations_mark) {
            drop_entry(Some(entry));
            return None;
        }
        Some(entry.read)
    })
}

/// Bytes the entries hold (or will).
fn bytes_held(ahead: &VecDeque<Entry>) -> u64 {
    ahead.iter().map(|e| e.len).sum()
}

/// Whether a piece read ahead starts at `pos` of file `id`.
pub fn has(id: FileId, pos: u64) -> bool {
    AHEAD.with_borrow(|ahead| ahead.iter().any(|e| e.file == id && e.pos == pos))
}

/// Drops the entries past their age every `READ_AHEAD_AGE_MS_MAX` until
/// none is left: what no fetch takes neither holds memory nor keeps a
/// deleted segment's file open for long.
fn age_out_later() {
    glommio::spawn_local(async {
        loop {
            glommio::timer::sleep(Duration::from_millis(READ_AHEAD_AGE_MS_MAX)).await;
            let left = AHEAD.with_borrow_mut(|ahead| {
                drop_old(ahead);
                ahead.len()
            });
            if left == 0 {
                AGING.with(|a| a.set(false));
                return;
            }
        }
    })
    .detach();
}

/// Drops entries past their age.
fn drop_old(ahead: &mut VecDeque<Entry>) {
    let age_max = Duration::from_millis(READ_AHEAD_AGE_MS_MAX);
    while ahead.front().is_some_and(|e| e.started.elapsed() > age_max) {
        drop_entry(ahead.pop_front());
    }
}

/// Drops an entry that no fetch took: its read is cancelled (or its bytes
/// freed) and counted.
fn drop_entry(entry: Option<Entry>) {
    if let Some(e) = entry {
        crate::metrics::read_ahead_dropped(e.len);
        e.read.cancel();
    }
}

/// Pieces this shard holds read ahead (tests).
pub fn held_pieces() -> usize {
    AHEAD.with_borrow(|a| a.len())
}
