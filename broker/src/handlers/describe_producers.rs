//! DescribeProducers (KIP-664): the producers a partition's leader knows,
//! each with its epoch, last sequence and timestamp and the first offset
//! of the transaction it has open there — how an operator finds a hanging
//! transaction (`ferrite transactions find-hanging` / `abort`).
//!
//! As in Kafka: READ on the topic (TOPIC_AUTHORIZATION_FAILED), only the
//! leader answers (NOT_LEADER_OR_FOLLOWER elsewhere), an unknown partition
//! is UNKNOWN_TOPIC_OR_PARTITION. A producer's coordinator epoch is its
//! last marker's (-1: none seen here).

use std::rc::Rc;

use ferrite_engine::TopicPartition;
use ferrite_protocol::describe_producers::{
    DescribeProducersRequest, DescribeProducersResponse, PartitionProducers, ProducerDescription,
};
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::response::ResponseBuilder;
use ferrite_protocol::topic_partitions::TopicPartitions;
use ferrite_security::acl::Operation;

use crate::error_map;
use crate::shard::BrokerShard;

/// The producers of `tp`, read on its owning shard.
async fn producers_of(shard: &Rc<BrokerShard>, tp: TopicPartition) -> Result<Vec<ProducerDescription>, ErrorCode> {
    let owner = shard.owner(&tp);
    shard
        .run_on(owner, move |s: Rc<BrokerShard>| async move {
            let (log, _) = super::list_offsets::leader_log(&s, &tp, None)?;
            Ok(log
                .active_producers()
                .into_iter()
                .map(|p| ProducerDescription {
                    producer_id: p.producer_id,
                    producer_epoch: i32::from(p.epoch),
                    last_sequence: p.last_sequence.unwrap_or(-1),
                    last_timestamp: p.last_timestamp.map_or(-1, |t| t.0),
                    coordinator_epoch: p.coordinator_epoch.unwrap_or(-1),
                    current_txn_start_offset: p.txn_start.map_or(-1, |o| o.0),
                })
                .collect())
        })
        .await
        .map_err(|e| error_map::engine(&e))?
}

pub async fn describe_producers(
    shard: &Rc<BrokerShard>,
    access: &super::access::Access,
    req: DescribeProducersRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    let meta = shard.meta();
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let allowed = access.allows_topic(Operation::Read, &t.topic);
        let topic = meta.topic(&t.topic);
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let result = if !allowed {
                Err(ErrorCode::TopicAuthorizationFailed)
            } else if topic.and_then(|x| x.partition(p)).is_none() {
                Err(ErrorCode::UnknownTopicOrPartition)
            } else {
                producers_of(shard, TopicPartition::new(t.topic.clone(), p)).await
            };
            let (error_code, active_producers) = match result {
                Ok(producers) => (0, producers),
                Err(e) => (e.code(), Vec::new()),
            };
            partitions.push(PartitionProducers {
                partition_index: p,
                error_code,
                error_message: None,
                active_producers,
            });
        }
        topics.push(TopicPartitions {
            topic: t.topic,
            partitions,
        });
    }
    DescribeProducersResponse {
        throttle_time_ms: 0,
        topics,
    }
    .encode(&mut b.w, v);
}
