//! The Kafka wire primitives, decoded with bounds and encoded into a buffer.
//!
//! Every length read off the wire is checked against the bytes that remain
//! before anything is sliced or allocated, and every collection's element
//! count against what its smallest element would need, so a few bytes can
//! never make the broker reserve gigabytes (Kafka's CVE-2022-34917; the
//! `kafka-protocol` crate 0.18 aborts on a 14-byte Metadata request claiming
//! 2^31 topics).
//!
//! Types, as in Kafka's protocol guide: `int8/16/32/64` big-endian;
//! `varint`/`varlong` zig-zag; `unsigned_varint` 7 bits per byte;
//! `string` (int16 length, -1 null), `compact_string` (unsigned varint
//! length + 1, 0 null); `bytes` (int32 length), `compact_bytes`; arrays
//! (int32 count, -1 null) and compact arrays (unsigned varint count + 1);
//! tagged fields (unsigned varint count, then tag, size, bytes each).

use bytes::{BufMut, Bytes, BytesMut};

/// Why a frame could not be decoded. Malformed input closes the connection.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("truncated: {what} needs {needed} bytes, {available} remain")]
    Truncated {
        what: &'static str,
        needed: usize,
        available: usize,
    },
    #[error("invalid {what}: {value}")]
    Invalid { what: &'static str, value: i64 },
    #[error("{what} is not UTF-8")]
    NotUtf8 { what: &'static str },
    #[error("{what} is null where a value is required")]
    UnexpectedNull { what: &'static str },
    /// A message version that cannot be read or written.
    #[error("unsupported {what} version {version}")]
    UnsupportedVersion { what: &'static str, version: i16 },
    /// A value too long for its length prefix (encoding only).
    #[error("{what} is too large to encode: {len} exceeds the limit of {max}")]
    TooLarge { what: &'static str, len: usize, max: usize },
}

pub type WireResult<T> = Result<T, WireError>;

/// Elements reserved up front for a decoded collection. A count is checked
/// against the bytes present, but an element in memory is larger than its
/// smallest encoding (up to ~25x), so reserving the full count would let a
/// 100 MiB frame reserve gigabytes; past this, vectors grow as they fill.
pub const PREALLOC_ELEMENTS_MAX: usize = 1024;

/// The capacity to reserve for `n` decoded elements.
#[inline]
pub fn capacity(n: usize) -> usize {
    n.min(PREALLOC_ELEMENTS_MAX)
}

/// A bounded cursor over one frame.
pub struct Reader {
    buf: Bytes,
    pos: usize,
}

impl Reader {
    #[inline]
    pub fn new(buf: Bytes) -> Reader {
        Reader { buf, pos: 0 }
    }

    /// The whole buffer read from, wherever the reader stands.
    #[inline]
    pub fn into_bytes(self) -> Bytes {
        self.buf
    }

    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    #[inline]
    pub fn position(&self) -> usize {
        self.pos
    }

    #[inline]
    fn take(&mut self, n: usize, what: &'static str) -> WireResult<&[u8]> {
        if n > self.remaining() {
            return Err(WireError::Truncated {
                what,
                needed: n,
                available: self.remaining(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// `n` bytes as a zero-copy slice of the frame.
    #[inline]
    pub fn take_bytes(&mut self, n: usize, what: &'static str) -> WireResult<Bytes> {
        if n > self.remaining() {
            return Err(WireError::Truncated {
                what,
                needed: n,
                available: self.remaining(),
            });
        }
        let b = self.buf.slice(self.pos..self.pos + n);
        self.pos += n;
        Ok(b)
    }

    #[inline]
    pub fn i8(&mut self, what: &'static str) -> WireResult<i8> {
        Ok(self.take(1, what)?[0] as i8)
    }

    #[inline]
    pub fn bool(&mut self, what: &'static str) -> WireResult<bool> {
        Ok(self.i8(what)? != 0)
    }

    #[inline]
    pub fn i16(&mut self, what: &'static str) -> WireResult<i16> {
        let b = self.take(2, what)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    #[inline]
    pub fn i32(&mut self, what: &'static str) -> WireResult<i32> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    #[inline]
    pub fn i64(&mut self, what: &'static str) -> WireResult<i64> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    #[inline]
    pub fn uuid(&mut self, what: &'static str) -> WireResult<[u8; 16]> {
        let b = self.take(16, what)?;
        let mut a = [0u8; 16];
        a.copy_from_slice(b);
        Ok(a)
    }

    #[inline]
    pub fn unsigned_varint(&mut self, what: &'static str) -> WireResult<u32> {
        let mut v: u32 = 0;
        for i in 0..5 {
            let b = self.take(1, what)?[0];
            v |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(WireError::Invalid { what, value: -1 })
    }

    /// A count of elements each at least `min_size` bytes long, checked
    /// against the bytes left. `None` for a null collection.
    #[inline]
    fn checked_count(&mut self, raw: i64, min_size: usize, what: &'static str) -> WireResult<Option<usize>> {
        if raw < 0 {
            if raw == -1 {
                return Ok(None);
            }
            return Err(WireError::Invalid { what, value: raw });
        }
        let n = raw as usize;
        let needed = n.saturating_mul(min_size.max(1));
        if needed > self.remaining() {
            return Err(WireError::Truncated {
                what,
                needed,
                available: self.remaining(),
            });
        }
        Ok(Some(n))
    }

    /// An array count (classic or compact), bounded by the bytes left.
    #[inline]
    pub fn array_len(&mut self, flexible: bool, min_size: usize, what: &'static str) -> WireResult<Option<usize>> {
        let raw = if flexible {
            i64::from(self.unsigned_varint(what)?) - 1
        } else {
            i64::from(self.i32(what)?)
        };
        self.checked_count(raw, min_size, what)
    }

    /// A non-null array count.
    #[inline]
    pub fn array_len_required(&mut self, flexible: bool, min_size: usize, what: &'static str) -> WireResult<usize> {
        self.array_len(flexible, min_size, what)?
            .ok_or(WireError::UnexpectedNull { what })
    }

    #[inline]
    fn string_len(&mut self, flexible: bool, what: &'static str) -> WireResult<Option<usize>> {
        let raw = if flexible {
            i64::from(self.unsigned_varint(what)?) - 1
        } else {
            i64::from(self.i16(what)?)
        };
        self.checked_count(raw, 1, what)
    }

    #[inline]
    pub fn nullable_string(&mut self, flexible: bool, what: &'static str) -> WireResult<Option<String>> {
        let Some(n) = self.string_len(flexible, what)? else {
            return Ok(None);
        };
        let b = self.take(n, what)?;
        let s = std::str::from_utf8(b).map_err(|_| WireError::NotUtf8 { what })?;
        Ok(Some(s.to_string()))
    }

    #[inline]
    pub fn string(&mut self, flexible: bool, what: &'static str) -> WireResult<String> {
        self.nullable_string(flexible, what)?
            .ok_or(WireError::UnexpectedNull { what })
    }

    /// `bytes` / `compact_bytes` (also `records`), zero-copy. `None` if null.
    #[inline]
    pub fn nullable_bytes(&mut self, flexible: bool, what: &'static str) -> WireResult<Option<Bytes>> {
        let raw = if flexible {
            i64::from(self.unsigned_varint(what)?) - 1
        } else {
            i64::from(self.i32(what)?)
        };
        let Some(n) = self.checked_count(raw, 1, what)? else {
            return Ok(None);
        };
        self.take_bytes(n, what).map(Some)
    }

    /// Non-null `bytes` / `compact_bytes`, zero-copy.
    #[inline]
    pub fn bytes(&mut self, flexible: bool, what: &'static str) -> WireResult<Bytes> {
        self.nullable_bytes(flexible, what)?
            .ok_or(WireError::UnexpectedNull { what })
    }

    /// A non-null array of int32 (classic or compact), bounded by the bytes
    /// left.
    #[inline]
    pub fn i32_array(&mut self, flexible: bool, what: &'static str) -> WireResult<Vec<i32>> {
        let n = self.array_len_required(flexible, 4, what)?;
        let mut v = Vec::with_capacity(capacity(n));
        for _ in 0..n {
            v.push(self.i32(what)?);
        }
        Ok(v)
    }

    /// A non-null array of int64 (classic or compact), bounded by the bytes
    /// left.
    #[inline]
    pub fn i64_array(&mut self, flexible: bool, what: &'static str) -> WireResult<Vec<i64>> {
        let n = self.array_len_required(flexible, 8, what)?;
        let mut v = Vec::with_capacity(capacity(n));
        for _ in 0..n {
            v.push(self.i64(what)?);
        }
        Ok(v)
    }

    /// A non-null array of non-null strings (classic or compact), bounded
    /// by the bytes left.
    #[inline]
    pub fn strings(&mut self, flexible: bool, what: &'static str) -> WireResult<Vec<String>> {
        // A string's length prefix: an int16, or an unsigned varint.
        let n = self.array_len_required(flexible, if flexible { 1 } else { 2 }, what)?;
        let mut v = Vec::with_capacity(capacity(n));
        for _ in 0..n {
            v.push(self.string(flexible, what)?);
        }
        Ok(v)
    }

    /// A non-null array of structs: the count (each element taking at least
    /// `element_bytes_min`, so a count the bytes left cannot hold is refused
    /// before anything is allocated), then each element as `read` reads it,
    /// followed in flexible versions by its tagged fields.
    #[inline]
    pub fn structs<T>(
        &mut self,
        flexible: bool,
        element_bytes_min: usize,
        what: &'static str,
        mut read: impl FnMut(&mut Reader) -> WireResult<T>,
    ) -> WireResult<Vec<T>> {
        let n = self.array_len_required(flexible, element_bytes_min, what)?;
        let mut v = Vec::with_capacity(capacity(n));
        for _ in 0..n {
            v.push(read(self)?);
            self.tagged_fields_if(flexible)?;
        }
        Ok(v)
    }

    /// Skips a tagged-field section (flexible versions). Ferrite reads no
    /// tagged request fields yet; unknown tags are ignored as Kafka requires.
    #[inline]
    pub fn skip_tagged_fields(&mut self) -> WireResult<()> {
        let n = self.unsigned_varint("tagged field count")?;
        let n = self.checked_count(i64::from(n), 2, "tagged field count")?.unwrap_or(0);
        for _ in 0..n {
            let _tag = self.unsigned_varint("tag")?;
            let size = self.unsigned_varint("tagged field size")? as usize;
            self.take(size, "tagged field")?;
        }
        Ok(())
    }

    /// Tagged fields, if `flexible`.
    #[inline]
    pub fn tagged_fields_if(&mut self, flexible: bool) -> WireResult<()> {
        if flexible {
            self.skip_tagged_fields()?;
        }
        Ok(())
    }
}

/// Encodes into a growable buffer.
#[derive(Default)]
pub struct Writer {
    buf: BytesMut,
}

impl Writer {
    #[inline]
    pub fn new() -> Writer {
        Writer::default()
    }

    #[inline]
    pub fn with_capacity(n: usize) -> Writer {
        Writer {
            buf: BytesMut::with_capacity(n),
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    #[inline]
    pub fn into_bytes(self) -> BytesMut {
        self.buf
    }

    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &self.buf
    }

    /// Overwrites an int32 at `at` (a length prefix written earlier).
    #[inline]
    pub fn patch_i32(&mut self, at: usize, v: i32) {
        self.buf[at..at + 4].copy_from_slice(&v.to_be_bytes());
    }

    #[inline]
    pub fn i8(&mut self, v: i8) {
        self.buf.put_i8(v);
    }

    #[inline]
    pub fn bool(&mut self, v: bool) {
        self.buf.put_i8(i8::from(v));
    }

    #[inline]
    pub fn i16(&mut self, v: i16) {
        self.buf.put_i16(v);
    }

    #[inline]
    pub fn i32(&mut self, v: i32) {
        self.buf.put_i32(v);
    }

    #[inline]
    pub fn i64(&mut self, v: i64) {
        self.buf.put_i64(v);
    }

    #[inline]
    pub fn uuid(&mut self, v: &[u8; 16]) {
        self.buf.put_slice(v);
    }

    #[inline]
    pub fn raw(&mut self, b: &[u8]) {
        self.buf.put_slice(b);
    }

    #[inline]
    pub fn unsigned_varint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.buf.put_u8((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.buf.put_u8(v as u8);
    }

    /// An array count (classic or compact); `None` writes null.
    #[inline]
    pub fn array_len(&mut self, flexible: bool, n: Option<usize>) {
        match (flexible, n) {
            (true, Some(n)) => self.unsigned_varint(n as u32 + 1),
            (true, None) => self.unsigned_varint(0),
            (false, Some(n)) => self.i32(n as i32),
            (false, None) => self.i32(-1),
        }
    }

    /// A non-null array of int32.
    #[inline]
    pub fn i32_array(&mut self, flexible: bool, v: &[i32]) {
        self.array_len(flexible, Some(v.len()));
        for x in v {
            self.i32(*x);
        }
    }

    /// A non-null array of int64.
    #[inline]
    pub fn i64_array(&mut self, flexible: bool, v: &[i64]) {
        self.array_len(flexible, Some(v.len()));
        for x in v {
            self.i64(*x);
        }
    }

    /// A non-null array of non-null strings.
    #[inline]
    pub fn strings(&mut self, flexible: bool, v: &[String]) {
        self.array_len(flexible, Some(v.len()));
        for s in v {
            self.string(flexible, s);
        }
    }

    #[inline]
    pub fn nullable_string(&mut self, flexible: bool, s: Option<&str>) {
        match (flexible, s) {
            (true, Some(s)) => {
                self.unsigned_varint(s.len() as u32 + 1);
                self.raw(s.as_bytes());
            }
            (true, None) => self.unsigned_varint(0),
            (false, Some(s)) => {
                self.i16(s.len() as i16);
                self.raw(s.as_bytes());
            }
            (false, None) => self.i16(-1),
        }
    }

    #[inline]
    pub fn string(&mut self, flexible: bool, s: &str) {
        self.nullable_string(flexible, Some(s));
    }

    /// `bytes` / `compact_bytes` length prefix for `n` bytes that follow
    /// (written separately, possibly by sendfile).
    #[inline]
    pub fn bytes_len(&mut self, flexible: bool, n: Option<usize>) {
        match (flexible, n) {
            (true, Some(n)) => self.unsigned_varint(n as u32 + 1),
            (true, None) => self.unsigned_varint(0),
            (false, Some(n)) => self.i32(n as i32),
            (false, None) => self.i32(-1),
        }
    }

    #[inline]
    pub fn nullable_bytes(&mut self, flexible: bool, b: Option<&[u8]>) {
        self.bytes_len(flexible, b.map(|b| b.len()));
        if let Some(b) = b {
            self.raw(b);
        }
    }

    /// A classic (int32) array count for a caller's value, refused when it
    /// does not fit the prefix.
    #[inline]
    pub fn checked_array_len(&mut self, n: usize, what: &'static str) -> WireResult<()> {
        self.i32(classic_len(n, i32::MAX as usize, what)?);
        Ok(())
    }

    /// A classic nullable string (int16 length) for a caller's value,
    /// refused when it is longer than the prefix can say.
    #[inline]
    pub fn checked_string(&mut self, s: Option<&str>, what: &'static str) -> WireResult<()> {
        if let Some(s) = s {
            classic_len(s.len(), i16::MAX as usize, what)?;
        }
        self.nullable_string(false, s);
        Ok(())
    }

    /// Classic nullable bytes (int32 length) for a caller's value, refused
    /// when longer than the prefix can say.
    #[inline]
    pub fn checked_bytes(&mut self, b: Option<&[u8]>, what: &'static str) -> WireResult<()> {
        if let Some(b) = b {
            classic_len(b.len(), i32::MAX as usize, what)?;
        }
        self.nullable_bytes(false, b);
        Ok(())
    }

    /// An empty tagged-field section, if `flexible`. Ferrite writes tagged
    /// fields only when they differ from their defaults (as Apache Kafka
    /// does); librdkafka 2.0.2 misreads defaults written out.
    #[inline]
    pub fn empty_tagged_fields_if(&mut self, flexible: bool) {
        if flexible {
            self.unsigned_varint(0);
        }
    }

    /// A non-null array of structs in the layout [`Reader::structs`] reads:
    /// the count, then each element as `write` writes it, followed in flexible
    /// versions by an empty tagged-field section.
    #[inline]
    pub fn structs<T>(&mut self, flexible: bool, items: &[T], mut write: impl FnMut(&mut Writer, &T)) {
        self.array_len(flexible, Some(items.len()));
        for item in items {
            write(self, item);
            self.empty_tagged_fields_if(flexible);
        }
    }
}

/// `len` as a length prefix no larger than `max`.
#[inline]
fn classic_len(len: usize, max: usize, what: &'static str) -> WireResult<i32> {
    if len > max {
        return Err(WireError::TooLarge { what, len, max });
    }
    Ok(len as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_writes_refuse_what_the_prefix_cannot_say() {
        let mut w = Writer::new();
        let long = "x".repeat(i16::MAX as usize + 1);
        let err = w.checked_string(Some(&long), "name").unwrap_err();
        assert_eq!(
            err,
            WireError::TooLarge {
                what: "name",
                len: 32_768,
                max: 32_767
            }
        );
        assert!(w.is_empty(), "nothing is written for a refused value");
        w.checked_string(Some(&long[1..]), "name").unwrap();
        w.checked_string(None, "name").unwrap();
        w.checked_bytes(Some(b"ab"), "data").unwrap();
        w.checked_array_len(3, "items").unwrap();
        let mut r = Reader::new(w.into_bytes().freeze());
        assert_eq!(r.string(false, "name").unwrap().len(), 32_767);
        assert_eq!(r.nullable_string(false, "name").unwrap(), None);
        assert_eq!(r.bytes(false, "data").unwrap().as_ref(), b"ab");
        assert_eq!(r.i32("items").unwrap(), 3);
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn huge_counts_are_refused_before_allocating() {
        // A classic array claiming 2^31 - 1 elements in a 4-byte frame.
        let mut r = Reader::new(Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff]));
        assert!(matches!(
            r.array_len(false, 2, "topics"),
            Err(WireError::Truncated { .. })
        ));
        // A compact string claiming 2^32 - 2 bytes.
        let mut r = Reader::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f]));
        assert!(matches!(
            r.nullable_string(true, "name"),
            Err(WireError::Truncated { .. })
        ));
        let mut r = Reader::new(Bytes::from_static(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]));
        assert!(matches!(r.unsigned_varint("v"), Err(WireError::Invalid { .. })));
        let mut r = Reader::new(Bytes::from_static(&[0xff, 0xfe]));
        assert!(matches!(r.nullable_string(false, "s"), Err(WireError::Invalid { .. })));
    }

    #[test]
    fn primitives_round_trip() {
        let mut w = Writer::new();
        for flexible in [false, true] {
            w.string(flexible, "héllo");
            w.nullable_string(flexible, None);
            w.array_len(flexible, Some(3));
            w.array_len(flexible, None);
            w.nullable_bytes(flexible, Some(b"abc"));
            w.nullable_bytes(flexible, None);
            w.empty_tagged_fields_if(flexible);
        }
        w.unsigned_varint(300);
        w.i64(-5);
        let mut r = Reader::new(w.into_bytes().freeze());
        for flexible in [false, true] {
            assert_eq!(r.string(flexible, "s").unwrap(), "héllo");
            assert_eq!(r.nullable_string(flexible, "s").unwrap(), None);
            // The count is checked against the bytes left: 3 one-byte elements fit.
            assert_eq!(r.array_len(flexible, 1, "a").unwrap(), Some(3));
            assert_eq!(r.array_len(flexible, 1, "a").unwrap(), None);
            assert_eq!(r.nullable_bytes(flexible, "b").unwrap().as_deref(), Some(&b"abc"[..]));
            assert_eq!(r.nullable_bytes(flexible, "b").unwrap(), None);
            r.tagged_fields_if(flexible).unwrap();
        }
        assert_eq!(r.unsigned_varint("v").unwrap(), 300);
        assert_eq!(r.i64("v").unwrap(), -5);
        assert_eq!(r.remaining(), 0);
    }
}
