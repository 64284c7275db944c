//! Which topic-level configs a topic may carry, and their values' checks.
//!
//! The log settings are the engine's (`ferrite_engine::LogConfig`); the
//! others are accepted for the operators' and clients' sake and checked for
//! form: `cleanup.policy` (`delete` only, compaction is not built),
//! `compression.type`, `message.timestamp.type`, `min.insync.replicas`,
//! `unclean.leader.election.enable`.

use ferrite_engine::log_config::{self, LogConfig};

use crate::error::{ControllerError, Result};

pub const OTHER_KEYS: &[&str] = &[
    "cleanup.policy",
    "compression.type",
    "message.timestamp.type",
    "min.insync.replicas",
    "unclean.leader.election.enable",
];

/// The value each non-log key has when not overridden.
pub fn other_default(key: &str) -> Option<&'static str> {
    match key {
        "cleanup.policy" => Some("delete"),
        "compression.type" => Some("producer"),
        "message.timestamp.type" => Some("CreateTime"),
        "min.insync.replicas" => Some("1"),
        "unclean.leader.election.enable" => Some("false"),
        _ => None,
    }
}

pub fn is_known(key: &str) -> bool {
    log_config::KEYS.contains(&key) || OTHER_KEYS.contains(&key)
}

fn invalid(key: &str, value: &str, reason: impl Into<String>) -> ControllerError {
    ControllerError::InvalidConfig {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

pub fn validate_key(key: &str) -> Result<()> {
    if is_known(key) {
        Ok(())
    } else {
        Err(invalid(key, "", "unknown topic config"))
    }
}

/// Longest config value accepted.
pub const VALUE_BYTES_MAX: usize = 1024;

pub fn validate(key: &str, value: &str) -> Result<()> {
    if value.len() > VALUE_BYTES_MAX {
        return Err(invalid(
            key,
            &value[..64.min(value.len())],
            "value longer than 1024 bytes",
        ));
    }
    if value != value.trim() {
        return Err(invalid(key, value, "leading or trailing white space"));
    }
    if log_config::KEYS.contains(&key) {
        return LogConfig::default()
            .set(key, value)
            .map_err(|e| invalid(key, value, e.to_string()));
    }
    let ok = match key {
        "cleanup.policy" => value == "delete",
        "compression.type" => ["producer", "uncompressed", "none", "gzip", "snappy", "lz4", "zstd"].contains(&value),
        "message.timestamp.type" => value == "CreateTime" || value == "LogAppendTime",
        "min.insync.replicas" => value.parse::<i32>().is_ok_and(|n| n >= 1),
        "unclean.leader.election.enable" => value == "true" || value == "false",
        _ => return Err(invalid(key, value, "unknown topic config")),
    };
    if ok {
        Ok(())
    } else {
        Err(invalid(key, value, "value not allowed"))
    }
}

/// The log config a topic's overrides give, over `base` (the broker's
/// defaults).
pub fn log_config(base: &LogConfig, overrides: &std::collections::BTreeMap<String, String>) -> LogConfig {
    let mut c = base.clone();
    for (k, v) in overrides {
        if log_config::KEYS.contains(&k.as_str()) {
            // Validated when stored; a bad value here keeps the default.
            if let Err(e) = c.set(k, v) {
                tracing::warn!(key = %k, value = %v, error = %e, "ignoring stored topic config");
            }
        }
    }
    c
}
