//! Gathered sends: the buffers of one response (its size, header, body and
//! cached record batches) leave in one `sendmsg(2)` instead of one send per
//! buffer. On loopback every send is a trip through the TCP stack that also
//! wakes the receiver, and a fetch answered from the cache is one buffer per
//! batch.
//!
//! The call is non-blocking (`MSG_DONTWAIT`); when the socket is full, the
//! rest of the first unsent buffer goes through the stream's own write,
//! which waits for room on the reactor, and gathering resumes after it.

use std::io;

use futures_lite::{AsyncWrite, AsyncWriteExt};

/// Buffers gathered into one call (Linux's `IOV_MAX` is 1024).
const IOVECS_MAX: usize = 64;

/// Where a send is: buffer `index`, `offset` bytes into it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Cursor {
    index: usize,
    offset: usize,
}

impl Cursor {
    /// Moves past `n` sent bytes, and past empty buffers.
    fn advance(&mut self, bufs: &[&[u8]], mut n: usize) {
        while self.index < bufs.len() {
            let left = bufs[self.index].len() - self.offset;
            if n < left {
                self.offset += n;
                return;
            }
            n -= left;
            self.index += 1;
            self.offset = 0;
        }
        assert!(n == 0, "sent more bytes than the buffers hold");
    }
}

/// Sends every byte of `bufs`, in order, on `sock`, the descriptor of `w`.
pub async fn send_all<W: AsyncWrite + Unpin>(w: &mut W, sock: i32, bufs: &[&[u8]]) -> io::Result<()> {
    let mut at = Cursor::default();
    at.advance(bufs, 0);
    while at.index < bufs.len() {
        match send_some(sock, bufs, at) {
            Ok(n) => at.advance(bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let n = w.write(&bufs[at.index][at.offset..]).await?;
                if n == 0 {
                    return Err(io::ErrorKind::WriteZero.into());
                }
                at.advance(bufs, n);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One non-blocking `sendmsg` of the buffers from `at` on.
fn send_some(sock: i32, bufs: &[&[u8]], at: Cursor) -> io::Result<usize> {
    let iov: Vec<libc::iovec> = bufs[at.index..]
        .iter()
        .enumerate()
        .map(|(i, b)| if i == 0 { &b[at.offset..] } else { b })
        .filter(|b| !b.is_empty())
        .take(IOVECS_MAX)
        .map(|b| libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        })
        .collect();
    // SAFETY: zeroed is a valid msghdr (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = iov.len();
    // SAFETY: every iovec points into a buffer of `bufs`, alive and unmoved
    // for the call; the kernel only reads them.
    let n = unsafe { libc::sendmsg(sock, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cursor_steps_over_sent_and_empty_buffers() {
        let bufs: [&[u8]; 4] = [b"abc", b"", b"de", b"f"];
        let mut at = Cursor::default();
        at.advance(&bufs, 2);
        assert_eq!(at, Cursor { index: 0, offset: 2 });
        at.advance(&bufs, 1);
        assert_eq!(at, Cursor { index: 2, offset: 0 });
        at.advance(&bufs, 3);
        assert_eq!(at, Cursor { index: 4, offset: 0 });
    }

    #[test]
    fn a_full_socket_gets_every_byte_in_order() {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .make()
            .expect("executor")
            .run(async {
                use futures_lite::AsyncReadExt;
                use std::os::unix::io::AsRawFd;
                let listener = glommio::net::TcpListener::bind("127.0.0.1:0").expect("bind");
                let addr = listener.local_addr().expect("addr");
                let client = glommio::spawn_local(async move {
                    let mut s = glommio::net::TcpStream::connect(addr).await.expect("connect");
                    // Let the sender fill the socket first.
                    glommio::timer::sleep(std::time::Duration::from_millis(50)).await;
                    let mut got = Vec::new();
                    s.read_to_end(&mut got).await.expect("read");
                    got
                });
                let mut server = listener.accept().await.expect("accept");
                let sock = server.as_raw_fd();
                // ~32 MB in 200 buffers of varying sizes: more than the
                // socket holds, so sends block part-way.
                let data: Vec<Vec<u8>> = (0..200u32)
                    .map(|i| {
                        (0..(i as usize * 1597) % 320_000)
                            .map(|j| (i as usize + j) as u8)
                            .collect()
                    })
                    .collect();
                let bufs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
                send_all(&mut server, sock, &bufs).await.expect("send");
                server.close().await.expect("close");
                let got = client.await;
                assert_eq!(got, data.concat());
            });
    }
}
