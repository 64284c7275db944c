//! The log cleaner's work on one batch: which records stay, and the bytes
//! of the batch that holds them.
//!
//! Offsets never change. A batch keeps its base offset and its
//! `lastOffsetDelta` whatever records it loses (as Kafka's cleaner does:
//! the producer's last sequence, and so its deduplication, depends on the
//! batch's last offset), and each surviving record keeps its offset delta.
//! So a consumer, a follower or a committed offset that names an offset
//! below the cleaned range finds the same record there, or — where a record
//! was removed — the next one after it.
//!
//! - Every record kept: the batch is copied byte for byte.
//! - Some kept: the batch is rebuilt from them — same base offset, last
//!   offset delta, leader epoch, producer id/epoch/base sequence,
//!   attributes and codec (recompressed), a new record count and CRC.
//! - None kept: the batch goes, unless it is the last one its idempotent
//!   producer wrote (then its 61-byte header stays with no records, so the
//!   producer's sequence survives a restart).
//! - Control batches (transaction markers) are copied as they are, stamped
//!   with a delete horizon, or removed, as [`crate::clean_txn`] decides.
//!
//! Tombstones (a key with a null value) follow KIP-534: the first time the
//! cleaner keeps a batch with tombstones it stamps a *delete horizon*
//! (`now + delete.retention.ms`) into the batch's baseTimestamp and sets
//! attribute bit 6, rewriting the records' timestamp deltas so every record
//! keeps its timestamp; a later pass past the horizon removes them.

use crate::batch::{self, BatchInfo, Compression, ATTR_DELETE_HORIZON, CRC_START, HEADER_BYTES, LOG_OVERHEAD_BYTES};
use crate::error::BatchError;
use crate::record::{self, Record};
use crate::types::{Offset, TimestampMs};

/// Largest decompressed batch the cleaner inflates; a larger one is kept
/// whole, uncleaned.
pub const DECOMPRESSED_BYTES_MAX: usize = 256 << 20;

/// One record as the cleaner judges it.
#[derive(Clone, Copy, Debug)]
pub struct RecordView<'a> {
    pub offset: Offset,
    pub key: Option<&'a [u8]>,
    /// A null value: the key's tombstone.
    pub is_tombstone: bool,
}

/// What becomes of a batch.
#[derive(Debug, PartialEq, Eq)]
pub enum Kept {
    /// Copied byte for byte.
    Whole,
    /// Rewritten with fewer records (or a delete horizon).
    Rebuilt(Vec<u8>),
    /// Removed.
    Dropped,
}

/// Whether a batch with no record left keeps its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhenEmpty {
    Drop,
    /// The producer's last batch: its header stays.
    KeepHeader,
}

/// The records of a batch (`bytes` exactly one stored batch), decompressed
/// within `limit` bytes; `None` for what the cleaner does not look inside
/// (and keeps whole): a control batch, one that inflates past `limit`, one
/// whose records' offset deltas are not increasing within its
/// `lastOffsetDelta` (judging such records could remove a later record).
pub fn records_of<'b>(
    bytes: &[u8],
    info: &BatchInfo,
    scratch: &'b mut Vec<u8>,
    limit: usize,
) -> Result<Option<Vec<Record<'b>>>, BatchError> {
    if info.is_control {
        return Ok(None);
    }
    let body = bytes.get(HEADER_BYTES..info.size).ok_or(BatchError::Truncated {
        needed: info.size,
        available: bytes.len(),
    })?;
    *scratch = match info.compression {
        Compression::None => body.to_vec(),
        codec => match crate::compression::decompress(codec, body, limit) {
            Ok(v) => v,
            Err(BatchError::Invalid { reason }) if reason == crate::compression::BEYOND_LIMIT => return Ok(None),
            Err(e) => return Err(e),
        },
    };
    let records = record::decode_records(scratch, info.record_count)?;
    let in_order = records
        .iter()
        .try_fold(-1i32, |last, r| {
            (r.offset_delta > last && r.offset_delta <= info.last_offset_delta).then_some(r.offset_delta)
        })
        .is_some();
    Ok(in_order.then_some(records))
}

/// Refuses a producer's batch holding a record without a key: a compacted
/// topic keeps records by key (Kafka answers INVALID_RECORD). The records
/// are inflated on the shard, at most [`PRODUCE_CHECK_BYTES_MAX`] of them.
pub fn check_keys(bytes: &[u8], info: &BatchInfo) -> Result<(), BatchError> {
    let mut scratch = Vec::new();
    match records_of(bytes, info, &mut scratch, PRODUCE_CHECK_BYTES_MAX)? {
        Some(records) if records.iter().all(|r| r.key.is_some()) => Ok(()),
        Some(_) => Err(BatchError::Invalid {
            reason: "a compacted topic refuses records without a key",
        }),
        None => Err(BatchError::Invalid {
            reason: "a compacted topic checks every record's key, and these inflate past 64 MiB or their offsets are out of order",
        }),
    }
}

/// Largest inflated batch a produce to a compacted topic may carry.
pub const PRODUCE_CHECK_BYTES_MAX: usize = 64 << 20;

/// Applies `retain` to each record of the batch in `bytes` below
/// `judged_below` (the end of what the pass's key map covers); records at
/// or after it stay as they are. `horizon` is `now + delete.retention.ms`,
/// stamped into a batch whose judged tombstones stay.
pub fn filter_batch(
    bytes: &[u8],
    info: &BatchInfo,
    horizon: TimestampMs,
    when_empty: WhenEmpty,
    judged_below: Offset,
    retain: &mut dyn FnMut(&RecordView<'_>) -> bool,
) -> Result<Kept, BatchError> {
    let mut scratch = Vec::new();
    let Some(records) = records_of(bytes, info, &mut scratch, DECOMPRESSED_BYTES_MAX)? else {
        return Ok(Kept::Whole);
    };
    let mut kept = Vec::with_capacity(records.len());
    let mut tombstones = false;
    for r in &records {
        let view = RecordView {
            offset: info.base_offset.plus(i64::from(r.offset_delta)),
            key: r.key,
            is_tombstone: r.value.is_none(),
        };
        if view.offset >= judged_below {
            kept.push(r.clone());
        } else if retain(&view) {
            tombstones |= view.is_tombstone;
            kept.push(r.clone());
        }
    }
    let stamp = tombstones && !info.has_delete_horizon;
    if kept.len() == records.len() && !stamp {
        return Ok(Kept::Whole);
    }
    if kept.is_empty() {
        return Ok(match when_empty {
            WhenEmpty::Drop => Kept::Dropped,
            WhenEmpty::KeepHeader => Kept::Rebuilt(rebuild(bytes, info, &[], None)?),
        });
    }
    Ok(Kept::Rebuilt(rebuild(bytes, info, &kept, stamp.then_some(horizon))?))
}

/// The control batch in `bytes` (uncompressed, as every marker is) stamped
/// with the delete horizon `horizon`, its records' timestamps kept.
pub fn stamp_control(bytes: &[u8], info: &BatchInfo, horizon: TimestampMs) -> Result<Vec<u8>, BatchError> {
    assert!(info.is_control, "stamping a data batch as a control batch");
    let body = bytes.get(HEADER_BYTES..info.size).ok_or(BatchError::Truncated {
        needed: info.size,
        available: bytes.len(),
    })?;
    if info.compression != Compression::None {
        return Err(BatchError::Invalid {
            reason: "a compressed control batch",
        });
    }
    let records = record::decode_records(body, info.record_count)?;
    rebuild(bytes, info, &records, Some(horizon))
}

/// The batch in `bytes` with only `records`, stamped with `horizon` if set.
fn rebuild(
    bytes: &[u8],
    info: &BatchInfo,
    records: &[Record<'_>],
    horizon: Option<TimestampMs>,
) -> Result<Vec<u8>, BatchError> {
    let base_timestamp = horizon.unwrap_or(info.base_timestamp);
    let shift = base_timestamp.0 - info.base_timestamp.0;
    let mut body = Vec::new();
    for r in records {
        let moved = Record {
            timestamp_delta: r.timestamp_delta - shift,
            ..r.clone()
        };
        moved.encode(&mut body);
    }
    let body = crate::compression::compress(info.compression, &body)?;
    let mut out = Vec::with_capacity(HEADER_BYTES + body.len());
    out.extend_from_slice(&bytes[..HEADER_BYTES]);
    out.extend_from_slice(&body);
    let length = i32::try_from(out.len() - LOG_OVERHEAD_BYTES).map_err(|_| BatchError::Invalid {
        reason: "a rebuilt batch exceeds 2 GiB",
    })?;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    if horizon.is_some() {
        let attributes = i16::from_be_bytes([out[21], out[22]]) | ATTR_DELETE_HORIZON;
        out[21..23].copy_from_slice(&attributes.to_be_bytes());
        out[27..35].copy_from_slice(&base_timestamp.0.to_be_bytes());
    }
    let count = records.len() as i32;
    out[57..61].copy_from_slice(&count.to_be_bytes());
    let crc = crc32c::crc32c(&out[CRC_START..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    let back = batch::validate(&out, out.len(), batch::Validation::Stored)?;
    assert!(
        back.base_offset == info.base_offset,
        "a rebuilt batch moved its base offset"
    );
    assert!(
        back.last_offset_delta == info.last_offset_delta,
        "a rebuilt batch lost its last offset"
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::build_batch_of_records;

    fn rec<'a>(delta: i32, key: &'a [u8], value: Option<&'a [u8]>) -> Record<'a> {
        Record {
            offset_delta: delta,
            timestamp_delta: i64::from(delta) * 10,
            key: Some(key),
            value,
            headers: vec![(b"h", Some(b"v"))],
        }
    }

    /// Every record judged.
    const ALL: Offset = Offset(i64::MAX);

    fn sample() -> Vec<u8> {
        let records = [rec(0, b"a", Some(b"1")), rec(1, b"b", None), rec(2, b"c", Some(b"3"))];
        build_batch_of_records(Offset(100), TimestampMs(5_000), &records)
    }

    fn info(bytes: &[u8]) -> BatchInfo {
        batch::validate(bytes, 1 << 20, batch::Validation::Stored).unwrap()
    }

    fn keys_and_times(bytes: &[u8]) -> Vec<(i64, Vec<u8>, i64)> {
        let i = info(bytes);
        let mut scratch = Vec::new();
        let base_ts = i.base_timestamp.0;
        records_of(bytes, &i, &mut scratch, DECOMPRESSED_BYTES_MAX)
            .unwrap()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    i.base_offset.0 + i64::from(r.offset_delta),
                    r.key.unwrap().to_vec(),
                    base_ts + r.timestamp_delta,
                )
            })
            .collect()
    }

    #[test]
    fn kept_records_keep_offsets_and_timestamps_and_tombstones_get_a_horizon() {
        let mut b = sample();
        // No tombstone among the kept: drop "b".
        let k = filter_batch(&b, &info(&b), TimestampMs(9_999), WhenEmpty::Drop, ALL, &mut |r| {
            !r.is_tombstone
        })
        .unwrap();
        let Kept::Rebuilt(out) = k else {
            panic!("expected a rebuild")
        };
        assert_eq!(
            keys_and_times(&out),
            vec![(100, b"a".to_vec(), 5_000), (102, b"c".to_vec(), 5_020)]
        );
        let i = info(&out);
        assert_eq!(
            (i.base_offset, i.last_offset(), i.record_count),
            (Offset(100), Offset(102), 2)
        );
        assert!(!i.has_delete_horizon);
        // A batch whose tombstones already carry a horizon, all kept: whole.
        b = sample();
        let Kept::Rebuilt(stamped) =
            filter_batch(&b, &info(&b), TimestampMs(9_999), WhenEmpty::Drop, ALL, &mut |_| true).unwrap()
        else {
            panic!("tombstones get a horizon")
        };
        let i = info(&stamped);
        assert_eq!(i.delete_horizon(), Some(TimestampMs(9_999)));
        assert_eq!(
            keys_and_times(&stamped),
            keys_and_times(&b),
            "timestamps kept across the stamp"
        );
        assert_eq!(
            filter_batch(&stamped, &i, TimestampMs(20_000), WhenEmpty::Drop, ALL, &mut |_| true).unwrap(),
            Kept::Whole
        );
    }

    #[test]
    fn an_emptied_batch_goes_or_keeps_its_header() {
        let b = sample();
        let i = info(&b);
        assert_eq!(
            filter_batch(&b, &i, TimestampMs(0), WhenEmpty::Drop, ALL, &mut |_| false).unwrap(),
            Kept::Dropped
        );
        let Kept::Rebuilt(h) =
            filter_batch(&b, &i, TimestampMs(0), WhenEmpty::KeepHeader, ALL, &mut |_| false).unwrap()
        else {
            panic!("header kept")
        };
        assert_eq!(h.len(), HEADER_BYTES);
        let hi = info(&h);
        assert_eq!(
            (hi.base_offset, hi.last_offset(), hi.record_count),
            (Offset(100), Offset(102), 0)
        );
    }

    #[test]
    fn compressed_batches_are_rebuilt_with_their_codec() {
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let plain = sample();
            let body = crate::compression::compress(codec, &plain[HEADER_BYTES..]).unwrap();
            let mut b = plain[..HEADER_BYTES].to_vec();
            b.extend_from_slice(&body);
            let len = (b.len() - LOG_OVERHEAD_BYTES) as i32;
            b[8..12].copy_from_slice(&len.to_be_bytes());
            let attr = codec_bits(codec);
            b[21..23].copy_from_slice(&attr.to_be_bytes());
            let crc = crc32c::crc32c(&b[CRC_START..]);
            b[17..21].copy_from_slice(&crc.to_be_bytes());
            let Kept::Rebuilt(out) = filter_batch(&b, &info(&b), TimestampMs(0), WhenEmpty::Drop, ALL, &mut |r| {
                r.key != Some(b"a")
            })
            .unwrap() else {
                panic!("rebuilt")
            };
            let i = info(&out);
            assert_eq!(i.compression, codec);
            let keys: Vec<_> = keys_and_times(&out).into_iter().map(|(o, k, _)| (o, k)).collect();
            assert_eq!(keys, vec![(101, b"b".to_vec()), (102, b"c".to_vec())], "{codec:?}");
        }
    }

    #[test]
    fn records_with_offsets_out_of_order_are_not_looked_inside() {
        let records = [
            rec(1, b"a", Some(b"1")),
            rec(0, b"b", Some(b"2")),
            rec(2, b"c", Some(b"3")),
        ];
        let b = build_batch_of_records(Offset(0), TimestampMs(0), &records);
        let i = info(&b);
        let mut scratch = Vec::new();
        assert!(records_of(&b, &i, &mut scratch, DECOMPRESSED_BYTES_MAX)
            .unwrap()
            .is_none());
        assert_eq!(
            filter_batch(&b, &i, TimestampMs(0), WhenEmpty::Drop, ALL, &mut |_| false).unwrap(),
            Kept::Whole
        );
        assert!(check_keys(&b, &i).is_err(), "refused at produce");
    }

    fn codec_bits(codec: Compression) -> i16 {
        match codec {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }
}
