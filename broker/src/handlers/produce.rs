//! Produce: each partition's record set is appended on the shard that owns
//! the partition. On a single broker, acks=-1 means the local append, as
//! acks=1; in a cluster the partition's replica takes it (acks=-1 waits for
//! the ISR, within the request's timeout). acks=0 gets no response at all.

use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use ferrite_engine::{AppendMode, EngineError, LeaderEpoch, TopicPartition};
use ferrite_replication::{Acks, ReplicaOpError, ReplicationError};

use super::metadata::auto_create;
use crate::error_map;
use crate::protocol::errors::ErrorCode;
use crate::protocol::produce::{encode_response, ProducePartitionResponse, ProduceRequest, ProduceTopicResponse};
use crate::protocol::response::ResponseBuilder;
use crate::shard::BrokerShard;

fn failed(index: i32, error: ErrorCode, message: Option<String>) -> ProducePartitionResponse {
    ProducePartitionResponse {
        index,
        error: error.code(),
        base_offset: -1,
        log_append_time_ms: -1,
        log_start_offset: -1,
        error_message: message,
    }
}

/// Why a produce to one partition failed.
enum ProduceFailure {
    Engine(EngineError),
    Replica(ReplicaOpError),
}

impl ProduceFailure {
    fn code(&self) -> ErrorCode {
        match self {
            ProduceFailure::Engine(e) => error_map::engine(e),
            ProduceFailure::Replica(e) => error_map::replica_op(e),
        }
    }

    fn message(&self) -> String {
        match self {
            ProduceFailure::Engine(e) => e.to_string(),
            ProduceFailure::Replica(e) => e.to_string(),
        }
    }
}

/// A produce's `acks` (already checked to be -1, 0 or 1).
fn acks_of(acks: i16) -> Acks {
    match acks {
        0 => Acks::None,
        1 => Acks::Leader,
        _ => Acks::All,
    }
}

/// Appends on the owning shard; returns (base offset, log start). In a
/// cluster the partition's replica takes the append: it refuses it when
/// this broker does not lead, and with acks=all answers once committed.
async fn append_on_owner(
    shard: &Rc<BrokerShard>,
    tp: TopicPartition,
    epoch: i32,
    records: Bytes,
    acks: i16,
    timeout_ms: i32,
) -> Result<(i64, i64), ProduceFailure> {
    let owner = shard.owner(&tp);
    shard
        .run_on(owner, move |s: Rc<BrokerShard>| async move {
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
                let deadline = replicas.cluster.now().plus_ms(timeout_ms.max(0) as u64);
                let info = replica
                    .produce(owned, acks_of(acks), deadline)
                    .await
                    .map_err(ProduceFailure::Replica)?;
                crate::metrics::produced(&tp.topic, info.bytes, info.records);
                return Ok((info.first_offset.0, replica.log().log_start_offset().0));
            }
            let log = s
                .local_log(&tp)
                .ok_or_else(|| ProduceFailure::Engine(EngineError::UnknownPartition { tp: tp.clone() }))?;
            let info = log
                .append(
                    owned,
                    AppendMode::Leader {
                        epoch: LeaderEpoch(epoch),
                    },
                )
                .await
                .map_err(ProduceFailure::Engine)?;
            crate::metrics::produced(&tp.topic, info.bytes, info.records);
            Ok((info.first_offset.0, log.log_start_offset().0))
        })
        .await
        .map_err(ProduceFailure::Engine)?
}

/// One partition's answer to its append.
async fn answer_append(
    shard: Rc<BrokerShard>,
    tp: TopicPartition,
    epoch: i32,
    records: Bytes,
    acks: i16,
    timeout_ms: i32,
) -> ProducePartitionResponse {
    let index = tp.partition;
    match append_on_owner(&shard, tp, epoch, records, acks, timeout_ms).await {
        Ok((base, start)) => ProducePartitionResponse {
            index,
            error: 0,
            base_offset: base,
            log_append_time_ms: -1,
            log_start_offset: start,
            error_message: None,
        },
        Err(e) => failed(index, e.code(), Some(e.message())),
    }
}

/// Answers a produce; returns whether every partition succeeded.
pub async fn produce(
    shard: &Rc<BrokerShard>,
    p: ProduceRequest,
    v: i16,
    flexible: bool,
    b: &mut ResponseBuilder,
) -> bool {
    let acks_ok = (-1..=1).contains(&p.acks);
    let mut out = Vec::with_capacity(p.topics.len().min(1024));
    let mut created = 0usize;
    for t in p.topics {
        let mut meta = shard.meta();
        if acks_ok
            && meta.topic(&t.name).is_none()
            && shard.config.auto_create_topics
            && created < super::metadata::AUTO_CREATE_PER_REQUEST_MAX
        {
            created += 1;
            if let Err(e) = auto_create(shard, &t.name).await {
                tracing::debug!(topic = %t.name, error = %e, "auto-creation on produce failed");
            }
            meta = shard.meta();
        }
        let topic = meta.topic(&t.name);
        let valid_name = ferrite_controller::topic::validate_name(&t.name).is_ok();
        // Partitions that fail at once are answered without a task.
        let mut tasks: Vec<Result<ProducePartitionResponse, glommio::Task<ProducePartitionResponse>>> =
            Vec::with_capacity(t.partitions.len().min(1024));
        let single = t.partitions.len() == 1;
        for part in t.partitions {
            let index = part.index;
            let known = topic.and_then(|x| x.partition(index));
            let ready = match (acks_ok, known, part.records) {
                (false, _, _) => Err(failed(index, ErrorCode::InvalidRequiredAcks, None)),
                _ if !valid_name => Err(failed(index, ErrorCode::InvalidTopicException, None)),
                (_, None, _) => Err(failed(index, ErrorCode::UnknownTopicOrPartition, None)),
                (_, Some(_), None) => Err(failed(index, ErrorCode::CorruptMessage, Some("null record set".into()))),
                (_, Some(pm), Some(records)) => Ok((pm.leader_epoch, records)),
            };
            match ready {
                Err(r) => tasks.push(Ok(r)),
                Ok((epoch, records)) => {
                    let tp = TopicPartition::new(t.name.clone(), index);
                    let append = answer_append(shard.clone(), tp, epoch, records, p.acks, p.timeout_ms);
                    // A topic's partitions append concurrently, each as its
                    // own task; a lone partition needs no task.
                    tasks.push(match single {
                        true => Ok(append.await),
                        false => Err(glommio::spawn_local(append)),
                    });
                }
            }
        }
        let mut partitions = Vec::with_capacity(tasks.len());
        for task in tasks {
            partitions.push(match task {
                Ok(ready) => ready,
                Err(running) => running.await,
            });
        }
        out.push(ProduceTopicResponse {
            name: t.name,
            partitions,
        });
    }
    encode_response(&mut b.w, v, flexible, &out);
    out.iter().all(|t| t.partitions.iter().all(|p| p.error == 0))
}
