//! Bytes between sockets, files and a shard, below the request handlers:
//!
//! - [`recv`]: reading request frames off a socket;
//! - [`sequence`]: answering a connection's requests in the order they
//!   came while their work runs concurrently;
//! - [`gather`]: one response's buffers in one `sendmsg(2)`;
//! - [`sendfile`], [`direct_read`], [`read_ahead`]: a response's file
//!   regions, zero-copy from the page cache or read with O_DIRECT, and
//!   the bytes after them read ahead for the next fetch;
//! - [`spread`]: which shard serves a new connection;
//! - [`port_taken`]: whether something already listens where a broker
//!   would;
//! - [`tls`]: an SSL listener's handshake (rustls, in userspace).
//!
//! Depends on: `ferrite-ids`, `ferrite-protocol` (a response's chunks) and
//! `ferrite-engine` (its truncation marks, so that nothing read ahead
//! outlives a truncation). It must not depend on replication, the
//! controller, the client or the broker: it knows frames and file
//! regions, not what a request means.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod direct_read;
pub mod error;
pub mod gather;
pub mod metrics;
pub mod port_taken;
pub mod read_ahead;
pub mod recv;
pub mod sendfile;
pub mod sequence;
pub mod spread;
pub mod tls;
