//! Producer ids for InitProducerId, handed out from a block this shard
//! reserved cluster-wide (see `ferrite_controller::producer_ids`): from
//! ZooKeeper through the cluster thread, or from shard 0's embedded store.
//! A block is used up before the next is reserved; ids of a block left
//! unused at a restart are skipped, never reused. Where a block comes from
//! is the caller's (`handlers::init_producer_id::reserve_producer_ids`).

use std::cell::Cell;
use std::future::Future;

use ferrite_controller::producer_ids::ProducerIdBlock;
use ferrite_ids::ProducerId;

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
    /// A producer id no other producer of the cluster has; `reserve`
    /// reserves the next block when this one is used up.
    pub async fn next<F, Fut>(&self, reserve: F) -> Result<ProducerId, String>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<ProducerIdBlock, String>>,
    {
        loop {
            if self.next.get() <= self.end.get() {
                let id = self.next.get();
                self.next.set(id + 1);
                return Ok(ProducerId(id));
            }
            let _one = self.refill.acquire_permit(1).await.map_err(|e| e.to_string())?;
            if self.next.get() <= self.end.get() {
                continue;
            }
            let block = reserve().await?;
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
