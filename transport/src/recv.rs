//! Receiving a request frame's bytes without zeroing its buffer first.
//!
//! `AsyncRead` wants an initialised slice, so a frame's buffer was zeroed
//! (`BytesMut::resize`) before every read: a 16 KiB produce was written
//! twice, once with zeros. [`recv_ready`] instead asks the kernel, without
//! waiting (`MSG_DONTWAIT`), for the bytes already queued on the socket and
//! lets it write them into the buffer's spare capacity. Only when nothing is
//! queued does the caller fall back to glommio's read, which waits. glommio
//! itself tries the same non-blocking `recv` first, so the two mix: neither
//! keeps bytes of its own.
//!
//! [`recv_ready_then`] also takes, in the same call, the bytes just past the
//! frame (the next frame's 4-byte size): with pipelined requests queued
//! back to back, each frame then costs one `recv` instead of two.

use std::io;
use std::os::fd::RawFd;

use bytes::BytesMut;

/// Appends to `buf` up to `want` bytes already queued on socket `sock`.
/// `None`: nothing is queued (the caller waits with an async read).
/// `Some(Ok(0))`: the peer closed its end.
pub fn recv_ready(sock: RawFd, buf: &mut BytesMut, want: usize) -> Option<io::Result<usize>> {
    recv_ready_then(sock, buf, want, &mut []).map(|got| got.map(|(n, _)| n))
}

/// Like [`recv_ready`], and in the same call, once `want` bytes have come,
/// up to `next.len()` bytes more into `next`: the start of the frame behind
/// this one (its size), which would otherwise cost a `recv` of its own.
/// Returns the bytes appended to `buf` and the bytes written to `next`.
pub fn recv_ready_then(
    sock: RawFd,
    buf: &mut BytesMut,
    want: usize,
    next: &mut [u8],
) -> Option<io::Result<(usize, usize)>> {
    buf.reserve(want);
    let spare = buf.spare_capacity_mut();
    let len = want.min(spare.len());
    let mut iov = [
        libc::iovec {
            iov_base: spare.as_mut_ptr().cast::<libc::c_void>(),
            iov_len: len,
        },
        libc::iovec {
            iov_base: next.as_mut_ptr().cast::<libc::c_void>(),
            iov_len: next.len(),
        },
    ];
    // SAFETY: an all-zero msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = iov.len() as _;
    // SAFETY: both iovecs point into live, exclusively borrowed memory of
    // the lengths given (`len` bytes of `buf`'s spare capacity, all of
    // `next`), unmoved for the call; recvmsg(2) writes at most that much,
    // filling the first before the second.
    let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock => None,
            io::ErrorKind::Interrupted => None,
            _ => Some(Err(e)),
        };
    }
    let n = n as usize;
    assert!(n <= len + next.len(), "recvmsg returned more than asked");
    let body = n.min(len);
    // SAFETY: recvmsg(2) initialised the first `body` bytes of the spare
    // capacity (the first iovec is filled before the second).
    unsafe { buf.set_len(buf.len() + body) };
    Some(Ok((body, n - body)))
}

/// The bytes queued on socket `sock`, ready to be received (FIONREAD); 0
/// when the kernel will not say.
pub fn queued_bytes(sock: RawFd) -> usize {
    let mut queued: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, which points to
    // a live local.
    let r = unsafe { libc::ioctl(sock, libc::FIONREAD, &mut queued) };
    match r {
        0 => usize::try_from(queued).unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn queued_bytes_are_appended_and_an_empty_socket_says_so() {
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut buf = BytesMut::from(&b"ab"[..]);
        assert!(recv_ready(b.as_raw_fd(), &mut buf, 8).is_none(), "nothing queued yet");
        a.write_all(b"cdefghijkl").unwrap();
        assert_eq!(recv_ready(b.as_raw_fd(), &mut buf, 4).unwrap().unwrap(), 4);
        assert_eq!(&buf[..], b"abcdef");
        assert_eq!(recv_ready(b.as_raw_fd(), &mut buf, 100).unwrap().unwrap(), 6);
        assert_eq!(&buf[..], b"abcdefghijkl");
        drop(a);
        assert_eq!(recv_ready(b.as_raw_fd(), &mut buf, 4).unwrap().unwrap(), 0, "closed");
    }

    #[test]
    fn queued_bytes_counts_what_a_recv_would_take() {
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(queued_bytes(b.as_raw_fd()), 0);
        a.write_all(&[7u8; 1000]).unwrap();
        assert_eq!(queued_bytes(b.as_raw_fd()), 1000);
        let mut buf = BytesMut::new();
        assert_eq!(recv_ready(b.as_raw_fd(), &mut buf, 600).unwrap().unwrap(), 600);
        assert_eq!(queued_bytes(b.as_raw_fd()), 400);
        assert_eq!(queued_bytes(-1), 0, "not a socket");
    }

    #[test]
    fn the_bytes_past_the_wanted_ones_go_to_next_and_no_further() {
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut buf = BytesMut::new();
        let mut next = [0u8; 4];
        assert!(
            recv_ready_then(b.as_raw_fd(), &mut buf, 3, &mut next).is_none(),
            "nothing queued yet"
        );
        a.write_all(b"ab").unwrap();
        assert_eq!(
            recv_ready_then(b.as_raw_fd(), &mut buf, 3, &mut next).unwrap().unwrap(),
            (2, 0)
        );
        a.write_all(b"cdefghij").unwrap();
        assert_eq!(
            recv_ready_then(b.as_raw_fd(), &mut buf, 1, &mut next).unwrap().unwrap(),
            (1, 4)
        );
        assert_eq!(&buf[..], b"abc");
        assert_eq!(&next, b"defg");
        assert_eq!(
            recv_ready(b.as_raw_fd(), &mut buf, 100).unwrap().unwrap(),
            3,
            "h, i and j stay queued"
        );
        assert_eq!(&buf[..], b"abchij");
        drop(a);
        assert_eq!(
            recv_ready_then(b.as_raw_fd(), &mut buf, 4, &mut next).unwrap().unwrap(),
            (0, 0),
            "closed"
        );
    }
}
