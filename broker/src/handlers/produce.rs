//! Produce: each partition's record set is appended on the shard that owns
//! the partition. On a single broker, acks=-1 means the local append, as
//! acks=1; in a cluster the partition's replica takes it (acks=-1 waits for
//! the ISR, within the request's timeout). acks=0 gets no response at all.
//!
//! A produce takes effect, for its connection's order (see
//! [`sequence`](ferrite_transport::sequence)), once every partition's append has
//! its place in its log: the next produce on the connection may start while
//! this one's bytes are still on their way to the disk or the ISR.

use std::rc::Rc;

use std::future::Future;

use bytes::{Bytes, BytesMut};
use ferrite_engine::{AppendMode, EngineError, LeaderEpoch, Offset, TimestampMs, TopicPartition};
use ferrite_replication::{Acks, ReplicaOpError, ReplicationError};
use futures::channel::oneshot;

use super::access::Access;
use super::metadata::auto_create;
use crate::error_map;
use crate::shard::BrokerShard;
use crate::transactions::verify::{self, TxnWriter};
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::produce::{encode_response, ProducePartitionResponse, ProduceRequest, ProduceTopicResponse};
use ferrite_protocol::response::ResponseBuilder;
use ferrite_security::acl::Operation;
use ferrite_transactions::Verification;
use ferrite_transport::sequence::Effect;

fn failed(index: i32, error: ErrorCode, message: Option<String>) -> ProducePartitionResponse {
    ProducePartitionResponse {
        index,
        error: error.code(),
        base_offset: Offset::NONE,
        log_append_time_ms: TimestampMs::NONE,
        log_start_offset: Offset::NONE,
        error_message: message,
    }
}

/// Why a produce to one partition failed.
enum ProduceFailure {
    Engine(EngineError),
    Replica(ReplicaOpError),
    /// The transaction coordinator did not verify the batch (KIP-890).
    Unverified(ErrorCode),
}

impl ProduceFailure {
    fn code(&self) -> ErrorCode {
        match self {
            ProduceFailure::Engine(e) => error_map::engine(e),
            ProduceFailure::Replica(e) => error_map::replica_op(e),
            ProduceFailure::Unverified(code) => *code,
        }
    }

    fn message(&self) -> String {
        match self {
            ProduceFailure::Engine(e) => e.to_string(),
            ProduceFailure::Replica(e) => e.to_string(),
            ProduceFailure::Unverified(_) => {
                "the transaction coordinator does not know this partition in the producer's transaction".into()
            }
        }
    }
}

/// Whether a record set's first batch is transactional (a producer's
/// record set is one batch; the log checks every batch in full).
fn is_transactional(records: &Bytes) -> bool {
    const ATTRIBUTES_AT: usize = 21;
    records
        .get(ATTRIBUTES_AT..ATTRIBUTES_AT + 2)
        .is_some_and(|a| i16::from_be_bytes([a[0], a[1]]) & ferrite_engine::batch::ATTR_TRANSACTIONAL != 0)
}

/// A produce's `acks` (already checked to be -1, 0 or 1).
fn acks_of(acks: i16) -> Acks {
    match acks {
        0 => Acks::None,
        1 => Acks::Leader,
        _ => Acks::All,
    }
}

/// Runs `append` and sends on `placed` once it has its place in the log:
/// an append takes it at its first poll (`PartitionLog::append` and
/// `LocalReplica::produce` take their turn before their first await).
async fn placed_then<T>(append: impl Future<Output = T>, placed: Option<oneshot::Sender<()>>) -> T {
    let mut append = std::pin::pin!(append);
    let first = futures_lite::future::poll_once(append.as_mut()).await;
    drop(placed);
    match first {
        Some(done) => done,
        None => append.await,
    }
}

/// Appends on the owning shard; returns (base offset, log start). In a
/// cluster the partition's replica takes the append: it refuses it when
/// this broker does not lead, and with acks=all answers once committed.
/// `placed` fires (or drops) once the append has its place: here, once the
/// append took it; on another shard, once the append is queued there (its
/// shard starts jobs in the order they were queued).
async fn append_on_owner(
    shard: &Rc<BrokerShard>,
    tp: TopicPartition,
    epoch: i32,
    records: Bytes,
    acks: (i16, i32),
    txn: Option<TxnWriter>,
    placed: oneshot::Sender<()>,
) -> Result<(Offset, Offset), ProduceFailure> {
    let owner = shard.owner(&tp);
    if owner == shard.id {
        return append_here(shard.clone(), tp, epoch, records, acks, txn, Some(placed)).await;
    }
    crate::metrics::cross_shard_call();
    let reply = shard
        .handle
        .enqueue(owner, move |s: Rc<BrokerShard>| {
            append_here(s, tp, epoch, records, acks, txn, None)
        })
        .await
        .map_err(ProduceFailure::Engine)?;
    drop(placed);
    reply.await.map_err(ProduceFailure::Engine)?
}

/// The append on the shard that owns the partition (see [`append_on_owner`]).
/// A transaction's first batch here is verified first (`txn`, KIP-890);
/// nothing is awaited between that and the append.
async fn append_here(
    s: Rc<BrokerShard>,
    tp: TopicPartition,
    epoch: i32,
    records: Bytes,
    acks: (i16, i32),
    txn: Option<TxnWriter>,
    placed: Option<oneshot::Sender<()>>,
) -> Result<(Offset, Offset), ProduceFailure> {
    let (acks, timeout_ms) = acks;
    // The log rewrites offsets in place: it needs the bytes to
    // itself (no copy when this request holds the only reference).
    let owned = records
        .try_into_mut()
        .unwrap_or_else(|shared| BytesMut::from(&shared[..]));
    if let Some(replicas) = &s.replicas {
        let Some(replica) = replicas.get(&tp) else {
            return Err(ProduceFailure::Replica(ReplicaOpError::Replication(
                ReplicationError::NotLeader { tp, op: "produce" },
            )));
        };
        if let Some(w) = &txn {
            verify::before_append(&s, &tp, replica.log(), w)
                .await
                .map_err(ProduceFailure::Unverified)?;
        }
        let deadline = replicas.cluster.now().plus_ms(timeout_ms.max(0) as u64);
        let info = placed_then(replica.produce(owned, acks_of(acks), deadline), placed)
            .await
            .map_err(ProduceFailure::Replica)?;
        crate::metrics::produced(&tp.topic, info.bytes, info.records);
        return Ok((info.first_offset, replica.log().log_start_offset()));
    }
    let log = s.logs.served(&tp).map_err(ProduceFailure::Engine)?;
    if let Some(w) = &txn {
        verify::before_append(&s, &tp, &log, w)
            .await
            .map_err(ProduceFailure::Unverified)?;
    }
    let mode = AppendMode::Leader {
        epoch: LeaderEpoch(epoch),
    };
    let info = placed_then(log.append(owned, mode), placed)
        .await
        .map_err(ProduceFailure::Engine)?;
    crate::metrics::produced(&tp.topic, info.bytes, info.records);
    Ok((info.first_offset, log.log_start_offset()))
}

/// One partition's answer to its append.
async fn answer_append(
    shard: Rc<BrokerShard>,
    tp: TopicPartition,
    epoch: i32,
    records: Bytes,
    acks: (i16, i32),
    txn: Option<TxnWriter>,
    placed: oneshot::Sender<()>,
) -> ProducePartitionResponse {
    let index = tp.partition;
    match append_on_owner(&shard, tp, epoch, records, acks, txn, placed).await {
        Ok((base, start)) => ProducePartitionResponse {
            index,
            error: 0,
            base_offset: base,
            log_append_time_ms: TimestampMs::NONE,
            log_start_offset: start,
            error_message: None,
        },
        Err(e) => failed(index, e.code(), Some(e.message())),
    }
}

/// One partition's answer: given at once, or the index of its append.
enum Slot {
    Answered(ProducePartitionResponse),
    Append(usize),
}

/// Answers a produce; returns whether every partition succeeded. `effect`
/// is marked once every partition's append has its place.
pub async fn produce(
    shard: &Rc<BrokerShard>,
    access: &Access,
    p: ProduceRequest,
    v: i16,
    flexible: bool,
    b: &mut ResponseBuilder,
    effect: &mut Effect,
) -> bool {
    let acks_ok = (-1..=1).contains(&p.acks);
    // A transactional producer needs Write on its transactional id.
    let txn_refused = p.transactional_id.as_deref().is_some_and(|id| {
        !access.allows(
            Operation::Write,
            ferrite_security::acl::ResourceType::TransactionalId,
            id,
        )
    });
    let acks = (p.acks, p.timeout_ms);
    let mut topics = Vec::with_capacity(p.topics.len().min(1024));
    let mut appends = Vec::new();
    let mut placed = Vec::new();
    let mut created = 0usize;
    // A batch of a request that carries others is copied out of the
    // request frame: the log keeps its recent batches in memory, and a
    // slice would keep the whole frame alive with it (one partition's 4 KiB
    // holding a 2 MiB frame). A request with a single batch is its frame.
    let parts_in_request: usize = p.topics.iter().map(|t| t.partitions.len()).sum();
    let own_copy = |records: Bytes| {
        if parts_in_request > 1 {
            Bytes::copy_from_slice(&records)
        } else {
            records
        }
    };
    for t in p.topics {
        let mut meta = shard.meta();
        let writable = access.allows_topic(Operation::Write, &t.name);
        if writable
            && acks_ok
            && meta.topic(&t.name).is_none()
            && shard.config.auto_create_topics
            && created < super::metadata::AUTO_CREATE_PER_REQUEST_MAX
            && access.may_create_topic(&t.name)
        {
            created += 1;
            if let Err(e) = auto_create(shard, &t.name).await {
                tracing::debug!(topic = %t.name, error = %e, "auto-creation on produce failed");
            }
            meta = shard.meta();
        }
        let topic = meta.topic(&t.name);
        let valid_name = ferrite_controller::topic::validate_name(&t.name).is_ok();
        let mut partitions = Vec::with_capacity(t.partitions.len().min(1024));
        for part in t.partitions {
            let index = part.index;
            let known = topic.and_then(|x| x.partition(index));
            let ready = match (acks_ok, known, part.records) {
                (false, _, _) => Err(failed(index, ErrorCode::InvalidRequiredAcks, None)),
                _ if txn_refused => Err(failed(index, ErrorCode::TransactionalIdAuthorizationFailed, None)),
                // Transactional records come with the transactional id
                // they are authorized under (Kafka refuses them too).
                (_, _, Some(r)) if p.transactional_id.is_none() && is_transactional(&r) => Err(failed(
                    index,
                    ErrorCode::TransactionalIdAuthorizationFailed,
                    Some("transactional records without a transactional id".into()),
                )),
                _ if !writable => Err(failed(index, ErrorCode::TopicAuthorizationFailed, None)),
                // The coordinators write their own topics; a client's
                // records there would be replayed as commits (Kafka refuses
                // them too).
                _ if t.name == crate::groups::OFFSETS_TOPIC
                    || t.name == ferrite_transactions::TRANSACTION_STATE_TOPIC =>
                {
                    Err(failed(
                        index,
                        ErrorCode::InvalidTopicException,
                        Some("producing to an internal topic is not allowed".into()),
                    ))
                }
                _ if !valid_name => Err(failed(index, ErrorCode::InvalidTopicException, None)),
                (_, None, _) => Err(failed(index, ErrorCode::UnknownTopicOrPartition, None)),
                (_, Some(_), None) => Err(failed(index, ErrorCode::CorruptMessage, Some("null record set".into()))),
                (_, Some(pm), Some(records)) => Ok((pm.leader_epoch, own_copy(records))),
            };
            partitions.push(match ready {
                Err(r) => Slot::Answered(r),
                Ok((epoch, records)) => {
                    let tp = TopicPartition::new(t.name.clone(), index);
                    let (tx, rx) = oneshot::channel();
                    placed.push(rx);
                    let txn = match shard.config.transactions.verification {
                        Verification::Enabled => TxnWriter::of(p.transactional_id.as_deref(), &records),
                        Verification::Disabled => None,
                    };
                    appends.push(answer_append(shard.clone(), tp, epoch, records, acks, txn, tx));
                    Slot::Append(appends.len() - 1)
                }
            });
        }
        topics.push((t.name, partitions));
    }
    let mut answers: Vec<Option<ProducePartitionResponse>> = append_all(appends, placed, effect)
        .await
        .into_iter()
        .map(Some)
        .collect();
    let out: Vec<ProduceTopicResponse> = topics
        .into_iter()
        .map(|(name, slots)| ProduceTopicResponse {
            name,
            partitions: slots
                .into_iter()
                .map(|slot| match slot {
                    Slot::Answered(a) => a,
                    Slot::Append(i) => answers[i]
                        .take()
                        .unwrap_or_else(|| unreachable!("one answer an append")),
                })
                .collect(),
        })
        .collect();
    encode_response(&mut b.w, v, flexible, &out);
    out.iter().all(|t| t.partitions.iter().all(|p| p.error == 0))
}

/// Runs the appends concurrently, each as its own task (a lone one in
/// this task); marks `effect` once each has its place (`placed`); returns
/// their answers in order.
async fn append_all<F: Future<Output = ProducePartitionResponse> + 'static>(
    mut appends: Vec<F>,
    placed: Vec<oneshot::Receiver<()>>,
    effect: &mut Effect,
) -> Vec<ProducePartitionResponse> {
    let all_placed = async {
        for p in placed {
            // A dropped sender: the partition was answered before its append.
            let _ = p.await;
        }
        effect.mark();
    };
    if appends.len() == 1 {
        if let Some(lone) = appends.pop() {
            let (answer, ()) = futures::join!(lone, all_placed);
            return vec![answer];
        }
    }
    let running: Vec<_> = appends.into_iter().map(glommio::spawn_local).collect();
    all_placed.await;
    let mut answers = Vec::with_capacity(running.len());
    for task in running {
        answers.push(task.await);
    }
    answers
}
