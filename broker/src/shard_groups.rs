//! The shard's side of the group coordinator: what the coordinator asks of
//! the shard it runs on ([`GroupHost`]: where a `__consumer_offsets`
//! partition's writes go, which partitions it serves, the metadata), and
//! the shard's group clock. The coordinator itself (`groups/`) knows
//! nothing of [`BrokerShard`].

use std::rc::Rc;
use std::sync::Arc;

use ferrite_controller::ClusterMeta;
use ferrite_engine::{LeaderEpoch, TopicPartition};
use ferrite_replication::RoleKind;

use crate::groups::coordinator::{GroupHost, Sink, TICK_MS};
use crate::groups::{GroupError, OFFSETS_TOPIC};
use crate::shard::BrokerShard;

impl GroupHost for BrokerShard {
    fn offsets_sink(&self, p: i32) -> Result<Sink, GroupError> {
        let tp = TopicPartition::new(OFFSETS_TOPIC.to_string(), p);
        if let Some(replicas) = &self.replicas {
            let replica = replicas.get(&tp).ok_or(GroupError::NotCoordinator)?;
            if replica.role() != RoleKind::Leader {
                return Err(GroupError::NotCoordinator);
            }
            return Ok(Sink::Replica(replica));
        }
        let partition = |meta: &ClusterMeta| meta.topic(OFFSETS_TOPIC).and_then(|t| t.partition(p)).cloned();
        let Some(log) = self.local_log(&tp) else {
            // The topic exists but its log is not open here yet (start-up):
            // retriable, as a load in progress.
            return Err(if partition(&self.meta()).is_some() {
                GroupError::CoordinatorLoadInProgress
            } else {
                GroupError::CoordinatorNotAvailable
            });
        };
        let epoch = partition(&self.meta()).map(|pm| pm.leader_epoch).unwrap_or(0);
        Ok(Sink::Log(log, LeaderEpoch(epoch)))
    }

    fn serves_offsets(&self, p: i32) -> bool {
        let tp = TopicPartition::new(OFFSETS_TOPIC.to_string(), p);
        if self.owner(&tp) != self.id {
            return false;
        }
        match &self.replicas {
            Some(replicas) => replicas.get(&tp).is_some_and(|r| r.role() == RoleKind::Leader),
            None => self.logs.get(&tp).is_some(),
        }
    }

    fn cluster_meta(&self) -> Arc<ClusterMeta> {
        self.meta()
    }
}

/// The shard's group clock: session and rebalance timeouts every
/// [`TICK_MS`], offset expiry every `offsets.retention.check.interval.ms`.
/// Ends when the broker stops.
pub async fn run_group_clock(shard: Rc<BrokerShard>) {
    let mut expired_at = std::time::Instant::now();
    let expiry_every = std::time::Duration::from_millis(shard.groups.offsets.retention_check_interval_ms.max(1_000));
    while !shard.stopping.get() {
        glommio::timer::sleep(std::time::Duration::from_millis(TICK_MS)).await;
        shard.groups.tick(&*shard).await;
        if expired_at.elapsed() >= expiry_every {
            expired_at = std::time::Instant::now();
            shard.groups.expire_offsets(&*shard).await;
        }
    }
}
