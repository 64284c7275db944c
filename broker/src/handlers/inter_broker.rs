//! The requests brokers send each other: the controller's LeaderAndIsr,
//! UpdateMetadata and StopReplica (refused with STALE_CONTROLLER_EPOCH when
//! an older controller sends them), a follower's OffsetForLeaderEpoch, and
//! a broker's ControlledShutdown to the controller.

use super::access::Access;
use ferrite_security::acl::Operation;
use std::collections::BTreeMap;
use std::rc::Rc;

use futures::StreamExt;

use ferrite_controller::control::{ControllerRequest, DeleteData, PartitionInfo};
use ferrite_controller::partition_state::ControllerEpoch;
use ferrite_engine::{LeaderEpoch, Offset, TopicPartition};

use crate::cluster::controller_wire;
use crate::cluster::metadata_cache::MetadataUpdate;
use crate::cluster::ClusterRequest;
use crate::error_map;
use crate::shard::{broadcast, BrokerShard};
use ferrite_protocol::controlled_shutdown::{ControlledShutdownRequest, ControlledShutdownResponse};
use ferrite_protocol::controller_rpc::ControllerRpc;
use ferrite_protocol::elect_leaders::{self, ElectLeadersRequest, ElectLeadersResponse, PartitionResult, TopicResult};
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::leader_and_isr::{LeaderAndIsrPartitionError, LeaderAndIsrResponse, LeaderAndIsrTopicError};
use ferrite_protocol::offset_for_leader_epoch::{
    EpochEndOffset, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, OffsetForLeaderTopicResult,
};
use ferrite_protocol::response::ResponseBuilder;
use ferrite_protocol::stop_replica::{StopReplicaPartitionError, StopReplicaResponse};
use ferrite_protocol::update_metadata::UpdateMetadataResponse;

/// Encodes the answer to a controller request with one error for all of it.
fn refuse(rpc: &ControllerRpc, error: ErrorCode, b: &mut ResponseBuilder) {
    let code = error.code();
    match rpc {
        ControllerRpc::LeaderAndIsr(_) => LeaderAndIsrResponse {
            error_code: code,
            topics: Vec::new(),
        }
        .encode(&mut b.w),
        ControllerRpc::UpdateMetadata(_) => UpdateMetadataResponse { error_code: code }.encode(&mut b.w),
        ControllerRpc::StopReplica(_) => StopReplicaResponse {
            error_code: code,
            partition_errors: Vec::new(),
        }
        .encode(&mut b.w),
    }
}

pub async fn controller_request(shard: &Rc<BrokerShard>, access: &Access, rpc: ControllerRpc, b: &mut ResponseBuilder) {
    // Only a broker (ClusterAction on the cluster) gives a broker orders.
    if !access.allows_cluster(Operation::ClusterAction) {
        refuse(&rpc, ErrorCode::ClusterAuthorizationFailed, b);
        return;
    }
    let Some(cluster) = shard.cluster().cloned() else {
        // A broker outside any cluster takes no controller's orders.
        refuse(&rpc, ErrorCode::NotController, b);
        return;
    };
    let header = rpc.header();
    if !cluster.accept_controller_epoch(header.controller_epoch) {
        tracing::warn!(epoch = %header.controller_epoch, seen = %cluster.controller_epoch(), "request from a stale controller refused");
        refuse(&rpc, ErrorCode::StaleControllerEpoch, b);
        return;
    }
    let request = match controller_wire::to_controller_request(&rpc) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "unusable controller request");
            refuse(&rpc, ErrorCode::InvalidRequest, b);
            return;
        }
    };
    match request {
        ControllerRequest::UpdateMetadata {
            brokers,
            partitions,
            deleted_topics,
        } => {
            // Merged before any await, so that updates install in the order
            // they arrived.
            let meta = cluster.merge_metadata(MetadataUpdate {
                controller: header.controller_id,
                brokers,
                partitions,
                deleted_topics,
            });
            let error = match broadcast(&shard.handle, meta).await {
                Ok(_) => ErrorCode::None,
                Err(e) => error_map::engine(&e),
            };
            UpdateMetadataResponse {
                error_code: error.code(),
            }
            .encode(&mut b.w);
        }
        ControllerRequest::LeaderAndIsr { partitions, leaders } => {
            cluster.note_endpoints(&leaders);
            let topics = leader_and_isr(shard, partitions, header.controller_epoch).await;
            LeaderAndIsrResponse { error_code: 0, topics }.encode(&mut b.w);
        }
        ControllerRequest::StopReplica { partitions, delete } => {
            let mut errors = Vec::with_capacity(partitions.len());
            for tp in partitions {
                let owner = shard.owner(&tp);
                let t = tp.clone();
                let result = shard
                    .run_on(owner, move |s: Rc<BrokerShard>| async move {
                        let Some(replicas) = s.replicas.clone() else {
                            return ErrorCode::NotController;
                        };
                        match replicas
                            .stop_replica(&s.logs, &s.follower_views, &t, delete == DeleteData::Delete)
                            .await
                        {
                            Ok(()) => ErrorCode::None,
                            Err(e) => error_map::replica_op(&e),
                        }
                    })
                    .await
                    .unwrap_or_else(|e| error_map::engine(&e));
                errors.push(StopReplicaPartitionError {
                    topic_name: tp.topic,
                    partition_index: tp.partition,
                    error_code: result.code(),
                });
            }
            StopReplicaResponse {
                error_code: 0,
                partition_errors: errors,
            }
            .encode(&mut b.w);
        }
    }
}

async fn leader_and_isr(
    shard: &Rc<BrokerShard>,
    partitions: Vec<PartitionInfo>,
    epoch: ControllerEpoch,
) -> Vec<LeaderAndIsrTopicError> {
    let mut by_topic: BTreeMap<[u8; 16], Vec<LeaderAndIsrPartitionError>> = BTreeMap::new();
    let mut order: Vec<[u8; 16]> = Vec::new();
    // Partitions apply independently; many at once, since creating a log
    // waits on fsyncs (LeaderAndIsr for a new topic of thousands of
    // partitions). The answers keep the request's order.
    let applied = futures::stream::iter(partitions)
        .map(|info| {
            let owner = shard.owner(&info.partition);
            let (topic_id, index) = (info.topic_id, info.partition.partition);
            let apply = shard.run_on(owner, move |s: Rc<BrokerShard>| async move {
                let Some(replicas) = s.replicas.clone() else {
                    return ErrorCode::NotController;
                };
                match replicas.leader_and_isr(&s.logs, &s.live(), &info, epoch).await {
                    Ok(()) => ErrorCode::None,
                    Err(e) => {
                        tracing::info!(tp = %info.partition, error = %e, "LeaderAndIsr not applied");
                        error_map::replica_op(&e)
                    }
                }
            });
            async move { (topic_id, index, apply.await.unwrap_or_else(|e| error_map::engine(&e))) }
        })
        .buffered(ferrite_engine::log_manager::OPENS_IN_FLIGHT_MAX)
        .collect::<Vec<_>>()
        .await;
    for (topic_id, index, result) in applied {
        if !by_topic.contains_key(&topic_id) {
            order.push(topic_id);
        }
        by_topic.entry(topic_id).or_default().push(LeaderAndIsrPartitionError {
            partition_index: index,
            error_code: result.code(),
        });
    }
    order
        .into_iter()
        .map(|topic_id| LeaderAndIsrTopicError {
            topic_id,
            partition_errors: by_topic.remove(&topic_id).unwrap_or_default(),
        })
        .collect()
}

/// OffsetForLeaderEpoch: where each asked epoch ends in this leader's log.
pub async fn offset_for_leader_epoch(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: OffsetForLeaderEpochRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    // A follower's needs ClusterAction; a consumer's, Describe on the topic.
    let follower = req.replica_id.0 >= 0;
    let replica_ok = !follower || access.allows_cluster(Operation::ClusterAction);
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        let refused = match (
            replica_ok,
            follower || access.allows_topic(Operation::Describe, &t.topic),
        ) {
            (false, _) => Some(ErrorCode::ClusterAuthorizationFailed),
            (true, false) => Some(ErrorCode::TopicAuthorizationFailed),
            (true, true) => None,
        };
        for p in t.partitions {
            if let Some(code) = refused {
                partitions.push(EpochEndOffset {
                    error_code: code.code(),
                    partition: p.partition,
                    leader_epoch: LeaderEpoch::NONE,
                    end_offset: Offset(-1),
                });
                continue;
            }
            let tp = TopicPartition::new(t.topic.clone(), p.partition);
            let owner = shard.owner(&tp);
            let (current, requested) = (p.current_leader_epoch, p.leader_epoch);
            let answer = shard
                .run_on(owner, move |s: Rc<BrokerShard>| async move {
                    epoch_end(&s, &tp, current, requested)
                })
                .await
                .unwrap_or_else(|e| Err(error_map::engine(&e)));
            partitions.push(match answer {
                Ok(found) => {
                    let (leader_epoch, end_offset) = found.unwrap_or((LeaderEpoch::NONE, Offset(-1)));
                    EpochEndOffset {
                        error_code: 0,
                        partition: p.partition,
                        leader_epoch,
                        end_offset,
                    }
                }
                Err(code) => EpochEndOffset {
                    error_code: code.code(),
                    partition: p.partition,
                    leader_epoch: LeaderEpoch::NONE,
                    end_offset: Offset(-1),
                },
            });
        }
        topics.push(OffsetForLeaderTopicResult {
            topic: t.topic,
            partitions,
        });
    }
    OffsetForLeaderEpochResponse {
        throttle_time_ms: 0,
        topics,
    }
    .encode(&mut b.w, v);
}

fn epoch_end(
    s: &BrokerShard,
    tp: &TopicPartition,
    current: LeaderEpoch,
    requested: LeaderEpoch,
) -> Result<Option<(LeaderEpoch, Offset)>, ErrorCode> {
    let current = (current != LeaderEpoch::NONE).then_some(current);
    match &s.replicas {
        Some(replicas) => {
            let replica = replicas.get(tp).ok_or(ErrorCode::NotLeaderOrFollower)?;
            replica
                .answer_epoch_end(current, requested)
                .map_err(|e| error_map::replication(&e))
        }
        None => {
            // A standalone broker leads everything it has.
            let log = s.served_log(tp)?;
            Ok(log.end_offset_for_epoch(requested))
        }
    }
}

/// ControlledShutdown, on the controller: moves the broker's leaderships
/// away and answers with the partitions it still leads.
pub async fn controlled_shutdown(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: ControlledShutdownRequest,
    b: &mut ResponseBuilder,
) {
    if !access.allows_cluster(Operation::ClusterAction) {
        let refused = ControlledShutdownResponse {
            error_code: ErrorCode::ClusterAuthorizationFailed.code(),
            remaining_partitions: Vec::new(),
        };
        return refused.encode(&mut b.w);
    }
    let answer = match shard.cluster() {
        Some(cluster) if cluster.is_controller() => {
            let broker = req.broker_id;
            cluster
                .ask(|reply| ClusterRequest::ShutdownOf { broker, reply })
                .await
                .unwrap_or(Err(()))
        }
        _ => Err(()),
    };
    let response = match answer {
        Ok(left) => controller_wire::shutdown_reply_to_wire(&left),
        Err(()) => ControlledShutdownResponse {
            error_code: ErrorCode::NotController.code(),
            remaining_partitions: Vec::new(),
        },
    };
    response.encode(&mut b.w);
}

/// ElectLeaders (preferred): hands the election to the controller (through
/// `/admin/preferred_replica_election`) and answers at once; the leaders
/// move as the controller gets to them.
pub async fn elect_leaders(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: ElectLeadersRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    if !access.allows_cluster(Operation::Alter) {
        let refused = ElectLeadersResponse {
            error_code: ErrorCode::ClusterAuthorizationFailed.code(),
            results: Vec::new(),
        };
        return refused.encode(&mut b.w, v);
    }
    let named: Option<Vec<TopicPartition>> = req.topics.as_ref().map(|ts| {
        ts.iter()
            .flat_map(|t| t.partitions.iter().map(|p| TopicPartition::new(t.topic.clone(), *p)))
            .collect()
    });
    let meta = shard.meta();
    let per_partition = |code: ErrorCode| -> Vec<TopicResult> {
        let Some(topics) = &req.topics else { return Vec::new() };
        topics
            .iter()
            .map(|t| TopicResult {
                topic: t.topic.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| {
                        let known = meta.topic(&t.topic).is_some_and(|x| x.partition(*p).is_some());
                        let code = if known {
                            code
                        } else {
                            ErrorCode::UnknownTopicOrPartition
                        };
                        PartitionResult {
                            partition: *p,
                            error_code: code.code(),
                            error_message: None,
                        }
                    })
                    .collect(),
            })
            .collect()
    };
    let response = if req.election_type != elect_leaders::PREFERRED {
        ElectLeadersResponse {
            error_code: ErrorCode::InvalidRequest.code(),
            results: Vec::new(),
        }
    } else {
        match shard.cluster() {
            // A standalone broker leads everything: nothing to elect.
            None => ElectLeadersResponse {
                error_code: 0,
                results: per_partition(ErrorCode::ElectionNotNeeded),
            },
            Some(cluster) => {
                let asked = cluster
                    .ask(|reply| ClusterRequest::ElectPreferred {
                        partitions: named,
                        reply,
                    })
                    .await;
                match asked {
                    Some(Ok(())) => ElectLeadersResponse {
                        error_code: 0,
                        results: per_partition(ErrorCode::None),
                    },
                    Some(Err(e)) => ElectLeadersResponse {
                        error_code: error_map::controller(&e).code(),
                        results: Vec::new(),
                    },
                    None => ElectLeadersResponse {
                        error_code: ErrorCode::RequestTimedOut.code(),
                        results: Vec::new(),
                    },
                }
            }
        }
    };
    response.encode(&mut b.w, v);
}
