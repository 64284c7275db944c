//! Topic configs: DescribeConfigs (every Kafka 3.9 topic config, with its
//! value, source, synonyms and documentation), AlterConfigs (the whole set
//! of a topic's overrides) and IncrementalAlterConfigs (SET, DELETE, APPEND,
//! SUBTRACT). Changes go through the metadata store like other admin
//! operations (see `admin.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use ferrite_controller::embedded::ConfigOp;
use ferrite_controller::topic_config_defs::{TopicConfigDef, TOPIC_CONFIGS};
use ferrite_controller::TopicMeta;
use ferrite_engine::log_config;

use crate::error_map;
use crate::protocol::configs::{
    encode_alter, encode_describe, AlterConfigsRequest, ConfigEntry, ConfigSource, ConfigSynonym,
    DescribeConfigsRequest, DescribeConfigsResult, IncrementalAlterConfigsRequest, OP_APPEND, OP_DELETE, OP_SET,
    OP_SUBTRACT, RESOURCE_BROKER, RESOURCE_TOPIC,
};
use crate::protocol::errors::ErrorCode;
use crate::protocol::response::ResponseBuilder;
use crate::shard::{AdminOp, BrokerShard};

/// What DescribeConfigs was asked to include.
#[derive(Clone, Copy)]
struct Include {
    synonyms: bool,
    documentation: bool,
}

/// The broker's own value of a topic config, and whether a setting given
/// at start (a synonym) made it so.
fn broker_value(shard: &BrokerShard, d: &TopicConfigDef) -> (String, Option<(&'static str, String)>) {
    let given = d
        .synonyms
        .iter()
        .find_map(|s| shard.config.given.get(*s).map(|v| (*s, v.clone())));
    let value = match shard.config.log.get(d.name) {
        // The engine's settings hold the broker's value in the topic's unit
        // (log.retention.hours given, retention.ms described).
        Some(v) if log_config::KEYS.contains(&d.name) => v,
        _ => given
            .as_ref()
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| d.default.to_string()),
    };
    (value, given)
}

/// One topic config as DescribeConfigs shows it: the topic's override, else
/// the broker's value, with the values behind it most specific first.
fn describe_one(shard: &BrokerShard, topic: &TopicMeta, d: &TopicConfigDef, include: Include) -> ConfigEntry {
    let (broker, given) = broker_value(shard, d);
    let over = topic.configs.get(d.name);
    let (value, source) = match (over, &given) {
        (Some(v), _) => (v.clone(), ConfigSource::DynamicTopic),
        (None, Some(_)) => (broker, ConfigSource::StaticBroker),
        (None, None) => (broker, ConfigSource::Default),
    };
    let mut synonyms = Vec::new();
    if include.synonyms {
        if let Some(v) = over {
            synonyms.push(synonym(d.name, v, ConfigSource::DynamicTopic));
        }
        if let Some((name, v)) = &given {
            synonyms.push(synonym(name, v, ConfigSource::StaticBroker));
        }
        if let Some(primary) = d.synonyms.first() {
            synonyms.push(synonym(primary, d.default, ConfigSource::Default));
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

fn synonym(name: &str, value: &str, source: ConfigSource) -> ConfigSynonym {
    ConfigSynonym {
        name: name.to_string(),
        value: Some(value.to_string()),
        source,
    }
}

fn topic_entries(
    shard: &BrokerShard,
    name: &str,
    keys: &Option<Vec<String>>,
    include: Include,
) -> Option<Vec<ConfigEntry>> {
    let meta = shard.meta();
    let topic = meta.topic(name)?;
    let wanted = |d: &&TopicConfigDef| keys.as_ref().is_none_or(|k| k.iter().any(|x| x == d.name));
    Some(
        TOPIC_CONFIGS
            .iter()
            .filter(wanted)
            .map(|d| describe_one(shard, topic, d, include))
            .collect(),
    )
}

pub fn describe_configs(
    shard: &Rc<BrokerShard>,
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
        match r.resource_type {
            RESOURCE_TOPIC => match topic_entries(shard, &r.name, &r.keys, include) {
                Some(c) => res.configs = c,
                None => res.error = ErrorCode::UnknownTopicOrPartition.code(),
            },
            RESOURCE_BROKER => {}
            _ => {
                res.error = ErrorCode::InvalidRequest.code();
                res.error_message = Some(format!("resource type {} is not supported", r.resource_type));
            }
        }
        results.push(res);
    }
    encode_describe(&mut b.w, v, flexible, &results);
}

/// One resource's answer: (error, message, resource type, resource name).
type AlterResult = (i16, Option<String>, i8, String);

fn refused(code: ErrorCode, message: impl Into<String>, rtype: i8, name: String) -> AlterResult {
    (code.code(), Some(message.into()), rtype, name)
}

/// Why a resource of this type cannot be altered, if it cannot.
fn unalterable(rtype: i8, name: &str) -> Option<(ErrorCode, String)> {
    match rtype {
        RESOURCE_TOPIC if name.is_empty() => Some((
            ErrorCode::InvalidRequest,
            "default topic resources are not allowed".into(),
        )),
        RESOURCE_TOPIC => None,
        RESOURCE_BROKER => Some((
            ErrorCode::InvalidRequest,
            "broker configs cannot be changed while running yet: set them in server.properties".into(),
        )),
        other => Some((
            ErrorCode::InvalidRequest,
            format!("resource type {other} cannot be altered"),
        )),
    }
}

/// Carries out `ops` on topic `name`.
async fn alter_topic(shard: &Rc<BrokerShard>, name: String, ops: Vec<ConfigOp>, validate_only: bool) -> AlterResult {
    let op = AdminOp::AlterConfigs {
        name: name.clone(),
        ops,
        validate_only,
    };
    match shard.admin(op).await {
        Ok(_) => (0, None, RESOURCE_TOPIC, name),
        Err(e) => (error_map::admin(&e).code(), Some(e.to_string()), RESOURCE_TOPIC, name),
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
        if let Some((code, message)) = unalterable(r.resource_type, &r.name) {
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
            Ok(ops) => alter_topic(shard, r.name, ops, a.validate_only).await,
            Err(message) => refused(ErrorCode::InvalidRequest, message, r.resource_type, r.name),
        });
    }
    encode_alter(&mut b.w, flexible, &results);
}

/// AlterConfigs: each topic's overrides become exactly those sent.
pub async fn alter_configs(shard: &Rc<BrokerShard>, a: AlterConfigsRequest, flexible: bool, b: &mut ResponseBuilder) {
    let twice = repeated(a.resources.iter().map(|(t, n, _)| (*t, n.as_str())));
    let mut results = Vec::with_capacity(a.resources.len());
    for (rtype, name, configs) in a.resources {
        if twice.contains(&(rtype, name.clone())) {
            results.push(refused(ErrorCode::InvalidRequest, REPEATED, rtype, name));
            continue;
        }
        if let Some((code, message)) = unalterable(rtype, &name) {
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
        results.push(alter_topic(shard, name, ops, a.validate_only).await);
    }
    encode_alter(&mut b.w, flexible, &results);
}
