//! One client connection: frames in, responses out, in order.
//!
//! The reader decodes each frame and starts its handler at once (up to
//! `connection_requests_inflight_max` requests in flight), after giving it
//! its turn: writes take effect in arrival order and reads see the writes
//! before them (see [`sequence`](super::sequence)). The writer awaits the
//! handlers in arrival order and writes each response, so answers keep the
//! request order. Responses already done behind the awaited one leave in
//! the same gathered send.
//!
//! A frame is refused — and the connection closed — when its size is
//! negative, larger than `socket.request.max.bytes`, or smaller than a
//! request header, or when it ends early, does not decode, or names an API
//! or version Ferrite does not serve (ApiVersions excepted, which gets
//! UNSUPPORTED_VERSION and the supported ranges). The size is checked before
//! the frame's buffer is allocated.

use std::os::unix::io::{AsRawFd, RawFd};
use std::rc::Rc;

use bytes::BytesMut;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;

use crate::handlers::{self, Caller, Reply};
use crate::shard::BrokerShard;
use ferrite_protocol::request::{decode_frame, Decoded};
use ferrite_protocol::response::Chunk;
use ferrite_security::Principal;
use ferrite_transport::direct_read::{DirectReads, SendPath};
use ferrite_transport::sequence::{Ordering, Sequencer};
use ferrite_transport::{gather, recv, sendfile, tls};

/// api_key + api_version + correlation_id.
const REQUEST_HEADER_BYTES_MIN: usize = 8;
/// A TLS record's first byte when it carries a handshake (its second is
/// the major version, 3): a frame "size" starting so is a TLS client on a
/// plaintext listener (it would be over 369 MB, past any limit).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;
/// A read takes at most this much of a frame, and a frame's buffer starts
/// at most this large.
const FRAME_READ_BYTES_MAX: usize = 256 << 10;

enum Next {
    Frame(std::io::Result<Option<BytesMut>>),
    Stop,
}

/// The next frame's 4-byte size, or its first bytes, taken in by the read
/// that finished the frame before it.
#[derive(Default)]
pub(super) struct SizeCarry {
    bytes: [u8; 4],
    len: usize,
}

/// The next frame's size, checked against `max`, from the bytes in
/// `carry` and then `r`; `Ok(None)` at a clean end of stream.
async fn read_size<R: futures_lite::AsyncRead + Unpin>(
    r: &mut R,
    max: usize,
    carry: &mut SizeCarry,
) -> std::io::Result<Option<usize>> {
    let mut size = carry.bytes;
    let mut got = std::mem::take(&mut carry.len);
    while got < 4 {
        let n = r.read(&mut size[got..]).await?;
        if n == 0 {
            if got == 0 {
                return Ok(None);
            }
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        got += n;
    }
    if size[0] == TLS_HANDSHAKE_RECORD && size[1] == 3 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "a TLS handshake on a PLAINTEXT listener (is the client set to SSL for this port?)",
        ));
    }
    let size = i32::from_be_bytes(size);
    if size < REQUEST_HEADER_BYTES_MIN as i32 || size as usize > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame size {size} outside [{REQUEST_HEADER_BYTES_MIN}, {max}]"),
        ));
    }
    Ok(Some(size as usize))
}

/// Reads one frame from `r`; `Ok(None)` at a clean end of stream. On a
/// plaintext connection (`raw`: its socket) bytes already queued are
/// taken off the socket directly. The frame starts with the bytes in
/// `carry`, and its last read leaves the next frame's first bytes there.
pub(super) async fn read_frame<R: futures_lite::AsyncRead + Unpin>(
    r: &mut R,
    raw: Option<RawFd>,
    max: usize,
    carry: &mut SizeCarry,
) -> std::io::Result<Option<BytesMut>> {
    let Some(size) = read_size(r, max, carry).await? else {
        return Ok(None);
    };
    let mut frame = BytesMut::new();
    while frame.len() < size {
        let start = frame.len();
        if frame.capacity() == start {
            // Only a frame larger than the first allocation asks how much
            // is queued (one ioctl); a smaller one is allocated whole.
            let queued = match (raw, size > FRAME_READ_BYTES_MAX) {
                (Some(sock), true) => recv::queued_bytes(sock),
                _ => 0,
            };
            let capacity = frame_capacity(size, start, queued);
            assert!(capacity > start, "a frame's buffer must grow while bytes are missing");
            // Exactly this much: `BytesMut::reserve` would at least double.
            let mut grown = BytesMut::with_capacity(capacity);
            grown.extend_from_slice(&frame);
            frame = grown;
        }
        let want = (size - start).min(FRAME_READ_BYTES_MAX).min(frame.capacity() - start);
        // Bytes already queued go straight into the spare capacity (the
        // frame's last ones with the next frame's size behind them); only
        // an empty socket costs a zeroed chunk and an async read.
        let ready = match (raw, start + want == size) {
            (None, _) => None,
            (Some(sock), true) => recv::recv_ready_then(sock, &mut frame, want, &mut carry.bytes),
            (Some(sock), false) => recv::recv_ready(sock, &mut frame, want).map(|got| got.map(|n| (n, 0))),
        };
        match ready {
            Some(Ok((0, _))) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Some(Ok((_, next))) => {
                carry.len = next;
                continue;
            }
            Some(Err(e)) => return Err(e),
            None => {}
        }
        frame.resize(start + want, 0);
        let n = r.read(&mut frame[start..]).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        frame.truncate(start + n);
    }
    Ok(Some(frame))
}

/// The capacity a frame's buffer takes when it is full at `len` of the
/// frame's `size` bytes, `queued` more bytes waiting on the socket: room
/// for what the client has sent, so that a frame already queued whole is
/// received into one allocation, with no copy as it grows (a 1 MiB batch
/// grown by doubling from 256 KiB was copied 0.75 times over); at least
/// double `len`, so that a frame trickling in is copied less than twice
/// over in all; at least [`FRAME_READ_BYTES_MAX`]; never more than
/// `size`. A size claimed by a client that then sends nothing costs at
/// most [`FRAME_READ_BYTES_MAX`].
fn frame_capacity(size: usize, len: usize, queued: usize) -> usize {
    let sent = len.saturating_add(queued);
    size.min(sent.max(2 * len).max(FRAME_READ_BYTES_MAX))
}

/// Responses already answered behind the one the writer waited for leave
/// with it in one gathered send, up to this many. An acks=all high
/// watermark or a group write often finishes several requests of a
/// connection at once; one send then wakes the client once.
const REPLIES_GATHERED_MAX: usize = 16;

/// A TLS session is handed buffers joined up to this size: it makes one
/// record per write at least, and a response's small buffers would each
/// be a record of their own.
const TLS_JOINED_BYTES_MAX: usize = 64 << 10;

/// Sends `bufs` in order: on a plaintext connection (`raw`: its socket) in
/// gathered sends; through a TLS session joined into larger pieces first.
async fn send_all<W: futures_lite::AsyncWrite + Unpin>(
    w: &mut W,
    raw: Option<i32>,
    bufs: &[&[u8]],
) -> std::io::Result<()> {
    let Some(sock) = raw else {
        // Small buffers (sizes, headers, cached batches) joined into
        // pieces of up to TLS_JOINED_BYTES_MAX; a large one as it is.
        let mut joined = Vec::new();
        for b in bufs {
            if joined.len() + b.len() > TLS_JOINED_BYTES_MAX && !joined.is_empty() {
                w.write_all(&joined).await?;
                joined.clear();
            }
            match b.len() >= TLS_JOINED_BYTES_MAX {
                true => w.write_all(b).await?,
                false => joined.extend_from_slice(b),
            }
        }
        return w.write_all(&joined).await;
    };
    gather::send_all(w, sock, bufs).await
}

/// Writes `replies` in order: their in-memory chunks gathered into as few
/// sends as possible; on a plaintext connection (`raw`: its socket) a file
/// region by sendfile or read directly (`direct_read.rs`), through a TLS
/// session read into memory and encrypted (`tls.rs`). A `Reply::Close`
/// ends the connection after the replies before it are written.
pub(super) async fn write_replies<W: futures_lite::AsyncWrite + Unpin>(
    w: &mut W,
    raw: Option<i32>,
    replies: &[Reply],
) -> std::io::Result<()> {
    let mut prefixes = Vec::with_capacity(replies.len());
    for reply in replies {
        let len = match reply {
            Reply::Response { len, .. } => {
                i32::try_from(*len).map_err(|_| std::io::Error::other("response larger than 2 GiB"))?
            }
            Reply::Nothing | Reply::Close => 0,
        };
        prefixes.push(len.to_be_bytes());
    }
    let mut gathered: Vec<&[u8]> = Vec::new();
    for (reply, prefix) in replies.iter().zip(&prefixes) {
        let chunks = match reply {
            Reply::Nothing => continue,
            Reply::Close => {
                send_all(w, raw, &gathered).await?;
                w.flush().await?;
                return Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    "acks=0 produce failed",
                ));
            }
            Reply::Response { chunks, .. } => chunks,
        };
        let mut reads = match raw {
            Some(_) => DirectReads::start(chunks).await,
            None => DirectReads::none(),
        };
        gathered.push(prefix);
        for (i, c) in chunks.iter().enumerate() {
            match c {
                Chunk::Bytes(b) => gathered.push(b),
                Chunk::File(f) => {
                    send_all(w, raw, &gathered).await?;
                    gathered.clear();
                    let Some(sock) = raw else {
                        tls::send_region(w, f).await?;
                        continue;
                    };
                    if reads.is_direct(i) {
                        reads.send(w, sock, f).await?;
                    } else if f.path == SendPath::Inline {
                        sendfile::send_inline(w, sock, f).await?;
                        ferrite_transport::metrics::file_sent(SendPath::Inline, f.len);
                    } else {
                        w.flush().await?;
                        sendfile::send_chunk(sock, f).await?;
                        ferrite_transport::metrics::file_sent(SendPath::Sendfile, f.len);
                    }
                }
            }
        }
    }
    send_all(w, raw, &gathered).await?;
    w.flush().await
}

/// The connection's writer: awaits each request's handler in arrival
/// order, takes along the replies of those behind it that are already
/// done, and writes them. Ends when the reader is gone and every accepted
/// request is answered, or on a failed write.
async fn write_loop<W: futures_lite::AsyncWrite + Unpin>(
    mut w: W,
    (sock, raw): (i32, Option<i32>),
    rx: async_channel::Receiver<glommio::Task<Reply>>,
) {
    let mut waiting: Option<glommio::Task<Reply>> = None;
    let mut replies = Vec::with_capacity(REPLIES_GATHERED_MAX);
    loop {
        let task = match waiting.take() {
            Some(t) => t,
            None => match rx.recv().await {
                Ok(t) => t,
                Err(_) => {
                    if raw.is_none() {
                        close_session(&mut w).await;
                    }
                    return;
                }
            },
        };
        replies.push(task.await);
        while replies.len() < REPLIES_GATHERED_MAX {
            let Ok(mut next) = rx.try_recv() else { break };
            match futures_lite::future::poll_once(&mut next).await {
                Some(reply) => replies.push(reply),
                None => {
                    waiting = Some(next);
                    break;
                }
            }
        }
        if let Err(e) = write_replies(&mut w, raw, &replies).await {
            tracing::debug!(error = %e, "closing connection after a failed or refused write");
            // Wake the reader too: it must not wait for more requests.
            // SAFETY: shutdown(2) on the connection's own socket.
            unsafe { libc::shutdown(sock, libc::SHUT_RDWR) };
            return;
        }
        replies.clear();
    }
}

/// Ends a TLS session as TLS asks (close_notify), so that the client sees
/// an orderly end and not a cut-off stream; a client that takes nothing
/// for the send-stall limit is not waited for.
async fn close_session<W: futures_lite::AsyncWrite + Unpin>(w: &mut W) {
    let stall = std::time::Duration::from_millis(sendfile::SEND_STALL_MS_MAX);
    let closed = futures_lite::future::or(async { Some(w.close().await) }, async {
        glommio::timer::sleep(stall).await;
        None
    })
    .await;
    if let Some(Err(e)) = closed {
        tracing::debug!(error = %e, "closing a TLS session");
    }
}

/// Serves a connection accepted on a listener (`ear`): plaintext, or after
/// its TLS handshake, and on a SASL listener once the client is
/// authenticated.
pub async fn serve(shard: Rc<BrokerShard>, stream: TcpStream, ear: super::Ear) {
    let peer = stream.peer_addr().ok();
    tracing::debug!(?peer, shard = %shard.id, "connection opened");
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "TCP_NODELAY");
    }
    let sock = stream.as_raw_fd();
    if let Err(e) = sendfile::limit_blocking_sends(sock) {
        tracing::warn!(error = %e, "SO_SNDTIMEO");
    }
    // Inline sendfile must not block the shard on a full socket; glommio's
    // own reads and writes never block either way (MSG_DONTWAIT, then a
    // poll on the ring).
    if let Err(e) = sendfile::set_nonblocking(sock) {
        tracing::warn!(error = %e, "O_NONBLOCK");
    }
    let caller = Caller {
        peer,
        listener: ear.index,
        principal: Rc::new(Principal::anonymous()),
    };
    match &ear.tls {
        None => serve_authenticated(shard, stream, (sock, Some(sock)), caller, &ear).await,
        Some(acceptor) => match acceptor.handshake(stream).await {
            Ok(session) => serve_authenticated(shard, session, (sock, None), caller, &ear).await,
            Err(e) => tracing::info!(?peer, error = %e, "TLS handshake failed; connection closed"),
        },
    }
    tracing::debug!(?peer, "connection closed");
}

/// Serves `stream` once its client is authenticated, when the listener
/// asks for SASL.
async fn serve_authenticated<S>(
    shard: Rc<BrokerShard>,
    mut stream: S,
    (sock, raw): (RawFd, Option<RawFd>),
    mut caller: Caller,
    ear: &super::Ear,
) where
    S: futures_lite::AsyncRead + futures_lite::AsyncWrite + Unpin + 'static,
{
    let mut carry = SizeCarry::default();
    if let Some(sasl) = &ear.sasl {
        let (mechanisms, receive_max) = (&sasl.mechanisms, sasl.receive_bytes_max);
        let authenticated = super::sasl_gate::authenticate(
            &shard,
            &mut stream,
            raw,
            mechanisms,
            receive_max,
            caller.peer,
            &mut carry,
        )
        .await;
        match authenticated {
            Some(principal) => caller.principal = Rc::new(principal),
            None => {
                if raw.is_none() {
                    close_session(&mut stream).await;
                }
                return;
            }
        }
    }
    serve_frames(shard, stream, (sock, raw), caller, carry).await
}

/// Reads frames off `stream` and answers them, in order, until the client
/// or the broker ends it. `sock`: the socket; `raw`: the same, when bytes
/// may go to and from it directly (plaintext), `None` under TLS.
/// `carry`: what was read of the first frame already (by authentication).
async fn serve_frames<S>(
    shard: Rc<BrokerShard>,
    stream: S,
    (sock, raw): (RawFd, Option<RawFd>),
    caller: Caller,
    mut carry: SizeCarry,
) where
    S: futures_lite::AsyncRead + futures_lite::AsyncWrite + Unpin + 'static,
{
    let peer = caller.peer;
    let (mut rd, wr) = futures_lite::io::split(stream);
    let inflight_max = shard.config.connection_requests_inflight_max.max(1);
    let (tx, rx) = async_channel::bounded::<glommio::Task<Reply>>(inflight_max);
    let writer = glommio::spawn_local(write_loop(wr, (sock, raw), rx));
    let max = shard.config.socket_request_max_bytes;
    let mut sequencer = Sequencer::default();
    loop {
        let seen = shard.stop_signal.generation();
        if shard.stopping.get() {
            break;
        }
        let next = futures_lite::future::or(
            async { Next::Frame(read_frame(&mut rd, raw, max, &mut carry).await) },
            async {
                shard.stop_signal.changed_since(seen).await;
                Next::Stop
            },
        )
        .await;
        let frame = match next {
            Next::Stop => break,
            Next::Frame(Ok(Some(f))) => f,
            Next::Frame(Ok(None)) => break,
            Next::Frame(Err(e)) => {
                tracing::info!(?peer, error = %e, "closing connection");
                break;
            }
        };
        let task = match decode_frame(frame.freeze()) {
            Ok(Decoded::Request(req)) => {
                let shard = shard.clone();
                let turn = sequencer.turn(Ordering::of(req.api));
                let caller = caller.clone();
                glommio::spawn_local(async move { handlers::handle_from(&shard, *req, caller, turn).await })
            }
            Ok(Decoded::ApiVersionsUnsupported(header)) => {
                let reply = handlers::api_versions_unsupported(&header);
                glommio::spawn_local(async move { reply })
            }
            Err(e) => {
                tracing::info!(?peer, error = %e, "closing connection");
                break;
            }
        };
        if tx.send(task).await.is_err() {
            break;
        }
    }
    // Answer what was already accepted, then close.
    drop(tx);
    writer.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    /// Frames of `bodies`, each behind its 4-byte size.
    fn frames(bodies: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for b in bodies {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        }
        out
    }

    /// Every split of a frame's size between the carry and the socket (the
    /// read that ended the frame before may have taken 0 to 4 of its
    /// bytes), with frames small and larger than the first allocation,
    /// sent in pieces: each frame comes back whole, in a buffer no larger
    /// than itself, and the last read leaves the next frame's first bytes
    /// in the carry.
    #[test]
    fn a_size_split_between_carry_and_socket_reads_the_frames_whole() {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .make()
            .expect("executor")
            .run(async {
                use std::os::unix::io::AsRawFd;
                let bodies: Vec<Vec<u8>> = [12usize, 700 << 10, 9]
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (0..*n).map(|j| (i * 31 + j) as u8).collect())
                    .collect();
                let wire = frames(&bodies);
                for carried in 0..=4 {
                    let listener = glommio::net::TcpListener::bind("127.0.0.1:0").expect("bind");
                    let addr = listener.local_addr().expect("addr");
                    let sent = wire[carried..].to_vec();
                    let writer = std::thread::spawn(move || {
                        use std::io::Write;
                        let mut s = std::net::TcpStream::connect(addr).expect("connect");
                        s.set_nodelay(true).expect("nodelay");
                        // In pieces, so that the large frame's buffer grows.
                        for piece in sent.chunks(100 << 10) {
                            s.write_all(piece).expect("write");
                            std::thread::sleep(std::time::Duration::from_millis(2));
                        }
                    });
                    let mut server = listener.accept().await.expect("accept");
                    let sock = server.as_raw_fd();
                    let mut carry = SizeCarry::default();
                    carry.bytes[..carried].copy_from_slice(&wire[..carried]);
                    carry.len = carried;
                    for body in &bodies {
                        let frame = read_frame(&mut server, Some(sock), 1 << 20, &mut carry)
                            .await
                            .expect("read")
                            .expect("a frame");
                        assert_eq!(frame.len(), body.len(), "carried {carried}");
                        assert_eq!(
                            frame.capacity(),
                            body.len(),
                            "carried {carried}: the buffer fits the frame"
                        );
                        assert!(frame[..] == body[..], "carried {carried}: the bytes differ");
                    }
                    assert!(
                        read_frame(&mut server, Some(sock), 1 << 20, &mut carry)
                            .await
                            .expect("end")
                            .is_none(),
                        "carried {carried}: a clean end after the last frame"
                    );
                    writer.join().expect("writer");
                }
            });
    }

    #[test]
    fn a_frame_queued_whole_gets_one_buffer_of_its_size() {
        assert_eq!(
            frame_capacity(16 << 10, 0, 0),
            16 << 10,
            "small frames are allocated whole"
        );
        assert_eq!(frame_capacity(MIB, 0, MIB), MIB);
        assert_eq!(
            frame_capacity(MIB, 0, 8 * MIB),
            MIB,
            "bytes of later frames are not counted"
        );
    }

    #[test]
    fn a_claimed_size_costs_no_more_than_what_was_sent() {
        assert_eq!(frame_capacity(100 * MIB, 0, 0), FRAME_READ_BYTES_MAX);
        assert_eq!(frame_capacity(100 * MIB, 0, 3 * MIB), 3 * MIB);
        assert_eq!(
            frame_capacity(100 * MIB, FRAME_READ_BYTES_MAX, 0),
            2 * FRAME_READ_BYTES_MAX
        );
    }

    #[test]
    fn a_trickling_frame_at_least_doubles_its_buffer() {
        let size = 10 * MIB;
        let mut capacity = frame_capacity(size, 0, 1);
        let mut copied = 0;
        while capacity < size {
            copied += capacity;
            let next = frame_capacity(size, capacity, 1);
            assert!(next >= 2 * capacity.min(size / 2), "{capacity} grew to {next}");
            capacity = next;
        }
        assert_eq!(capacity, size);
        assert!(
            copied < 2 * size,
            "growing copied {copied} bytes of a {size}-byte frame"
        );
    }
}
