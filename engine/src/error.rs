//! The engine's one error type. Each variant carries the context an operator
//! needs (operation, path, offsets); the broker maps variants to Kafka error
//! codes at the protocol edge, never here.

use std::path::PathBuf;

use crate::types::{Offset, TopicPartition};

/// Why a batch was refused. Kept separate from [`EngineError`] so that the
/// batch parser (used by the fuzzers and the broker's decoder) has a small,
/// allocation-free error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// Fewer bytes than the batch header or than the length field claims.
    #[error("truncated batch: need {needed} bytes, have {available}")]
    Truncated { needed: usize, available: usize },
    /// The length field is below the minimum header size.
    #[error("batch length {length} is below the header size")]
    LengthTooSmall { length: i32 },
    #[error("unsupported magic {magic} (only RecordBatch v2 is accepted)")]
    BadMagic { magic: i8 },
    #[error("CRC-32C mismatch: header says {stored:#010x}, bytes give {computed:#010x}")]
    BadCrc { stored: u32, computed: u32 },
    /// The header's fields contradict each other or the records that follow.
    #[error("invalid batch: {reason}")]
    Invalid { reason: &'static str },
    #[error("batch of {size} bytes exceeds max.message.bytes {max}")]
    TooLarge { size: usize, max: usize },
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A batch was refused on append; nothing was written.
    #[error("{tp}: batch at byte {position} of the request: {source}")]
    Batch {
        tp: TopicPartition,
        position: usize,
        #[source]
        source: BatchError,
    },

    /// An idempotent producer's batch is out of sequence or of a stale
    /// epoch; nothing was written.
    #[error("{tp}: {source}")]
    Sequence {
        tp: TopicPartition,
        #[source]
        source: crate::producer_state::SequenceError,
    },

    /// A replicated append does not continue the log where it ends.
    #[error("{tp}: replicated batch starts at offset {batch_base} but the log ends at {log_end}")]
    NonContiguousAppend {
        tp: TopicPartition,
        batch_base: Offset,
        log_end: Offset,
    },

    #[error("{tp}: offset {requested} is out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        tp: TopicPartition,
        requested: Offset,
        log_start: Offset,
        log_end: Offset,
    },

    /// An earlier write or fsync failed. Retrying an fsync is unsafe (the
    /// kernel may have dropped the dirty pages), so the log refuses further
    /// appends and flushes until it is reopened and recovered.
    #[error("{tp}: log is poisoned since {op} failed on {path}: {cause}")]
    Poisoned {
        tp: TopicPartition,
        op: &'static str,
        path: PathBuf,
        cause: String,
    },

    /// Data below the recovery point (already fsynced) does not parse. This is
    /// not a torn write; the partition is not opened unless the operator asks
    /// for repair.
    #[error("{path}: corrupt data at byte {position}, below the recovery point ({reason}); refusing to open (repair with log.recovery.repair=true)")]
    CorruptBelowRecoveryPoint {
        path: PathBuf,
        position: u64,
        reason: String,
    },

    /// A checkpoint or index file does not parse.
    #[error("{path}: {reason}")]
    BadFile { path: PathBuf, reason: String },

    /// The leader-epoch checkpoint file does not parse or breaks the
    /// cache's invariants. Opening a log does not fail on it: the cache is
    /// rebuilt from the segments' batch headers and the file rewritten.
    #[error("{path}: bad leader-epoch checkpoint: {reason}")]
    BadLeaderEpochFile { path: PathBuf, reason: String },

    #[error("invalid log config {key}={value}: {reason}")]
    InvalidConfig {
        key: &'static str,
        value: String,
        reason: &'static str,
    },

    #[error("partition {tp} already exists")]
    PartitionExists { tp: TopicPartition },

    /// The partition could not be opened (see the log for why); it is not
    /// served until the operator deals with it and the broker restarts.
    #[error("partition {tp} is offline: {reason}")]
    PartitionOffline { tp: TopicPartition, reason: String },

    /// The scrubber found the batch at `offset` damaged on the device; the
    /// range is not served until it is healed or removed.
    #[error("partition {tp}: damaged data at offset {offset} in {}: {reason}", path.display())]
    Damaged {
        tp: TopicPartition,
        offset: Offset,
        path: PathBuf,
        reason: String,
    },

    #[error("partition {tp} is not on this shard")]
    UnknownPartition { tp: TopicPartition },

    /// The partition was deleted while it was being created: what the
    /// creation made is removed.
    #[error("partition {tp} was deleted while it was being created")]
    DeletedWhileCreated { tp: TopicPartition },

    #[error("shard {shard} is not running")]
    ShardGone { shard: usize },

    /// The segment was replaced by a cleaned one after the reader found it;
    /// the reader looks the offset up again.
    #[error("{}: the segment was replaced by the log cleaner", path.display())]
    SegmentReplaced { path: PathBuf },
}

impl EngineError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: impl Into<std::io::Error>) -> EngineError {
        EngineError::Io {
            op,
            path: path.into(),
            source: source.into(),
        }
    }
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;
