//! Topic and broker configs: DescribeConfigs (every Kafka 3.9 topic config,
//! every broker setting, each with its value, source, synonyms and
//! documentation), AlterConfigs (the whole set of a topic's overrides or a
//! broker entity's dynamic configs) and IncrementalAlterConfigs (SET,
//! DELETE, APPEND, SUBTRACT). Topic changes go through the metadata store
//! like other admin operations (see `admin.rs`); broker changes through
//! `config_live.rs`. A BROKER resource names this broker's id (its own
//! dynamic configs) or is empty (the cluster's default); another broker's
//! id is refused, as Kafka does: clients send it to that broker. A
//! BROKER_LOGGER resource (this broker's id) lists the loggers and their
//! levels, and IncrementalAlterConfigs sets or deletes levels
//! (`log_levels.rs`).

use super::access::Access;
use ferrite_security::acl::Operation;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use ferrite_controller::broker_config::BrokerEntity;
use ferrite_controller::embedded::ConfigOp;
use ferrite_controller::topic_config_defs::{ConfigKind, TopicConfigDef, TOPIC_CONFIGS};
use ferrite_controller::{BrokerId, TopicMeta};
use ferrite_engine::log_config;

use crate::config_live::LiveConfig;
use crate::error_map;
use crate::log_levels::{self, LevelOp, Refusal};
use crate::shard::{AdminOp, BrokerShard};
use ferrite_config::defs;
use ferrite_protocol::configs::{
    encode_alter, encode_describe, AlterConfigsRequest, ConfigEntry, ConfigSource, ConfigSynonym,
    DescribeConfigsRequest, DescribeConfigsResult, IncrementalAlterConfigsRequest, OP_APPEND, OP_DELETE, OP_SET,
    OP_SUBTRACT, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_TOPIC,
};
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::response::ResponseBuilder;

/// What DescribeConfigs was asked to include.
#[derive(Clone, Copy)]
struct Include {
    synonyms: bool,
    documentation: bool,
}

/// The broker's own value of a topic config in force, and the broker
/// settings behind it, most specific first (each synonym at each level:
/// this broker's dynamic value, the dynamic default, the start-up value).
fn broker_value(shard: &BrokerShard, live: &LiveConfig, d: &TopicConfigDef) -> (String, Vec<ConfigSynonym>) {
    let behind: Vec<ConfigSynonym> = d
        .synonyms
        .iter()
        .flat_map(|s| {
            live.layers(&shard.config, s)
                .into_iter()
                .map(move |(source, v)| synonym(s, &v, source))
        })
        .collect();
    let value = match live.effective.log.get(d.name) {
        // The engine's settings hold the broker's value in the topic's unit
        // (log.retention.hours given, retention.ms described).
        Some(v) if log_config::KEYS.contains(&d.name) => v,
        _ => behind
            .first()
            .and_then(|s| s.value.clone())
            .unwrap_or_else(|| d.default.to_string()),
    };
    (value, behind)
}

/// One topic config as DescribeConfigs shows it: the topic's override, else
/// the broker's value, with the values behind it most specific first.
fn describe_one(
    shard: &BrokerShard,
    live: &LiveConfig,
    topic: &TopicMeta,
    d: &TopicConfigDef,
    include: Include,
) -> ConfigEntry {
    let (broker, behind) = broker_value(shard, live, d);
    let over = topic.configs.get(d.name);
    let (value, source) = match (over, behind.first()) {
        (Some(v), _) => (v.clone(), ConfigSource::DynamicTopic),
        (None, Some(s)) => (broker, s.source),
        (None, None) => (broker, ConfigSource::Default),
    };
    let mut synonyms = Vec::new();
    if include.synonyms {
        if let Some(v) = over {
            synonyms.push(synonym(d.name, v, ConfigSource::DynamicTopic));
        }
        synonyms.extend(behind);
        if let Some((name, value)) = default_synonym(d) {
            synonyms.push(synonym(name, &value, ConfigSource::Default));
        }
    }
    ConfigEntry {
        name: d.name.to_string(),
        value: Some(value),
        read_only: false,
        source,
        is_sensitive: false,
        synonyms,
        config_type: d.kind.code(),
        documentation: include.documentation.then(|| d.documentation()),
    }
}

/// The broker setting whose built-in default stands behind a topic config,
/// as Kafka names it: the first synonym that has a default of its own
/// (`log.retention.hours=168` behind `retention.ms`, whose `log.retention.ms`
/// and `log.retention.minutes` are null).
fn default_synonym(d: &TopicConfigDef) -> Option<(&'static str, String)> {
    d.synonyms
        .iter()
        .find_map(|s| Some((*s, defs::default_of(s)?.to_string())))
}

fn synonym(name: &str, value: &str, source: ConfigSource) -> ConfigSynonym {
    ConfigSynonym {
        name: name.to_string(),
        value: Some(value.to_string()),
        source,
    }
}

fn wanted(keys: &Option<Vec<String>>, name: &str) -> bool {
    keys.as_ref().is_none_or(|k| k.iter().any(|x| x == name))
}

fn topic_entries(
    shard: &BrokerShard,
    name: &str,
    keys: &Option<Vec<String>>,
    include: Include,
) -> Option<Vec<ConfigEntry>> {
    let meta = shard.meta();
    let topic = meta.topic(name)?;
    let live = shard.live();
    Some(
        TOPIC_CONFIGS
            .iter()
            .filter(|d| wanted(keys, d.name))
            .map(|d| describe_one(shard, &live, topic, d, include))
            .collect(),
    )
}

/// One broker setting as DescribeConfigs shows it on a broker resource.
fn broker_entry(shard: &BrokerShard, live: &LiveConfig, d: &defs::Described, include: Include) -> ConfigEntry {
    let layers = live.layers(&shard.config, d.name);
    let (value, source) = match layers.first() {
        Some((source, v)) => (Some(v.clone()), *source),
        None => (d.default.map(str::to_string), ConfigSource::Default),
    };
    let mut synonyms = Vec::new();
    if include.synonyms {
        synonyms.extend(layers.iter().map(|(source, v)| synonym(d.name, v, *source)));
        if let Some(default) = d.default {
            synonyms.push(synonym(d.name, default, ConfigSource::Default));
        }
    }
    ConfigEntry {
        name: d.name.to_string(),
        value,
        read_only: !d.dynamic,
        source,
        is_sensitive: false,
        synonyms,
        config_type: d.kind.code(),
        documentation: include.documentation.then(|| d.doc.clone()),
    }
}

/// Which broker entity a BROKER resource names, as this broker serves it:
/// its own id, or the empty name for the cluster's default (Kafka answers
/// another broker's id with INVALID_REQUEST: that broker serves it).
pub(super) fn broker_entity(shard: &BrokerShard, name: &str) -> Result<BrokerEntity, String> {
    if name.is_empty() {
        return Ok(BrokerEntity::Default);
    }
    match name.parse::<i32>() {
        Ok(id) if id == shard.config.broker_id => Ok(BrokerEntity::Broker(BrokerId(id))),
        _ => Err(format!(
            "unexpected broker id: expected {} or an empty string, got {name:?}",
            shard.config.broker_id
        )),
    }
}

/// A BROKER resource: every setting for this broker's id, the dynamic
/// defaults for the empty name.
fn broker_entries(
    shard: &BrokerShard,
    entity: BrokerEntity,
    keys: &Option<Vec<String>>,
    include: Include,
) -> Vec<ConfigEntry> {
    let live = shard.live();
    let all = defs::all();
    match entity {
        BrokerEntity::Broker(_) => all
            .iter()
            .filter(|d| wanted(keys, d.name))
            .map(|d| broker_entry(shard, &live, d, include))
            .collect(),
        BrokerEntity::Default => {
            let defaults = live.dynamic.get(&BrokerEntity::Default).cloned().unwrap_or_default();
            defaults
                .iter()
                .filter(|(k, _)| wanted(keys, k))
                .map(|(k, v)| {
                    let d = all.iter().find(|d| d.name == k.as_str());
                    ConfigEntry {
                        name: k.clone(),
                        value: Some(v.clone()),
                        read_only: false,
                        source: ConfigSource::DynamicDefaultBroker,
                        is_sensitive: false,
                        synonyms: if include.synonyms {
                            vec![synonym(k, v, ConfigSource::DynamicDefaultBroker)]
                        } else {
                            Vec::new()
                        },
                        config_type: d.map_or(ConfigKind::String.code(), |d| d.kind.code()),
                        documentation: include
                            .documentation
                            .then(|| d.map(|d| d.doc.clone()).unwrap_or_default()),
                    }
                })
                .collect()
        }
    }
}

/// A BROKER_LOGGER resource (this broker's id): every logger and its level.
fn logger_entries(shard: &BrokerShard, name: &str, keys: &Option<Vec<String>>) -> Result<Vec<ConfigEntry>, String> {
    own_logger_resource(shard, name)?;
    let loggers = log_levels::describe().map_err(|r| match r {
        Refusal::Request(m) | Refusal::Config(m) => m,
    })?;
    Ok(loggers
        .into_iter()
        .filter(|(n, _)| wanted(keys, n))
        .map(|(n, level)| ConfigEntry {
            name: n,
            value: Some(level),
            read_only: false,
            source: ConfigSource::DynamicBrokerLogger,
            is_sensitive: false,
            synonyms: Vec::new(),
            config_type: ConfigKind::String.code(),
            documentation: None,
        })
        .collect())
}

/// A BROKER_LOGGER resource names this broker's id, never the default.
fn own_logger_resource(shard: &BrokerShard, name: &str) -> Result<(), String> {
    match broker_entity(shard, name)? {
        BrokerEntity::Broker(_) => Ok(()),
        BrokerEntity::Default => Err("a BROKER_LOGGER resource names a broker id".into()),
    }
}

/// IncrementalAlterConfigs on this broker's loggers (SET and DELETE).
fn alter_loggers(
    shard: &BrokerShard,
    name: String,
    configs: Vec<(String, i8, Option<String>)>,
    validate_only: bool,
) -> AlterResult {
    let rtype = RESOURCE_BROKER_LOGGER;
    if let Err(m) = own_logger_resource(shard, &name) {
        return refused(ErrorCode::InvalidRequest, m, rtype, name);
    }
    let mut ops = Vec::with_capacity(configs.len());
    for (logger, op, value) in configs {
        ops.push(match (op, value) {
            (OP_SET, Some(v)) => LevelOp::Set(logger, v),
            (OP_DELETE, _) => LevelOp::Delete(logger),
            (OP_SET, None) => {
                return refused(
                    ErrorCode::InvalidConfig,
                    format!("null level for {logger}"),
                    rtype,
                    name,
                )
            }
            (_, _) => {
                let m = format!("{logger}: only SET and DELETE apply to loggers");
                return refused(ErrorCode::InvalidRequest, m, rtype, name);
            }
        });
    }
    match log_levels::alter(&ops, validate_only) {
        Ok(()) => (0, None, rtype, name),
        Err(Refusal::Request(m)) => refused(ErrorCode::InvalidRequest, m, rtype, name),
        Err(Refusal::Config(m)) => refused(ErrorCode::InvalidConfig, m, rtype, name),
    }
}

pub fn describe_configs(
    shard: &Rc<BrokerShard>,
    access: &Access,
    d: DescribeConfigsRequest,
    v: i16,
    flexible: bool,
    b: &mut ResponseBuilder,
) {
    let include = Include {
        synonyms: d.include_synonyms,
        documentation: d.include_documentation,
    };
    let mut results = Vec::with_capacity(d.resources.len());
    for r in d.resources {
        let mut res = DescribeConfigsResult {
            error: 0,
            error_message: None,
            resource_type: r.resource_type,
            name: r.name.clone(),
            configs: Vec::new(),
        };
        if let Some(code) = denied(access, Operation::DescribeConfigs, r.resource_type, &r.name) {
            res.error = code.code();
            results.push(res);
            continue;
        }
        match r.resource_type {
            RESOURCE_TOPIC => match topic_entries(shard, &r.name, &r.keys, include) {
                Some(c) => res.configs = c,
                None => res.error = ErrorCode::UnknownTopicOrPartition.code(),
            },
            RESOURCE_BROKER => match broker_entity(shard, &r.name) {
                Ok(entity) => res.configs = broker_entries(shard, entity, &r.keys, include),
                Err(message) => {
                    res.error = ErrorCode::InvalidRequest.code();
                    res.error_message = Some(message);
                }
            },
            RESOURCE_BROKER_LOGGER => match logger_entries(shard, &r.name, &r.keys) {
                Ok(c) => res.configs = c,
                Err(message) => {
                    res.error = ErrorCode::InvalidRequest.code();
                    res.error_message = Some(message);
                }
            },
            _ => {
                res.error = ErrorCode::InvalidRequest.code();
                res.error_message = Some(format!("resource type {} is not supported", r.resource_type));
            }
        }
        results.push(res);
    }
    encode_describe(&mut b.w, v, flexible, &results);
}

/// Kafka's check of a config resource: `op` (DescribeConfigs or
/// AlterConfigs) on the topic, or on the cluster for a broker or its
/// loggers; the error when refused.
fn denied(access: &Access, op: Operation, rtype: i8, name: &str) -> Option<ErrorCode> {
    match rtype {
        RESOURCE_TOPIC => (!access.allows_topic(op, name)).then_some(ErrorCode::TopicAuthorizationFailed),
        _ => (!access.allows_cluster(op)).then_some(ErrorCode::ClusterAuthorizationFailed),
    }
}

/// One resource's answer: (error, message, resource type, resource name).
type AlterResult = (i16, Option<String>, i8, String);

fn refused(code: ErrorCode, message: impl Into<String>, rtype: i8, name: String) -> AlterResult {
    (code.code(), Some(message.into()), rtype, name)
}

/// Why a resource cannot be altered here, if it cannot.
fn unalterable(shard: &BrokerShard, rtype: i8, name: &str) -> Option<(ErrorCode, String)> {
    match rtype {
        RESOURCE_TOPIC if name.is_empty() => Some((
            ErrorCode::InvalidRequest,
            "default topic resources are not allowed".into(),
        )),
        RESOURCE_TOPIC => None,
        RESOURCE_BROKER => broker_entity(shard, name).err().map(|m| (ErrorCode::InvalidRequest, m)),
        other => Some((
            ErrorCode::InvalidRequest,
            format!("resource type {other} cannot be altered"),
        )),
    }
}

/// Carries out `ops` on a topic or a broker entity.
async fn alter(
    shard: &Rc<BrokerShard>,
    rtype: i8,
    name: String,
    ops: Vec<ConfigOp>,
    validate_only: bool,
) -> AlterResult {
    let done = if rtype == RESOURCE_BROKER {
        match broker_entity(shard, &name) {
            Ok(entity) => shard.alter_broker_configs(entity, ops, validate_only).await,
            Err(message) => return refused(ErrorCode::InvalidRequest, message, rtype, name),
        }
    } else {
        let op = AdminOp::AlterConfigs {
            name: name.clone(),
            ops,
            validate_only,
        };
        shard.admin(op).await.map(|_| ())
    };
    match done {
        Ok(()) => (0, None, rtype, name),
        Err(e) => (error_map::admin(&e).code(), Some(e.to_string()), rtype, name),
    }
}

/// The resources named more than once (Kafka refuses those, and alters
/// the others).
fn repeated<'a>(resources: impl Iterator<Item = (i8, &'a str)>) -> BTreeSet<(i8, String)> {
    let mut seen = BTreeSet::new();
    resources
        .filter(|r| !seen.insert(*r))
        .map(|(t, n)| (t, n.to_string()))
        .collect()
}

const REPEATED: &str = "the resource appears more than once in the request";

/// IncrementalAlterConfigs: each resource's operations, all or nothing.
pub async fn incremental_alter_configs(
    shard: &Rc<BrokerShard>,
    access: &Access,
    a: IncrementalAlterConfigsRequest,
    flexible: bool,
    b: &mut ResponseBuilder,
) {
    let twice = repeated(a.resources.iter().map(|r| (r.resource_type, r.name.as_str())));
    let mut results = Vec::with_capacity(a.resources.len());
    for r in a.resources {
        if twice.contains(&(r.resource_type, r.name.clone())) {
            results.push(refused(ErrorCode::InvalidRequest, REPEATED, r.resource_type, r.name));
            continue;
        }
        if let Some(code) = denied(access, Operation::AlterConfigs, r.resource_type, &r.name) {
            results.push(refused(code, "not authorized", r.resource_type, r.name));
            continue;
        }
        if r.resource_type == RESOURCE_BROKER_LOGGER {
            let configs = r.configs.into_iter().map(|c| (c.name, c.op, c.value)).collect();
            results.push(alter_loggers(shard, r.name, configs, a.validate_only));
            continue;
        }
        if let Some((code, message)) = unalterable(shard, r.resource_type, &r.name) {
            results.push(refused(code, message, r.resource_type, r.name));
            continue;
        }
        let mut names = BTreeSet::new();
        let ops: Result<Vec<ConfigOp>, String> = r
            .configs
            .into_iter()
            .map(|c| {
                if !names.insert(c.name.clone()) {
                    return Err(format!("config {} appears more than once", c.name));
                }
                match (c.op, c.value) {
                    (OP_DELETE, _) => Ok(ConfigOp::Delete(c.name)),
                    (OP_SET, Some(v)) => Ok(ConfigOp::Set(c.name, v)),
                    (OP_APPEND, Some(v)) => Ok(ConfigOp::Append(c.name, v)),
                    (OP_SUBTRACT, Some(v)) => Ok(ConfigOp::Subtract(c.name, v)),
                    (OP_SET | OP_APPEND | OP_SUBTRACT, None) => Err(format!("null value for {}", c.name)),
                    (op, _) => Err(format!("unknown operation {op} on {}", c.name)),
                }
            })
            .collect();
        results.push(match ops {
            Ok(ops) => alter(shard, r.resource_type, r.name, ops, a.validate_only).await,
            Err(message) => refused(ErrorCode::InvalidRequest, message, r.resource_type, r.name),
        });
    }
    encode_alter(&mut b.w, flexible, &results);
}

/// AlterConfigs: each topic's overrides (or broker entity's dynamic
/// configs) become exactly those sent.
pub async fn alter_configs(
    shard: &Rc<BrokerShard>,
    access: &Access,
    a: AlterConfigsRequest,
    flexible: bool,
    b: &mut ResponseBuilder,
) {
    let twice = repeated(a.resources.iter().map(|(t, n, _)| (*t, n.as_str())));
    let mut results = Vec::with_capacity(a.resources.len());
    for (rtype, name, configs) in a.resources {
        if twice.contains(&(rtype, name.clone())) {
            results.push(refused(ErrorCode::InvalidRequest, REPEATED, rtype, name));
            continue;
        }
        if let Some(code) = denied(access, Operation::AlterConfigs, rtype, &name) {
            results.push(refused(code, "not authorized", rtype, name));
            continue;
        }
        if let Some((code, message)) = unalterable(shard, rtype, &name) {
            results.push(refused(code, message, rtype, name));
            continue;
        }
        let mut set = BTreeMap::new();
        let mut bad = None;
        for (k, v) in configs {
            match v {
                None => bad = Some(format!("null value for {k}")),
                Some(_) if set.contains_key(&k) => bad = Some(format!("config {k} appears more than once")),
                Some(v) => {
                    set.insert(k, v);
                }
            }
        }
        if let Some(message) = bad {
            results.push(refused(ErrorCode::InvalidRequest, message, rtype, name));
            continue;
        }
        let ops = std::iter::once(ConfigOp::Clear)
            .chain(set.into_iter().map(|(k, v)| ConfigOp::Set(k, v)))
            .collect();
        results.push(alter(shard, rtype, name, ops, a.validate_only).await);
    }
    encode_alter(&mut b.w, flexible, &results);
}
