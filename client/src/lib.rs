//! Ferrite's own Kafka client, used by the `ferrite` CLI, the broker's
//! follower fetcher and controller courier, and `ferrite-bench`: blocking
//! connections with pipelining, the client-side codec ([`codec`]), the
//! follower's fetch ([`replica_fetch`]) and a consumer-group member with its
//! assignors ([`group`]).
//!
//! Depends on: `ferrite-ids` and `ferrite-protocol` only; no runtime (the
//! connections are `std::net`). It must not depend on the engine,
//! replication, the controller or the broker.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod codec;
pub mod group;
pub mod replica_fetch;

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::Bytes;

use ferrite_protocol::wire::{Reader, WireError, Writer};

/// Largest response frame accepted.
pub const RESPONSE_BYTES_MAX: usize = 256 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{addr}: {source}")]
    Io { addr: String, source: std::io::Error },
    #[error("malformed response: {0}")]
    Wire(#[from] WireError),
    #[error("response {got} arrived while {expected} was expected")]
    Correlation { expected: i32, got: i32 },
    #[error("response of {0} bytes exceeds the limit")]
    TooLarge(usize),
    #[error("{0}")]
    Kafka(String),
}

/// Bytes read from the socket at a time: a broker that gathers several
/// answers into one send has them all taken in by one read.
const READ_BUFFER_BYTES: usize = 64 << 10;

/// A connection to one broker. Requests may be pipelined: `send` any number,
/// then `recv` their responses in the same order.
pub struct Connection {
    /// Reads go through the buffer; writes go to the socket itself.
    stream: BufReader<TcpStream>,
    addr: String,
    client_id: String,
    correlation: i32,
    awaiting: std::collections::VecDeque<i32>,
}

impl Connection {
    pub fn connect(addr: &str, client_id: &str) -> Result<Connection, ClientError> {
        let stream = TcpStream::connect(addr).map_err(|source| ClientError::Io {
            addr: addr.to_string(),
            source,
        })?;
        Connection::over(stream, addr, client_id)
    }

    /// [`Connection::connect`], giving up on the TCP handshake after
    /// `timeout` (an unreachable broker otherwise takes the kernel's two
    /// minutes).
    pub fn connect_timeout(addr: &str, client_id: &str, timeout: Duration) -> Result<Connection, ClientError> {
        let io = |source| ClientError::Io {
            addr: addr.to_string(),
            source,
        };
        let resolved = std::net::ToSocketAddrs::to_socket_addrs(addr).map_err(io)?.next();
        let target = resolved.ok_or_else(|| io(std::io::Error::other("resolves to no address")))?;
        let stream = TcpStream::connect_timeout(&target, timeout).map_err(io)?;
        Connection::over(stream, addr, client_id)
    }

    /// How long a response may take before `recv` fails (60 s by default).
    pub fn set_read_timeout(&mut self, timeout: Duration) -> Result<(), ClientError> {
        let stream = self.stream.get_ref();
        stream.set_read_timeout(Some(timeout)).map_err(|e| self.io(e))?;
        stream.set_write_timeout(Some(timeout)).map_err(|e| self.io(e))
    }

    fn over(stream: TcpStream, addr: &str, client_id: &str) -> Result<Connection, ClientError> {
        let io = |source| ClientError::Io {
            addr: addr.to_string(),
            source,
        };
        stream.set_nodelay(true).map_err(io)?;
        stream.set_read_timeout(Some(Duration::from_secs(60))).map_err(io)?;
        Ok(Connection {
            stream: BufReader::with_capacity(READ_BUFFER_BYTES, stream),
            addr: addr.to_string(),
            client_id: client_id.to_string(),
            correlation: 0,
            awaiting: Default::default(),
        })
    }

    fn io(&self, source: std::io::Error) -> ClientError {
        ClientError::Io {
            addr: self.addr.clone(),
            source,
        }
    }

    /// Sends a request; returns its correlation id.
    pub fn send(&mut self, api_key: i16, version: i16, body: impl FnOnce(&mut Writer)) -> Result<i32, ClientError> {
        self.correlation = self.correlation.wrapping_add(1);
        let f = codec::frame(api_key, version, self.correlation, &self.client_id, body);
        self.stream.get_mut().write_all(&f).map_err(|e| self.io(e))?;
        self.awaiting.push_back(self.correlation);
        Ok(self.correlation)
    }

    /// The next response, positioned after its header.
    pub fn recv(&mut self) -> Result<Reader, ClientError> {
        let expected = self.awaiting.pop_front().unwrap_or(-1);
        read_response(&mut self.stream, &self.addr, expected)
    }

    /// Splits the connection into a half that sends and a half that
    /// receives, each for its own thread: a sender that keeps to a
    /// schedule must not wait for answers (an open-loop load). Responses
    /// still come in request order.
    pub fn split(self) -> Result<(SendHalf, RecvHalf), ClientError> {
        let write = self.stream.get_ref().try_clone().map_err(|e| self.io(e))?;
        let (tx, rx) = std::sync::mpsc::channel();
        for c in &self.awaiting {
            let _ = tx.send(*c);
        }
        let send = SendHalf {
            stream: write,
            addr: self.addr.clone(),
            client_id: self.client_id,
            correlation: self.correlation,
            awaiting: tx,
        };
        let recv = RecvHalf {
            stream: self.stream,
            addr: self.addr,
            awaiting: rx,
        };
        Ok((send, recv))
    }

    pub fn call(&mut self, api_key: i16, version: i16, body: impl FnOnce(&mut Writer)) -> Result<Reader, ClientError> {
        self.send(api_key, version, body)?;
        self.recv()
    }

    /// A call at a flexible version: request header v2, response header v1
    /// (each with its tagged fields).
    pub fn call_flexible(
        &mut self,
        api_key: i16,
        version: i16,
        body: impl FnOnce(&mut Writer),
    ) -> Result<Reader, ClientError> {
        self.correlation = self.correlation.wrapping_add(1);
        let mut w = Writer::new();
        body(&mut w);
        let f = codec::frame_v2(api_key, version, self.correlation, &self.client_id, w.as_slice());
        self.stream.get_mut().write_all(&f).map_err(|e| self.io(e))?;
        self.awaiting.push_back(self.correlation);
        let mut r = self.recv()?;
        r.skip_tagged_fields()?;
        Ok(r)
    }

    pub fn inflight(&self) -> usize {
        self.awaiting.len()
    }
}

/// The sending half of a split [`Connection`].
pub struct SendHalf {
    stream: TcpStream,
    addr: String,
    client_id: String,
    correlation: i32,
    awaiting: std::sync::mpsc::Sender<i32>,
}

impl SendHalf {
    /// Sends a request; returns its correlation id.
    pub fn send(&mut self, api_key: i16, version: i16, body: impl FnOnce(&mut Writer)) -> Result<i32, ClientError> {
        self.correlation = self.correlation.wrapping_add(1);
        let f = codec::frame(api_key, version, self.correlation, &self.client_id, body);
        // Awaited before it can be answered.
        let _ = self.awaiting.send(self.correlation);
        self.stream.write_all(&f).map_err(|source| ClientError::Io {
            addr: self.addr.clone(),
            source,
        })?;
        Ok(self.correlation)
    }
}

/// The receiving half of a split [`Connection`].
pub struct RecvHalf {
    stream: BufReader<TcpStream>,
    addr: String,
    awaiting: std::sync::mpsc::Receiver<i32>,
}

impl RecvHalf {
    /// The next response, positioned after its header; waits for its
    /// request to be sent first (an error once the sending half is gone
    /// with nothing awaited).
    pub fn recv(&mut self) -> Result<Reader, ClientError> {
        let expected = self
            .awaiting
            .recv()
            .map_err(|_| ClientError::Kafka(format!("{}: no request awaits an answer", self.addr)))?;
        read_response(&mut self.stream, &self.addr, expected)
    }
}

/// Reads one response frame and checks that it answers `expected`.
fn read_response(stream: &mut BufReader<TcpStream>, addr: &str, expected: i32) -> Result<Reader, ClientError> {
    let io = |source| ClientError::Io {
        addr: addr.to_string(),
        source,
    };
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).map_err(io)?;
    let size = i32::from_be_bytes(size).max(0) as usize;
    if size > RESPONSE_BYTES_MAX {
        return Err(ClientError::TooLarge(size));
    }
    let mut buf = vec![0u8; size];
    stream.read_exact(&mut buf).map_err(io)?;
    let mut r = Reader::new(Bytes::from(buf));
    let got = codec::response_correlation(&mut r)?;
    if got != expected {
        return Err(ClientError::Correlation { expected, got });
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A split connection's halves, each on its own thread, still pair
    /// every response with its request; a response out of order is an
    /// error.
    #[test]
    fn the_halves_of_a_split_connection_keep_responses_in_request_order() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        // A peer that answers each request with its correlation id, and
        // the fourth with a wrong one.
        let peer = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            for i in 0..4 {
                let mut size = [0u8; 4];
                s.read_exact(&mut size).unwrap();
                let mut frame = vec![0u8; i32::from_be_bytes(size) as usize];
                s.read_exact(&mut frame).unwrap();
                let correlation = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
                let answer = if i == 3 { correlation + 7 } else { correlation };
                let mut out = 4i32.to_be_bytes().to_vec();
                out.extend_from_slice(&answer.to_be_bytes());
                s.write_all(&out).unwrap();
            }
        });
        let c = Connection::connect(&addr, "test").unwrap();
        let (mut send, mut recv) = c.split().unwrap();
        let reader = std::thread::spawn(move || {
            for _ in 0..3 {
                recv.recv().expect("in order");
            }
            recv.recv().map(|_| ())
        });
        for _ in 0..4 {
            send.send(18, 0, |_| {}).unwrap();
        }
        let last = reader.join().unwrap();
        assert!(
            matches!(last, Err(ClientError::Correlation { expected: 4, got: 11 })),
            "{last:?}"
        );
        peer.join().unwrap();
    }
}
