//! Writes any broker makes: admin requests (topic creation, partition
//! addition, deletion requests, config overrides, preferred elections,
//! reassignments), which the controller picks up through its watches; and a
//! leader's own ISR changes, conditional on the state version it was given,
//! announced under `/isr_change_notification`.

use std::collections::BTreeMap;

use ferrite_ids::TopicPartition;
use zookeeper_client::{Acls, CreateMode, Error as ZkError, MultiWriteError};

use super::store::{zk_err, ZkStore, PERSISTENT};
use super::{json, paths};
use crate::error::{ControllerError, Result};
use crate::metadata::BrokerId;
use crate::partition_state::{PartitionState, Versioned, ZkVersion};

/// How a leader's ISR write went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IsrWrite {
    Written(ZkVersion),
    /// The state moved on (a new leader epoch, or the controller changed
    /// it); the leader waits for the controller's LeaderAndIsr.
    Stale(Option<Versioned<PartitionState>>),
}

impl ZkStore {
    /// Creates a topic: its config overrides, then its assignment (which
    /// the controller watches). `TopicExists` if it is there already.
    pub async fn create_topic(
        &self,
        name: &str,
        id: &[u8; 16],
        replicas: &[Vec<BrokerId>],
        configs: &BTreeMap<String, String>,
    ) -> Result<()> {
        let topic_path = paths::topic(name);
        let config_path = paths::topic_config(name);
        let mut multi = self.client.new_multi_writer();
        let config = json::encode_config(configs);
        let assignment = json::encode_assignment(id, replicas);
        multi
            .add_create(&config_path, &config, &PERSISTENT)
            .map_err(zk_err("prepare", &config_path))?;
        multi
            .add_create(&topic_path, &assignment, &PERSISTENT)
            .map_err(zk_err("prepare", &topic_path))?;
        match multi.commit().await {
            Ok(_) => Ok(()),
            Err(MultiWriteError::OperationFailed {
                source: ZkError::NodeExists,
                ..
            }) => Err(ControllerError::TopicExists {
                topic: name.to_string(),
            }),
            Err(e) => Err(zk_err("create topic", &topic_path)(e.into())),
        }
    }

    /// Replaces a topic's assignment with one that has more partitions,
    /// conditional on the version the caller read.
    pub async fn add_partitions(
        &self,
        name: &str,
        id: &[u8; 16],
        replicas: &[Vec<BrokerId>],
        expected: ZkVersion,
    ) -> Result<()> {
        let path = paths::topic(name);
        let data = json::encode_assignment(id, replicas);
        match self.client.set_data(&path, &data, Some(expected.0)).await {
            Ok(_) => Ok(()),
            Err(ZkError::NoNode) => Err(ControllerError::UnknownTopic {
                topic: name.to_string(),
            }),
            Err(e) => Err(zk_err("add partitions", &path)(e)),
        }
    }

    /// Asks the controller to delete a topic.
    pub async fn request_deletion(&self, name: &str) -> Result<()> {
        let path = paths::deletion(name);
        match self.client.create(&path, &[], &PERSISTENT).await {
            Ok(_) | Err(ZkError::NodeExists) => Ok(()),
            Err(e) => Err(zk_err("request deletion", &path)(e)),
        }
    }

    /// Whether a topic's deletion is under way.
    pub async fn deletion_pending(&self, name: &str) -> Result<bool> {
        let path = paths::deletion(name);
        let stat = self.client.check_stat(&path).await.map_err(zk_err("exists", &path))?;
        Ok(stat.is_some())
    }

    /// Replaces a topic's config overrides.
    pub async fn set_topic_config(&self, name: &str, configs: &BTreeMap<String, String>) -> Result<()> {
        let path = paths::topic_config(name);
        let data = json::encode_config(configs);
        match self.client.set_data(&path, &data, None).await {
            Ok(_) => Ok(()),
            Err(ZkError::NoNode) => match self.client.create(&path, &data, &PERSISTENT).await {
                Ok(_) => Ok(()),
                Err(e) => Err(zk_err("create config", &path)(e)),
            },
            Err(e) => Err(zk_err("set config", &path)(e)),
        }
    }

    /// Asks for a preferred replica election. `Ok(false)`: one is under way.
    pub async fn request_preferred_election(&self, parts: &[TopicPartition]) -> Result<bool> {
        let data = json::encode_partition_list(parts);
        match self.client.create(paths::PREFERRED, &data, &PERSISTENT).await {
            Ok(_) => Ok(true),
            Err(ZkError::NodeExists) => Ok(false),
            Err(e) => Err(zk_err("request election", paths::PREFERRED)(e)),
        }
    }

    /// Adds moves to `/admin/reassign_partitions` (a later move of the same
    /// partition replaces the earlier).
    pub async fn request_reassignment(&self, moves: &[(TopicPartition, Vec<BrokerId>)]) -> Result<()> {
        loop {
            let current = self.data(paths::REASSIGN).await?;
            let mut merged: BTreeMap<TopicPartition, Vec<BrokerId>> = match &current {
                Some((data, _)) => json::decode_reassignment(data)
                    .map_err(super::store::bad(paths::REASSIGN))?
                    .into_iter()
                    .collect(),
                None => BTreeMap::new(),
            };
            merged.extend(moves.iter().cloned());
            let list: Vec<(TopicPartition, Vec<BrokerId>)> = merged.into_iter().collect();
            let data = json::encode_reassignment(&list);
            let written = match current {
                Some((_, stat)) => self
                    .client
                    .set_data(paths::REASSIGN, &data, Some(stat.version))
                    .await
                    .map(|_| ()),
                None => self
                    .client
                    .create(paths::REASSIGN, &data, &PERSISTENT)
                    .await
                    .map(|_| ()),
            };
            match written {
                Ok(()) => return Ok(()),
                Err(ZkError::BadVersion | ZkError::NodeExists | ZkError::NoNode) => continue,
                Err(e) => return Err(zk_err("request reassignment", paths::REASSIGN)(e)),
            }
        }
    }

    /// A leader's ISR change, conditional on the state version it knows.
    pub async fn update_isr(
        &self,
        tp: &TopicPartition,
        state: &PartitionState,
        expected: ZkVersion,
    ) -> Result<IsrWrite> {
        let path = paths::state(tp);
        match self
            .client
            .set_data(&path, &json::encode_state(state), Some(expected.0))
            .await
        {
            Ok(stat) => Ok(IsrWrite::Written(ZkVersion(stat.version))),
            Err(ZkError::BadVersion | ZkError::NoNode) => Ok(IsrWrite::Stale(self.partition_state(tp).await?)),
            Err(e) => Err(zk_err("update isr", &path)(e)),
        }
    }

    /// Tells the controller these partitions' ISRs changed.
    pub async fn notify_isr_change(&self, parts: &[TopicPartition]) -> Result<()> {
        let data = json::encode_partition_list(parts);
        let options = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
        let created = self.client.create(paths::ISR_CHANGE_PREFIX, &data, &options).await;
        created.map(|_| ()).map_err(zk_err("notify", paths::ISR_CHANGE_PREFIX))
    }

    /// Reads and removes ISR change notifications; returns the partitions
    /// they name.
    pub async fn take_isr_changes(&self, children: &[String]) -> Result<Vec<TopicPartition>> {
        let mut out = Vec::new();
        for child in children {
            let path = format!("{}/{child}", paths::ISR_CHANGES);
            if let Some((data, _)) = self.data(&path).await? {
                match json::decode_partition_list(&data) {
                    Ok(parts) => out.extend(parts),
                    Err(reason) => tracing::warn!(%path, %reason, "unreadable ISR change notification"),
                }
            }
            match self.client.delete(&path, None).await {
                Ok(()) | Err(ZkError::NoNode) => {}
                Err(e) => return Err(zk_err("delete", &path)(e)),
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

impl ZkStore {
    /// Tells the controller that `broker`'s logs of `parts` are damaged.
    pub async fn notify_damage(&self, broker: crate::metadata::BrokerId, parts: &[TopicPartition]) -> Result<()> {
        let data = json::encode_damage(broker, parts);
        let options = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
        let created = self.client.create(paths::DAMAGE_NOTICE_PREFIX, &data, &options).await;
        created
            .map(|_| ())
            .map_err(zk_err("notify", paths::DAMAGE_NOTICE_PREFIX))
    }

    /// Reads and removes damage notifications; returns the replicas they
    /// name.
    pub async fn take_damage_notices(
        &self,
        children: &[String],
    ) -> Result<Vec<(crate::metadata::BrokerId, TopicPartition)>> {
        let mut out = Vec::new();
        for child in children {
            let path = format!("{}/{child}", paths::DAMAGE_NOTICES);
            if let Some((data, _)) = self.data(&path).await? {
                match json::decode_damage(&data) {
                    Ok((broker, parts)) => out.extend(parts.into_iter().map(|tp| (broker, tp))),
                    Err(reason) => tracing::warn!(%path, %reason, "unreadable damage notification"),
                }
            }
            match self.client.delete(&path, None).await {
                Ok(()) | Err(ZkError::NoNode) => {}
                Err(e) => return Err(zk_err("delete", &path)(e)),
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

/// Attempts at reserving a producer id block against concurrent brokers.
const PRODUCER_ID_ATTEMPTS_MAX: usize = 20;

impl ZkStore {
    /// Reserves the next block of producer ids with a conditional write of
    /// `/latest_producer_id_block` (retried when another broker got there
    /// first).
    pub async fn allocate_producer_ids(&self, broker: BrokerId) -> Result<crate::producer_ids::ProducerIdBlock> {
        use crate::producer_ids::ProducerIdBlock;
        let path = paths::PRODUCER_ID_BLOCK;
        for _ in 0..PRODUCER_ID_ATTEMPTS_MAX {
            let current = self.data(path).await?;
            let previous = match &current {
                Some((data, _)) if !data.is_empty() => {
                    Some(
                        ProducerIdBlock::decode(data).map_err(|reason| ControllerError::BadZnode {
                            path: path.to_string(),
                            reason,
                        })?,
                    )
                }
                _ => None,
            };
            let next = ProducerIdBlock::after(previous.as_ref(), broker);
            let written = match &current {
                Some((_, stat)) => self
                    .client
                    .set_data(path, &next.encode(), Some(stat.version))
                    .await
                    .map(|_| ()),
                None => self.client.create(path, &next.encode(), &PERSISTENT).await.map(|_| ()),
            };
            match written {
                Ok(()) => return Ok(next),
                Err(ZkError::BadVersion | ZkError::NodeExists | ZkError::NoNode) => continue,
                Err(e) => return Err(zk_err("reserve producer ids", path)(e)),
            }
        }
        Err(ControllerError::Unavailable {
            reason: "producer id block: too many concurrent reservations".into(),
        })
    }
}
