//! Dynamic broker configs: the broker settings that may change while the
//! brokers run, for one broker (`/config/brokers/<id>`) or as the cluster's
//! default (`/config/brokers/<default>`), Kafka's ZooKeeper layout; the
//! embedded store of `ferrite standalone` keeps the same two maps.
//!
//! A broker's setting is, most specific first: its own dynamic value, the
//! cluster's dynamic default, its `server.properties` (or `--override`)
//! value, the built-in default. Which names are dynamic follows Kafka: the
//! first broker synonym of each topic config (`log.retention.ms`,
//! `log.segment.bytes`, `message.max.bytes`, `min.insync.replicas`,
//! `unclean.leader.election.enable`, …) and the thread-pool sizes
//! (`num.replica.fetchers` is applied: fetch connections per leader; the
//! others size pools Ferrite does not have); the other broker settings are
//! read at start only and are refused here. Ferrite
//! differs where it cannot apply a change while running:
//! `log.message.format.version` (Kafka excludes it too) and
//! `log.preallocate` (Ferrite's preallocation is the log manager's write
//! mode, chosen at start).
//!
//! Values are checked with the topic config's check (a broker synonym has
//! its topic config's unit), so a value accepted here is one every topic
//! could take.

use std::collections::BTreeMap;

use crate::error::{ControllerError, Result};
use crate::metadata::BrokerId;
use crate::topic_config::{self, ConfigOp};
use crate::topic_config_defs::{ConfigKind, TopicConfigDef, TOPIC_CONFIGS};

/// The name of the cluster-wide default entity (`/config/brokers/<default>`).
pub const DEFAULT_ENTITY: &str = "<default>";

/// Whose dynamic configs: one broker's, or the cluster's default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum BrokerEntity {
    Default,
    Broker(BrokerId),
}

impl BrokerEntity {
    /// The entity's name under `/config/brokers` (and in the embedded store).
    pub fn name(self) -> String {
        match self {
            BrokerEntity::Default => DEFAULT_ENTITY.to_string(),
            BrokerEntity::Broker(id) => id.0.to_string(),
        }
    }

    /// The entity a name under `/config/brokers` stands for.
    pub fn parse(name: &str) -> Option<BrokerEntity> {
        if name == DEFAULT_ENTITY {
            return Some(BrokerEntity::Default);
        }
        name.parse()
            .ok()
            .filter(|id| *id >= 0)
            .map(|id| BrokerEntity::Broker(BrokerId(id)))
    }
}

impl serde::Serialize for BrokerEntity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> serde::Deserialize<'de> for BrokerEntity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<BrokerEntity, D::Error> {
        let name = String::deserialize(d)?;
        BrokerEntity::parse(&name).ok_or_else(|| serde::de::Error::custom(format!("not a broker entity: {name:?}")))
    }
}

/// Thread-pool sizes Kafka lets change while running. Ferrite's shards are
/// fixed at start, so these are accepted and stored, and change nothing.
pub const INERT_DYNAMIC: &[&str] = &[
    "num.network.threads",
    "num.io.threads",
    "num.recovery.threads.per.data.dir",
    "background.threads",
];

/// The most fetch connections a shard opens to one leader
/// (`num.replica.fetchers`).
pub const REPLICA_FETCHERS_MAX: i32 = 16;

/// Counts that may change while running and are applied, with their
/// largest value.
const COUNTS: &[(&str, i32)] = &[("num.replica.fetchers", REPLICA_FETCHERS_MAX)];

/// Topic synonyms that stay read-only in Ferrite (see the module doc).
const NOT_DYNAMIC_HERE: &[&str] = &["log.message.format.version", "log.preallocate"];

/// What a broker setting is to a dynamic change.
#[derive(Clone, Copy, Debug)]
pub enum Dynamic {
    /// The broker default of this topic config; applied while running.
    TopicDefault(&'static TopicConfigDef),
    /// A count applied while running, from 1 to `max`.
    Count { max: i32 },
    /// A thread-pool size: accepted, changes nothing.
    Inert,
}

/// How `key` may change while the brokers run; `None`: only at start.
pub fn dynamic(key: &str) -> Option<Dynamic> {
    if INERT_DYNAMIC.contains(&key) {
        return Some(Dynamic::Inert);
    }
    if let Some(&(_, max)) = COUNTS.iter().find(|(k, _)| *k == key) {
        return Some(Dynamic::Count { max });
    }
    if NOT_DYNAMIC_HERE.contains(&key) {
        return None;
    }
    TOPIC_CONFIGS
        .iter()
        .find(|d| d.synonyms.first() == Some(&key))
        .map(Dynamic::TopicDefault)
}

/// Every dynamic name, in a stable order.
pub fn dynamic_names() -> impl Iterator<Item = &'static str> {
    TOPIC_CONFIGS
        .iter()
        .filter_map(|d| d.synonyms.first().copied())
        .filter(|k| !NOT_DYNAMIC_HERE.contains(k))
        .chain(COUNTS.iter().map(|(k, _)| *k))
        .chain(INERT_DYNAMIC.iter().copied())
}

fn invalid(key: &str, value: &str, reason: impl Into<String>) -> ControllerError {
    ControllerError::InvalidConfig {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// Checks that `key` may change while running, and (for a set) its value.
pub fn validate(key: &str, value: Option<&str>) -> Result<()> {
    let Some(how) = dynamic(key) else {
        return Err(ControllerError::NotDynamic { key: key.to_string() });
    };
    let Some(value) = value else { return Ok(()) };
    match how {
        Dynamic::TopicDefault(d) => topic_config::validate(d.name, value).map_err(|e| match e {
            ControllerError::InvalidConfig { value, reason, .. } => invalid(key, &value, reason),
            other => other,
        }),
        Dynamic::Count { max } => match value.parse::<i32>() {
            Ok(n) if (1..=max).contains(&n) => Ok(()),
            _ => Err(invalid(key, value, format!("must be an integer from 1 to {max}"))),
        },
        Dynamic::Inert => match value.parse::<i32>() {
            Ok(n) if n >= 1 => Ok(()),
            _ => Err(invalid(key, value, "must be an integer of at least 1")),
        },
    }
}

/// Applies `ops` in order to one entity's dynamic configs, checking each;
/// on an error `configs` may be half changed (callers apply to a copy).
pub fn apply_ops(configs: &mut BTreeMap<String, String>, ops: &[ConfigOp]) -> Result<()> {
    for op in ops {
        match op {
            ConfigOp::Set(k, v) => {
                validate(k, Some(v))?;
                configs.insert(k.clone(), v.clone());
            }
            ConfigOp::Delete(k) => {
                validate(k, None)?;
                configs.remove(k);
            }
            ConfigOp::Append(k, values) | ConfigOp::Subtract(k, values) => {
                let list = list_default(k)?;
                let current = configs.get(k).map(String::as_str).unwrap_or(list.default);
                let mut items: Vec<String> = current
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                let given = values.split(',').filter(|v| !v.is_empty());
                if matches!(op, ConfigOp::Append(..)) {
                    for v in given {
                        if !items.iter().any(|x| x == v) {
                            items.push(v.to_string());
                        }
                    }
                } else {
                    let gone: Vec<&str> = given.collect();
                    items.retain(|x| !gone.contains(&x.as_str()));
                }
                let joined = items.join(",");
                validate(k, Some(&joined))?;
                configs.insert(k.clone(), joined);
            }
            ConfigOp::Clear => configs.clear(),
        }
    }
    Ok(())
}

/// The topic config behind a dynamic list setting (APPEND and SUBTRACT
/// work on lists only).
fn list_default(key: &str) -> Result<&'static TopicConfigDef> {
    match dynamic(key) {
        Some(Dynamic::TopicDefault(d)) if d.kind == ConfigKind::List => Ok(d),
        Some(_) => Err(invalid(key, "", "APPEND and SUBTRACT apply to list configs only")),
        None => Err(ControllerError::NotDynamic { key: key.to_string() }),
    }
}

/// The dynamic configs of every entity, by entity: what a broker reads at
/// start and after each change notification.
pub type BrokerConfigs = BTreeMap<BrokerEntity, BTreeMap<String, String>>;

/// The dynamic settings in force on broker `me`, default first then its
/// own (later wins).
pub fn layered(all: &BrokerConfigs, me: BrokerId) -> Vec<(String, String)> {
    let default = all.get(&BrokerEntity::Default).into_iter().flatten();
    let own = all.get(&BrokerEntity::Broker(me)).into_iter().flatten();
    let mut merged: BTreeMap<&String, &String> = BTreeMap::new();
    for (k, v) in default.chain(own) {
        merged.insert(k, v);
    }
    merged.into_iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_names_are_the_first_synonyms_and_the_pools() {
        assert!(matches!(dynamic("log.retention.ms"), Some(Dynamic::TopicDefault(d)) if d.name == "retention.ms"));
        assert!(
            dynamic("log.retention.hours").is_none(),
            "only the primary synonym, as in Kafka"
        );
        assert!(dynamic("message.max.bytes").is_some());
        assert!(dynamic("min.insync.replicas").is_some());
        assert!(matches!(
            dynamic("num.replica.fetchers"),
            Some(Dynamic::Count { max: 16 })
        ));
        assert!(validate("num.replica.fetchers", Some("16")).is_ok());
        assert!(validate("num.replica.fetchers", Some("17")).is_err());
        assert!(validate("num.replica.fetchers", Some("0")).is_err());
        assert!(dynamic("broker.id").is_none());
        assert!(dynamic("log.dirs").is_none());
        assert!(dynamic("log.preallocate").is_none());
        assert!(dynamic("log.message.format.version").is_none());
        let names: Vec<&str> = dynamic_names().collect();
        assert!(names.iter().all(|n| dynamic(n).is_some()));
        assert!(names.contains(&"log.cleanup.policy"));
    }

    #[test]
    fn values_are_checked_as_their_topic_config_and_non_dynamic_names_refused() {
        assert!(validate("log.retention.ms", Some("1000")).is_ok());
        assert!(matches!(
            validate("log.retention.ms", Some("soon")),
            Err(ControllerError::InvalidConfig { key, .. }) if key == "log.retention.ms"
        ));
        assert!(
            validate("log.segment.bytes", Some("10")).is_err(),
            "below the engine's minimum"
        );
        assert!(matches!(
            validate("broker.id", Some("3")),
            Err(ControllerError::NotDynamic { .. })
        ));
        assert!(matches!(
            validate("no.such", None),
            Err(ControllerError::NotDynamic { .. })
        ));
        assert!(validate("num.io.threads", Some("0")).is_err());
    }

    #[test]
    fn list_operations_start_from_the_default() {
        let mut c = BTreeMap::new();
        apply_ops(
            &mut c,
            &[ConfigOp::Append("log.cleanup.policy".into(), "compact".into())],
        )
        .unwrap();
        assert_eq!(c["log.cleanup.policy"], "delete,compact");
        apply_ops(
            &mut c,
            &[ConfigOp::Subtract("log.cleanup.policy".into(), "delete".into())],
        )
        .unwrap();
        assert_eq!(c["log.cleanup.policy"], "compact");
        assert!(apply_ops(&mut c, &[ConfigOp::Append("log.retention.ms".into(), "5".into())]).is_err());
    }

    #[test]
    fn a_brokers_own_value_wins_over_the_default() {
        let mut all = BrokerConfigs::new();
        let map = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        all.insert(
            BrokerEntity::Default,
            map(&[("log.retention.ms", "1"), ("message.max.bytes", "10")]),
        );
        all.insert(BrokerEntity::Broker(BrokerId(2)), map(&[("log.retention.ms", "2")]));
        let got = layered(&all, BrokerId(2));
        assert_eq!(
            got,
            vec![
                ("log.retention.ms".to_string(), "2".to_string()),
                ("message.max.bytes".to_string(), "10".to_string())
            ]
        );
        assert_eq!(layered(&all, BrokerId(1))[0].1, "1");
        assert_eq!(BrokerEntity::parse("<default>"), Some(BrokerEntity::Default));
        assert_eq!(BrokerEntity::parse("7"), Some(BrokerEntity::Broker(BrokerId(7))));
        assert_eq!(BrokerEntity::parse("x"), None);
        assert_eq!(BrokerEntity::Broker(BrokerId(7)).name(), "7");
    }
}
