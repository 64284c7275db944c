//! Following config changes on the cluster thread: at each session's
//! start every topic's config and every dynamic broker config is read;
//! then each notification under `/config/changes`
//! (`ferrite_controller::zk::config_changes`) newer than the last one read
//! makes the broker read the config of the topic or broker entity it
//! names. What is read goes to [`ClusterShared`], which tells the shards;
//! each applies it to its logs, replicas and metadata (see
//! `BrokerShard::apply_topic_configs`).

use std::sync::Arc;
use std::time::Duration;

use ferrite_controller::driver::SessionHandle;
use ferrite_controller::zk::broker_configs::broker_entity_of;
use ferrite_controller::zk::config_changes::topic_of;
use ferrite_controller::ControllerError;
use tokio::sync::watch;

use super::{BrokerConfigsRead, ClusterShared, TopicConfigs};

/// Pause before following again after a ZooKeeper error.
const RETRY_MS: u64 = 1_000;

/// Follows config changes for as long as the cluster thread runs, through
/// every session `sessions` announces.
pub async fn follow(shared: Arc<ClusterShared>, mut sessions: watch::Receiver<Option<SessionHandle>>) {
    loop {
        let session = sessions.borrow_and_update().clone();
        let Some(session) = session else {
            if sessions.changed().await.is_err() {
                return;
            }
            continue;
        };
        tokio::select! {
            r = follow_session(&shared, &session) => {
                if let Err(e) = r {
                    tracing::warn!(error = %e, "following config changes");
                    tokio::time::sleep(Duration::from_millis(RETRY_MS)).await;
                }
            }
            changed = sessions.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

/// Reads every topic's config, then each change announced after it.
async fn follow_session(shared: &ClusterShared, s: &SessionHandle) -> Result<(), ControllerError> {
    // Listed before the configs are read: a change made in between is in
    // both, never in neither.
    let (changes, mut watcher) = s.store.watch_config_changes().await?;
    let mut last = changes.last().map(|c| c.sequence);
    shared.set_broker_configs(BrokerConfigsRead::All(s.store.all_broker_configs().await?));
    shared.set_topic_configs(TopicConfigs::All(s.store.all_topic_configs().await?));
    loop {
        watcher.changed().await;
        let (changes, next) = s.store.watch_config_changes().await?;
        watcher = next;
        if let Some(l) = last {
            // The last one read was deleted as old with newer ones behind
            // it: some in between may be gone unread.
            let missed = changes.first().is_some_and(|c| c.sequence > l) && changes.iter().all(|c| c.sequence != l);
            if missed {
                tracing::info!("config change notifications were deleted unread: reading every config");
                shared.set_broker_configs(BrokerConfigsRead::All(s.store.all_broker_configs().await?));
                shared.set_topic_configs(TopicConfigs::All(s.store.all_topic_configs().await?));
            }
        }
        let seen = last;
        for change in changes.iter().filter(|c| seen.is_none_or(|l| c.sequence > l)) {
            let entity = s.store.config_change_entity(change).await?;
            if let Some(topic) = entity.as_deref().and_then(topic_of) {
                let configs = s.store.topic_config(topic).await?;
                tracing::info!(%topic, ?configs, "topic config changed");
                shared.set_topic_configs(TopicConfigs::One(topic.to_string(), configs));
            }
            if let Some(entity) = entity.as_deref().and_then(broker_entity_of) {
                let configs = s.store.broker_config(entity).await?;
                tracing::info!(entity = %entity.name(), ?configs, "dynamic broker config changed");
                shared.set_broker_configs(BrokerConfigsRead::One(entity, configs));
            }
            last = Some(change.sequence);
        }
    }
}
