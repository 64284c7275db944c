//! The transaction APIs (KIP-98): AddPartitionsToTxn, AddOffsetsToTxn,
//! EndTxn and InitProducerId with a transactional id go to the shard
//! owning the id's `__transaction_state` partition, where the coordinator
//! ([`crate::transactions`]) answers; TxnOffsetCommit goes to the group's
//! coordinator; WriteTxnMarkers (from a coordinator, maybe another
//! broker's) writes markers on the partitions' shards; DescribeTransactions
//! and ListTransactions read the coordinators' state.

use std::future::Future;
use std::rc::Rc;

use ferrite_engine::txn_state::Marker;
use ferrite_engine::{ProducerId, TopicPartition};
use ferrite_groups::OFFSETS_TOPIC;
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::response::ResponseBuilder;
use ferrite_protocol::topic_partitions::{PartitionError, TopicPartitions};
use ferrite_protocol::txn_admin as ta;
use ferrite_protocol::txn_offset_commit::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use ferrite_protocol::txn_producer as tp;
use ferrite_protocol::write_txn_markers::{TxnMarkerResult, WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use ferrite_security::acl::{Operation, ResourceType};
use ferrite_transactions::metadata::Caller;
use ferrite_transactions::{TxnError, TxnStatus};

use crate::coordinator_log::{TxnMarker, Writer};
use crate::error_map;
use crate::groups::ops::Committer;
use crate::handlers::access::Access;
use crate::handlers::groups::{all_failed, by_topic, commit_entries, on_coordinator};
use crate::shard::BrokerShard;

/// The first version of AddPartitionsToTxn, AddOffsetsToTxn and EndTxn
/// that knows PRODUCER_FENCED (KIP-588).
const FENCED_FROM: i16 = 2;

/// Write on the transactional id, or TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
fn gate(access: &Access, id: &str) -> Result<(), TxnError> {
    match access.allows(Operation::Write, ResourceType::TransactionalId, id) {
        true => Ok(()),
        false => Err(TxnError::TransactionalIdAuthorizationFailed),
    }
}

/// Runs `f` on the shard owning `id`'s `__transaction_state` partition.
async fn on_txn_coordinator<R, F, Fut>(shard: &Rc<BrokerShard>, id: &str, f: F) -> Result<R, TxnError>
where
    R: Send + 'static,
    F: FnOnce(Rc<BrokerShard>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<R, TxnError>> + 'static,
{
    let owner = shard.owner(&shard.transactions.topic_partition(id));
    shard
        .run_on(owner, f)
        .await
        .map_err(|_| TxnError::CoordinatorNotAvailable)?
}

/// InitProducerId with a transactional id.
pub async fn init_producer_id(
    shard: &Rc<BrokerShard>,
    access: &Access,
    id: String,
    req: &ferrite_protocol::init_producer_id::InitProducerIdRequest,
) -> Result<(ProducerId, i16), TxnError> {
    gate(access, &id)?;
    let timeout_ms = req.transaction_timeout_ms;
    let expected = (req.producer_id.0 >= 0).then_some(Caller {
        producer_id: req.producer_id,
        producer_epoch: req.producer_epoch,
    });
    super::groups::ensure_internal_topic(shard, super::groups::Internal::TransactionState)
        .await
        .map_err(|_| TxnError::CoordinatorNotAvailable)?;
    let key = id.clone();
    on_txn_coordinator(shard, &key, move |s| async move {
        s.transactions.init_producer_id(&s, &id, timeout_ms, expected).await
    })
    .await
}

pub async fn add_partitions_to_txn(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: tp::AddPartitionsToTxnRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    let meta = shard.meta();
    let asked: Vec<(String, i32)> = req
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic.clone(), *p)))
        .collect();
    // A partition refused or unknown fails the request: the others are
    // OPERATION_NOT_ATTEMPTED, as Kafka answers.
    let refusal = |(t, p): &(String, i32)| {
        if !access.allows_topic(Operation::Write, t) {
            Some(ErrorCode::TopicAuthorizationFailed)
        } else if meta.topic(t).and_then(|x| x.partition(*p)).is_none() || t == OFFSETS_TOPIC {
            Some(ErrorCode::UnknownTopicOrPartition)
        } else {
            None
        }
    };
    let refused: Vec<Option<ErrorCode>> = asked.iter().map(refusal).collect();
    let codes: Vec<ErrorCode> = if let Err(e) = gate(access, &req.transactional_id) {
        vec![error_map::txn(e, v, FENCED_FROM); asked.len()]
    } else if refused.iter().any(Option::is_some) {
        refused
            .iter()
            .map(|r| r.unwrap_or(ErrorCode::OperationNotAttempted))
            .collect()
    } else {
        let caller = Caller {
            producer_id: req.producer_id,
            producer_epoch: req.producer_epoch,
        };
        let partitions: Vec<TopicPartition> = asked.iter().map(|(t, p)| TopicPartition::new(t.clone(), *p)).collect();
        let id = req.transactional_id.clone();
        let added = on_txn_coordinator(shard, &req.transactional_id, move |s| async move {
            s.transactions.add_partitions(&s, &id, caller, partitions).await
        })
        .await;
        let code = added.map_or_else(|e| error_map::txn(e, v, FENCED_FROM), |()| ErrorCode::None);
        vec![code; asked.len()]
    };
    let results = TopicPartitions::from_runs(asked.into_iter().zip(codes).map(|((t, p), c)| {
        (
            t,
            PartitionError {
                partition_index: p,
                error_code: c.code(),
            },
        )
    }));
    tp::AddPartitionsToTxnResponse {
        throttle_time_ms: 0,
        results,
    }
    .encode(&mut b.w, v);
}

/// AddPartitionsToTxn v4, a broker's batched form: each transaction's
/// partitions verified (`verify_only`, KIP-890: a leader about to append a
/// transaction's first batch) or added; needs CLUSTER_ACTION.
pub async fn add_partitions_to_txn_batch(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: ferrite_protocol::txn_verify::AddPartitionsToTxnBatch,
    v: i16,
    b: &mut ResponseBuilder,
) {
    use ferrite_protocol::txn_verify::AddPartitionsToTxnBatchResponse;
    let allowed = access.allows_cluster(Operation::ClusterAction);
    let mut results = Vec::with_capacity(req.transactions.len());
    for t in req.transactions.into_iter().filter(|_| allowed) {
        results.push(verify_or_add(shard, t, v).await);
    }
    let error_code = match allowed {
        true => ErrorCode::None,
        false => ErrorCode::ClusterAuthorizationFailed,
    };
    AddPartitionsToTxnBatchResponse {
        throttle_time_ms: 0,
        error_code: error_code.code(),
        results,
    }
    .encode(&mut b.w, v);
}

/// One transaction of an AddPartitionsToTxn v4.
async fn verify_or_add(
    shard: &Rc<BrokerShard>,
    t: ferrite_protocol::txn_verify::TxnToVerify,
    v: i16,
) -> ferrite_protocol::txn_verify::TxnVerified {
    let caller = Caller {
        producer_id: t.producer_id,
        producer_epoch: t.producer_epoch,
    };
    let partitions: Vec<TopicPartition> = t
        .topics
        .iter()
        .flat_map(|x| x.partitions.iter().map(|p| TopicPartition::new(x.topic.clone(), *p)))
        .collect();
    let code_of = |r: Result<(), TxnError>| r.map_or_else(|e| error_map::txn(e, v, FENCED_FROM), |()| ErrorCode::None);
    let codes: Vec<ErrorCode> = if t.verify_only {
        let mut codes = Vec::with_capacity(partitions.len());
        for tp in &partitions {
            let (id, tp) = (t.transactional_id.clone(), tp.clone());
            let verified = on_txn_coordinator(shard, &t.transactional_id, move |s| async move {
                s.transactions.verify(&s, &id, caller, &tp).await
            })
            .await;
            codes.push(code_of(verified));
        }
        codes
    } else {
        let (id, all) = (t.transactional_id.clone(), partitions.clone());
        let added = on_txn_coordinator(shard, &t.transactional_id, move |s| async move {
            s.transactions.add_partitions(&s, &id, caller, all).await
        })
        .await;
        vec![code_of(added); partitions.len()]
    };
    let topics = TopicPartitions::from_runs(partitions.into_iter().zip(codes).map(|(tp, c)| {
        (
            tp.topic,
            PartitionError {
                partition_index: tp.partition,
                error_code: c.code(),
            },
        )
    }));
    ferrite_protocol::txn_verify::TxnVerified {
        transactional_id: t.transactional_id,
        topics,
    }
}

pub async fn add_offsets_to_txn(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: tp::AddOffsetsToTxnRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    let code = if let Err(e) = gate(access, &req.transactional_id) {
        error_map::txn(e, v, FENCED_FROM)
    } else if !access.allows_group(Operation::Read, &req.group_id) {
        ErrorCode::GroupAuthorizationFailed
    } else {
        let offsets = shard.groups.topic_partition(&req.group_id);
        let caller = Caller {
            producer_id: req.producer_id,
            producer_epoch: req.producer_epoch,
        };
        let id = req.transactional_id.clone();
        let added = on_txn_coordinator(shard, &req.transactional_id, move |s| async move {
            s.transactions.add_partitions(&s, &id, caller, vec![offsets]).await
        })
        .await;
        added.map_or_else(|e| error_map::txn(e, v, FENCED_FROM), |()| ErrorCode::None)
    };
    tp::AddOffsetsToTxnResponse {
        throttle_time_ms: 0,
        error_code: code.code(),
    }
    .encode(&mut b.w, v);
}

pub async fn end_txn(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: tp::EndTxnRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    let code = if let Err(e) = gate(access, &req.transactional_id) {
        error_map::txn(e, v, FENCED_FROM)
    } else {
        let caller = Caller {
            producer_id: req.producer_id,
            producer_epoch: req.producer_epoch,
        };
        let (id, commit) = (req.transactional_id.clone(), req.committed);
        let ended = on_txn_coordinator(shard, &req.transactional_id, move |s| async move {
            s.transactions.end_txn(&s, &id, caller, commit).await
        })
        .await;
        ended.map_or_else(|e| error_map::txn(e, v, FENCED_FROM), |()| ErrorCode::None)
    };
    tp::EndTxnResponse {
        throttle_time_ms: 0,
        error_code: code.code(),
    }
    .encode(&mut b.w, v);
}

pub async fn txn_offset_commit(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: TxnOffsetCommitRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    let asked: Vec<(String, Vec<i32>)> = req
        .topics
        .iter()
        .map(|t| {
            (
                t.topic.clone(),
                t.partitions.iter().map(|p| p.partition_index).collect(),
            )
        })
        .collect();
    let topics = if gate(access, &req.transactional_id).is_err() {
        let refused = asked.iter().flat_map(|(t, ps)| {
            ps.iter().map(move |p| {
                let error_code = ErrorCode::TransactionalIdAuthorizationFailed.code();
                (
                    t.clone(),
                    PartitionError {
                        partition_index: *p,
                        error_code,
                    },
                )
            })
        });
        TopicPartitions::from_runs(refused)
    } else if !access.allows_group(Operation::Read, &req.group_id) {
        by_topic(all_failed(&asked, ferrite_groups::GroupError::GroupAuthorizationFailed))
    } else {
        by_topic(commit_on_group_coordinator(shard, access, req).await)
    };
    TxnOffsetCommitResponse {
        throttle_time_ms: 0,
        topics,
    }
    .encode(&mut b.w, v);
}

async fn commit_on_group_coordinator(
    shard: &Rc<BrokerShard>,
    access: &Access,
    mut req: TxnOffsetCommitRequest,
) -> Vec<(String, i32, Result<(), ferrite_groups::GroupError>)> {
    let (asked, refused, entries) = commit_entries(std::mem::take(&mut req.topics), access);
    let who = Committer {
        member_id: req.member_id,
        instance_id: req.group_instance_id,
        generation: req.generation_id,
    };
    let writer = Writer::Transaction {
        producer_id: req.producer_id,
        producer_epoch: req.producer_epoch,
    };
    let group = req.group_id.clone();
    let result = on_coordinator(shard, Ok(()), &req.group_id, move |s| async move {
        s.groups.txn_commit(&*s, &group, (who, writer), entries).await
    })
    .await
    .and_then(|r| r);
    let mut results = result.unwrap_or_else(|e| all_failed(&asked, e));
    results.extend(all_failed(
        &refused,
        ferrite_groups::GroupError::TopicAuthorizationFailed,
    ));
    results
}

/// WriteTxnMarkers, from a transaction coordinator: each marker on its
/// partitions, here.
pub async fn write_txn_markers(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: WriteTxnMarkersRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    let allowed = access.allows_cluster(Operation::ClusterAction);
    let mut markers = Vec::with_capacity(req.markers.len());
    for m in req.markers {
        let marker = TxnMarker {
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
            result: if m.transaction_result {
                Marker::Commit
            } else {
                Marker::Abort
            },
            coordinator_epoch: m.coordinator_epoch,
        };
        let mut topics = Vec::with_capacity(m.topics.len());
        for t in m.topics {
            let mut partitions = Vec::with_capacity(t.partitions.len());
            for p in t.partitions {
                let code = if allowed {
                    let tp = TopicPartition::new(t.topic.clone(), p);
                    crate::transactions::markers::write_on_owner(shard, tp, marker).await
                } else {
                    ErrorCode::ClusterAuthorizationFailed
                };
                partitions.push(PartitionError {
                    partition_index: p,
                    error_code: code.code(),
                });
            }
            topics.push(TopicPartitions {
                topic: t.topic,
                partitions,
            });
        }
        markers.push(TxnMarkerResult {
            producer_id: m.producer_id,
            topics,
        });
    }
    WriteTxnMarkersResponse { markers }.encode(&mut b.w, v);
}

pub async fn describe_transactions(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: ta::DescribeTransactionsRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    let mut out = Vec::with_capacity(req.transactional_ids.len().min(1024));
    for id in req.transactional_ids {
        let described = if access.allows(Operation::Describe, ResourceType::TransactionalId, &id) {
            let key = id.clone();
            on_txn_coordinator(
                shard,
                &id,
                move |s| async move { s.transactions.describe(&s, &key).await },
            )
            .await
        } else {
            Err(TxnError::TransactionalIdAuthorizationFailed)
        };
        out.push(match described {
            Ok(m) => ta::TransactionDescription {
                error_code: 0,
                transactional_id: id,
                transaction_state: m.status.name().to_string(),
                transaction_timeout_ms: m.timeout_ms,
                transaction_start_time_ms: m.start_ms,
                producer_id: m.producer_id,
                producer_epoch: m.producer_epoch,
                topics: TopicPartitions::from_runs(m.partitions.into_iter().map(|tp| (tp.topic, tp.partition))),
            },
            Err(e) => ta::TransactionDescription {
                error_code: error_map::txn(e, 0, 0).code(),
                transactional_id: id,
                transaction_state: String::new(),
                transaction_timeout_ms: 0,
                transaction_start_time_ms: -1,
                producer_id: ProducerId::NONE,
                producer_epoch: -1,
                topics: Vec::new(),
            },
        });
    }
    ta::DescribeTransactionsResponse {
        throttle_time_ms: 0,
        transaction_states: out,
    }
    .encode(&mut b.w, v);
}

pub async fn list_transactions(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: ta::ListTransactionsRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    let (known, unknown): (Vec<String>, Vec<String>) = req
        .state_filters
        .into_iter()
        .partition(|s| TxnStatus::of_name(s).is_some());
    let states: Vec<TxnStatus> = known.iter().filter_map(|s| TxnStatus::of_name(s)).collect();
    let mut all = Vec::new();
    for s in 0..shard.shard_count() {
        let listed = shard
            .run_on(ferrite_engine::ShardId(s), |s: Rc<BrokerShard>| async move {
                s.transactions.list()
            })
            .await;
        all.extend(listed.unwrap_or_default());
    }
    let now = crate::groups::coordinator::wall_ms();
    let transaction_states = all
        .into_iter()
        .filter(|t| states.is_empty() || states.contains(&t.meta.status))
        .filter(|t| req.producer_id_filters.is_empty() || req.producer_id_filters.contains(&t.meta.producer_id))
        .filter(|t| req.duration_filter < 0 || t.meta.open_for_ms(now).is_some_and(|d| d > req.duration_filter))
        .filter(|t| access.allows(Operation::Describe, ResourceType::TransactionalId, &t.transactional_id))
        .map(|t| ta::ListedTransaction {
            transactional_id: t.transactional_id,
            producer_id: t.meta.producer_id,
            transaction_state: t.meta.status.name().to_string(),
        })
        .collect();
    ta::ListTransactionsResponse {
        throttle_time_ms: 0,
        error_code: 0,
        unknown_state_filters: unknown,
        transaction_states,
    }
    .encode(&mut b.w, v);
}
