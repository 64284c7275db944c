//! The ZooKeeper session and reads: connecting, the persistent parents, the
//! cluster id, broker registration, and reading topics, partition states and
//! admin requests (with or without one-shot watches). Runs on the cluster
//! thread's tokio runtime.

use std::collections::BTreeMap;
use std::time::Duration;

use ferrite_ids::TopicPartition;
use zookeeper_client::{Acls, Client, CreateMode, CreateOptions, Error as ZkError, OneshotWatcher, Stat};

use super::{json, paths};
use crate::control::{BrokerEpoch, ClusterSnapshot, LiveBroker, TopicAssignment};
use crate::error::{ControllerError, Result};
use crate::metadata::{BrokerId, BrokerMeta};
use crate::partition_state::{PartitionState, Versioned, ZkVersion};

pub(super) const PERSISTENT: CreateOptions<'static> = CreateMode::Persistent.with_acls(Acls::anyone_all());
pub(super) const EPHEMERAL: CreateOptions<'static> = CreateMode::Ephemeral.with_acls(Acls::anyone_all());

/// Most topics, brokers or admin children one read may return.
pub const CHILDREN_MAX: usize = 100_000;

pub(super) fn zk_err<'a>(op: &'static str, path: &'a str) -> impl FnOnce(ZkError) -> ControllerError + 'a {
    move |source| ControllerError::Zk {
        op,
        path: path.to_string(),
        source,
    }
}

pub(super) fn bad(path: &str) -> impl FnOnce(String) -> ControllerError + '_ {
    move |reason| ControllerError::BadZnode {
        path: path.to_string(),
        reason,
    }
}

fn bounded(path: &str, children: Vec<String>) -> Result<Vec<String>> {
    if children.len() > CHILDREN_MAX {
        return Err(bad(path)(format!(
            "{} children, more than {CHILDREN_MAX}",
            children.len()
        )));
    }
    Ok(children)
}

/// A connected ZooKeeper session.
#[derive(Clone)]
pub struct ZkStore {
    pub(super) client: Client,
}

impl ZkStore {
    /// Connects to `connect` (`host:port,…[/chroot]`) with a session that
    /// expires `session_timeout` after the servers last heard of it.
    pub async fn connect(connect: &str, session_timeout: Duration) -> Result<ZkStore> {
        let client = Client::connector()
            .with_session_timeout(session_timeout)
            .with_connection_timeout(session_timeout)
            .connect(connect)
            .await
            .map_err(zk_err("connect", connect))?;
        Ok(ZkStore { client })
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Creates the persistent parents that are missing.
    pub async fn ensure_paths(&self) -> Result<()> {
        for p in paths::PERSISTENT {
            self.client.mkdir(p, &PERSISTENT).await.map_err(zk_err("mkdir", p))?;
        }
        Ok(())
    }

    /// The cluster id, created from `fresh` by the first broker to ask.
    pub async fn cluster_id(&self, fresh: String) -> Result<String> {
        let path = paths::CLUSTER_ID;
        match self
            .client
            .create(path, &json::encode_cluster_id(&fresh), &PERSISTENT)
            .await
        {
            Ok(_) => return Ok(fresh),
            Err(ZkError::NodeExists) => {}
            Err(e) => return Err(zk_err("create", path)(e)),
        }
        let (data, _) = self.client.get_data(path).await.map_err(zk_err("get", path))?;
        json::decode_cluster_id(&data).map_err(bad(path))
    }

    /// Registers this broker (ephemeral `/brokers/ids/<id>`). A registration
    /// left by this broker's previous session goes when that session
    /// expires; until then, `NodeExists` is retried.
    pub async fn register_broker(&self, meta: &BrokerMeta, wait_max: Duration) -> Result<BrokerEpoch> {
        let path = paths::broker(meta.id);
        let data = json::encode_broker(meta);
        let deadline = tokio::time::Instant::now() + wait_max;
        loop {
            match self.client.create(&path, &data, &EPHEMERAL).await {
                Ok((stat, _)) => return Ok(BrokerEpoch(stat.czxid)),
                Err(ZkError::NodeExists) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => return Err(zk_err("register", &path)(e)),
            }
        }
    }

    pub(super) async fn children(&self, path: &str) -> Result<Vec<String>> {
        match self.client.list_children(path).await {
            Ok(c) => bounded(path, c),
            Err(ZkError::NoNode) => Ok(Vec::new()),
            Err(e) => Err(zk_err("list", path)(e)),
        }
    }

    /// Children of `path`, and a watch that fires when they change.
    pub async fn watch_children(&self, path: &str) -> Result<(Vec<String>, OneshotWatcher)> {
        let (children, _, watcher) = self
            .client
            .get_and_watch_children(path)
            .await
            .map_err(zk_err("watch children", path))?;
        Ok((bounded(path, children)?, watcher))
    }

    /// `path`'s data if it exists, and a watch that fires when it is
    /// created, changed or deleted.
    pub async fn watch_data(&self, path: &str) -> Result<(Option<Vec<u8>>, OneshotWatcher)> {
        loop {
            match self.client.get_and_watch_data(path).await {
                Ok((data, _, w)) => return Ok((Some(data), w)),
                Err(ZkError::NoNode) => {}
                Err(e) => return Err(zk_err("watch", path)(e)),
            }
            let (stat, w) = self
                .client
                .check_and_watch_stat(path)
                .await
                .map_err(zk_err("exists", path))?;
            if stat.is_none() {
                return Ok((None, w));
            }
            // Created between the two calls: read it again.
        }
    }

    pub(super) async fn data(&self, path: &str) -> Result<Option<(Vec<u8>, Stat)>> {
        match self.client.get_data(path).await {
            Ok(d) => Ok(Some(d)),
            Err(ZkError::NoNode) => Ok(None),
            Err(e) => Err(zk_err("get", path)(e)),
        }
    }

    /// The registered brokers (a registration with unreadable content is
    /// skipped and logged).
    pub async fn brokers(&self, ids: &[String]) -> Result<Vec<LiveBroker>> {
        let mut out = Vec::with_capacity(ids.len());
        for child in ids {
            let Ok(id) = child.parse::<i32>() else { continue };
            let path = paths::broker(BrokerId(id));
            let Some((data, stat)) = self.data(&path).await? else {
                continue;
            };
            match json::decode_broker(BrokerId(id), &data) {
                Ok(meta) => out.push(LiveBroker {
                    meta,
                    epoch: BrokerEpoch(stat.czxid),
                }),
                Err(reason) => tracing::warn!(%path, %reason, "unreadable broker registration"),
            }
        }
        Ok(out)
    }

    pub async fn live_brokers(&self) -> Result<Vec<LiveBroker>> {
        let ids = self.children(paths::BROKER_IDS).await?;
        self.brokers(&ids).await
    }

    pub async fn topic_names(&self) -> Result<Vec<String>> {
        self.children(paths::TOPICS).await
    }

    /// A topic's assignment and config overrides; `None` if it is gone.
    /// Topics written without an id (by Kafka before 2.8) get one derived
    /// from their name, stable across reads.
    pub async fn topic(&self, name: &str) -> Result<Option<(TopicAssignment, ZkVersion)>> {
        let path = paths::topic(name);
        let Some((data, stat)) = self.data(&path).await? else {
            return Ok(None);
        };
        let (id, replicas) = json::decode_assignment(&data).map_err(bad(&path))?;
        let configs = self.topic_config(name).await?;
        let assignment = TopicAssignment {
            name: name.to_string(),
            id: id.unwrap_or_else(|| derived_topic_id(name)),
            replicas,
            configs,
        };
        Ok(Some((assignment, ZkVersion(stat.version))))
    }

    pub async fn topic_config(&self, name: &str) -> Result<BTreeMap<String, String>> {
        let path = paths::topic_config(name);
        match self.data(&path).await? {
            Some((data, _)) => json::decode_config(&data).map_err(bad(&path)),
            None => Ok(BTreeMap::new()),
        }
    }

    pub async fn partition_state(&self, tp: &TopicPartition) -> Result<Option<Versioned<PartitionState>>> {
        let path = paths::state(tp);
        let Some((data, stat)) = self.data(&path).await? else {
            return Ok(None);
        };
        let value = json::decode_state(&data).map_err(bad(&path))?;
        Ok(Some(Versioned {
            value,
            version: ZkVersion(stat.version),
        }))
    }

    pub async fn pending_deletions(&self) -> Result<Vec<String>> {
        self.children(paths::DELETE_TOPICS).await
    }

    pub async fn reassignments(&self) -> Result<Vec<(TopicPartition, Vec<BrokerId>)>> {
        match self.data(paths::REASSIGN).await? {
            Some((data, _)) => json::decode_reassignment(&data).map_err(bad(paths::REASSIGN)),
            None => Ok(Vec::new()),
        }
    }

    pub async fn preferred_election(&self) -> Result<Option<Vec<TopicPartition>>> {
        match self.data(paths::PREFERRED).await? {
            Some((data, _)) => json::decode_partition_list(&data)
                .map(Some)
                .map_err(bad(paths::PREFERRED)),
            None => Ok(None),
        }
    }

    /// Everything a new controller needs, read from ZooKeeper.
    pub async fn snapshot(&self, cluster_id: &str) -> Result<ClusterSnapshot> {
        let brokers = self.live_brokers().await?;
        let mut topics = Vec::new();
        let mut states = Vec::new();
        for name in self.topic_names().await? {
            let Some((t, _)) = self.topic(&name).await? else {
                continue;
            };
            for p in 0..t.replicas.len() {
                let tp = TopicPartition::new(name.clone(), p as i32);
                if let Some(s) = self.partition_state(&tp).await? {
                    states.push((tp, s));
                }
            }
            topics.push(t);
        }
        Ok(ClusterSnapshot {
            cluster_id: cluster_id.to_string(),
            brokers,
            topics,
            states,
            deletions: self.pending_deletions().await?,
            reassignments: self.reassignments().await?,
            preferred_election: self.preferred_election().await?,
            // The driver fills it in (it knows which broker it runs on).
            broker_unclean: None,
        })
    }
}

/// A stable id for a topic whose znode carries none.
fn derived_topic_id(name: &str) -> [u8; 16] {
    let mut id = [0u8; 16];
    let a = crc32c::crc32c(name.as_bytes());
    let b = crc32c::crc32c_append(a, b"ferrite-topic-id");
    id[..4].copy_from_slice(&a.to_be_bytes());
    id[4..8].copy_from_slice(&b.to_be_bytes());
    id
}
