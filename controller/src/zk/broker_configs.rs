//! Dynamic broker configs in ZooKeeper, Kafka's layout:
//! `/config/brokers/<id>` for one broker and `/config/brokers/<default>` for
//! the cluster's default, each `{"version":1,"config":{…}}` as a topic's
//! config znode is. A change is a conditional write (the znode's version
//! read with it, so two brokers changing one entity at once cannot lose
//! either change), then a notification `brokers/<entity>` under
//! `/config/changes` (see `config_changes`), which every broker follows.

use std::collections::BTreeMap;

use zookeeper_client::Error as ZkError;

use super::store::{zk_err, ZkStore, PERSISTENT};
use super::{json, paths};
use crate::broker_config::{self, BrokerConfigs, BrokerEntity};
use crate::error::{ControllerError, Result};
use crate::topic_config::ConfigOp;

/// Attempts at a conditional write before giving up (each lost to another
/// writer of the same entity).
const ALTER_ATTEMPTS_MAX: usize = 16;

/// The entity a notification's entity path names (`brokers/<id>`,
/// `brokers/<default>`).
pub fn broker_entity_of(entity_path: &str) -> Option<BrokerEntity> {
    entity_path.strip_prefix("brokers/").and_then(BrokerEntity::parse)
}

impl ZkStore {
    /// One entity's dynamic configs (empty when it has none).
    pub async fn broker_config(&self, entity: BrokerEntity) -> Result<BTreeMap<String, String>> {
        let path = paths::broker_config(&entity.name());
        match self.data(&path).await? {
            Some((data, _)) if !data.is_empty() => {
                json::decode_config(&data).map_err(|reason| ControllerError::BadZnode {
                    path: path.clone(),
                    reason,
                })
            }
            _ => Ok(BTreeMap::new()),
        }
    }

    /// Every entity's dynamic configs (children with other names skipped).
    pub async fn all_broker_configs(&self) -> Result<BrokerConfigs> {
        let mut out = BrokerConfigs::new();
        for name in self.children(paths::BROKER_CONFIGS).await? {
            let Some(entity) = BrokerEntity::parse(&name) else {
                tracing::warn!(%name, "unknown entity under /config/brokers, skipped");
                continue;
            };
            let configs = self.broker_config(entity).await?;
            if !configs.is_empty() {
                out.insert(entity, configs);
            }
        }
        Ok(out)
    }

    /// Applies `ops` to an entity's dynamic configs, all or nothing, and
    /// (unless `validate_only`) announces the change; returns the configs
    /// after it.
    pub async fn alter_broker_config(
        &self,
        entity: BrokerEntity,
        ops: &[ConfigOp],
        validate_only: bool,
    ) -> Result<BTreeMap<String, String>> {
        let path = paths::broker_config(&entity.name());
        for _ in 0..ALTER_ATTEMPTS_MAX {
            let current = self.data(&path).await?;
            let mut configs = match &current {
                Some((data, _)) if !data.is_empty() => {
                    json::decode_config(data).map_err(|reason| ControllerError::BadZnode {
                        path: path.clone(),
                        reason,
                    })?
                }
                _ => BTreeMap::new(),
            };
            broker_config::apply_ops(&mut configs, ops)?;
            if validate_only {
                return Ok(configs);
            }
            let data = json::encode_config(&configs);
            let written = match &current {
                Some((_, stat)) => self.client.set_data(&path, &data, Some(stat.version)).await.map(|_| ()),
                None => self.client.create(&path, &data, &PERSISTENT).await.map(|_| ()),
            };
            match written {
                Ok(()) => {
                    // Stored: the change is made. A broker that misses the
                    // notification reads it at its next session.
                    let entity_path = format!("brokers/{}", entity.name());
                    if let Err(e) = self.announce_config_change(&entity_path).await {
                        tracing::warn!(%entity_path, error = %e, "announcing a broker config change");
                    }
                    return Ok(configs);
                }
                Err(ZkError::BadVersion | ZkError::NodeExists | ZkError::NoNode) => continue,
                Err(e) => return Err(zk_err("set broker config", &path)(e)),
            }
        }
        Err(ControllerError::Unavailable {
            reason: format!("{path}: too many concurrent changes"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::BrokerId;

    #[test]
    fn entity_paths_name_brokers_and_the_default() {
        assert_eq!(broker_entity_of("brokers/<default>"), Some(BrokerEntity::Default));
        assert_eq!(broker_entity_of("brokers/3"), Some(BrokerEntity::Broker(BrokerId(3))));
        assert_eq!(broker_entity_of("brokers/"), None);
        assert_eq!(broker_entity_of("topics/3"), None);
    }
}
