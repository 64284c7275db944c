//! The recovery scanner: finds the longest valid prefix of a segment.
//!
//! It is fed the file's bytes in chunks of any size and keeps constant memory:
//! a batch's 61-byte header is buffered, the rest is only run through CRC-32C.
//! A length field read off the disk therefore never sizes an allocation, and
//! a garbage length simply runs past the end of the file and stops the scan.
//!
//! A batch is valid when its header parses, its CRC matches, its fields pass
//! the `Stored` checks of [`crate::batch`], and its base offset is at or
//! after the previous batch's next offset (the segment's base for the first).
//! The scan stops at the first batch that is not.

use crate::batch::{self, BatchInfo, Validation, CRC_START, HEADER_BYTES};
use crate::error::BatchError;
use crate::types::Offset;

/// Why the scan stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScanStop {
    /// Every byte fed was part of a valid batch.
    End,
    /// The batch at `position` is invalid or incomplete.
    Invalid { position: u64, reason: String },
}

enum State {
    /// At a batch boundary; `filled` header bytes are buffered.
    Header {
        filled: usize,
    },
    /// Inside the batch that starts at `start`.
    Body {
        start: u64,
        info: BatchInfo,
        crc: u32,
        remaining: u64,
    },
    Stopped,
}

pub struct Scanner {
    /// Absolute position of the next byte to be fed.
    position: u64,
    /// Where the batch being read starts.
    batch_start: u64,
    min_offset: Offset,
    header: [u8; HEADER_BYTES],
    state: State,
    stop: Option<ScanStop>,
}

impl Scanner {
    /// A scanner whose first byte is at `position`, expecting batches at or
    /// after `min_offset`.
    pub fn new(position: u64, min_offset: Offset) -> Scanner {
        Scanner {
            position,
            batch_start: position,
            min_offset,
            header: [0u8; HEADER_BYTES],
            state: State::Header { filled: 0 },
            stop: None,
        }
    }

    /// End of the valid prefix so far.
    pub fn valid_end(&self) -> u64 {
        self.batch_start
    }

    /// The offset after the last valid batch (or the starting minimum).
    pub fn next_offset(&self) -> Offset {
        self.min_offset
    }

    pub fn is_stopped(&self) -> bool {
        self.stop.is_some()
    }

    fn fail(&mut self, reason: String) {
        self.stop = Some(ScanStop::Invalid {
            position: self.batch_start,
            reason,
        });
        self.state = State::Stopped;
    }

    /// Consumes `chunk` (the bytes at the current position), calling
    /// `on_batch(position, info)` for each valid batch completed. Stops
    /// consuming at the first invalid batch.
    pub fn feed(&mut self, mut chunk: &[u8], on_batch: &mut dyn FnMut(u64, &BatchInfo)) {
        while !chunk.is_empty() {
            let used = match &mut self.state {
                State::Stopped => return,
                State::Header { filled } => {
                    let take = (HEADER_BYTES - *filled).min(chunk.len());
                    self.header[*filled..*filled + take].copy_from_slice(&chunk[..take]);
                    *filled += take;
                    if *filled == HEADER_BYTES {
                        self.start_body();
                    }
                    take
                }
                State::Body { crc, remaining, .. } => {
                    let take = (*remaining).min(chunk.len() as u64) as usize;
                    *crc = crc32c::crc32c_append(*crc, &chunk[..take]);
                    *remaining -= take as u64;
                    take
                }
            };
            chunk = &chunk[used..];
            self.position += used as u64;
            self.finish_batch_if_done(on_batch);
        }
    }

    fn start_body(&mut self) {
        let info = match batch::peek(&self.header) {
            Ok(info) => info,
            Err(e) => return self.fail(e.to_string()),
        };
        if info.base_offset < self.min_offset {
            return self.fail(format!(
                "batch base offset {} is below the expected {}",
                info.base_offset, self.min_offset
            ));
        }
        let crc = crc32c::crc32c(&self.header[CRC_START..]);
        self.state = State::Body {
            start: self.batch_start,
            info,
            crc,
            remaining: (info.size - HEADER_BYTES) as u64,
        };
    }

    fn finish_batch_if_done(&mut self, on_batch: &mut dyn FnMut(u64, &BatchInfo)) {
        let State::Body {
            start,
            info,
            crc,
            remaining: 0,
        } = self.state
        else {
            return;
        };
        let stored = u32::from_be_bytes([self.header[17], self.header[18], self.header[19], self.header[20]]);
        if stored != crc {
            return self.fail(BatchError::BadCrc { stored, computed: crc }.to_string());
        }
        if let Err(e) = batch::check_fields(&info, Validation::Stored) {
            return self.fail(e.to_string());
        }
        on_batch(start, &info);
        self.min_offset = info.next_offset();
        self.batch_start = start + info.size as u64;
        self.state = State::Header { filled: 0 };
    }

    /// Ends the scan: a batch left incomplete is a torn tail.
    pub fn finish(mut self) -> ScanStop {
        if let Some(stop) = self.stop.take() {
            return stop;
        }
        match self.state {
            State::Header { filled: 0 } => ScanStop::End,
            State::Header { filled } => ScanStop::Invalid {
                position: self.batch_start,
                reason: format!("truncated header ({filled} of {HEADER_BYTES} bytes)"),
            },
            State::Body { remaining, .. } => ScanStop::Invalid {
                position: self.batch_start,
                reason: format!("truncated batch ({remaining} bytes missing)"),
            },
            State::Stopped => ScanStop::End,
        }
    }
}

/// Scans a whole in-memory segment: the valid batches and why it stopped.
pub fn scan_bytes(bytes: &[u8], base: Offset) -> (Vec<(u64, BatchInfo)>, u64, ScanStop) {
    let mut found = Vec::new();
    let mut s = Scanner::new(0, base);
    s.feed(bytes, &mut |pos, info| found.push((pos, *info)));
    let end = s.valid_end();
    (found, end, s.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{build_batch, stamp};
    use crate::types::{LeaderEpoch, TimestampMs};

    fn log_of(n: usize) -> (Vec<u8>, Vec<usize>) {
        let mut out = Vec::new();
        let mut ends = Vec::new();
        for i in 0..n {
            let mut b = build_batch(Offset(0), TimestampMs(1000 + i as i64), &[b"hello", b"world"]);
            stamp(&mut b, Offset(2 * i as i64), LeaderEpoch(0));
            out.extend_from_slice(&b);
            ends.push(out.len());
        }
        (out, ends)
    }

    #[test]
    fn chunking_does_not_change_the_result() {
        let (bytes, ends) = log_of(20);
        for chunk in [1, 7, 61, 62, 100, 4096] {
            let mut s = Scanner::new(0, Offset(0));
            let mut n = 0;
            for c in bytes.chunks(chunk) {
                s.feed(c, &mut |_, _| n += 1);
            }
            assert_eq!(n, 20, "chunk {chunk}");
            assert_eq!(s.valid_end(), *ends.last().unwrap() as u64);
            assert_eq!(s.next_offset(), Offset(40));
            assert_eq!(s.finish(), ScanStop::End);
        }
    }

    #[test]
    fn stops_at_torn_tail_and_at_damage() {
        let (bytes, ends) = log_of(5);
        let (found, end, stop) = scan_bytes(&bytes[..ends[3] + 30], Offset(0));
        assert_eq!((found.len(), end), (4, ends[3] as u64));
        assert!(matches!(stop, ScanStop::Invalid { position, .. } if position == ends[3] as u64));
        let mut damaged = bytes.clone();
        damaged[ends[1] + 70] ^= 0xff;
        let (found, end, _) = scan_bytes(&damaged, Offset(0));
        assert_eq!((found.len(), end), (2, ends[1] as u64));
    }

    #[test]
    fn offsets_going_backwards_stop_the_scan() {
        let (mut bytes, ends) = log_of(3);
        bytes[ends[1]..ends[1] + 8].copy_from_slice(&0i64.to_be_bytes());
        let (found, _, stop) = scan_bytes(&bytes, Offset(0));
        assert_eq!(found.len(), 2);
        assert!(matches!(stop, ScanStop::Invalid { .. }));
    }
}
