//! DeleteRecords: moves the log start of partitions up to an offset (-1:
//! the high watermark), deleting the records below it.
//!
//! As in Kafka: the caller needs DELETE on the topic; only the leader
//! answers (NOT_LEADER_OR_FOLLOWER elsewhere); an offset past the high
//! watermark is OFFSET_OUT_OF_RANGE; one at or below the log start changes
//! nothing; a topic whose `cleanup.policy` lacks `delete` answers
//! POLICY_VIOLATION, `__consumer_offsets` INVALID_TOPIC_EXCEPTION. The
//! answer is the leader's new log start: its followers take it from their
//! next fetch (Kafka waits until every replica has, up to the timeout).

use std::rc::Rc;

use ferrite_engine::{Offset, TopicPartition};
use ferrite_protocol::delete_records::{DeleteRecordsRequest, DeleteRecordsResponse, PartitionResult, HIGH_WATERMARK};
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::response::ResponseBuilder;
use ferrite_protocol::topic_partitions::TopicPartitions;

use crate::error_map;
use crate::shard::BrokerShard;

/// Deletes below `offset` on the owning shard; returns the new log start.
async fn delete_below(shard: &Rc<BrokerShard>, tp: TopicPartition, offset: i64) -> Result<i64, ErrorCode> {
    let owner = shard.owner(&tp);
    shard
        .run_on(owner, move |s: Rc<BrokerShard>| async move {
            let (log, hw) = super::list_offsets::leader_log(&s, &tp, None)?;
            if !log.config().cleanup_policy.deletes() {
                return Err(ErrorCode::PolicyViolation);
            }
            let target = match offset {
                HIGH_WATERMARK => hw,
                o if o < 0 || o > hw.0 => return Err(ErrorCode::OffsetOutOfRange),
                o => Offset(o),
            };
            log.delete_records(target)
                .await
                .map(|start| start.0)
                .map_err(|e| error_map::engine(&e))
        })
        .await
        .map_err(|e| error_map::engine(&e))?
}

pub async fn delete_records(
    shard: &Rc<BrokerShard>,
    access: &super::access::Access,
    req: DeleteRecordsRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    use ferrite_security::acl::Operation;
    let meta = shard.meta();
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let allowed = access.allows_topic(Operation::Delete, &t.topic);
        let topic = meta.topic(&t.topic);
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let result = if !allowed {
                Err(ErrorCode::TopicAuthorizationFailed)
            } else if t.topic == crate::groups::OFFSETS_TOPIC {
                Err(ErrorCode::InvalidTopicException)
            } else if topic.and_then(|x| x.partition(p.partition)).is_none() {
                Err(ErrorCode::UnknownTopicOrPartition)
            } else {
                let tp = TopicPartition::new(t.topic.clone(), p.partition);
                delete_below(shard, tp, p.offset).await
            };
            partitions.push(PartitionResult {
                partition: p.partition,
                low_watermark: *result.as_ref().unwrap_or(&-1),
                error_code: result.err().map_or(0, |e| e.code()),
            });
        }
        topics.push(TopicPartitions {
            topic: t.topic,
            partitions,
        });
    }
    DeleteRecordsResponse { topics }.encode(&mut b.w, v);
}
