//! Metadata and DescribeCluster, served from the shard's metadata snapshot.
//! Topics are auto-created on Metadata when `auto.create.topics.enable` is
//! on and the request allows it.

use ferrite_controller::assignment::Placement;
use std::collections::BTreeMap;
use std::rc::Rc;

use ferrite_controller::{topic, BrokerMeta, ClusterMeta, ControllerError};

use crate::error_map;
use crate::handlers::access::Access;
use crate::handlers::ListenerIndex;
use crate::shard::{AdminError, AdminOp, BrokerShard};
use ferrite_protocol::authorized_operations as ops;
use ferrite_protocol::describe_cluster;
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::metadata::{BrokerEntry, MetadataRequest, MetadataResponse, PartitionEntry, TopicEntry};
use ferrite_protocol::response::ResponseBuilder;
use ferrite_security::acl::Operation;
use std::sync::Arc;

/// Where a client that came in on `listener` reaches broker `b`: the
/// address `b` advertises for that listener. Only this broker has other
/// listeners than the primary so far (a standalone broker's); every other
/// broker's address is its primary listener's.
pub(crate) fn endpoint(shard: &BrokerShard, b: &BrokerMeta, listener: ListenerIndex) -> (String, u16) {
    let extra = listener
        .0
        .checked_sub(1)
        .and_then(|i| shard.config.extra_listeners.get(i));
    match extra {
        Some(l) if b.id.0 == shard.config.broker_id => (l.advertised_host.clone(), l.advertised_port),
        _ => (b.host.clone(), b.port),
    }
}

fn brokers(shard: &BrokerShard, meta: &ClusterMeta, listener: ListenerIndex) -> Vec<BrokerEntry> {
    meta.brokers
        .iter()
        .map(|b| {
            let (host, port) = endpoint(shard, b, listener);
            BrokerEntry {
                node_id: b.id.0,
                host,
                port: i32::from(port),
                rack: b.rack.clone(),
            }
        })
        .collect()
}

fn missing(name: Option<String>, error: ErrorCode) -> TopicEntry {
    TopicEntry {
        error: error.code(),
        name,
        id: [0; 16],
        is_internal: false,
        partitions: Vec::new(),
    }
}

fn entry(meta: &ClusterMeta, name: &str) -> Option<TopicEntry> {
    let t = meta.topic(name)?;
    Some(TopicEntry {
        error: 0,
        name: Some(t.name.clone()),
        id: t.id,
        is_internal: t.name == crate::groups::OFFSETS_TOPIC || t.name == ferrite_transactions::TRANSACTION_STATE_TOPIC,
        partitions: t
            .partitions
            .iter()
            .map(|p| PartitionEntry {
                error: if p.leader.is_some() {
                    0
                } else {
                    ErrorCode::LeaderNotAvailable.code()
                },
                index: p.partition,
                leader: p.leader.map(|b| b.0).unwrap_or(-1),
                leader_epoch: p.leader_epoch,
                replicas: p.replicas.iter().map(|b| b.0).collect(),
                isr: p.isr.iter().map(|b| b.0).collect(),
                offline: Vec::new(),
            })
            .collect(),
    })
}

/// Topics one request may auto-create; the rest get
/// UNKNOWN_TOPIC_OR_PARTITION (each creation rewrites the metadata and
/// touches every shard).
pub const AUTO_CREATE_PER_REQUEST_MAX: usize = 100;

/// Creates a topic with the broker's defaults, as Kafka's auto-creation does.
pub async fn auto_create(shard: &Rc<BrokerShard>, name: &str) -> Result<(), AdminError> {
    let live = shard.meta().brokers.len() as i16;
    let op = AdminOp::CreateTopic {
        name: name.to_string(),
        placement: Placement::Spread {
            count: shard.config.num_partitions,
            replication_factor: shard.config.default_replication_factor.min(live.max(1)),
        },
        configs: BTreeMap::new(),
        validate_only: false,
    };
    match shard.admin(op).await {
        Ok(_) | Err(AdminError::Controller(ControllerError::TopicExists { .. })) => Ok(()),
        Err(e) => Err(e),
    }
}

pub async fn metadata(
    shard: &Rc<BrokerShard>,
    access: &Access,
    caller: &crate::handlers::Caller,
    req: &MetadataRequest,
    v: i16,
    flexible: bool,
    b: &mut ResponseBuilder,
) {
    let mut meta = shard.meta();
    let mut topics = Vec::new();
    let mut created = 0usize;
    match &req.topics {
        // Every topic the caller may describe (Kafka leaves the others out).
        None => topics.extend(
            meta.topics
                .keys()
                .filter(|n| access.allows_topic(Operation::Describe, n))
                .filter_map(|n| entry(&meta, n)),
        ),
        Some(wanted) => {
            for t in wanted {
                let name = match &t.name {
                    Some(n) => n.clone(),
                    None => match meta.topics.values().find(|x| x.id == t.id) {
                        // Named by id, refused: the name is not told.
                        Some(x) if !access.allows_topic(Operation::Describe, &x.name) => {
                            topics.push(missing(None, ErrorCode::TopicAuthorizationFailed));
                            continue;
                        }
                        Some(x) => x.name.clone(),
                        None => {
                            topics.push(missing(None, ErrorCode::UnknownTopicId));
                            continue;
                        }
                    },
                };
                let create = req.allow_auto_topic_creation && created < AUTO_CREATE_PER_REQUEST_MAX;
                let (e, made) = named(shard, access, &mut meta, name, create).await;
                created += usize::from(made);
                topics.push(e);
            }
        }
    }
    MetadataResponse {
        brokers: brokers(shard, &meta, caller.listener),
        cluster_id: Some(meta.cluster_id.clone()),
        controller_id: meta.controller.0,
        topics,
        cluster_authorized_operations: ops::if_asked(req.include_cluster_authorized_operations, ops::CLUSTER),
        topic_authorized_operations: ops::if_asked(req.include_topic_authorized_operations, ops::TOPIC),
    }
    .encode(&mut b.w, v, flexible);
}

/// A topic Metadata names: its entry, or why not; and whether it was
/// auto-created for it (`create`: the request allows that, within the
/// request's bound). A topic the caller may not describe, or may not create
/// where it would be created, is TOPIC_AUTHORIZATION_FAILED.
async fn named(
    shard: &Rc<BrokerShard>,
    access: &Access,
    meta: &mut Arc<ClusterMeta>,
    name: String,
    create: bool,
) -> (TopicEntry, bool) {
    if !access.allows_topic(Operation::Describe, &name) {
        return (missing(Some(name), ErrorCode::TopicAuthorizationFailed), false);
    }
    if let Some(e) = entry(meta, &name) {
        return (e, false);
    }
    if topic::validate_name(&name).is_err() {
        return (missing(Some(name), ErrorCode::InvalidTopicException), false);
    }
    if !(shard.config.auto_create_topics && create) {
        return (missing(Some(name), ErrorCode::UnknownTopicOrPartition), false);
    }
    if !access.may_create_topic(&name) {
        return (missing(Some(name), ErrorCode::TopicAuthorizationFailed), false);
    }
    match auto_create(shard, &name).await {
        Ok(()) => {
            *meta = shard.meta();
            let e = entry(meta, &name).unwrap_or_else(|| missing(Some(name), ErrorCode::LeaderNotAvailable));
            (e, true)
        }
        Err(e) => (missing(Some(name), error_map::admin(&e)), true),
    }
}

pub fn describe_cluster(
    shard: &Rc<BrokerShard>,
    listener: ListenerIndex,
    v: i16,
    include_authorized_operations: bool,
    b: &mut ResponseBuilder,
) {
    let meta = shard.meta();
    let description = describe_cluster::ClusterDescription {
        cluster_id: &meta.cluster_id,
        controller_id: meta.controller.0,
        brokers: &brokers(shard, &meta, listener),
        authorized_operations: ops::if_asked(include_authorized_operations, ops::CLUSTER),
    };
    describe_cluster::encode_response(&mut b.w, v, &description);
}
