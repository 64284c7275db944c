//! Records inside an uncompressed RecordBatch v2, and the zig-zag varints they
//! are made of. The log never needs this on its append or fetch path; it is
//! used to find the first record at or after a timestamp, and to build batches
//! in tests, benchmarks and fuzz seeds.
//!
//! # Layout of one record
//!
//! ```text
//! length          varint   bytes that follow
//! attributes      int8     unused, 0
//! timestampDelta  varlong  record timestamp - batch baseTimestamp
//! offsetDelta     varint   record offset - batch baseOffset
//! keyLength       varint   -1 for a null key
//! key             bytes
//! valueLength     varint   -1 for a null value
//! value           bytes
//! headerCount     varint
//!   headerKeyLength varint, headerKey bytes,
//!   headerValueLength varint, headerValue bytes   (repeated)
//! ```
//!
//! Varints are zig-zag encoded, 7 bits per byte, least significant group first.
//! Decoding checks every length against the bytes present before slicing.

use crate::error::BatchError;

const VARINT_BYTES_MAX: usize = 5;
const VARLONG_BYTES_MAX: usize = 10;

/// One record, borrowing its key, value and headers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub offset_delta: i32,
    pub timestamp_delta: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: Vec<(&'a [u8], Option<&'a [u8]>)>,
}

impl Record<'_> {
    /// Appends this record's encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut body = Vec::new();
        body.push(0u8);
        put_varlong(&mut body, self.timestamp_delta);
        put_varlong(&mut body, i64::from(self.offset_delta));
        put_bytes(&mut body, self.key);
        put_bytes(&mut body, self.value);
        put_varlong(&mut body, self.headers.len() as i64);
        for (k, v) in &self.headers {
            put_bytes(&mut body, Some(k));
            put_bytes(&mut body, *v);
        }
        put_varlong(out, body.len() as i64);
        out.extend_from_slice(&body);
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => put_varlong(out, -1),
        Some(b) => {
            put_varlong(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

/// Appends the zig-zag varint encoding of `v`.
pub fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        if z < 0x80 {
            out.push(z as u8);
            return;
        }
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
}

/// A bounded cursor over record bytes.
pub struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

fn invalid(reason: &'static str) -> BatchError {
    BatchError::Invalid { reason }
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn varint_of(&mut self, bytes_max: usize) -> Result<i64, BatchError> {
        let mut z: u64 = 0;
        for i in 0..bytes_max {
            let b = *self.bytes.get(self.pos).ok_or(invalid("truncated varint"))?;
            self.pos += 1;
            z |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(((z >> 1) as i64) ^ -((z & 1) as i64));
            }
        }
        Err(invalid("varint too long"))
    }

    pub fn varint(&mut self) -> Result<i32, BatchError> {
        let v = self.varint_of(VARINT_BYTES_MAX)?;
        i32::try_from(v).map_err(|_| invalid("varint out of range"))
    }

    pub fn varlong(&mut self) -> Result<i64, BatchError> {
        self.varint_of(VARLONG_BYTES_MAX)
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], BatchError> {
        if n > self.remaining() {
            return Err(invalid("length beyond the record's bytes"));
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn nullable_bytes(&mut self) -> Result<Option<&'a [u8]>, BatchError> {
        let len = self.varint()?;
        if len < 0 {
            return Ok(None);
        }
        self.take(len as usize).map(Some)
    }
}

/// Decodes the records of an uncompressed batch body (bytes after the 61-byte
/// header), stopping at `count`. The headers vector of each record is
/// bounded by the bytes present (each header takes at least 2 bytes).
pub fn decode_records(body: &[u8], count: i32) -> Result<Vec<Record<'_>>, BatchError> {
    let mut cur = Cursor::new(body);
    let count = usize::try_from(count).map_err(|_| invalid("negative record count"))?;
    // Each record takes at least 7 bytes; never reserve more than that allows.
    let mut out = Vec::with_capacity(count.min(body.len() / 7).min(1024));
    for _ in 0..count {
        let len = cur.varint()?;
        let len = usize::try_from(len).map_err(|_| invalid("negative record length"))?;
        let mut rec = Cursor::new(cur.take(len)?);
        let _attributes = rec.take(1)?;
        let timestamp_delta = rec.varlong()?;
        let offset_delta = rec.varint()?;
        let key = rec.nullable_bytes()?;
        let value = rec.nullable_bytes()?;
        let header_count = rec.varint()?;
        let header_count = usize::try_from(header_count).map_err(|_| invalid("negative header count"))?;
        if header_count > rec.remaining() / 2 {
            return Err(invalid("header count exceeds the record's bytes"));
        }
        let mut headers = Vec::with_capacity(header_count.min(64));
        for _ in 0..header_count {
            let k = rec.nullable_bytes()?.ok_or(invalid("null header key"))?;
            let v = rec.nullable_bytes()?;
            headers.push((k, v));
        }
        if rec.remaining() != 0 {
            return Err(invalid("record has trailing bytes"));
        }
        out.push(Record {
            offset_delta,
            timestamp_delta,
            key,
            value,
            headers,
        });
    }
    if cur.remaining() != 0 {
        return Err(invalid("batch has bytes after its last record"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn varlong_round_trips(v in any::<i64>()) {
            let mut out = Vec::new();
            put_varlong(&mut out, v);
            let mut c = Cursor::new(&out);
            prop_assert_eq!(c.varlong().unwrap(), v);
            prop_assert_eq!(c.remaining(), 0);
        }

        #[test]
        fn records_round_trip(
            key in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
            value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
            hk in proptest::collection::vec(any::<u8>(), 0..10),
            ts in -1000i64..1000,
        ) {
            let r = Record {
                offset_delta: 0,
                timestamp_delta: ts,
                key: key.as_deref(),
                value: value.as_deref(),
                headers: vec![(&hk[..], Some(&b"v"[..])), (&hk[..], None)],
            };
            let mut out = Vec::new();
            r.encode(&mut out);
            let back = decode_records(&out, 1).unwrap();
            prop_assert_eq!(&back[0], &r);
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64), n in 0i32..100) {
            let _ = decode_records(&bytes, n);
        }
    }
}
