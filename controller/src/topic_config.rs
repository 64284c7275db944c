//! A topic's config overrides: which names and values are accepted (every
//! topic config of Kafka 3.9, see [`topic_config_defs`](crate::topic_config_defs)),
//! how changes apply to them, and the log config they give.
//!
//! The log settings are the engine's (`ferrite_engine::LogConfig`), with the
//! engine's own limits on top of Kafka's (`cleanup.policy` and the
//! cleaner's settings among them: the engine's retention and cleaner read
//! them); the others are stored and served.

use std::collections::BTreeMap;

use ferrite_engine::log_config::{self, LogConfig};

use crate::error::{ControllerError, Result};
use crate::topic_config_defs::{def, TopicConfigDef};

/// One change to a topic's overrides (AlterConfigs, IncrementalAlterConfigs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigOp {
    Set(String, String),
    Delete(String),
    /// Adds the values not in the list yet (a list config; from its default
    /// when not overridden).
    Append(String, String),
    /// Removes the values from the list (a list config; from its default
    /// when not overridden).
    Subtract(String, String),
    /// Removes every override (AlterConfigs replaces the whole set).
    Clear,
}

pub fn is_known(key: &str) -> bool {
    def(key).is_some()
}

fn invalid(key: &str, value: &str, reason: impl Into<String>) -> ControllerError {
    ControllerError::InvalidConfig {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

fn known(key: &str) -> Result<&'static TopicConfigDef> {
    def(key).ok_or_else(|| invalid(key, "", "unknown topic config"))
}

pub fn validate_key(key: &str) -> Result<()> {
    known(key).map(|_| ())
}

/// Longest config value accepted.
pub const VALUE_BYTES_MAX: usize = 1024;

pub fn validate(key: &str, value: &str) -> Result<()> {
    if value.len() > VALUE_BYTES_MAX {
        let shown: String = value.chars().take(64).collect();
        return Err(invalid(key, &shown, "value longer than 1024 bytes"));
    }
    if value != value.trim() {
        return Err(invalid(key, value, "leading or trailing white space"));
    }
    let d = known(key)?;
    if let Some(reason) = d.refusal(value) {
        return Err(invalid(key, value, reason));
    }
    if key == "remote.storage.enable" && value.eq_ignore_ascii_case("true") {
        return Err(invalid(key, value, "tiered storage is not built in Ferrite"));
    }
    if log_config::KEYS.contains(&key) {
        return LogConfig::default()
            .set(key, value)
            .map(|_| ())
            .map_err(|e| invalid(key, value, e.to_string()));
    }
    Ok(())
}

/// The items of a list config's current value: the override, else the
/// default.
fn list_of(configs: &BTreeMap<String, String>, d: &TopicConfigDef) -> Vec<String> {
    let current = configs.get(d.name).map(String::as_str).unwrap_or(d.default);
    current
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn list_config(key: &str, op: &str) -> Result<&'static TopicConfigDef> {
    let d = known(key)?;
    if !d.is_list() {
        return Err(invalid(
            key,
            "",
            format!("config value {op} is not allowed for a config that is not a list"),
        ));
    }
    Ok(d)
}

/// Applies `ops` in order to `configs`, checking each value; on an error
/// `configs` may be half changed (callers apply to a copy).
pub fn apply_ops(configs: &mut BTreeMap<String, String>, ops: &[ConfigOp]) -> Result<()> {
    for op in ops {
        match op {
            ConfigOp::Set(k, v) => {
                validate(k, v)?;
                configs.insert(k.clone(), v.clone());
            }
            ConfigOp::Delete(k) => {
                validate_key(k)?;
                configs.remove(k);
            }
            ConfigOp::Append(k, values) => {
                let d = list_config(k, "append")?;
                let mut list = list_of(configs, d);
                for v in values.split(',').filter(|v| !v.is_empty()) {
                    if !list.iter().any(|x| x == v) {
                        list.push(v.to_string());
                    }
                }
                let joined = list.join(",");
                validate(k, &joined)?;
                configs.insert(k.clone(), joined);
            }
            ConfigOp::Subtract(k, values) => {
                let d = list_config(k, "subtract")?;
                let gone: Vec<&str> = values.split(',').collect();
                let list: Vec<String> = list_of(configs, d)
                    .into_iter()
                    .filter(|x| !gone.contains(&x.as_str()))
                    .collect();
                let joined = list.join(",");
                validate(k, &joined)?;
                configs.insert(k.clone(), joined);
            }
            ConfigOp::Clear => configs.clear(),
        }
    }
    Ok(())
}

/// The log config a topic's overrides give, over `base` (the broker's
/// defaults).
pub fn log_config(base: &LogConfig, overrides: &BTreeMap<String, String>) -> LogConfig {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ops: &[ConfigOp]) -> Result<BTreeMap<String, String>> {
        let mut c = BTreeMap::new();
        apply_ops(&mut c, ops)?;
        Ok(c)
    }

    fn op_append(k: &str, v: &str) -> ConfigOp {
        ConfigOp::Append(k.into(), v.into())
    }

    #[test]
    fn append_starts_from_the_default_and_adds_what_is_missing() {
        let c = set(&[op_append("cleanup.policy", "compact")]).expect("append");
        assert_eq!(c["cleanup.policy"], "delete,compact");
        let c = set(&[
            op_append("cleanup.policy", "compact"),
            op_append("cleanup.policy", "delete,compact"),
        ])
        .expect("append twice");
        assert_eq!(
            c["cleanup.policy"], "delete,compact",
            "present values are not added again"
        );
    }

    #[test]
    fn subtract_removes_and_may_leave_an_empty_list() {
        let c = set(&[
            ConfigOp::Set("cleanup.policy".into(), "compact,delete".into()),
            ConfigOp::Subtract("cleanup.policy".into(), "compact".into()),
        ])
        .expect("subtract");
        assert_eq!(c["cleanup.policy"], "delete");
        let c = set(&[ConfigOp::Subtract("cleanup.policy".into(), "compact".into())]).expect("absent value");
        assert_eq!(
            c["cleanup.policy"], "delete",
            "subtracting an absent value changes nothing"
        );
        let c = set(&[ConfigOp::Subtract("cleanup.policy".into(), "delete".into())]).expect("subtract all");
        assert_eq!(c["cleanup.policy"], "", "an empty override, not the default");
        assert_eq!(
            log_config(&LogConfig::default(), &c).cleanup_policy,
            ferrite_engine::log_config::CleanupPolicy::KeepAll,
            "no policy: nothing deleted"
        );
        let c = set(&[ConfigOp::Subtract(
            "leader.replication.throttled.replicas".into(),
            "0:1".into(),
        )])
        .expect("an empty list of replicas");
        assert_eq!(c["leader.replication.throttled.replicas"], "");
    }

    #[test]
    fn append_and_subtract_refuse_configs_that_are_not_lists() {
        let e = set(&[op_append("retention.ms", "5")]).expect_err("not a list");
        assert!(e.to_string().contains("not a list"), "{e}");
        assert!(set(&[ConfigOp::Subtract("retention.ms".into(), "5".into())]).is_err());
        assert!(set(&[op_append("no.such.config", "5")]).is_err());
    }

    #[test]
    fn every_kafka_topic_config_is_accepted_with_a_valid_value() {
        let c = set(&[
            ConfigOp::Set("delete.retention.ms".into(), "1000".into()),
            ConfigOp::Set("min.cleanable.dirty.ratio".into(), "0.1".into()),
            ConfigOp::Set("message.timestamp.after.max.ms".into(), "3600000".into()),
            ConfigOp::Set("remote.storage.enable".into(), "false".into()),
        ])
        .expect("known configs");
        assert_eq!(c.len(), 4);
        assert!(set(&[ConfigOp::Set("remote.storage.enable".into(), "true".into())]).is_err());
        assert!(set(&[ConfigOp::Set("delete.retention.ms".into(), "-5".into())]).is_err());
    }

    #[test]
    fn the_cleanup_policy_reaches_the_log_config() {
        use ferrite_engine::log_config::CleanupPolicy;
        let base = LogConfig::default();
        let mut o = BTreeMap::new();
        o.insert("retention.ms".to_string(), "1000".to_string());
        assert_eq!(log_config(&base, &o).cleanup_policy, CleanupPolicy::Delete);
        o.insert("cleanup.policy".to_string(), "compact".to_string());
        assert_eq!(log_config(&base, &o).cleanup_policy, CleanupPolicy::Compact);
        assert_eq!(
            log_config(&base, &o).retention_ms,
            1000,
            "kept, unused while compact only"
        );
        o.insert("cleanup.policy".to_string(), "compact,delete".to_string());
        assert_eq!(log_config(&base, &o).cleanup_policy, CleanupPolicy::CompactAndDelete);
        o.insert("min.cleanable.dirty.ratio".to_string(), "0.1".to_string());
        o.insert("delete.retention.ms".to_string(), "5".to_string());
        let c = log_config(&base, &o);
        assert_eq!((c.min_cleanable_dirty_ratio.0, c.delete_retention_ms), (100_000, 5));
    }

    #[test]
    fn a_long_value_is_refused_whatever_its_characters() {
        let value = format!("{}é{}", "a".repeat(63), "b".repeat(1024));
        assert!(
            validate("retention.ms", &value).is_err(),
            "refused, not a panic on a character boundary"
        );
    }

    #[test]
    fn clear_removes_every_override() {
        let c = set(&[ConfigOp::Set("retention.ms".into(), "5".into()), ConfigOp::Clear]).expect("clear");
        assert!(c.is_empty());
    }
}
