//! The log cleaner's broker settings, under Kafka's names:
//!
//! | key | default | what |
//! |---|---|---|
//! | `log.cleaner.enable` | true | run the cleaner on topics with `cleanup.policy` compact |
//! | `log.cleaner.dedupe.buffer.size` | 134217728 | memory for the cleaners' key maps, shared by the shards (64 bytes a key) |
//! | `log.cleaner.io.max.bytes.per.second` | unlimited | bytes a shard's cleaner reads and writes per second |
//! | `log.cleaner.backoff.ms` | 15000 | pause between two cleaner passes over a shard's logs |
//!
//! The per-topic defaults (`log.cleanup.policy`, `log.cleaner.min.cleanable.ratio`,
//! `log.cleaner.delete.retention.ms`, `log.cleaner.min.compaction.lag.ms`,
//! `log.cleaner.max.compaction.lag.ms`) are read with the other `log.*`
//! topic defaults. Each shard cleans its own logs, one at a time, so
//! `log.cleaner.threads` is refused unless 1 (Kafka's default): Ferrite
//! has one cleaner per shard.

use crate::{invalid, ConfigError};

/// Smallest key map a shard may have: a few thousand keys.
pub const DEDUPE_BYTES_MIN: u64 = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CleanerSettings {
    pub enabled: bool,
    pub dedupe_buffer_bytes: u64,
    /// `None`: unpaced.
    pub io_bytes_per_second: Option<u64>,
    pub backoff_ms: u64,
}

impl Default for CleanerSettings {
    fn default() -> CleanerSettings {
        CleanerSettings {
            enabled: true,
            dedupe_buffer_bytes: 128 << 20,
            io_bytes_per_second: None,
            backoff_ms: 15_000,
        }
    }
}

impl CleanerSettings {
    /// Takes one cleaner key; `false` if `key` is not one of them.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        let v = value.trim();
        let count = |what: &'static str| v.parse::<u64>().map_err(|_| invalid(key, value, what));
        match key {
            "log.cleaner.enable" => {
                self.enabled = match v {
                    "true" => true,
                    "false" => false,
                    _ => return Err(invalid(key, value, "expected true or false")),
                }
            }
            "log.cleaner.dedupe.buffer.size" => {
                let n = count("expected a byte count")?;
                if n < DEDUPE_BYTES_MIN {
                    return Err(invalid(key, value, format!("at least {DEDUPE_BYTES_MIN} bytes")));
                }
                self.dedupe_buffer_bytes = n;
            }
            "log.cleaner.io.max.bytes.per.second" => {
                // Kafka's type is a double; its default (Double.MAX_VALUE) means unpaced.
                let n: f64 = v
                    .parse()
                    .map_err(|_| invalid(key, value, "expected bytes per second"))?;
                if n.is_nan() || n < 1.0 {
                    return Err(invalid(key, value, "at least 1 byte per second"));
                }
                self.io_bytes_per_second = (n < u64::MAX as f64).then_some(n as u64);
            }
            "log.cleaner.backoff.ms" => self.backoff_ms = count("expected milliseconds")?.max(1),
            "log.cleaner.threads" if v != "1" => {
                return Err(invalid(key, value, "each shard runs one cleaner: leave it 1"));
            }
            "log.cleaner.threads" => {}
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Keys one shard's map holds, of `shards`.
    pub fn entries_per_shard(&self, shards: usize) -> usize {
        let bytes = self.dedupe_buffer_bytes / shards.max(1) as u64;
        (bytes as usize / ferrite_engine::clean_map::ENTRY_BYTES).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_names_are_read_and_bad_values_refused() {
        let mut c = CleanerSettings::default();
        assert!(c.set("log.cleaner.enable", "false").unwrap());
        assert!(!c.enabled);
        assert!(c
            .set("log.cleaner.io.max.bytes.per.second", "1.7976931348623157E308")
            .unwrap());
        assert_eq!(c.io_bytes_per_second, None);
        assert!(c.set("log.cleaner.io.max.bytes.per.second", "1048576").unwrap());
        assert_eq!(c.io_bytes_per_second, Some(1 << 20));
        assert!(c.set("log.cleaner.threads", "1").unwrap());
        assert!(c.set("log.cleaner.threads", "4").is_err());
        assert!(c.set("log.cleaner.dedupe.buffer.size", "100").is_err());
        assert!(!c.set("log.retention.ms", "1").unwrap());
        assert_eq!(CleanerSettings::default().entries_per_shard(2), (64 << 20) / 64);
    }
}
