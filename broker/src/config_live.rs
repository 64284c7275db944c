//! The broker settings in force while it runs: the settings it started
//! with (`server.properties`, `--override`), with the dynamic broker
//! configs over them (see `ferrite_controller::broker_config`).
//!
//! Each shard holds one [`LiveConfig`]. A dynamic change reaches it the way
//! metadata does — for `ferrite standalone`, shard 0's embedded store
//! changes and the new metadata (which carries the dynamic configs) goes to
//! every shard; in a cluster, the change is written to
//! `/config/brokers/<entity>`, announced under `/config/changes`, read
//! again by every broker's cluster thread and handed to its shards. A shard
//! that installs new dynamic configs composes its settings again and gives
//! every log and replica it has their new config, so a change is in force
//! on the broker that made it before its answer, and on the others within
//! the time they take to read the notification.
//!
//! What a change acts on: the topic defaults (`log.retention.ms`,
//! `log.segment.bytes`, `message.max.bytes`, `log.cleanup.policy`, …) for
//! every topic that does not override them, `min.insync.replicas` for
//! acks=all produces, `num.replica.fetchers` for the shard's fetchers, and,
//! on the controller, `unclean.leader.election.enable`.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use ferrite_controller::broker_config::{self, BrokerConfigs, BrokerEntity};
use ferrite_controller::embedded::ConfigOp;
use ferrite_controller::{topic_config, BrokerId, ClusterMeta, ControllerError};
use ferrite_engine::{LogConfig, ShardId};

use crate::shard::{broadcast, AdminError, BrokerShard};
use ferrite_config::BrokerConfig;
use ferrite_protocol::configs::ConfigSource;

/// The settings in force on one shard.
#[derive(Debug)]
pub struct LiveConfig {
    /// Every entity's dynamic configs, as the metadata store has them.
    pub dynamic: BrokerConfigs,
    /// The settings the broker started with, the dynamic ones over them.
    pub effective: BrokerConfig,
}

impl LiveConfig {
    /// The settings `fixed` (the broker's start-up settings) become with
    /// the dynamic configs `dynamic`. A dynamic value the broker cannot
    /// take (checked when stored, so only from a store written by another
    /// release) is logged and left out.
    pub fn compose(fixed: &BrokerConfig, dynamic: BrokerConfigs) -> LiveConfig {
        let mut effective = fixed.clone();
        for (k, v) in broker_config::layered(&dynamic, BrokerId(fixed.broker_id)) {
            let mut next = effective.clone();
            match next.apply(&[(k.clone(), v.clone())]) {
                Ok(_) => effective = next,
                Err(e) => tracing::warn!(key = %k, value = %v, error = %e, "dynamic broker config not applied"),
            }
        }
        LiveConfig { dynamic, effective }
    }

    /// The log config of a topic with `overrides`: the broker's defaults in
    /// force, the topic's overrides over them.
    pub fn topic_log_config(&self, topic: &str, overrides: &BTreeMap<String, String>) -> LogConfig {
        let broker_policy = self.effective.given.get("log.cleanup.policy");
        let mut c = match broker_policy {
            Some(p) if !overrides.contains_key("cleanup.policy") => {
                let mut o = overrides.clone();
                o.insert("cleanup.policy".into(), p.clone());
                topic_config::log_config(&self.effective.log, &o)
            }
            _ => topic_config::log_config(&self.effective.log, overrides),
        };
        if topic == crate::groups::OFFSETS_TOPIC || topic == ferrite_transactions::TRANSACTION_STATE_TOPIC {
            // Compacted whatever its stored configs say (topics created
            // before the cleaner existed say nothing): the coordinators
            // read them back as key → latest value tables.
            c.cleanup_policy = ferrite_engine::log_config::CleanupPolicy::Compact;
        }
        c
    }

    /// `min.insync.replicas` for a topic that does not override it.
    pub fn min_insync_replicas(&self) -> usize {
        self.effective.cluster.min_insync_replicas
    }

    /// The values a broker setting has, most specific first: this broker's
    /// dynamic value, the cluster's dynamic default, the start-up value.
    pub fn layers(&self, fixed: &BrokerConfig, name: &str) -> Vec<(ConfigSource, String)> {
        let dynamic = |entity| self.dynamic.get(&entity).and_then(|m| m.get(name)).cloned();
        let me = BrokerEntity::Broker(BrokerId(fixed.broker_id));
        [
            dynamic(me).map(|v| (ConfigSource::DynamicBroker, v)),
            dynamic(BrokerEntity::Default).map(|v| (ConfigSource::DynamicDefaultBroker, v)),
            fixed.given.get(name).map(|v| (ConfigSource::StaticBroker, v.clone())),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

impl BrokerShard {
    /// Changes the dynamic configs of `entity` and has them in force on
    /// every shard of this broker before returning.
    pub async fn alter_broker_configs(
        self: &Rc<Self>,
        entity: BrokerEntity,
        ops: Vec<ConfigOp>,
        validate_only: bool,
    ) -> Result<(), AdminError> {
        if let Some(cluster) = self.cluster().cloned() {
            return self
                .cluster_alter_broker_configs(&cluster, entity, ops, validate_only)
                .await;
        }
        let handle = self.handle.clone();
        let meta = self
            .handle
            .submit(ShardId(0), move |zero: Rc<BrokerShard>| async move {
                zero.alter_broker_configs_on_zero(entity, &ops, validate_only)
            })
            .await
            .map_err(AdminError::Engine)??;
        if let Some(meta) = meta {
            // A config change creates no partition (one that could not be
            // created was answered so when its topic was).
            broadcast(&handle, meta).await?;
        }
        Ok(())
    }

    fn alter_broker_configs_on_zero(
        &self,
        entity: BrokerEntity,
        ops: &[ConfigOp],
        validate_only: bool,
    ) -> Result<Option<Arc<ClusterMeta>>, ControllerError> {
        self.with_store(|store| {
            store.alter_broker_configs(entity, ops, validate_only)?;
            Ok((!validate_only).then(|| Arc::new(store.meta().clone())))
        })
    }

    /// Takes `dynamic` as the dynamic broker configs: when they differ from
    /// those in force, composes the settings again. The caller then gives
    /// the logs and replicas their configs (`apply_metadata`,
    /// `apply_topic_configs`).
    pub(crate) fn refresh_live(&self, dynamic: &BrokerConfigs) -> Rc<LiveConfig> {
        let live = self.live();
        if live.dynamic == *dynamic {
            return live;
        }
        let live = Rc::new(LiveConfig::compose(&self.config, dynamic.clone()));
        if self.id.0 == 0 {
            let layered = broker_config::layered(dynamic, self.broker_id());
            tracing::info!(dynamic = ?layered, "dynamic broker configs in force");
        }
        self.set_live(live.clone());
        if let Some(replicas) = &self.replicas {
            replicas
                .fetchers
                .set_per_leader(live.effective.cluster.num_replica_fetchers);
        }
        live
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn dynamic_values_win_over_static_ones_and_a_brokers_own_over_the_default() {
        let mut fixed = BrokerConfig {
            broker_id: 2,
            ..BrokerConfig::default()
        };
        fixed
            .apply(&[
                ("log.retention.hours".into(), "1".into()),
                ("min.insync.replicas".into(), "2".into()),
            ])
            .unwrap();
        let mut dynamic = BrokerConfigs::new();
        dynamic.insert(
            BrokerEntity::Default,
            map(&[("log.retention.ms", "5000"), ("message.max.bytes", "100")]),
        );
        dynamic.insert(BrokerEntity::Broker(BrokerId(2)), map(&[("message.max.bytes", "200")]));
        dynamic.insert(BrokerEntity::Broker(BrokerId(3)), map(&[("min.insync.replicas", "3")]));
        let live = LiveConfig::compose(&fixed, dynamic);
        assert_eq!(
            live.effective.log.retention_ms, 5000,
            "log.retention.ms beats log.retention.hours"
        );
        assert_eq!(live.effective.log.max_message_bytes, 200, "the broker's own value wins");
        assert_eq!(
            live.min_insync_replicas(),
            2,
            "another broker's value is not this one's"
        );
        let layers = live.layers(&fixed, "message.max.bytes");
        assert_eq!(layers[0], (ConfigSource::DynamicBroker, "200".to_string()));
        assert_eq!(layers[1], (ConfigSource::DynamicDefaultBroker, "100".to_string()));
        assert_eq!(
            live.layers(&fixed, "min.insync.replicas"),
            vec![(ConfigSource::StaticBroker, "2".to_string())]
        );
    }

    #[test]
    fn a_brokers_cleanup_policy_stands_in_for_a_topics() {
        use ferrite_engine::log_config::CleanupPolicy;
        let mut dynamic = BrokerConfigs::new();
        dynamic.insert(BrokerEntity::Default, map(&[("log.cleanup.policy", "compact")]));
        let live = LiveConfig::compose(&BrokerConfig::default(), dynamic);
        assert_eq!(
            live.topic_log_config("t", &BTreeMap::new()).cleanup_policy,
            CleanupPolicy::Compact,
            "compact only: nothing deleted"
        );
        let own = live.topic_log_config("t", &map(&[("cleanup.policy", "delete")]));
        assert_eq!(own.cleanup_policy, CleanupPolicy::Delete, "the topic's own policy wins");
        let offsets = live.topic_log_config(crate::groups::OFFSETS_TOPIC, &map(&[("cleanup.policy", "delete")]));
        assert_eq!(
            offsets.cleanup_policy,
            CleanupPolicy::Compact,
            "__consumer_offsets is always compacted"
        );
    }
}
