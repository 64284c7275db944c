//! Kafka RecordBatch v2 (magic 2): the unit the log stores, verbatim.
//!
//! A partition's `.log` files are a concatenation of batches exactly as a
//! producer (or a leader, for a follower) sent them, so that a fetch can hand
//! file bytes to a socket without looking inside. Only two header fields are
//! ever rewritten, and both lie *before* the CRC-covered region: the base
//! offset (the log assigns offsets) and the partition leader epoch.
//!
//! # Layout (all integers big-endian)
//!
//! ```text
//! byte  size field                  notes
//!    0     8 baseOffset             rewritten by the log on append
//!    8     4 batchLength            bytes that follow this field (total = 12 + batchLength)
//!   12     4 partitionLeaderEpoch   rewritten by the leader on append
//!   16     1 magic                  must be 2
//!   17     4 crc                    CRC-32C (Castagnoli) of bytes 21..end
//!   21     2 attributes             bits 0-2 compression (0 none, 1 gzip, 2 snappy,
//!                                   3 lz4, 4 zstd), bit 3 timestamp type,
//!                                   bit 4 transactional, bit 5 control,
//!                                   bit 6 delete horizon set
//!   23     4 lastOffsetDelta        last record's offset - baseOffset
//!   27     8 baseTimestamp          first record's timestamp
//!   35     8 maxTimestamp           largest record timestamp
//!   43     8 producerId             -1 when not idempotent
//!   51     2 producerEpoch
//!   53     4 baseSequence
//!   57     4 recordCount
//!   61     - records                compressed as a whole when bits 0-2 != 0
//! ```
//!
//! The parser never decodes records and never allocates: a batch is checked
//! from its 61-byte header and its CRC, so that validation costs one pass of
//! CRC-32C (hardware-accelerated) over the bytes.

use zerocopy::byteorder::big_endian::{I16, I32, I64, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::error::BatchError;
use crate::types::{LeaderEpoch, Offset, ProducerId, TimestampMs};

/// Size of the fixed header that precedes the records.
pub const HEADER_BYTES: usize = 61;
/// Bytes before the `batchLength` count starts (baseOffset + batchLength).
pub const LOG_OVERHEAD_BYTES: usize = 12;
/// First byte covered by the CRC (attributes).
pub const CRC_START: usize = 21;
/// The only magic value the log accepts.
pub const MAGIC_V2: i8 = 2;

const _: () = assert!(std::mem::size_of::<BatchHeader>() == HEADER_BYTES);
const _: () = assert!(CRC_START == 8 + 4 + 4 + 1 + 4);
// A batch cannot be shorter than its own header.
const _: () = assert!(HEADER_BYTES > LOG_OVERHEAD_BYTES);

const ATTR_COMPRESSION_MASK: i16 = 0x07;
const ATTR_TIMESTAMP_TYPE: i16 = 0x08;
pub const ATTR_TRANSACTIONAL: i16 = 0x10;
pub const ATTR_CONTROL: i16 = 0x20;
/// KIP-534: the batch's baseTimestamp holds the time after which the
/// cleaner may remove its tombstones (set by the cleaner only).
pub const ATTR_DELETE_HORIZON: i16 = 0x40;

/// The 61-byte header, as it sits in the file.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
#[repr(C)]
pub struct BatchHeader {
    pub base_offset: I64,
    pub batch_length: I32,
    pub partition_leader_epoch: I32,
    pub magic: i8,
    pub crc: U32,
    pub attributes: I16,
    pub last_offset_delta: I32,
    pub base_timestamp: I64,
    pub max_timestamp: I64,
    pub producer_id: I64,
    pub producer_epoch: I16,
    pub base_sequence: I32,
    pub record_count: I32,
}

/// Compression codec from attributes bits 0-2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

/// Timestamp type from attributes bit 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

/// How strictly to validate: batches from producers must be fresh
/// (`recordCount == lastOffsetDelta + 1`, no control batches), while batches
/// already in a log or from a leader may have been compacted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validation {
    Producer,
    Stored,
}

/// The facts about one batch that the log keeps, read from a validated header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchInfo {
    pub base_offset: Offset,
    pub last_offset_delta: i32,
    /// Total size in bytes, header included.
    pub size: usize,
    pub leader_epoch: LeaderEpoch,
    pub max_timestamp: TimestampMs,
    pub base_timestamp: TimestampMs,
    pub record_count: i32,
    pub compression: Compression,
    pub timestamp_type: TimestampType,
    pub producer_id: ProducerId,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub is_transactional: bool,
    pub is_control: bool,
    /// The cleaner stamped a delete horizon into `base_timestamp`.
    pub has_delete_horizon: bool,
}

impl BatchInfo {
    /// When the cleaner may drop this batch's tombstones, once it stamped
    /// one (KIP-534).
    pub fn delete_horizon(&self) -> Option<TimestampMs> {
        self.has_delete_horizon.then_some(self.base_timestamp)
    }

    pub fn last_offset(&self) -> Offset {
        self.base_offset.plus(i64::from(self.last_offset_delta))
    }

    /// The offset after this batch.
    pub fn next_offset(&self) -> Offset {
        self.last_offset().plus(1)
    }
}

/// Reads the header at the start of `bytes` without validating anything but
/// its presence.
pub fn read_header(bytes: &[u8]) -> Result<&BatchHeader, BatchError> {
    let available = bytes.len();
    let head = bytes.get(..HEADER_BYTES).ok_or(BatchError::Truncated {
        needed: HEADER_BYTES,
        available,
    })?;
    // Cannot fail: the slice has exactly the header's size and alignment 1.
    BatchHeader::ref_from_bytes(head).map_err(|_| BatchError::Truncated {
        needed: HEADER_BYTES,
        available,
    })
}

/// The total size the length field claims (header included), after checking
/// that it is at least a header. Works on a prefix of [`LOG_OVERHEAD_BYTES`].
pub fn claimed_size(prefix: &[u8]) -> Result<usize, BatchError> {
    let raw = prefix.get(8..12).ok_or(BatchError::Truncated {
        needed: LOG_OVERHEAD_BYTES,
        available: prefix.len(),
    })?;
    let length = i32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]);
    let min = (HEADER_BYTES - LOG_OVERHEAD_BYTES) as i32;
    if length < min {
        return Err(BatchError::LengthTooSmall { length });
    }
    Ok(LOG_OVERHEAD_BYTES + length as usize)
}

/// Validates the batch at the start of `bytes` (which may hold more after it)
/// and returns its facts. Checks, in order: presence of the header, length,
/// presence of the whole batch, size limit, magic, CRC-32C, then the header
/// fields' consistency.
pub fn validate(bytes: &[u8], size_max: usize, validation: Validation) -> Result<BatchInfo, BatchError> {
    let size = claimed_size(bytes)?;
    read_header(bytes)?;
    if size > size_max {
        return Err(BatchError::TooLarge { size, max: size_max });
    }
    let batch = bytes.get(..size).ok_or(BatchError::Truncated {
        needed: size,
        available: bytes.len(),
    })?;
    let header = read_header(batch)?;
    if header.magic != MAGIC_V2 {
        return Err(BatchError::BadMagic { magic: header.magic });
    }
    let stored = header.crc.get();
    let computed = crc32c::crc32c(&batch[CRC_START..]);
    if stored != computed {
        return Err(BatchError::BadCrc { stored, computed });
    }
    let info = info_of(header, size)?;
    check_fields(&info, validation)?;
    Ok(info)
}

/// Reads the facts of the batch whose header starts `bytes`, checking only
/// what a header alone can show (length, magic, field ranges), not the CRC.
/// Used to walk a log whose CRCs were checked when it was written.
pub fn peek(bytes: &[u8]) -> Result<BatchInfo, BatchError> {
    let size = claimed_size(bytes)?;
    let header = read_header(bytes)?;
    if header.magic != MAGIC_V2 {
        return Err(BatchError::BadMagic { magic: header.magic });
    }
    let info = info_of(header, size)?;
    if info.last_offset_delta < 0 || info.base_offset.0 < 0 {
        return Err(BatchError::Invalid {
            reason: "negative offsets",
        });
    }
    if info
        .base_offset
        .0
        .checked_add(i64::from(info.last_offset_delta) + 1)
        .is_none()
    {
        return Err(BatchError::Invalid {
            reason: "offsets overflow",
        });
    }
    Ok(info)
}

fn info_of(header: &BatchHeader, size: usize) -> Result<BatchInfo, BatchError> {
    let attributes = header.attributes.get();
    let compression = match attributes & ATTR_COMPRESSION_MASK {
        0 => Compression::None,
        1 => Compression::Gzip,
        2 => Compression::Snappy,
        3 => Compression::Lz4,
        4 => Compression::Zstd,
        _ => {
            return Err(BatchError::Invalid {
                reason: "unknown compression codec",
            })
        }
    };
    let timestamp_type = if attributes & ATTR_TIMESTAMP_TYPE == 0 {
        TimestampType::CreateTime
    } else {
        TimestampType::LogAppendTime
    };
    Ok(BatchInfo {
        base_offset: Offset(header.base_offset.get()),
        last_offset_delta: header.last_offset_delta.get(),
        size,
        leader_epoch: LeaderEpoch(header.partition_leader_epoch.get()),
        max_timestamp: TimestampMs(header.max_timestamp.get()),
        base_timestamp: TimestampMs(header.base_timestamp.get()),
        record_count: header.record_count.get(),
        compression,
        timestamp_type,
        producer_id: ProducerId(header.producer_id.get()),
        producer_epoch: header.producer_epoch.get(),
        base_sequence: header.base_sequence.get(),
        is_transactional: attributes & ATTR_TRANSACTIONAL != 0,
        is_control: attributes & ATTR_CONTROL != 0,
        has_delete_horizon: attributes & ATTR_DELETE_HORIZON != 0,
    })
}

/// Checks the header fields' consistency (everything `validate` checks after
/// the CRC).
pub fn check_fields(info: &BatchInfo, validation: Validation) -> Result<(), BatchError> {
    let invalid = |reason| Err(BatchError::Invalid { reason });
    if info.last_offset_delta < 0 {
        return invalid("negative lastOffsetDelta");
    }
    if info.record_count < 0 {
        return invalid("negative recordCount");
    }
    // Every record takes at least 7 bytes (length, attributes, three varints,
    // empty key and value, header count), which bounds recordCount by the
    // bytes present; it stops a header claiming 2^31 records.
    let records_bytes = info.size - HEADER_BYTES;
    if info.compression == Compression::None && info.record_count as usize > records_bytes / 7 {
        return invalid("recordCount exceeds what the batch's bytes can hold");
    }
    if info.base_offset.0 < 0 {
        return invalid("negative baseOffset");
    }
    if info
        .base_offset
        .0
        .checked_add(i64::from(info.last_offset_delta) + 1)
        .is_none()
    {
        return invalid("offsets overflow");
    }
    // A delete horizon replaces the base timestamp with a later time.
    let base_is_time = !info.has_delete_horizon;
    if base_is_time && info.record_count > 0 && info.max_timestamp < info.base_timestamp && info.max_timestamp.0 != -1 {
        return invalid("maxTimestamp is below baseTimestamp");
    }
    if info.base_timestamp.0 < -1 || info.max_timestamp.0 < -1 {
        return invalid("negative timestamp");
    }
    if info.producer_id < ProducerId::NONE {
        return invalid("producerId below -1");
    }
    // A transaction marker (a control batch) carries its producer's id and
    // epoch but no sequence, as in Kafka.
    if info.producer_id > ProducerId::NONE && (info.producer_epoch < 0 || (info.base_sequence < 0 && !info.is_control))
    {
        return invalid("idempotent batch without epoch or sequence");
    }
    match validation {
        Validation::Producer => check_producer_fields(info),
        Validation::Stored => {
            if i64::from(info.record_count) > i64::from(info.last_offset_delta) + 1 {
                return invalid("more records than offsets");
            }
            Ok(())
        }
    }
}

fn check_producer_fields(info: &BatchInfo) -> Result<(), BatchError> {
    let invalid = |reason| Err(BatchError::Invalid { reason });
    if info.record_count == 0 {
        return invalid("empty batch from a producer");
    }
    if i64::from(info.record_count) != i64::from(info.last_offset_delta) + 1 {
        return invalid("recordCount does not match lastOffsetDelta + 1");
    }
    if info.is_control {
        return invalid("control batches cannot be produced by clients");
    }
    if info.is_transactional && !info.producer_id.is_producer() {
        return invalid("a transactional batch without a producer id");
    }
    if info.has_delete_horizon {
        return invalid("the delete horizon is the log cleaner's to set");
    }
    Ok(())
}

/// Rewrites the base offset and partition leader epoch of the batch at the
/// start of `bytes`. Both fields precede the CRC-covered region, so the CRC
/// stays valid.
pub fn stamp(bytes: &mut [u8], base_offset: Offset, epoch: LeaderEpoch) {
    assert!(bytes.len() >= HEADER_BYTES);
    bytes[0..8].copy_from_slice(&base_offset.0.to_be_bytes());
    bytes[12..16].copy_from_slice(&epoch.0.to_be_bytes());
}

/// Builds an uncompressed batch of `values` (no keys, no headers), for tests,
/// benchmarks and fuzz seeds. `values` may be empty only for `Validation::Stored`
/// style batches; producers always send at least one record.
pub fn build_batch(base_offset: Offset, base_timestamp: TimestampMs, values: &[&[u8]]) -> Vec<u8> {
    let records: Vec<crate::record::Record<'_>> = values
        .iter()
        .enumerate()
        .map(|(i, v)| crate::record::Record {
            offset_delta: i as i32,
            timestamp_delta: i as i64,
            key: None,
            value: Some(v),
            headers: Vec::new(),
        })
        .collect();
    build_batch_of_records(base_offset, base_timestamp, &records)
}

/// Makes the batch at the start of `bytes` an idempotent producer's:
/// rewrites its producer id, epoch and base sequence and its CRC (tests,
/// benchmarks, fuzz seeds, transaction markers).
pub fn set_producer(bytes: &mut [u8], producer_id: ProducerId, producer_epoch: i16, base_sequence: i32) {
    assert!(bytes.len() >= HEADER_BYTES);
    bytes[43..51].copy_from_slice(&producer_id.0.to_be_bytes());
    bytes[51..53].copy_from_slice(&producer_epoch.to_be_bytes());
    bytes[53..57].copy_from_slice(&base_sequence.to_be_bytes());
    let end = claimed_size(bytes).unwrap_or(bytes.len()).min(bytes.len());
    let crc = crc32c::crc32c(&bytes[CRC_START..end]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Builds an uncompressed batch from records (with keys and headers).
pub fn build_batch_of_records(
    base_offset: Offset,
    base_timestamp: TimestampMs,
    records: &[crate::record::Record<'_>],
) -> Vec<u8> {
    let mut body = Vec::new();
    let mut max_ts = base_timestamp.0;
    let mut last_delta = 0;
    for r in records {
        r.encode(&mut body);
        max_ts = max_ts.max(base_timestamp.0 + r.timestamp_delta);
        last_delta = r.offset_delta;
    }
    let mut out = vec![0u8; HEADER_BYTES];
    out.extend_from_slice(&body);
    let header = BatchHeader {
        base_offset: I64::new(base_offset.0),
        batch_length: I32::new((out.len() - LOG_OVERHEAD_BYTES) as i32),
        partition_leader_epoch: I32::new(-1),
        magic: MAGIC_V2,
        crc: U32::new(0),
        attributes: I16::new(0),
        last_offset_delta: I32::new(last_delta),
        base_timestamp: I64::new(base_timestamp.0),
        max_timestamp: I64::new(max_ts),
        producer_id: I64::new(-1),
        producer_epoch: I16::new(-1),
        base_sequence: I32::new(-1),
        record_count: I32::new(records.len() as i32),
    };
    out[..HEADER_BYTES].copy_from_slice(header.as_bytes());
    let crc = crc32c::crc32c(&out[CRC_START..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        build_batch(Offset(0), TimestampMs(1_000), &[b"a", b"bb", b"ccc"])
    }

    #[test]
    fn valid_batch_parses() {
        let b = sample();
        let info = validate(&b, 1 << 20, Validation::Producer).expect("valid");
        assert_eq!(info.size, b.len());
        assert_eq!(info.record_count, 3);
        assert_eq!(info.last_offset_delta, 2);
        assert_eq!(info.max_timestamp, TimestampMs(1_002));
        assert_eq!(info.compression, Compression::None);
    }

    #[test]
    fn stamping_keeps_crc_valid() {
        let mut b = sample();
        stamp(&mut b, Offset(1234), LeaderEpoch(7));
        let info = validate(&b, 1 << 20, Validation::Producer).expect("valid");
        assert_eq!(info.base_offset, Offset(1234));
        assert_eq!(info.leader_epoch, LeaderEpoch(7));
        assert_eq!(info.next_offset(), Offset(1237));
    }

    #[test]
    fn every_flipped_crc_covered_byte_is_caught() {
        let b = sample();
        for i in CRC_START..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x40;
            assert!(
                validate(&c, 1 << 20, Validation::Stored).is_err(),
                "flip at {i} not caught"
            );
        }
    }

    #[test]
    fn rejects_bad_magic_truncation_size_and_counts() {
        let b = sample();
        let mut m = b.clone();
        m[16] = 1;
        assert_eq!(
            validate(&m, 1 << 20, Validation::Producer),
            Err(BatchError::BadMagic { magic: 1 })
        );
        assert!(matches!(
            validate(&b[..b.len() - 1], 1 << 20, Validation::Producer),
            Err(BatchError::Truncated { .. })
        ));
        assert!(matches!(
            validate(&b[..20], 1 << 20, Validation::Producer),
            Err(BatchError::Truncated { .. })
        ));
        assert_eq!(
            validate(&b, b.len() - 1, Validation::Producer),
            Err(BatchError::TooLarge {
                size: b.len(),
                max: b.len() - 1
            })
        );
        let mut short = b.clone();
        short[8..12].copy_from_slice(&10i32.to_be_bytes());
        assert_eq!(
            validate(&short, 1 << 20, Validation::Producer),
            Err(BatchError::LengthTooSmall { length: 10 })
        );
    }

    #[test]
    fn rejects_record_count_mismatch_after_recomputing_crc() {
        let mut b = sample();
        b[57..61].copy_from_slice(&2i32.to_be_bytes());
        let crc = crc32c::crc32c(&b[CRC_START..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            validate(&b, 1 << 20, Validation::Producer),
            Err(BatchError::Invalid { .. })
        ));
        // A compacted (stored) batch may hold fewer records than offsets.
        assert!(validate(&b, 1 << 20, Validation::Stored).is_ok());
    }
}
