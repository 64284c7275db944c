//! Bounded readers and writers for the classic (non-flexible) Kafka
//! primitive encoding used by the consumer embedded protocol.
//!
//! Everything is big-endian. Arrays are an `int32` count, strings an `int16`
//! length, nullable bytes an `int32` length with `-1` for null, and nullable
//! strings an `int16` length with `-1` for null.
//!
//! The reader never trusts a length: it checks it against the bytes that
//! remain before slicing or allocating, so a tiny hostile input cannot make
//! the broker reserve gigabytes. Errors name the field being read.

use bytes::{BufMut, Bytes, BytesMut};

/// Why a consumer-protocol message could not be decoded or encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// The input ended in the middle of a field.
    #[error("truncated {field}: needs {needed} more bytes but only {remaining} remain")]
    Truncated {
        field: &'static str,
        needed: usize,
        remaining: usize,
    },
    /// A length prefix is negative where that is not allowed (or below -1).
    #[error("invalid length {length} for {field}: {reason}")]
    InvalidLength {
        field: &'static str,
        length: i32,
        reason: &'static str,
    },
    /// An array claims more elements than the remaining bytes could hold.
    #[error(
        "{field} claims {count} elements (at least {min_bytes} bytes) \
         but only {remaining} bytes remain"
    )]
    ArrayTooLong {
        field: &'static str,
        count: usize,
        min_bytes: usize,
        remaining: usize,
    },
    /// A string field is not valid UTF-8.
    #[error("{field} is not valid UTF-8")]
    InvalidUtf8 { field: &'static str },
    /// A version that cannot be read or written.
    #[error("unsupported {message} version {version}")]
    UnsupportedVersion { message: &'static str, version: i16 },
    /// A value too long for its length prefix (encoding only).
    #[error("{field} is too large to encode: {len} exceeds the limit of {max}")]
    TooLarge {
        field: &'static str,
        len: usize,
        max: usize,
    },
}

/// Maps a decoded version to the layout to parse: negative versions are
/// rejected, newer ones are read as `max` (their known prefix).
pub(super) fn known_version(message: &'static str, version: i16, max: i16) -> Result<i16, ProtocolError> {
    if version < 0 {
        return Err(ProtocolError::UnsupportedVersion { message, version });
    }
    Ok(version.min(max))
}

/// Accepts only versions `0..=max` for encoding.
pub(super) fn check_version(message: &'static str, version: i16, max: i16) -> Result<i16, ProtocolError> {
    if (0..=max).contains(&version) {
        Ok(version)
    } else {
        Err(ProtocolError::UnsupportedVersion { message, version })
    }
}

/// A cursor over untrusted input.
pub(super) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], ProtocolError> {
        if n > self.buf.len() {
            return Err(ProtocolError::Truncated {
                field,
                needed: n,
                remaining: self.buf.len(),
            });
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    pub(super) fn i16(&mut self, field: &'static str) -> Result<i16, ProtocolError> {
        let b = self.take(2, field)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    pub(super) fn i32(&mut self, field: &'static str) -> Result<i32, ProtocolError> {
        let b = self.take(4, field)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn utf8(&mut self, len: usize, field: &'static str) -> Result<String, ProtocolError> {
        let raw = self.take(len, field)?;
        match std::str::from_utf8(raw) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(ProtocolError::InvalidUtf8 { field }),
        }
    }

    /// A non-nullable `int16`-length string.
    pub(super) fn string(&mut self, field: &'static str) -> Result<String, ProtocolError> {
        let len = self.i16(field)?;
        if len < 0 {
            return Err(ProtocolError::InvalidLength {
                field,
                length: i32::from(len),
                reason: "non-nullable string is negative",
            });
        }
        self.utf8(len as usize, field)
    }

    /// A nullable `int16`-length string (`-1` is null).
    pub(super) fn nullable_string(&mut self, field: &'static str) -> Result<Option<String>, ProtocolError> {
        match self.i16(field)? {
            -1 => Ok(None),
            len if len < 0 => Err(ProtocolError::InvalidLength {
                field,
                length: i32::from(len),
                reason: "only -1 may mark a null string",
            }),
            len => self.utf8(len as usize, field).map(Some),
        }
    }

    /// Nullable `int32`-length bytes (`-1` is null).
    pub(super) fn nullable_bytes(&mut self, field: &'static str) -> Result<Option<Bytes>, ProtocolError> {
        match self.i32(field)? {
            -1 => Ok(None),
            len if len < 0 => Err(ProtocolError::InvalidLength {
                field,
                length: len,
                reason: "only -1 may mark null bytes",
            }),
            len => Ok(Some(Bytes::copy_from_slice(self.take(len as usize, field)?))),
        }
    }

    /// A non-nullable array count whose elements each take at least
    /// `min_elem` bytes; the count is checked against the remaining input so
    /// callers may safely `Vec::with_capacity` it.
    pub(super) fn array_len(&mut self, field: &'static str, min_elem: usize) -> Result<usize, ProtocolError> {
        let count = self.i32(field)?;
        if count < 0 {
            return Err(ProtocolError::InvalidLength {
                field,
                length: count,
                reason: "non-nullable array is negative",
            });
        }
        let count = count as usize;
        let min_bytes = count.saturating_mul(min_elem);
        if min_bytes > self.buf.len() {
            return Err(ProtocolError::ArrayTooLong {
                field,
                count,
                min_bytes,
                remaining: self.buf.len(),
            });
        }
        Ok(count)
    }
}

/// An output buffer that refuses values too long for their length prefix.
pub(super) struct Writer {
    buf: BytesMut,
}

impl Writer {
    pub(super) fn new(buf: BytesMut) -> Self {
        Writer { buf }
    }

    /// Raw access for fixed-width fields.
    pub(super) fn buf(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    pub(super) fn finish(self) -> Bytes {
        self.buf.freeze()
    }

    fn len_i16(field: &'static str, len: usize) -> Result<i16, ProtocolError> {
        i16::try_from(len).map_err(|_| ProtocolError::TooLarge {
            field,
            len,
            max: i16::MAX as usize,
        })
    }

    fn len_i32(field: &'static str, len: usize) -> Result<i32, ProtocolError> {
        i32::try_from(len).map_err(|_| ProtocolError::TooLarge {
            field,
            len,
            max: i32::MAX as usize,
        })
    }

    pub(super) fn array_len(&mut self, field: &'static str, len: usize) -> Result<(), ProtocolError> {
        let len = Self::len_i32(field, len)?;
        self.buf.put_i32(len);
        Ok(())
    }

    pub(super) fn string(&mut self, field: &'static str, s: &str) -> Result<(), ProtocolError> {
        let len = Self::len_i16(field, s.len())?;
        self.buf.put_i16(len);
        self.buf.put_slice(s.as_bytes());
        Ok(())
    }

    pub(super) fn nullable_string(&mut self, field: &'static str, s: Option<&str>) -> Result<(), ProtocolError> {
        match s {
            Some(s) => self.string(field, s),
            None => {
                self.buf.put_i16(-1);
                Ok(())
            }
        }
    }

    pub(super) fn nullable_bytes(&mut self, field: &'static str, b: Option<&[u8]>) -> Result<(), ProtocolError> {
        match b {
            Some(b) => {
                let len = Self::len_i32(field, b.len())?;
                self.buf.put_i32(len);
                self.buf.put_slice(b);
            }
            None => self.buf.put_i32(-1),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_reports_field_and_sizes() {
        let mut r = Reader::new(&[0, 5, b'a']);
        let err = r.string("topic").unwrap_err();
        assert_eq!(
            err,
            ProtocolError::Truncated {
                field: "topic",
                needed: 5,
                remaining: 1
            }
        );
        assert_eq!(err.to_string(), "truncated topic: needs 5 more bytes but only 1 remain");
    }

    #[test]
    fn nullable_values_round_trip() {
        let mut w = Writer::new(BytesMut::new());
        w.nullable_string("s", None).unwrap();
        w.nullable_string("s", Some("hi")).unwrap();
        w.nullable_bytes("b", None).unwrap();
        w.nullable_bytes("b", Some(b"xyz")).unwrap();
        let bytes = w.finish();
        let mut r = Reader::new(&bytes);
        assert_eq!(r.nullable_string("s").unwrap(), None);
        assert_eq!(r.nullable_string("s").unwrap().as_deref(), Some("hi"));
        assert_eq!(r.nullable_bytes("b").unwrap(), None);
        assert_eq!(r.nullable_bytes("b").unwrap().as_deref(), Some(&b"xyz"[..]));
    }

    #[test]
    fn array_len_bounds_by_min_element_size() {
        // 3 elements of at least 4 bytes need 12 bytes; only 8 remain.
        let mut r = Reader::new(&[0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(matches!(
            r.array_len("a", 4),
            Err(ProtocolError::ArrayTooLong {
                count: 3,
                min_bytes: 12,
                remaining: 8,
                ..
            })
        ));
        let mut r = Reader::new(&[0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(r.array_len("a", 4).unwrap(), 2);
    }

    #[test]
    fn invalid_lengths_and_text_are_rejected() {
        let err = Reader::new(&[0xff, 0xff, 0xff, 0xff])
            .array_len("topics", 2)
            .unwrap_err();
        assert!(matches!(
            err,
            ProtocolError::InvalidLength {
                field: "topics",
                length: -1,
                ..
            }
        ));
        let err = Reader::new(&[0xff, 0xfe]).string("topic").unwrap_err();
        assert!(matches!(
            err,
            ProtocolError::InvalidLength {
                field: "topic",
                length: -2,
                ..
            }
        ));
        let err = Reader::new(&[0xff, 0xfe]).nullable_string("rack_id").unwrap_err();
        assert!(matches!(err, ProtocolError::InvalidLength { field: "rack_id", .. }));
        let err = Reader::new(&[0xff, 0xff, 0xff, 0xfe])
            .nullable_bytes("user_data")
            .unwrap_err();
        assert!(matches!(err, ProtocolError::InvalidLength { field: "user_data", .. }));
        let err = Reader::new(&[0x7f, 0, 0, 0, 1])
            .nullable_bytes("user_data")
            .unwrap_err();
        assert!(matches!(
            err,
            ProtocolError::Truncated {
                field: "user_data",
                remaining: 1,
                ..
            }
        ));
        let err = Reader::new(&[0, 1, 0xff]).string("topic").unwrap_err();
        assert_eq!(err, ProtocolError::InvalidUtf8 { field: "topic" });
    }

    #[test]
    fn versions() {
        assert_eq!(known_version("m", 7, 3), Ok(3));
        assert_eq!(known_version("m", 2, 3), Ok(2));
        assert!(known_version("m", -1, 3).is_err());
        assert!(check_version("m", 4, 3).is_err());
        assert_eq!(check_version("m", 0, 3), Ok(0));
    }
}
