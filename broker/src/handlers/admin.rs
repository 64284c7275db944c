//! Topic administration: CreateTopics, DeleteTopics, CreatePartitions.
//! Changes go through shard 0's metadata store (the controller, in a
//! cluster) and are installed on every shard before the answer.

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::error_map;
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
