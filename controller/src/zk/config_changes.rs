//! Config change notifications, Kafka's `/config/changes`.
//!
//! A broker that changes a topic's config writes `/config/topics/<t>`, then
//! creates the sequential znode `/config/changes/config_change_<n>`
//! (`{"version":2,"entity_path":"topics/<t>"}`). Every broker watches the
//! children of `/config/changes` and, when they change, reads again the
//! configs of the entities that the notifications newer than the last it
//! read name. A broker whose session starts reads every topic's config, and
//! so does one that finds the last notification it read deleted with newer
//! ones behind it (it may have missed some). A topic created with configs
//! is announced too.
//!
//! The writer deletes the notifications older than the newest
//! [`CONFIG_CHANGES_KEPT_MAX`] (Kafka deletes them after 15 minutes).

use std::collections::BTreeMap;

use zookeeper_client::{Acls, CreateMode, Error as ZkError, OneshotWatcher};

use super::store::{zk_err, ZkStore};
use super::{json, paths};
use crate::error::Result;

/// Notifications kept under `/config/changes`.
pub const CONFIG_CHANGES_KEPT_MAX: u64 = 1000;

/// One notification: its znode name and its sequence number.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ConfigChange {
    pub sequence: u64,
    pub name: String,
}

/// The notifications among `children`, oldest first (other names skipped).
fn changes(children: Vec<String>) -> Vec<ConfigChange> {
    let prefix = paths::CONFIG_CHANGE_PREFIX
        .rsplit('/')
        .next()
        .unwrap_or("config_change_");
    let mut out: Vec<ConfigChange> = children
        .into_iter()
        .filter_map(|name| {
            let sequence = name.strip_prefix(prefix)?.parse().ok()?;
            Some(ConfigChange { sequence, name })
        })
        .collect();
    out.sort();
    out
}

/// The topic a notification's entity path names (`topics/<t>`).
pub fn topic_of(entity_path: &str) -> Option<&str> {
    entity_path.strip_prefix("topics/").filter(|t| !t.is_empty())
}

impl ZkStore {
    /// Writes a topic's whole config, then tells every broker.
    pub async fn set_topic_config_and_announce(&self, name: &str, configs: &BTreeMap<String, String>) -> Result<()> {
        self.set_topic_config(name, configs).await?;
        self.announce_config_change(&format!("topics/{name}")).await
    }

    /// Creates a notification naming `entity_path`, and deletes those older
    /// than the newest [`CONFIG_CHANGES_KEPT_MAX`].
    pub async fn announce_config_change(&self, entity_path: &str) -> Result<()> {
        let data = json::encode_config_change(entity_path);
        let options = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
        let prefix = paths::CONFIG_CHANGE_PREFIX;
        self.client
            .create(prefix, &data, &options)
            .await
            .map_err(zk_err("notify", prefix))?;
        let all = changes(
            self.client
                .list_children(paths::CONFIG_CHANGES)
                .await
                .map_err(zk_err("list", paths::CONFIG_CHANGES))?,
        );
        let newest = all.last().map_or(0, |c| c.sequence);
        for old in all.iter().filter(|c| c.sequence + CONFIG_CHANGES_KEPT_MAX <= newest) {
            let path = format!("{}/{}", paths::CONFIG_CHANGES, old.name);
            match self.client.delete(&path, None).await {
                Ok(()) | Err(ZkError::NoNode) => {}
                Err(e) => return Err(zk_err("delete", &path)(e)),
            }
        }
        Ok(())
    }

    /// The notifications, oldest first, and a watch that fires when one is
    /// added or removed.
    pub async fn watch_config_changes(&self) -> Result<(Vec<ConfigChange>, OneshotWatcher)> {
        let (children, watcher) = self.watch_children(paths::CONFIG_CHANGES).await?;
        Ok((changes(children), watcher))
    }

    /// The entity a notification names; `None` when it is gone (deleted as
    /// old) or unreadable (logged).
    pub async fn config_change_entity(&self, change: &ConfigChange) -> Result<Option<String>> {
        let path = format!("{}/{}", paths::CONFIG_CHANGES, change.name);
        let Some((data, _)) = self.data(&path).await? else {
            return Ok(None);
        };
        match json::decode_config_change(&data) {
            Ok(entity) => Ok(Some(entity)),
            Err(reason) => {
                tracing::warn!(%path, %reason, "unreadable config change notification");
                Ok(None)
            }
        }
    }

    /// Every topic's config overrides (an empty map for a topic without
    /// any).
    pub async fn all_topic_configs(&self) -> Result<BTreeMap<String, BTreeMap<String, String>>> {
        let mut out = BTreeMap::new();
        for topic in self.children(paths::TOPICS).await? {
            let configs = self.topic_config(&topic).await?;
            out.insert(topic, configs);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_are_ordered_by_sequence_and_others_skipped() {
        let got = changes(vec![
            "config_change_0000000010".into(),
            "config_change_0000000002".into(),
            "something_else".into(),
        ]);
        let seqs: Vec<u64> = got.iter().map(|c| c.sequence).collect();
        assert_eq!(seqs, vec![2, 10]);
    }

    #[test]
    fn entity_paths_name_topics() {
        assert_eq!(topic_of("topics/orders"), Some("orders"));
        assert_eq!(topic_of("topics/"), None);
        assert_eq!(topic_of("brokers/1"), None);
    }
}
