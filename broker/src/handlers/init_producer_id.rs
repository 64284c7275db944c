//! InitProducerId: a producer id and epoch for an idempotent producer
//! (from this shard's block of ids), or for a transactional one (from the
//! transaction coordinator, which fences older instances).

use std::rc::Rc;

use ferrite_controller::producer_ids::ProducerIdBlock;
use ferrite_ids::{ProducerId, ShardId};
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::response::ResponseBuilder;
use ferrite_security::acl::Operation;

use crate::cluster::ClusterRequest;
use crate::error_map;
use crate::handlers::access::Access;
use crate::shard::BrokerShard;

/// InitProducerId v4 is the first to know PRODUCER_FENCED.
const PRODUCER_FENCED_FROM: i16 = 4;

/// A producer id nobody else has, for a transactional id's first producer.
pub(crate) async fn fresh_producer_id(shard: &Rc<BrokerShard>) -> Result<ProducerId, ferrite_transactions::TxnError> {
    shard
        .producer_ids
        .next(|| reserve_producer_ids(shard))
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "no producer id");
            ferrite_transactions::TxnError::CoordinatorNotAvailable
        })
}

/// InitProducerId: for an idempotent producer a fresh producer id at epoch
/// 0 (a producer asking to bump its epoch gets a fresh id too, as Kafka
/// does without a transactional id); with a transactional id, the
/// transaction coordinator's answer.
pub async fn init_producer_id(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: ferrite_protocol::init_producer_id::InitProducerIdRequest,
    v: i16,
    b: &mut ResponseBuilder,
) {
    use ferrite_protocol::init_producer_id::InitProducerIdResponse;
    use ferrite_security::acl::ResourceType;
    let refused = |code: ErrorCode| InitProducerIdResponse {
        error_code: code.code(),
        producer_id: ProducerId::NONE,
        producer_epoch: -1,
    };
    // An idempotent producer needs IdempotentWrite on the cluster, or Write
    // on some topic (KIP-679).
    let idempotent =
        access.allows_cluster(Operation::IdempotentWrite) || access.allows_any(Operation::Write, ResourceType::Topic);
    let answer = match &req.transactional_id {
        Some(id) if !access.allows(Operation::Write, ResourceType::TransactionalId, id) => {
            refused(ErrorCode::TransactionalIdAuthorizationFailed)
        }
        Some(id) => match crate::handlers::transactions::init_producer_id(shard, access, id.clone(), &req).await {
            Ok((producer_id, producer_epoch)) => InitProducerIdResponse {
                error_code: 0,
                producer_id,
                producer_epoch,
            },
            Err(e) => refused(error_map::txn(e, v, PRODUCER_FENCED_FROM)),
        },
        None if !idempotent => refused(ErrorCode::ClusterAuthorizationFailed),
        None => match shard.producer_ids.next(|| reserve_producer_ids(shard)).await {
            Ok(id) => InitProducerIdResponse {
                error_code: 0,
                producer_id: id,
                producer_epoch: 0,
            },
            Err(e) => {
                tracing::warn!(error = %e, "no producer id");
                refused(ErrorCode::CoordinatorNotAvailable)
            }
        },
    };
    answer.encode(&mut b.w, v);
}

/// The next block of producer ids for this shard: from ZooKeeper through
/// the cluster thread, or from shard 0's embedded store.
async fn reserve_producer_ids(shard: &Rc<BrokerShard>) -> Result<ProducerIdBlock, String> {
    if let Some(cluster) = shard.cluster() {
        let answer = cluster
            .ask(|reply| ClusterRequest::AllocateProducerIds { reply })
            .await
            .ok_or_else(|| "the cluster thread is gone".to_string())?;
        return answer.map_err(|e| e.to_string());
    }
    let reserved = shard
        .handle
        .submit(ShardId(0), |zero: Rc<BrokerShard>| async move {
            zero.allocate_producer_ids().map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())?;
    reserved
}
