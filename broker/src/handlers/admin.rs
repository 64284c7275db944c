//! Topic administration: CreateTopics, DeleteTopics, CreatePartitions.
//! Changes go through shard 0's metadata store (the controller, in a
//! cluster) and are installed on every shard before the answer.

use ferrite_controller::assignment::Placement;
use ferrite_controller::BrokerId;
use std::collections::BTreeMap;
use std::rc::Rc;

use super::access::Access;
use crate::error_map;
use crate::shard::{AdminOp, BrokerShard};
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::response::ResponseBuilder;
use ferrite_protocol::topics_admin::{
    encode_create_partitions, encode_create_topics, encode_delete_topics, CreatableTopicResult,
    CreatePartitionsRequest, CreateTopicsRequest, DeletableTopicResult, DeleteTopicsRequest,
};
use ferrite_security::acl::Operation;

pub async fn create_topics(
    shard: &Rc<BrokerShard>,
    access: &Access,
    c: CreateTopicsRequest,
    v: i16,
    flexible: bool,
    b: &mut ResponseBuilder,
) {
    let mut results = Vec::with_capacity(c.topics.len());
    for t in c.topics {
        let placement = placement_of(shard, t.num_partitions, t.replication_factor, &t.assignments);
        let (partitions, rf) = match &placement {
            Ok(Placement::Spread {
                count,
                replication_factor,
            }) => (*count, *replication_factor),
            Ok(Placement::Manual(lists)) => (lists.len() as i32, lists[0].len() as i16),
            Err(_) => (t.num_partitions, t.replication_factor),
        };
        let mut result = CreatableTopicResult {
            name: t.name.clone(),
            topic_id: [0; 16],
            error: 0,
            error_message: None,
            num_partitions: partitions,
            replication_factor: rf,
        };
        let (configs, mut bad) = configs_of(&t.configs);
        let placement = match placement {
            Ok(p) => p,
            Err(refusal) => {
                bad = Some(refusal);
                Placement::Manual(Vec::new())
            }
        };
        if !access.may_create_topic(&t.name) {
            bad = Some((
                ErrorCode::TopicAuthorizationFailed,
                "not authorized to create the topic".into(),
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
            placement,
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

/// A new topic's configs, or why not (a null value).
fn configs_of(given: &[(String, Option<String>)]) -> (BTreeMap<String, String>, Option<(ErrorCode, String)>) {
    let mut configs = BTreeMap::new();
    let mut bad = None;
    for (k, v) in given {
        match v {
            Some(v) => {
                configs.insert(k.clone(), v.clone());
            }
            None => bad = Some((ErrorCode::InvalidConfig, format!("{k} has a null value"))),
        }
    }
    (configs, bad)
}

/// Where CreateTopics puts a topic's partitions: spread, with the broker's
/// defaults for -1, or as `assignments` lists them (partitions 0, 1, … each
/// once; then the count and replication factor must be -1).
fn placement_of(
    shard: &BrokerShard,
    partitions: i32,
    replication_factor: i16,
    assignments: &[(i32, Vec<i32>)],
) -> Result<Placement, (ErrorCode, String)> {
    if assignments.is_empty() {
        let or_default = |v: i32, default: i32| if v == -1 { default } else { v };
        return Ok(Placement::Spread {
            count: or_default(partitions, shard.config.num_partitions),
            replication_factor: or_default(
                i32::from(replication_factor),
                i32::from(shard.config.default_replication_factor),
            ) as i16,
        });
    }
    if partitions != -1 || replication_factor != -1 {
        return Err((
            ErrorCode::InvalidRequest,
            "a replica assignment goes with partitions and replication factor -1".into(),
        ));
    }
    let mut sorted: Vec<&(i32, Vec<i32>)> = assignments.iter().collect();
    sorted.sort_by_key(|(p, _)| *p);
    if sorted.iter().enumerate().any(|(i, (p, _))| i64::from(*p) != i as i64) {
        return Err((
            ErrorCode::InvalidReplicaAssignment,
            "the assignment's partitions must be 0, 1, 2, … each once".into(),
        ));
    }
    Ok(Placement::Manual(
        sorted
            .into_iter()
            .map(|(_, brokers)| brokers.iter().copied().map(BrokerId).collect())
            .collect(),
    ))
}

pub async fn delete_topics(
    shard: &Rc<BrokerShard>,
    access: &Access,
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
            Some(name) if !access.allows_topic(Operation::Delete, &name) => {
                r.error = ErrorCode::TopicAuthorizationFailed.code();
                // Named by id: the name is not told.
                if r.topic_id != [0; 16] {
                    r.name = None;
                }
            }
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
    access: &Access,
    c: CreatePartitionsRequest,
    flexible: bool,
    b: &mut ResponseBuilder,
) {
    let mut results = Vec::with_capacity(c.topics.len());
    for t in c.topics {
        if !access.allows_topic(Operation::Alter, &t.name) {
            results.push((t.name, ErrorCode::TopicAuthorizationFailed.code(), None));
            continue;
        }
        let assignment = t.assignments.map(|lists| {
            lists
                .into_iter()
                .map(|l| l.into_iter().map(BrokerId).collect())
                .collect()
        });
        let op = AdminOp::CreatePartitions {
            name: t.name.clone(),
            total: t.count,
            assignment,
            validate_only: c.validate_only,
        };
        match shard.admin(op).await {
            Ok(_) => results.push((t.name, 0, None)),
            Err(e) => results.push((t.name, error_map::admin(&e).code(), Some(e.to_string()))),
        }
    }
    encode_create_partitions(&mut b.w, flexible, &results);
}
