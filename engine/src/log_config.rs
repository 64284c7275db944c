//! Per-topic log configuration, under Kafka's topic-level names.
//!
//! | key                   | default        | meaning |
//! |-----------------------|----------------|---------|
//! | `segment.bytes`       | 1073741824     | roll the active segment before it exceeds this size |
//! | `segment.ms`          | 604800000      | roll a non-empty active segment this old |
//! | `segment.index.bytes` | 10485760       | roll when the offset index reaches this size |
//! | `index.interval.bytes`| 4096           | bytes between offset/time index entries |
//! | `max.message.bytes`   | 1048588        | largest batch accepted |
//! | `flush.messages`      | 9223372036854775807 | fsync after this many records (1 = every append) |
//! | `flush.ms`            | 9223372036854775807 | fsync when the oldest unflushed append is this old |
//! | `retention.ms`        | 604800000      | delete sealed segments whose largest timestamp is older; -1 keeps forever |
//! | `retention.bytes`     | -1             | delete the oldest sealed segments while the partition is larger; -1 = no limit |
//! | `cleanup.policy`      | delete         | `delete` (retention), `compact` (the cleaner, [`crate::cleaner`]), both, or neither (empty) |
//! | `min.cleanable.dirty.ratio` | 0.5      | share of a log not yet cleaned that starts a cleaning |
//! | `min.compaction.lag.ms` | 0            | a record younger than this is not cleaned away |
//! | `max.compaction.lag.ms` | 9223372036854775807 | a log holding a dirty record this old is cleaned whatever its ratio |
//! | `delete.retention.ms` | 86400000       | how long the cleaner keeps a tombstone |
//!
//! As in Kafka, the default flush policy never fsyncs on the append path:
//! durability comes from replication, and the OS writes pages back.

use crate::error::{EngineError, Result};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogConfig {
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub segment_index_bytes: u64,
    pub index_interval_bytes: u64,
    pub max_message_bytes: usize,
    pub flush_messages: i64,
    pub flush_ms: i64,
    pub retention_ms: i64,
    pub retention_bytes: i64,
    pub cleanup_policy: CleanupPolicy,
    pub min_cleanable_dirty_ratio: DirtyRatio,
    pub min_compaction_lag_ms: i64,
    pub max_compaction_lag_ms: i64,
    pub delete_retention_ms: i64,
    /// Bytes of the most recent batches kept in memory per partition, so that
    /// caught-up readers never touch the disk.
    pub cache_bytes_max: usize,
}

/// What happens to a log's old records (`cleanup.policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CleanupPolicy {
    /// Retention deletes old segments.
    Delete,
    /// The cleaner keeps each key's latest record.
    Compact,
    CompactAndDelete,
    /// An empty list: everything is kept.
    KeepAll,
}

impl CleanupPolicy {
    pub fn deletes(self) -> bool {
        matches!(self, CleanupPolicy::Delete | CleanupPolicy::CompactAndDelete)
    }

    pub fn compacts(self) -> bool {
        matches!(self, CleanupPolicy::Compact | CleanupPolicy::CompactAndDelete)
    }

    /// Parses Kafka's list (`delete`, `compact`, both in either order, or
    /// empty).
    pub fn parse(value: &str) -> Option<CleanupPolicy> {
        let (mut delete, mut compact) = (false, false);
        for item in value.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            match item {
                "delete" => delete = true,
                "compact" => compact = true,
                _ => return None,
            }
        }
        Some(match (compact, delete) {
            (true, true) => CleanupPolicy::CompactAndDelete,
            (true, false) => CleanupPolicy::Compact,
            (false, true) => CleanupPolicy::Delete,
            (false, false) => CleanupPolicy::KeepAll,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CleanupPolicy::Delete => "delete",
            CleanupPolicy::Compact => "compact",
            CleanupPolicy::CompactAndDelete => "compact,delete",
            CleanupPolicy::KeepAll => "",
        }
    }
}

/// `min.cleanable.dirty.ratio`, in millionths (0..=1_000_000), so the
/// config stays comparable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirtyRatio(pub u32);

impl DirtyRatio {
    pub const MILLIONTHS: u32 = 1_000_000;

    fn parse(value: &str) -> Option<DirtyRatio> {
        let v: f64 = value.trim().parse().ok()?;
        (0.0..=1.0)
            .contains(&v)
            .then(|| DirtyRatio((v * f64::from(Self::MILLIONTHS)).round() as u32))
    }

    /// Whether `dirty` of `total` bytes reaches this ratio.
    pub fn reached(self, dirty: u64, total: u64) -> bool {
        total > 0 && u128::from(dirty) * u128::from(Self::MILLIONTHS) >= u128::from(self.0) * u128::from(total)
    }
}

impl std::fmt::Display for DirtyRatio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", f64::from(self.0) / f64::from(Self::MILLIONTHS))
    }
}

/// Smallest segment that can hold a batch header, as Kafka's lower bound.
pub const SEGMENT_BYTES_MIN: u64 = 14;
/// Positions in the offset index are u32; Kafka caps segments at i32::MAX.
pub const SEGMENT_BYTES_MAX: u64 = i32::MAX as u64;

impl Default for LogConfig {
    fn default() -> LogConfig {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            segment_index_bytes: 10 << 20,
            index_interval_bytes: 4096,
            max_message_bytes: 1_048_588,
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            retention_ms: 7 * 24 * 3600 * 1000,
            retention_bytes: -1,
            cleanup_policy: CleanupPolicy::Delete,
            min_cleanable_dirty_ratio: DirtyRatio(DirtyRatio::MILLIONTHS / 2),
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 86_400_000,
            cache_bytes_max: 4 << 20,
        }
    }
}

/// The topic-level keys this config understands.
pub const KEYS: &[&str] = &[
    "segment.bytes",
    "segment.ms",
    "segment.index.bytes",
    "index.interval.bytes",
    "max.message.bytes",
    "flush.messages",
    "flush.ms",
    "retention.ms",
    "retention.bytes",
    "cleanup.policy",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "delete.retention.ms",
];

fn parse_i64(key: &'static str, value: &str, min: i64, max: i64) -> Result<i64> {
    let bad = |reason| EngineError::InvalidConfig {
        key,
        value: value.to_string(),
        reason,
    };
    let v: i64 = value.trim().parse().map_err(|_| bad("not an integer"))?;
    if v < min {
        return Err(bad("below the minimum"));
    }
    if v > max {
        return Err(bad("above the maximum"));
    }
    Ok(v)
}

impl LogConfig {
    /// Sets one key by its Kafka name. Unknown keys are an error; the caller
    /// decides whether to warn or refuse.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        match key {
            "segment.bytes" => {
                self.segment_bytes = parse_i64(
                    "segment.bytes",
                    value,
                    SEGMENT_BYTES_MIN as i64,
                    SEGMENT_BYTES_MAX as i64,
                )? as u64
            }
            "segment.ms" => self.segment_ms = parse_i64("segment.ms", value, 1, i64::MAX)?,
            "segment.index.bytes" => {
                self.segment_index_bytes = parse_i64("segment.index.bytes", value, 8, i32::MAX as i64)? as u64
            }
            "index.interval.bytes" => {
                self.index_interval_bytes = parse_i64("index.interval.bytes", value, 0, i32::MAX as i64)? as u64
            }
            "max.message.bytes" => {
                self.max_message_bytes = parse_i64("max.message.bytes", value, 0, i32::MAX as i64)? as usize
            }
            "flush.messages" => self.flush_messages = parse_i64("flush.messages", value, 1, i64::MAX)?,
            "flush.ms" => self.flush_ms = parse_i64("flush.ms", value, 0, i64::MAX)?,
            "retention.ms" => self.retention_ms = parse_i64("retention.ms", value, -1, i64::MAX)?,
            "retention.bytes" => self.retention_bytes = parse_i64("retention.bytes", value, -1, i64::MAX)?,
            "cleanup.policy" => {
                self.cleanup_policy = CleanupPolicy::parse(value).ok_or(EngineError::InvalidConfig {
                    key: "cleanup.policy",
                    value: value.to_string(),
                    reason: "not a list of delete and compact",
                })?
            }
            "min.cleanable.dirty.ratio" => {
                self.min_cleanable_dirty_ratio = DirtyRatio::parse(value).ok_or(EngineError::InvalidConfig {
                    key: "min.cleanable.dirty.ratio",
                    value: value.to_string(),
                    reason: "not a number from 0 to 1",
                })?
            }
            "min.compaction.lag.ms" => {
                self.min_compaction_lag_ms = parse_i64("min.compaction.lag.ms", value, 0, i64::MAX)?
            }
            "max.compaction.lag.ms" => {
                self.max_compaction_lag_ms = parse_i64("max.compaction.lag.ms", value, 1, i64::MAX)?
            }
            "delete.retention.ms" => self.delete_retention_ms = parse_i64("delete.retention.ms", value, 0, i64::MAX)?,
            _ => {
                return Err(EngineError::InvalidConfig {
                    key: "(unknown)",
                    value: key.to_string(),
                    reason: "unknown topic config key",
                })
            }
        }
        Ok(())
    }

    /// The value of one key, as a string, for DescribeConfigs.
    pub fn get(&self, key: &str) -> Option<String> {
        let v = match key {
            "segment.bytes" => self.segment_bytes.to_string(),
            "segment.ms" => self.segment_ms.to_string(),
            "segment.index.bytes" => self.segment_index_bytes.to_string(),
            "index.interval.bytes" => self.index_interval_bytes.to_string(),
            "max.message.bytes" => self.max_message_bytes.to_string(),
            "flush.messages" => self.flush_messages.to_string(),
            "flush.ms" => self.flush_ms.to_string(),
            "retention.ms" => self.retention_ms.to_string(),
            "retention.bytes" => self.retention_bytes.to_string(),
            "cleanup.policy" => self.cleanup_policy.as_str().to_string(),
            "min.cleanable.dirty.ratio" => self.min_cleanable_dirty_ratio.to_string(),
            "min.compaction.lag.ms" => self.min_compaction_lag_ms.to_string(),
            "max.compaction.lag.ms" => self.max_compaction_lag_ms.to_string(),
            "delete.retention.ms" => self.delete_retention_ms.to_string(),
            _ => return None,
        };
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_round_trips_and_bounds_are_enforced() {
        let mut c = LogConfig::default();
        for key in KEYS {
            let v = c.get(key).unwrap();
            c.set(key, &v).unwrap();
        }
        assert_eq!(c, LogConfig::default());
        c.set("retention.ms", "-1").unwrap();
        assert_eq!(c.retention_ms, -1);
        assert!(c.set("segment.bytes", "13").is_err());
        assert!(c.set("segment.bytes", "4294967296").is_err());
        assert!(c.set("flush.messages", "0").is_err());
        assert!(c.set("retention.bytes", "x").is_err());
        assert!(c.set("no.such.key", "1").is_err());
        c.set("cleanup.policy", "delete, compact").unwrap();
        assert_eq!(c.cleanup_policy, CleanupPolicy::CompactAndDelete);
        c.set("cleanup.policy", "").unwrap();
        assert_eq!(c.cleanup_policy, CleanupPolicy::KeepAll);
        assert!(c.set("cleanup.policy", "compact,shred").is_err());
        c.set("min.cleanable.dirty.ratio", "0.25").unwrap();
        assert_eq!(c.get("min.cleanable.dirty.ratio").unwrap(), "0.25");
        assert!(c.min_cleanable_dirty_ratio.reached(1, 4));
        assert!(!c.min_cleanable_dirty_ratio.reached(1, 5));
        assert!(c.set("min.cleanable.dirty.ratio", "1.5").is_err());
    }
}
