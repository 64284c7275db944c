//! Sending file regions to a socket with `sendfile(2)`.
//!
//! glommio 0.9 has no sendfile, so each call runs on glommio's blocking
//! thread pool. A call is bounded — at most `SENDFILE_CALL_BYTES_MAX` bytes
//! and `SENDFILE_CALL_WAIT_MS_MAX` of waiting for the socket to drain — so
//! that a slow consumer cannot hold a pool thread; the shard calls again
//! until the region is sent, and gives up on a client that takes nothing
//! for `SEND_STALL_MS_MAX`.
//!
//! A region the page cache holds whole (`SendPath::Inline`) is sent from
//! the shard's own thread instead (`send_inline`): no hand-off to the pool
//! and back, no futex. The socket is non-blocking (`set_nonblocking`), so
//! `sendfile` sends what the socket takes and says EAGAIN for the rest;
//! the shard then waits for room on its ring by writing the region's next
//! byte through the stream, as any write waits, and goes on from the byte
//! after. A page evicted since the region was judged is read from the disk
//! in that call, on the shard: rare, and one page-cache miss long.
//!
//! glommio leaves accepted sockets in blocking mode (its own sends pass
//! MSG_DONTWAIT); the connection also sets `SO_SNDTIMEO`
//! (`limit_blocking_sends`), which bounds a pool call's wait should the
//! socket be in blocking mode.

use std::os::fd::AsRawFd;
use std::os::unix::io::RawFd;
use std::time::{Duration, Instant};

use ferrite_protocol::response::FileChunk;

pub const SENDFILE_CALL_BYTES_MAX: u64 = 4 << 20;
pub const SENDFILE_CALL_WAIT_MS_MAX: u64 = 200;
/// A client that accepts no bytes for this long is dropped.
pub const SEND_STALL_MS_MAX: u64 = 30_000;

/// Makes blocking sends on `sock` give up after `SENDFILE_CALL_WAIT_MS_MAX`.
pub fn limit_blocking_sends(sock: RawFd) -> std::io::Result<()> {
    let tv = libc::timeval {
        tv_sec: 0,
        tv_usec: (SENDFILE_CALL_WAIT_MS_MAX * 1000) as libc::suseconds_t,
    };
    // SAFETY: setsockopt with a pointer to a local timeval of the right size.
    let rc = unsafe {
        libc::setsockopt(
            sock,
            libc::SOL_SOCKET,
            libc::SO_SNDTIMEO,
            &tv as *const libc::timeval as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Puts `sock` in non-blocking mode.
pub fn set_nonblocking(sock: RawFd) -> std::io::Result<()> {
    // SAFETY: fcntl on an open descriptor with integer arguments.
    let flags = unsafe { libc::fcntl(sock, libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(sock, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Sends all of `chunk` from the shard's own thread on `sock` (the
/// non-blocking descriptor of `w`): `sendfile` while the socket takes
/// bytes; when it is full, the next byte through `w`, which waits for room
/// on the shard's ring. Gives up on a client that takes nothing for
/// `SEND_STALL_MS_MAX`.
pub async fn send_inline<W: futures_lite::AsyncWrite + Unpin>(
    w: &mut W,
    sock: RawFd,
    chunk: &FileChunk,
) -> std::io::Result<()> {
    use futures_lite::AsyncWriteExt;
    let file = chunk.fd.as_raw_fd();
    let end = chunk.position + chunk.len;
    let mut at = chunk.position;
    w.flush().await?;
    while at < end {
        let len = (end - at).min(SENDFILE_CALL_BYTES_MAX);
        match sendfile_once(sock, file, at, len)? {
            Sendfile::Sent(n) => at += n,
            Sendfile::Interrupted => {}
            Sendfile::SocketFull => at += send_next_byte(w, file, at).await?,
        }
    }
    Ok(())
}

/// Sends the byte at `at` of `file` through `w`, which waits for room on
/// the shard's ring as any write does, at most `SEND_STALL_MS_MAX`.
async fn send_next_byte<W: futures_lite::AsyncWrite + Unpin>(w: &mut W, file: RawFd, at: u64) -> std::io::Result<u64> {
    use futures_lite::AsyncWriteExt;
    let mut byte = [0u8; 1];
    // SAFETY: pread of one byte into a local, from an open file.
    let got = unsafe { libc::pread(file, byte.as_mut_ptr().cast(), 1, at as libc::off_t) };
    if got != 1 {
        return Err(region_cut_short());
    }
    let stall = Duration::from_millis(SEND_STALL_MS_MAX);
    futures_lite::future::or(async { w.write_all(&byte).await.map(|_| 1) }, async {
        glommio::timer::sleep(stall).await;
        Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "client stopped reading",
        ))
    })
    .await?;
    w.flush().await?;
    Ok(1)
}

/// What one `sendfile(2)` call did.
enum Sendfile {
    Sent(u64),
    /// The socket took nothing (EAGAIN).
    SocketFull,
    Interrupted,
}

fn region_cut_short() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "file region ends before its length")
}

/// One `sendfile(2)` of up to `len` bytes of `file` at `at` to `sock`.
fn sendfile_once(sock: RawFd, file: RawFd, at: u64, len: u64) -> std::io::Result<Sendfile> {
    let mut off = at as libc::off_t;
    // SAFETY: both descriptors are open for the call (the callers hold the
    // socket's connection and the file's chunk); `off` is a local.
    let n = unsafe { libc::sendfile(sock, file, &mut off, len as usize) };
    if n > 0 {
        return Ok(Sendfile::Sent(n as u64));
    }
    if n == 0 {
        return Err(region_cut_short());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EINTR) => Ok(Sendfile::Interrupted),
        Some(libc::EAGAIN) => Ok(Sendfile::SocketFull),
        _ => Err(err),
    }
}

/// Sends all of `chunk` to the (non-blocking) socket `sock`.
pub async fn send_chunk(sock: RawFd, chunk: &FileChunk) -> std::io::Result<()> {
    send_region(sock, chunk.fd.as_raw_fd(), chunk.position, chunk.len).await
}

/// Sends `[position, position + len)` of `file`, which must stay open
/// until this returns, to the socket `sock`.
pub async fn send_region(sock: RawFd, file: RawFd, position: u64, len: u64) -> std::io::Result<()> {
    let end = position + len;
    let mut at = position;
    let mut last_progress = Instant::now();
    while at < end {
        let (pos, len) = (at, (end - at).min(SENDFILE_CALL_BYTES_MAX));
        // Both descriptors outlive the call: the socket belongs to the
        // connection awaiting it, the file to the caller.
        let sent = glommio::executor()
            .spawn_blocking(move || sendfile_bounded(sock, file, pos, len))
            .await?;
        if sent > 0 {
            last_progress = Instant::now();
        } else if last_progress.elapsed() > Duration::from_millis(SEND_STALL_MS_MAX) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "client stopped reading",
            ));
        }
        at += sent;
    }
    Ok(())
}

/// Sends up to `len` bytes from `file` at `pos`, waiting for the socket at
/// most `SENDFILE_CALL_WAIT_MS_MAX`. Returns the bytes sent (0 if the socket
/// stayed full).
fn sendfile_bounded(sock: RawFd, file: RawFd, pos: u64, len: u64) -> std::io::Result<u64> {
    let deadline = Instant::now() + Duration::from_millis(SENDFILE_CALL_WAIT_MS_MAX);
    let mut sent = 0u64;
    while sent < len {
        match sendfile_once(sock, file, pos + sent, len - sent)? {
            Sendfile::Sent(n) => sent += n,
            Sendfile::Interrupted => {}
            Sendfile::SocketFull => {
                if sent > 0 {
                    break;
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                let mut pfd = libc::pollfd {
                    fd: sock,
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut pfd, 1, left.as_millis() as libc::c_int) };
            }
        }
    }
    Ok(sent)
}
