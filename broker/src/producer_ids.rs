//! Producer ids for InitProducerId, handed out from a block this shard
//! reserved cluster-wide (see `ferrite_controller::producer_ids`): from
//! ZooKeeper through the cluster thread, or from shard 0's embedded store.
//! A block is used up before the next is reserved; ids of a block left
//! unused at a restart are skipped, never reused.

use std::cell::Cell;
use std::rc::Rc;

use ferrite_controller::producer_ids::ProducerIdBlock;
use ferrite_engine::ShardId;

use crate::cluster::ClusterRequest;
use crate::shard::BrokerShard;

pub struct ProducerIds {
    next: Cell<i64>,
    /// Inclusive; below `next` when no block is held.
    end: Cell<i64>,
    refill: glommio::sync::Semaphore,
}

impl Default for ProducerIds {
    fn default() -> ProducerIds {
        ProducerIds {
            next: Cell::new(0),
            end: Cell::new(-1),
            refill: glommio::sync::Semaphore::new(1),
        }
    }
}

impl ProducerIds {
    /// A producer id no other producer of the cluster has.
    pub async fn next(&self, shard: &Rc<BrokerShard>) -> Result<i64, String> {
        loop {
            if self.next.get() <= self.end.get() {
                let id = self.next.get();
                self.next.set(id + 1);
                return Ok(id);
            }
            let _one = self.refill.acquire_permit(1).await.map_err(|e| e.to_string())?;
            if self.next.get() <= self.end.get() {
                continue;
            }
            let block = reserve(shard).await?;
            tracing::info!(
                start = block.block_start,
                end = block.block_end,
                "reserved producer ids"
            );
            self.next.set(block.block_start);
            self.end.set(block.block_end);
        }
    }
}

async fn reserve(shard: &Rc<BrokerShard>) -> Result<ProducerIdBlock, String> {
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
