//! How a direct-mode group's bytes become O_DIRECT writes: a group is a
//! run of the log's bytes that may start and end anywhere, and the device
//! takes only whole blocks. `layout_direct` returns the *head* (the block
//! the group starts in, rewritten whole: the earlier bytes kept in `tail`
//! followed by the group's first ones) and the *body* (the rest, from the
//! next block boundary, zero-padded to a whole block). With
//! [`Head::Joined`] the head is the start of the body instead: one write
//! from the head block's start. The module doc of `segment_appender` says
//! when each is used and in which order the appender submits the writes.

use std::ops::Range;

use bytes::Bytes;
use glommio::io::{DmaBuffer, DmaFile};

/// A group's bytes as the batches it is made of.
pub(crate) struct Pieces<'a> {
    pub(crate) pieces: &'a [Bytes],
    pub(crate) len: usize,
}

impl Pieces<'_> {
    /// Copies bytes `from..from + out.len()` of the concatenation into `out`.
    pub(crate) fn copy_range(&self, from: usize, out: &mut [u8]) {
        assert!(from + out.len() <= self.len, "range beyond the group");
        let mut skip = from;
        let mut at = 0;
        for p in self.pieces {
            if at == out.len() {
                break;
            }
            if skip >= p.len() {
                skip -= p.len();
                continue;
            }
            let take = (p.len() - skip).min(out.len() - at);
            out[at..at + take].copy_from_slice(&p[skip..skip + take]);
            at += take;
            skip = 0;
        }
    }

    /// The last `n` bytes.
    fn suffix(&self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.copy_range(self.len - n, &mut v);
        v
    }
}

/// Where to put a block-sized scratch buffer: glommio's aligned allocator in
/// production, plain memory in the layout test.
pub(crate) trait BlockAlloc {
    type Buf: AsMut<[u8]>;
    fn alloc(&self, len: usize) -> Self::Buf;
}

impl BlockAlloc for DmaFile {
    type Buf = DmaBufferMut;
    fn alloc(&self, len: usize) -> DmaBufferMut {
        DmaBufferMut(self.alloc_dma_buffer(len))
    }
}

pub(crate) struct DmaBufferMut(pub(crate) DmaBuffer);

impl AsMut<[u8]> for DmaBufferMut {
    fn as_mut(&mut self) -> &mut [u8] {
        self.0.as_bytes_mut()
    }
}
pub(crate) type Placed<B> = Option<(u64, B)>;

/// How the block a group starts in (when it starts inside one) is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Head {
    /// As its own one-block write, which must land after the earlier
    /// group that padded that block.
    Separate,
    /// As the start of the body: one write from the block's start. Only
    /// when every earlier group has completed.
    Joined,
}

pub(crate) fn layout_direct<A: BlockAlloc>(
    alloc: &A,
    tail: &mut Vec<u8>,
    start: u64,
    data: &Pieces<'_>,
    alignment: u64,
    head_mode: Head,
) -> (Placed<A::Buf>, Placed<A::Buf>, u64) {
    let a = alignment as usize;
    let end = start + data.len as u64;
    assert!(
        tail.len() == (start % alignment) as usize,
        "tail does not match the start"
    );
    let block_start = start - tail.len() as u64;
    // Bytes of the group that go into the block holding `start`.
    let head_take = if tail.is_empty() {
        0
    } else {
        (a - tail.len()).min(data.len)
    };
    let (head, body) = if head_mode == Head::Joined && !tail.is_empty() {
        (None, Some((block_start, blocks(alloc, a, tail, data, 0..data.len))))
    } else {
        let head = (!tail.is_empty()).then(|| (block_start, blocks(alloc, a, tail, data, 0..head_take)));
        let body_pos = start + head_take as u64;
        let body = (head_take < data.len).then(|| {
            assert!(body_pos % alignment == 0, "body does not start on a block");
            (body_pos, blocks(alloc, a, &[], data, head_take..data.len))
        });
        (head, body)
    };
    *tail = new_tail(std::mem::take(tail), data, end, alignment);
    (head, body, end)
}

/// A write buffer of whole blocks: `prefix`, then the group's bytes
/// `range`, then zeros up to the next block boundary.
fn blocks<A: BlockAlloc>(alloc: &A, a: usize, prefix: &[u8], data: &Pieces<'_>, range: Range<usize>) -> A::Buf {
    let len = prefix.len() + range.len();
    let mut buf = alloc.alloc(len.div_ceil(a) * a);
    let b = buf.as_mut();
    b[..prefix.len()].copy_from_slice(prefix);
    data.copy_range(range.start, &mut b[prefix.len()..len]);
    b[len..].fill(0);
    buf
}

/// The tail after a group ending at `end`: the bytes of the block holding
/// `end`, up to `end`. When that block is the one the group started in
/// (it holds more than the group's bytes), `old`'s bytes come first.
fn new_tail(old: Vec<u8>, data: &Pieces<'_>, end: u64, alignment: u64) -> Vec<u8> {
    let in_last_block = (end % alignment) as usize;
    if in_last_block == 0 {
        Vec::new()
    } else if in_last_block > data.len {
        let mut t = old;
        t.extend_from_slice(&data.suffix(data.len));
        t
    } else {
        data.suffix(in_last_block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct VecAlloc;

    impl BlockAlloc for VecAlloc {
        type Buf = Vec<u8>;
        fn alloc(&self, len: usize) -> Vec<u8> {
            vec![0xEE; len]
        }
    }

    /// (bodies first, heads after earlier groups) and checks the result,
    /// with heads written separately, joined to the body, and alternating.
    #[test]
    fn direct_layouts_reassemble_the_stream() {
        for modes in [[Head::Separate; 2], [Head::Joined; 2], [Head::Separate, Head::Joined]] {
            reassemble(modes);
        }
    }

    fn reassemble(modes: [Head; 2]) {
        let a = 16u64;
        let mut tail = Vec::new();
        let mut device = vec![0u8; 4096];
        let mut stream = Vec::new();
        let mut start = 0u64;
        let mut x = 7u8;
        for (i, lens) in [
            vec![3usize],
            vec![20, 1],
            vec![13],
            vec![16],
            vec![1],
            vec![1, 1, 1],
            vec![40],
            vec![5, 30],
            vec![11],
            vec![32],
            vec![2],
        ]
        .into_iter()
        .enumerate()
        {
            let mode = modes[i % 2];
            let pieces: Vec<Bytes> = lens
                .iter()
                .map(|len| {
                    Bytes::from(
                        (0..*len)
                            .map(|_| {
                                x = x.wrapping_mul(31).wrapping_add(1);
                                x | 1
                            })
                            .collect::<Vec<u8>>(),
                    )
                })
                .collect();
            for p in &pieces {
                stream.extend_from_slice(p);
            }
            let len = pieces.iter().map(|p| p.len()).sum();
            let (head, body, end) =
                layout_direct(&VecAlloc, &mut tail, start, &Pieces { pieces: &pieces, len }, a, mode);
            if mode == Head::Joined {
                assert!(head.is_none(), "a joined head is part of the body");
            }
            if let Some((pos, b)) = &body {
                assert_eq!(pos % a, 0);
                assert_eq!(b.len() as u64 % a, 0);
                device[*pos as usize..*pos as usize + b.len()].copy_from_slice(b);
            }
            if let Some((pos, b)) = &head {
                assert_eq!(pos % a, 0);
                assert_eq!(b.len() as u64, a);
                device[*pos as usize..*pos as usize + b.len()].copy_from_slice(b);
            }
            start = end;
            assert_eq!(
                &device[..stream.len()],
                &stream[..],
                "after a group of {lens:?} ({mode:?})"
            );
        }
    }
}
