//! A response as the pieces that go on the socket: encoded bytes, and the
//! record regions of fetch responses, which are sent from the segment file
//! with `sendfile` (or from the engine's cache) without being copied into the
//! response buffer.

use std::os::fd::OwnedFd;

use bytes::Bytes;

use super::wire::Writer;

/// A region of a segment file to send as it is. The descriptor is a
/// duplicate owned by the response, so the segment may be deleted (and its
/// own descriptor closed) while the response is being sent.
#[derive(Debug)]
pub struct FileChunk {
    pub fd: OwnedFd,
    pub position: u64,
    pub len: u64,
    /// How the region is to be sent, as the partition's shard judged it.
    pub path: SendPath,
    /// Where a read ahead of what follows the region may go in the file,
    /// and the engine's mark of no truncation running when the region was
    /// read (`None`: one ran; the bytes read ahead are the file's only
    /// while no truncation began after the mark).
    pub readable_to: u64,
    pub truncations_quiet: Option<u64>,
}

/// How a file region is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendPath {
    /// `sendfile(2)` on glommio's blocking pool, from the page cache
    /// (filling it where it misses).
    Sendfile,
    /// `sendfile(2)` on the sending shard's own thread, non-blocking: the
    /// page cache held every page of the region when its partition's shard
    /// read it, so the call finds them there (`transport/src/sendfile.rs`).
    Inline,
    /// Read with O_DIRECT into memory and sent from there, when the sending
    /// shard has the memory (`transport/src/direct_read.rs`).
    Direct,
}

#[derive(Debug)]
pub enum Chunk {
    Bytes(Bytes),
    File(FileChunk),
}

impl Chunk {
    #[inline]
    pub fn len(&self) -> u64 {
        match self {
            Chunk::Bytes(b) => b.len() as u64,
            Chunk::File(f) => f.len,
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Builds a response: encoded fields interleaved with record chunks.
#[derive(Default)]
pub struct ResponseBuilder {
    chunks: Vec<Chunk>,
    pub w: Writer,
}

impl ResponseBuilder {
    #[inline]
    pub fn new() -> ResponseBuilder {
        ResponseBuilder::default()
    }

    /// Ends the current encoded run and appends a record chunk after it.
    #[inline]
    pub fn push_chunk(&mut self, chunk: Chunk) {
        let w = std::mem::take(&mut self.w);
        if !w.is_empty() {
            self.chunks.push(Chunk::Bytes(w.into_bytes().freeze()));
        }
        if !chunk.is_empty() {
            self.chunks.push(chunk);
        }
    }

    /// The chunks, and their total length.
    pub fn finish(mut self) -> (Vec<Chunk>, u64) {
        let w = std::mem::take(&mut self.w);
        if !w.is_empty() {
            self.chunks.push(Chunk::Bytes(w.into_bytes().freeze()));
        }
        let total = self.chunks.iter().map(Chunk::len).sum();
        (self.chunks, total)
    }
}
