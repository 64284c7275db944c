//! The consumer-group APIs: FindCoordinator, JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, OffsetDelete,
//! ListGroups, DescribeGroups and DeleteGroups. Each request is carried to
//! the shard owning the group's `__consumer_offsets` partition, where the
//! coordinator ([`crate::groups`]) answers it.

use crate::handlers::access::Access;
use crate::handlers::ListenerIndex;
use ferrite_controller::assignment::Placement;
use ferrite_security::acl::Operation;
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;

use ferrite_controller::ControllerError;
use ferrite_ids::{LeaderEpoch, Offset};

use crate::error_map;
use crate::groups::ops::{CommitEntry, Committer};
use crate::groups::{GroupError, OFFSETS_TOPIC};
use crate::shard::{AdminError, AdminOp, BrokerShard};
use ferrite_groups::group::{JoinAnswer, JoinRequest, MemberIdPolicy, SyncAnswer, SyncRequest};
use ferrite_protocol::authorized_operations as ops;
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::group_membership as gm;
use ferrite_protocol::group_offsets as go;
use ferrite_protocol::groups_admin as ga;
use ferrite_protocol::response::ResponseBuilder;
use ferrite_protocol::topic_partitions::TopicPartitions;

/// JoinGroup v4+ gives a new member its id first (KIP-394).
const MEMBER_ID_REQUIRED_FROM: i16 = 4;

fn code(e: Option<GroupError>) -> i16 {
    e.map(|e| error_map::group(e).code()).unwrap_or(0)
}

fn result_code(r: &Result<(), GroupError>) -> i16 {
    code(r.err())
}

/// Kafka's check of a group request: `op` on the group, or
/// GROUP_AUTHORIZATION_FAILED.
fn gate(access: &Access, op: Operation, group: &str) -> Result<(), GroupError> {
    match access.allows_group(op, group) {
        true => Ok(()),
        false => Err(GroupError::GroupAuthorizationFailed),
    }
}

/// Runs `f` with the coordinator of `group`'s partition, on its shard, if
/// the caller passed its `gate`.
pub(crate) async fn on_coordinator<R, F, Fut>(
    shard: &Rc<BrokerShard>,
    gate: Result<(), GroupError>,
    group: &str,
    f: F,
) -> Result<R, GroupError>
where
    R: Send + 'static,
    F: FnOnce(Rc<BrokerShard>) -> Fut + Send + 'static,
    Fut: Future<Output = R> + 'static,
{
    gate?;
    let tp = shard.groups.topic_partition(group);
    let owner = shard.owner(&tp);
    shard
        .run_on(owner, f)
        .await
        .map_err(|_| GroupError::CoordinatorNotAvailable)
}

/// The coordinators' internal topics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Internal {
    ConsumerOffsets,
    TransactionState,
}

impl Internal {
    pub fn name(self) -> &'static str {
        match self {
            Internal::ConsumerOffsets => OFFSETS_TOPIC,
            Internal::TransactionState => ferrite_transactions::TRANSACTION_STATE_TOPIC,
        }
    }
}

/// Creates an internal topic if it does not exist yet, as Kafka does on
/// the first FindCoordinator (or InitProducerId) that needs it.
pub(crate) async fn ensure_internal_topic(shard: &Rc<BrokerShard>, which: Internal) -> Result<(), GroupError> {
    if shard.meta().topic(which.name()).is_some() {
        return Ok(());
    }
    let live = shard.meta().brokers.len().max(1) as i16;
    let mut configs = BTreeMap::new();
    // As Kafka: the log cleaner keeps each key's latest record.
    configs.insert("cleanup.policy".to_string(), "compact".to_string());
    let (count, replication_factor) = match which {
        Internal::ConsumerOffsets => {
            let o = &shard.config.offsets;
            configs.insert("segment.bytes".to_string(), o.segment_bytes.to_string());
            (o.partitions, o.replication_factor)
        }
        Internal::TransactionState => {
            let t = &shard.config.transactions;
            let rf = t.replication_factor.clamp(1, live);
            configs.insert("segment.bytes".to_string(), t.segment_bytes.to_string());
            let min_isr = t.min_insync_replicas.clamp(1, i32::from(rf));
            configs.insert("min.insync.replicas".to_string(), min_isr.to_string());
            (t.partitions, t.replication_factor)
        }
    };
    let op = AdminOp::CreateTopic {
        name: which.name().to_string(),
        placement: Placement::Spread {
            count,
            replication_factor: replication_factor.clamp(1, live),
        },
        configs,
        validate_only: false,
    };
    match shard.admin(op).await {
        Ok(_) | Err(AdminError::Controller(ControllerError::TopicExists { .. })) => Ok(()),
        Err(e) => {
            tracing::warn!(topic = which.name(), error = %e, "creating an internal topic failed");
            Err(GroupError::CoordinatorNotAvailable)
        }
    }
}

pub async fn find_coordinator(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: gm::FindCoordinatorRequest,
    listener: ListenerIndex,
    v: i16,
    b: &mut ResponseBuilder,
) {
    let mut resp = gm::FindCoordinatorResponse {
        throttle_time_ms: 0,
        error_code: 0,
        error_message: None,
        node_id: -1,
        host: String::new(),
        port: -1,
    };
    let located = match req.key_type {
        gm::KEY_TYPE_GROUP => match gate(access, Operation::Describe, &req.key) {
            Ok(()) => {
                locate(
                    shard,
                    Internal::ConsumerOffsets,
                    shard.groups.partition_of(&req.key),
                    listener,
                )
                .await
            }
            Err(e) => Err(e),
        },
        gm::KEY_TYPE_TRANSACTION => {
            use ferrite_security::acl::ResourceType;
            if access.allows(Operation::Describe, ResourceType::TransactionalId, &req.key) {
                let p = shard.transactions.partition_of(&req.key);
                locate(shard, Internal::TransactionState, p, listener).await
            } else {
                resp.error_code = ErrorCode::TransactionalIdAuthorizationFailed.code();
                resp.encode(&mut b.w, v);
                return;
            }
        }
        _ => {
            resp.error_code = ErrorCode::InvalidRequest.code();
            resp.error_message = Some(format!("unknown coordinator key type {}", req.key_type));
            resp.encode(&mut b.w, v);
            return;
        }
    };
    match located {
        Ok((node_id, host, port)) => {
            resp.node_id = node_id;
            resp.host = host;
            resp.port = port;
        }
        Err(e) => {
            resp.error_code = error_map::group(e).code();
            resp.error_message = Some(e.to_string());
        }
    }
    resp.encode(&mut b.w, v);
}

/// The broker leading partition `p` of a coordinator's internal topic.
/// Its address is the one for `listener`, the listener the asking client
/// came in on.
async fn locate(
    shard: &Rc<BrokerShard>,
    which: Internal,
    p: i32,
    listener: ListenerIndex,
) -> Result<(i32, String, i32), GroupError> {
    ensure_internal_topic(shard, which).await?;
    let meta = shard.meta();
    let leader = meta
        .topic(which.name())
        .and_then(|t| t.partition(p))
        .and_then(|pm| pm.leader)
        .ok_or(GroupError::CoordinatorNotAvailable)?;
    let broker = meta
        .brokers
        .iter()
        .find(|b| b.id == leader)
        .ok_or(GroupError::CoordinatorNotAvailable)?;
    let (host, port) = crate::handlers::metadata::endpoint(shard, broker, listener);
    Ok((broker.id.0, host, i32::from(port)))
}

pub async fn join_group(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: gm::JoinGroupRequest,
    client_id: String,
    client_host: String,
    v: i16,
    b: &mut ResponseBuilder,
) {
    let session_ms = req.session_timeout_ms.max(0) as u64;
    let rebalance_ms = if req.rebalance_timeout_ms < 0 {
        session_ms
    } else {
        req.rebalance_timeout_ms as u64
    };
    let join = JoinRequest {
        member_id: req.member_id.clone(),
        instance_id: req.group_instance_id.clone(),
        client_id,
        client_host,
        session_timeout_ms: session_ms,
        rebalance_timeout_ms: rebalance_ms,
        protocol_type: req.protocol_type.clone(),
        protocols: req.protocols.into_iter().map(|p| (p.name, p.metadata)).collect(),
        policy: if v >= MEMBER_ID_REQUIRED_FROM {
            MemberIdPolicy::Required
        } else {
            MemberIdPolicy::AssignedOnJoin
        },
    };
    let group = req.group_id.clone();
    let gated = gate(access, Operation::Read, &req.group_id);
    let answer = on_coordinator(shard, gated, &req.group_id, move |s| async move {
        s.groups.join(&*s, &group, join).await
    })
    .await
    .unwrap_or_else(|e| JoinAnswer::refused(e, &req.member_id));
    gm::JoinGroupResponse {
        throttle_time_ms: 0,
        error_code: code(answer.error),
        generation_id: answer.generation,
        protocol_type: answer.protocol_type,
        protocol_name: answer.protocol,
        leader: answer.leader,
        member_id: answer.member_id,
        members: answer
            .members
            .into_iter()
            .map(|m| gm::JoinGroupMember {
                member_id: m.member_id,
                group_instance_id: m.instance_id,
                metadata: m.metadata,
            })
            .collect(),
    }
    .encode(&mut b.w, v);
}

pub async fn sync_group(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: gm::SyncGroupRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    let sync = SyncRequest {
        member_id: req.member_id,
        instance_id: req.group_instance_id,
        generation: req.generation_id,
        protocol_type: req.protocol_type,
        protocol: req.protocol_name,
        assignments: req
            .assignments
            .into_iter()
            .map(|a| (a.member_id, a.assignment))
            .collect(),
    };
    let group = req.group_id.clone();
    let gated = gate(access, Operation::Read, &req.group_id);
    let answer = on_coordinator(shard, gated, &req.group_id, move |s| async move {
        s.groups.sync(&*s, &group, sync).await
    })
    .await
    .unwrap_or_else(SyncAnswer::refused);
    gm::SyncGroupResponse {
        throttle_time_ms: 0,
        error_code: code(answer.error),
        protocol_type: answer.protocol_type,
        protocol_name: answer.protocol,
        assignment: answer.assignment,
    }
    .encode(&mut b.w, v);
}

pub async fn heartbeat(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: gm::HeartbeatRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    let group = req.group_id.clone();
    let gated = gate(access, Operation::Read, &req.group_id);
    let result = on_coordinator(shard, gated, &req.group_id, move |s| async move {
        let instance = req.group_instance_id.as_deref();
        s.groups
            .heartbeat(&*s, &group, &req.member_id, instance, req.generation_id)
            .await
    })
    .await
    .and_then(|r| r);
    gm::HeartbeatResponse {
        throttle_time_ms: 0,
        error_code: result_code(&result),
    }
    .encode(&mut b.w, v);
}

pub async fn leave_group(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: gm::LeaveGroupRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    let members: Vec<(String, Option<String>)> = req
        .members
        .iter()
        .map(|m| (m.member_id.clone(), m.group_instance_id.clone()))
        .collect();
    let group = req.group_id.clone();
    let asked = members.clone();
    let gated = gate(access, Operation::Read, &req.group_id);
    let result = on_coordinator(shard, gated, &req.group_id, move |s| async move {
        s.groups.leave(&*s, &group, asked).await
    })
    .await
    .and_then(|r| r);
    let (top, per_member) = match result {
        Ok(rs) => {
            // Below v3 the single member's error is the request's.
            let first = if v < 3 {
                rs.first().map(result_code).unwrap_or(0)
            } else {
                0
            };
            (first, rs)
        }
        Err(e) => (error_map::group(e).code(), Vec::new()),
    };
    gm::LeaveGroupResponse {
        throttle_time_ms: 0,
        error_code: top,
        members: if v >= 3 {
            members
                .into_iter()
                .zip(per_member)
                .map(|((member_id, group_instance_id), r)| gm::LeaveMemberResponse {
                    member: gm::LeaveMember {
                        member_id,
                        group_instance_id,
                    },
                    error_code: result_code(&r),
                })
                .collect()
        } else {
            Vec::new()
        },
    }
    .encode(&mut b.w, v);
}

/// Per-topic results in request order, from (topic, partition, result).
pub(crate) fn by_topic(results: Vec<(String, i32, Result<(), GroupError>)>) -> Vec<go::OffsetTopicResult> {
    TopicPartitions::from_runs(results.into_iter().map(|(topic, partition, r)| {
        let entry = go::OffsetPartitionResult {
            partition_index: partition,
            error_code: result_code(&r),
        };
        (topic, entry)
    }))
}

pub(crate) fn all_failed(topics: &[(String, Vec<i32>)], e: GroupError) -> Vec<(String, i32, Result<(), GroupError>)> {
    topics
        .iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p, Err(e))))
        .collect()
}

/// A committed partition of OffsetCommit or TxnOffsetCommit.
pub(crate) trait CommittedPartition {
    fn index(&self) -> i32;
    fn entry(self, topic: &str) -> CommitEntry;
}

/// Both requests' partitions carry the same fields.
macro_rules! committed_partition {
    ($($t:ty),*) => {$(
        impl CommittedPartition for $t {
            fn index(&self) -> i32 {
                self.partition_index
            }

            fn entry(self, topic: &str) -> CommitEntry {
                CommitEntry {
                    topic: topic.to_string(),
                    partition: self.partition_index,
                    offset: self.committed_offset.0,
                    leader_epoch: self.committed_leader_epoch.0,
                    metadata: self.committed_metadata,
                }
            }
        }
    )*};
}

committed_partition!(
    go::OffsetCommitPartition,
    ferrite_protocol::txn_offset_commit::TxnOffsetCommitPartition
);

/// Topics and their partitions, as named.
pub(crate) type Named = Vec<(String, Vec<i32>)>;

/// A commit's partitions split by whether the caller may read their topic
/// (the others are answered TOPIC_AUTHORIZATION_FAILED): those asked and
/// readable, those refused, and the entries to commit.
pub(crate) fn commit_entries<P: CommittedPartition>(
    topics: Vec<TopicPartitions<P>>,
    access: &Access,
) -> (Named, Named, Vec<CommitEntry>) {
    let (readable, refused): (Vec<_>, Vec<_>) = topics
        .into_iter()
        .partition(|t| access.allows_topic(Operation::Read, &t.topic));
    let named = |ts: &[TopicPartitions<P>]| -> Named {
        ts.iter()
            .map(|t| (t.topic.clone(), t.partitions.iter().map(P::index).collect()))
            .collect()
    };
    let (asked, refused) = (named(&readable), named(&refused));
    let entries = readable
        .into_iter()
        .flat_map(|t| {
            let topic = t.topic;
            t.partitions.into_iter().map(move |p| p.entry(&topic))
        })
        .collect();
    (asked, refused, entries)
}

pub async fn offset_commit(
    shard: &Rc<BrokerShard>,
    access: &Access,
    mut req: go::OffsetCommitRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    let (asked, refused, entries) = commit_entries(std::mem::take(&mut req.topics), access);
    let who = Committer {
        member_id: req.member_id,
        instance_id: req.group_instance_id,
        generation: if v == 0 { -1 } else { req.generation_id },
    };
    let group = req.group_id.clone();
    let gated = gate(access, Operation::Read, &req.group_id);
    let result = on_coordinator(shard, gated, &req.group_id, move |s| async move {
        s.groups.commit(&*s, &group, who, entries).await
    })
    .await
    .and_then(|r| r);
    let group_refused = matches!(result, Err(GroupError::GroupAuthorizationFailed));
    let mut results = result.unwrap_or_else(|e| all_failed(&asked, e));
    // A caller refused the group hears only that (Kafka's order).
    let topic_error = match group_refused {
        true => GroupError::GroupAuthorizationFailed,
        false => GroupError::TopicAuthorizationFailed,
    };
    results.extend(all_failed(&refused, topic_error));
    go::OffsetCommitResponse {
        throttle_time_ms: 0,
        topics: by_topic(results),
    }
    .encode(&mut b.w, v);
}

pub async fn offset_fetch(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: go::OffsetFetchRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    let wanted: Option<Vec<(String, Vec<i32>)>> = req
        .topics
        .map(|ts| ts.into_iter().map(|t| (t.topic, t.partitions)).collect());
    let every = wanted.is_none();
    let asked = wanted.clone();
    let group = req.group_id.clone();
    let gated = gate(access, Operation::Describe, &req.group_id);
    let result = on_coordinator(shard, gated, &req.group_id, move |s| async move {
        let found = s.groups.fetch_offsets(&*s, &group, asked).await?;
        Ok((found, s.groups.pending_offsets(&group)))
    })
    .await
    .and_then(|r| r);
    // A partition an open transaction holds an offset of is unstable for a
    // caller asking for stable offsets (KIP-447: it retries).
    let mut unstable = std::collections::BTreeSet::new();
    let (error, found) = match result {
        Ok((found, pending)) => {
            if req.require_stable {
                unstable = pending;
            }
            (0, found)
        }
        Err(e) => {
            let code = error_map::group(e).code();
            let all = wanted.unwrap_or_default();
            let none = all
                .into_iter()
                .flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p, None)));
            (code, none.collect())
        }
    };
    // A topic the caller may not describe: left out of "every topic",
    // TOPIC_AUTHORIZATION_FAILED where named.
    let found = found
        .into_iter()
        .map(|(t, p, o)| {
            let described = access.allows_topic(Operation::Describe, &t);
            (t, p, o, described)
        })
        .filter(|(_, _, _, described)| !every || *described);
    let topics = TopicPartitions::from_runs(found.map(|(topic, partition, o, described)| {
        let is_unstable = unstable.contains(&(topic.clone(), partition));
        let entry = fetched_partition(partition, o, (described, is_unstable), if v < 2 { error } else { 0 });
        (topic, entry)
    }));
    go::OffsetFetchResponse {
        throttle_time_ms: 0,
        topics,
        error_code: error,
    }
    .encode(&mut b.w, v);
}

/// One partition's OffsetFetch answer: its committed offset, unless the
/// caller may not describe its topic or a transaction holds its offset
/// (`described`, `unstable`); `error` where no other applies (below v2
/// there is no group-level error: each partition has it).
fn fetched_partition(
    partition: i32,
    o: Option<ferrite_groups::offsets_format::CommittedOffset>,
    (described, unstable): (bool, bool),
    error: i16,
) -> go::OffsetFetchPartitionResult {
    let o = o.filter(|_| described && !unstable);
    let denied = match (described, unstable) {
        (false, _) => Some(ErrorCode::TopicAuthorizationFailed.code()),
        (true, true) => Some(ErrorCode::UnstableOffsetCommit.code()),
        (true, false) => None,
    };
    go::OffsetFetchPartitionResult {
        partition_index: partition,
        committed_offset: o.as_ref().map_or(Offset::NONE, |o| Offset(o.offset)),
        committed_leader_epoch: o.as_ref().map_or(LeaderEpoch::NONE, |o| LeaderEpoch(o.leader_epoch)),
        metadata: Some(o.map(|o| o.metadata).unwrap_or_default()),
        error_code: denied.unwrap_or(error),
    }
}

pub async fn offset_delete(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: go::OffsetDeleteRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    let asked: Vec<(String, Vec<i32>)> = req
        .topics
        .iter()
        .map(|t| (t.topic.clone(), t.partitions.clone()))
        .collect();
    let (asked, refused): (Vec<_>, Vec<_>) = asked
        .into_iter()
        .partition(|(t, _)| access.allows_topic(Operation::Read, t));
    let partitions: Vec<(String, i32)> = asked
        .iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
        .collect();
    let group = req.group_id.clone();
    let gated = gate(access, Operation::Delete, &req.group_id);
    let result = on_coordinator(shard, gated, &req.group_id, move |s| async move {
        s.groups.delete_offsets(&*s, &group, partitions).await
    })
    .await
    .and_then(|r| r);
    let (error, topics) = match result {
        Ok(mut rs) => {
            rs.extend(all_failed(&refused, GroupError::TopicAuthorizationFailed));
            (0, by_topic(rs))
        }
        Err(e) => (error_map::group(e).code(), Vec::new()),
    };
    go::OffsetDeleteResponse {
        error_code: error,
        throttle_time_ms: 0,
        topics,
    }
    .encode(&mut b.w, v);
}

pub async fn list_groups(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: ga::ListGroupsRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    let mut groups = Vec::new();
    let mut error = 0;
    for s in 0..shard.shard_count() {
        let listed = shard
            .run_on(ferrite_engine::ShardId(s), |x: Rc<BrokerShard>| async move {
                x.groups.list()
            })
            .await;
        match listed {
            Ok(l) => groups.extend(l),
            Err(_) => error = ErrorCode::CoordinatorNotAvailable.code(),
        }
    }
    let in_filter =
        |filter: &[String], value: &str| filter.is_empty() || filter.iter().any(|f| f.eq_ignore_ascii_case(value));
    let wanted =
        |state: &str| in_filter(&req.states_filter, state) && in_filter(&req.types_filter, ga::GROUP_TYPE_CLASSIC);
    // Describe on the cluster lists every group; else those the caller may describe.
    let all = access.allows_cluster(Operation::Describe);
    ga::ListGroupsResponse {
        throttle_time_ms: 0,
        error_code: error,
        groups: groups
            .into_iter()
            .filter(|g| wanted(g.state) && (all || access.allows_group(Operation::Describe, &g.group_id)))
            .map(|g| ga::ListedGroup {
                group_id: g.group_id,
                protocol_type: g.protocol_type,
                group_state: g.state.to_string(),
                group_type: ga::GROUP_TYPE_CLASSIC.to_string(),
            })
            .collect(),
    }
    .encode(&mut b.w, v);
}

pub async fn describe_groups(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: ga::DescribeGroupsRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    let mut out = Vec::with_capacity(req.groups.len().min(1024));
    for group_id in req.groups.iter().cloned() {
        let g = group_id.clone();
        let described = on_coordinator(
            shard,
            gate(access, Operation::Describe, &group_id),
            &group_id,
            move |s| async move { s.groups.describe(&*s, &g).await },
        )
        .await
        .and_then(|r| r);
        out.push(match described {
            Ok(d) => ga::DescribedGroup {
                error_code: 0,
                group_id,
                group_state: d.state.to_string(),
                protocol_type: d.protocol_type,
                protocol_data: d.protocol,
                members: d
                    .members
                    .into_iter()
                    .map(|m| ga::DescribedGroupMember {
                        member_id: m.member_id,
                        group_instance_id: m.instance_id,
                        client_id: m.client_id,
                        client_host: m.client_host,
                        member_metadata: m.metadata,
                        member_assignment: m.assignment,
                    })
                    .collect(),
                authorized_operations: ops::if_asked(req.include_authorized_operations, ops::GROUP),
            },
            Err(e) => ga::DescribedGroup {
                error_code: error_map::group(e).code(),
                group_id,
                group_state: String::new(),
                protocol_type: String::new(),
                protocol_data: String::new(),
                members: Vec::new(),
                authorized_operations: ops::OMITTED,
            },
        });
    }
    ga::DescribeGroupsResponse {
        throttle_time_ms: 0,
        groups: out,
    }
    .encode(&mut b.w, v);
}

pub async fn delete_groups(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: ga::DeleteGroupsRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    let mut results = Vec::with_capacity(req.groups_names.len().min(1024));
    for group_id in req.groups_names {
        let g = group_id.clone();
        let gated = gate(access, Operation::Delete, &group_id);
        let r = on_coordinator(shard, gated, &group_id, move |s| async move {
            s.groups.delete(&*s, &g).await
        })
        .await
        .and_then(|r| r);
        results.push(ga::DeletableGroupResult {
            group_id,
            error_code: result_code(&r),
        });
    }
    ga::DeleteGroupsResponse {
        throttle_time_ms: 0,
        results,
    }
    .encode(&mut b.w, v);
}
