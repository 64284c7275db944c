//! ListOffsets: earliest (-2), latest (-1), largest timestamp (-3: the
//! first record that carries the log's largest timestamp), or the first
//! record at or after a timestamp. Timestamps are looked up per record.

use std::rc::Rc;

use ferrite_engine::{LeaderEpoch, Offset, TimestampMs, TopicPartition};

use crate::error_map;
use crate::shard::BrokerShard;
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::fetch::Isolation;
use ferrite_protocol::list_offsets::{
    encode_response, ListOffsetsPartitionResponse, ListOffsetsRequest, ListOffsetsTopicResponse, DEBUGGING_REPLICA_ID,
    EARLIEST, LATEST, MAX_TIMESTAMP,
};
use ferrite_protocol::response::ResponseBuilder;

/// (offset, timestamp) for one query, on the owning shard. In a cluster
/// only the leader answers (NOT_LEADER_OR_FOLLOWER elsewhere, so clients
/// refresh their metadata), fenced by the request's leader epoch, and
/// "latest" is the high watermark (consumers see nothing above it), or
/// for `read_committed` the last stable offset; timestamps are looked up
/// below the same bound.
async fn lookup(
    shard: &Rc<BrokerShard>,
    tp: TopicPartition,
    timestamp: i64,
    (current_leader_epoch, isolation): (Option<LeaderEpoch>, Isolation),
) -> Result<(i64, i64), ErrorCode> {
    let owner = shard.owner(&tp);
    shard
        .run_on(owner, move |s: Rc<BrokerShard>| async move {
            let (log, hw) = leader_log(&s, &tp, current_leader_epoch)?;
            let end = match isolation {
                Isolation::ReadCommitted => last_stable(&log, hw),
                Isolation::ReadUncommitted => hw,
            };
            Ok(match timestamp {
                EARLIEST => (log.log_start_offset().0, -1),
                LATEST => (end.0, -1),
                // The largest timestamp is known per batch; its first
                // record is found like any timestamp's.
                MAX_TIMESTAMP => match log.max_timestamp() {
                    None => (-1, -1),
                    Some(batch) => match log.offset_for_timestamp(batch.timestamp, end).await {
                        Ok(Some(h)) => (h.offset.0, h.timestamp.0),
                        // Its batch is past what clients may read.
                        Ok(None) => (-1, -1),
                        Err(e) => return Err(error_map::engine(&e)),
                    },
                },
                ts => match log.offset_for_timestamp(TimestampMs(ts), end).await {
                    Ok(Some(h)) => (h.offset.0, h.timestamp.0),
                    Ok(None) => (-1, -1),
                    Err(e) => return Err(error_map::engine(&e)),
                },
            })
        })
        .await
        .map_err(|e| error_map::engine(&e))?
}

/// The last stable offset (Kafka's LSO): the HW, or below it the first
/// offset of a transaction still open.
pub(super) fn last_stable(log: &ferrite_engine::PartitionLog, hw: Offset) -> Offset {
    log.first_unstable_offset().map_or(hw, |first| first.min(hw))
}

/// The log a client's request about `tp` reads, on its owning shard, and
/// its high watermark (standalone: the log end). In a cluster only the
/// leader has one (NOT_LEADER_OR_FOLLOWER elsewhere, so clients refresh
/// their metadata), fenced by the request's leader epoch when it gives one.
pub(super) fn leader_log(
    s: &BrokerShard,
    tp: &TopicPartition,
    current_leader_epoch: Option<LeaderEpoch>,
) -> Result<(Rc<ferrite_engine::PartitionLog>, Offset), ErrorCode> {
    let Some(replicas) = &s.replicas else {
        let log = s.served_log(tp)?;
        let end = log.log_end_offset();
        return Ok((log, end));
    };
    let replica = replicas.get(tp).ok_or(ErrorCode::NotLeaderOrFollower)?;
    if replica.role() != ferrite_replication::RoleKind::Leader {
        return Err(ErrorCode::NotLeaderOrFollower);
    }
    replica
        .check_request_epoch(current_leader_epoch)
        .map_err(|e| error_map::replication(&e))?;
    Ok((replica.log().clone(), replica.hw()))
}

/// A debugging read of this broker's replica of `tp` (its log end): what a
/// broker creating a topic asks each replica broker
/// (`cluster/created_check.rs`). KAFKA_STORAGE_ERROR when its log could not
/// be created here, UNKNOWN_TOPIC_OR_PARTITION when there is no replica
/// (yet).
async fn own_replica_end(shard: &Rc<BrokerShard>, tp: TopicPartition) -> Result<i64, ErrorCode> {
    let owner = shard.owner(&tp);
    shard
        .run_on(owner, move |s: Rc<BrokerShard>| async move {
            let Some(replicas) = &s.replicas else {
                return Err(ErrorCode::UnknownTopicOrPartition);
            };
            match replicas.get(&tp) {
                Some(r) => Ok(r.log().log_end_offset().0),
                None if replicas.not_created(&tp).is_some() => Err(ErrorCode::KafkaStorageError),
                None => Err(ErrorCode::UnknownTopicOrPartition),
            }
        })
        .await
        .unwrap_or(Err(ErrorCode::KafkaStorageError))
}

/// Answers ListOffsets: topics the caller may not describe are answered
/// TOPIC_AUTHORIZATION_FAILED, the others looked up.
pub async fn list_offsets(
    shard: &Rc<BrokerShard>,
    access: &super::access::Access,
    mut l: ListOffsetsRequest,
    v: i16,
    flexible: bool,
    b: &mut ResponseBuilder,
) {
    use ferrite_security::acl::Operation;
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut l.topics)
        .into_iter()
        .partition(|t| access.allows_topic(Operation::Describe, &t.name));
    l.topics = allowed;
    let mut out = look_up(shard, l, v).await;
    out.extend(refused.into_iter().map(|t| {
        ListOffsetsTopicResponse {
            partitions: t
                .partitions
                .iter()
                .map(|p| ListOffsetsPartitionResponse {
                    index: p.index,
                    error: ErrorCode::TopicAuthorizationFailed.code(),
                    timestamp: TimestampMs::NONE,
                    offset: Offset::NONE,
                    leader_epoch: LeaderEpoch::NONE,
                })
                .collect(),
            name: t.name,
        }
    }));
    encode_response(&mut b.w, v, flexible, &out);
}

async fn look_up(shard: &Rc<BrokerShard>, l: ListOffsetsRequest, v: i16) -> Vec<ListOffsetsTopicResponse> {
    if l.replica_id == DEBUGGING_REPLICA_ID && shard.replicas.is_some() {
        let mut out = Vec::with_capacity(l.topics.len());
        for t in l.topics {
            let mut partitions = Vec::with_capacity(t.partitions.len());
            for p in t.partitions {
                let end = own_replica_end(shard, TopicPartition::new(t.name.clone(), p.index)).await;
                partitions.push(ListOffsetsPartitionResponse {
                    index: p.index,
                    error: end.err().map_or(0, |e| e.code()),
                    timestamp: TimestampMs::NONE,
                    offset: end.map_or(Offset::NONE, Offset),
                    leader_epoch: LeaderEpoch::NONE,
                });
            }
            out.push(ListOffsetsTopicResponse {
                name: t.name,
                partitions,
            });
        }
        return out;
    }
    let meta = shard.meta();
    let mut out = Vec::with_capacity(l.topics.len());
    for t in l.topics {
        let topic = meta.topic(&t.name);
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let known = topic.and_then(|x| x.partition(p.index));
            let mut r = ListOffsetsPartitionResponse {
                index: p.index,
                error: 0,
                timestamp: TimestampMs::NONE,
                offset: Offset::NONE,
                leader_epoch: known.map_or(LeaderEpoch::NONE, |k| LeaderEpoch(k.leader_epoch)),
            };
            if known.is_none() {
                r.error = ErrorCode::UnknownTopicOrPartition.code();
            } else if p.timestamp < MAX_TIMESTAMP || (p.timestamp == MAX_TIMESTAMP && v < 7) {
                r.error = ErrorCode::InvalidRequest.code();
            } else {
                let tp = TopicPartition::new(t.name.clone(), p.index);
                let epoch = (p.current_leader_epoch.0 >= 0).then_some(p.current_leader_epoch);
                match lookup(shard, tp, p.timestamp, (epoch, l.isolation)).await {
                    Ok((offset, ts)) => {
                        r.offset = Offset(offset);
                        r.timestamp = TimestampMs(ts);
                    }
                    Err(code) => r.error = code.code(),
                }
            }
            partitions.push(r);
        }
        out.push(ListOffsetsTopicResponse {
            name: t.name,
            partitions,
        });
    }
    out
}
