//! Topic administration and topic configs: CreateTopics, DeleteTopics,
//! CreatePartitions, DescribeConfigs, IncrementalAlterConfigs. Changes go
//! through shard 0's metadata store and are installed on every shard before
//! the answer.

use std::collections::BTreeMap;
use std::rc::Rc;

use ferrite_controller::embedded::ConfigOp;
use ferrite_controller::topic_config;
use ferrite_engine::log_config;

use crate::error_map;
use crate::protocol::configs::{
    encode_alter, encode_describe, ConfigEntry, ConfigSource, DescribeConfigsRequest, DescribeConfigsResult,
    IncrementalAlterConfigsRequest, OP_DELETE, OP_SET, RESOURCE_BROKER, RESOURCE_TOPIC,
};
use crate::protocol::errors::ErrorCode;
use crate::protocol::response::ResponseBuilder;
use crate::protocol::topics_admin::{
    encode_create_partitions, encode_create_topics, encode_delete_topics, CreatableTopicResult,
    CreatePartitionsRequest, CreateTopicsRequest, DeletableTopicResult, DeleteTopicsRequest,
};
use crate::shard::{AdminOp, BrokerShard};

pub async fn create_topics(
    shard: &Rc<BrokerShard>,
    c: CreateTopicsRequest,
    v: i16,
    flexible: bool,
    b: &mut ResponseBuilder,
) {
    let mut results = Vec::with_capacity(c.topics.len());
    for t in c.topics {
        let partitions = if t.num_partitions == -1 {
            shard.config.num_partitions
        } else {
            t.num_partitions
        };
        let rf = if t.replication_factor == -1 {
            shard.config.default_replication_factor
        } else {
            t.replication_factor
        };
        let mut result = CreatableTopicResult {
            name: t.name.clone(),
            topic_id: [0; 16],
            error: 0,
            error_message: None,
            num_partitions: partitions,
            replication_factor: rf,
        };
        let mut configs = BTreeMap::new();
        let mut bad = None;
        for (k, v) in &t.configs {
            match v {
                Some(v) => {
                    configs.insert(k.clone(), v.clone());
                }
                None => bad = Some((ErrorCode::InvalidConfig, format!("{k} has a null value"))),
            }
        }
        if !t.assignments.is_empty() {
            bad = Some((
                ErrorCode::InvalidReplicaAssignment,
                "manual replica assignment is not supported".into(),
            ));
        }
        if let Some((code, message)) = bad {
            result.error = code.code();
            result.error_message = Some(message);
            results.push(result);
            continue;
        }
        let op = AdminOp::CreateTopic {
            name: t.name,
            partitions,
            replication_factor: rf,
            configs,
            validate_only: c.validate_only,
        };
        match shard.admin(op).await {
            Ok(topic) => result.topic_id = topic.id,
            Err(e) => {
                result.error = error_map::admin(&e).code();
                result.error_message = Some(e.to_string());
            }
        }
        results.push(result);
    }
    encode_create_topics(&mut b.w, v, flexible, &results);
}

pub async fn delete_topics(
    shard: &Rc<BrokerShard>,
    d: DeleteTopicsRequest,
    v: i16,
    flexible: bool,
    b: &mut ResponseBuilder,
) {
    let meta = shard.meta();
    let mut results = Vec::with_capacity(d.topics.len());
    for (name, id) in d.topics {
        let name = name.or_else(|| meta.topics.values().find(|t| t.id == id).map(|t| t.name.clone()));
        let mut r = DeletableTopicResult {
            name: name.clone(),
            topic_id: id,
            error: 0,
            error_message: None,
        };
        match name {
            None => r.error = ErrorCode::UnknownTopicId.code(),
            Some(name) => match shard.admin(AdminOp::DeleteTopic { name }).await {
                Ok(t) => r.topic_id = t.id,
                Err(e) => {
                    r.error = error_map::admin(&e).code();
                    r.error_message = Some(e.to_string());
                }
            },
        }
        results.push(r);
    }
    encode_delete_topics(&mut b.w, v, flexible, &results);
}

pub async fn create_partitions(
    shard: &Rc<BrokerShard>,
    c: CreatePartitionsRequest,
    flexible: bool,
    b: &mut ResponseBuilder,
) {
    let mut results = Vec::with_capacity(c.topics.len());
    for t in c.topics {
        if t.assignments.is_some() {
            results.push((
                t.name,
                ErrorCode::InvalidReplicaAssignment.code(),
                Some("manual replica assignment is not supported".into()),
            ));
            continue;
        }
        let op = AdminOp::CreatePartitions {
            name: t.name.clone(),
            total: t.count,
            validate_only: c.validate_only,
        };
        match shard.admin(op).await {
            Ok(_) => results.push((t.name, 0, None)),
            Err(e) => results.push((t.name, error_map::admin(&e).code(), Some(e.to_string()))),
        }
    }
    encode_create_partitions(&mut b.w, flexible, &results);
}

/// DescribeConfigs `ConfigType` of a topic key.
fn config_type(key: &str) -> i8 {
    match key {
        "cleanup.policy" | "compression.type" | "message.timestamp.type" => 2,
        "unclean.leader.election.enable" => 1,
        "min.insync.replicas"
        | "index.interval.bytes"
        | "max.message.bytes"
        | "segment.bytes"
        | "segment.index.bytes" => 3,
        _ => 5,
    }
}

fn topic_entries(shard: &BrokerShard, name: &str, keys: &Option<Vec<String>>) -> Option<Vec<ConfigEntry>> {
    let meta = shard.meta();
    let topic = meta.topic(name)?;
    let all: Vec<&str> = log_config::KEYS
        .iter()
        .chain(topic_config::OTHER_KEYS)
        .copied()
        .collect();
    let effective = shard.topic_log_config(topic);
    let mut out = Vec::new();
    for key in all {
        if keys.as_ref().is_some_and(|k| !k.iter().any(|x| x == key)) {
            continue;
        }
        let (value, source) = match topic.configs.get(key) {
            Some(v) => (v.clone(), ConfigSource::DynamicTopic),
            None => match effective.get(key) {
                Some(v) if v != ferrite_engine::LogConfig::default().get(key).unwrap_or_default() => {
                    (v, ConfigSource::StaticBroker)
                }
                Some(v) => (v, ConfigSource::Default),
                None => (
                    topic_config::other_default(key).unwrap_or("").to_string(),
                    ConfigSource::Default,
                ),
            },
        };
        out.push(ConfigEntry {
            name: key.to_string(),
            value: Some(value),
            read_only: false,
            source,
            is_sensitive: false,
            config_type: config_type(key),
        });
    }
    Some(out)
}

pub fn describe_configs(
    shard: &Rc<BrokerShard>,
    d: DescribeConfigsRequest,
    v: i16,
    flexible: bool,
    b: &mut ResponseBuilder,
) {
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
            RESOURCE_TOPIC => match topic_entries(shard, &r.name, &r.keys) {
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

pub async fn alter_configs(
    shard: &Rc<BrokerShard>,
    a: IncrementalAlterConfigsRequest,
    flexible: bool,
    b: &mut ResponseBuilder,
) {
    let mut results = Vec::with_capacity(a.resources.len());
    for r in a.resources {
        if r.resource_type != RESOURCE_TOPIC {
            results.push((
                ErrorCode::InvalidRequest.code(),
                Some("only topic configs can be altered".into()),
                r.resource_type,
                r.name,
            ));
            continue;
        }
        let mut ops = Vec::with_capacity(r.configs.len());
        let mut bad = None;
        for c in r.configs {
            match (c.op, c.value) {
                (OP_SET, Some(v)) => ops.push(ConfigOp::Set(c.name, v)),
                (OP_DELETE, _) => ops.push(ConfigOp::Delete(c.name)),
                (op, _) => bad = Some(format!("operation {op} on {} is not supported", c.name)),
            }
        }
        if let Some(message) = bad {
            results.push((ErrorCode::InvalidConfig.code(), Some(message), r.resource_type, r.name));
            continue;
        }
        let op = AdminOp::AlterConfigs {
            name: r.name.clone(),
            ops,
            validate_only: a.validate_only,
        };
        match shard.admin(op).await {
            Ok(_) => results.push((0, None, r.resource_type, r.name)),
            Err(e) => results.push((
                error_map::admin(&e).code(),
                Some(e.to_string()),
                r.resource_type,
                r.name,
            )),
        }
    }
    encode_alter(&mut b.w, flexible, &results);
}
