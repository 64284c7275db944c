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
    /// Bytes of the most recent batches kept in memory per partition, so that
    /// caught-up readers never touch the disk.
    pub cache_bytes_max: usize,
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
    }
}
