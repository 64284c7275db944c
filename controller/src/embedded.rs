//! The embedded single-node metadata store of `ferrite standalone`: the
//! cluster's metadata in one JSON file, `<data dir>/metadata.json`, replaced
//! atomically (temp file, fsync, rename, directory fsync) on every change.
//! One broker, which is the controller and leads every partition.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::assignment::{self, Placement};
use crate::broker_config::{self, BrokerEntity};
use crate::error::{ControllerError, Result};
use crate::metadata::{BrokerId, BrokerMeta, ClusterMeta, PartitionMeta, TopicMeta};
use crate::topic;
use crate::topic_config;

pub const FILE_NAME: &str = "metadata.json";
/// A metadata file larger than this is refused rather than read.
const FILE_BYTES_MAX: u64 = 256 << 20;

pub struct EmbeddedStore {
    path: PathBuf,
    meta: ClusterMeta,
}

pub use crate::topic_config::ConfigOp;

impl EmbeddedStore {
    /// Loads `dir/metadata.json`, or starts a new cluster there. The broker's
    /// endpoint is taken from `broker` (it may change between runs).
    pub fn open(dir: &Path, broker: BrokerMeta) -> Result<EmbeddedStore> {
        let path = dir.join(FILE_NAME);
        std::fs::create_dir_all(dir).map_err(|e| io("create data directory", dir, e))?;
        let meta = match std::fs::File::open(&path) {
            Ok(f) => {
                let mut data = Vec::new();
                f.take(FILE_BYTES_MAX + 1)
                    .read_to_end(&mut data)
                    .map_err(|e| io("read metadata", &path, e))?;
                if data.len() as u64 > FILE_BYTES_MAX {
                    return Err(ControllerError::BadFile {
                        path,
                        reason: "larger than 256 MiB".into(),
                    });
                }
                let mut meta: ClusterMeta = serde_json::from_slice(&data).map_err(|e| ControllerError::BadFile {
                    path: path.clone(),
                    reason: e.to_string(),
                })?;
                meta.controller = broker.id;
                meta.brokers = vec![broker];
                meta
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ClusterMeta {
                version: 0,
                cluster_id: new_cluster_id()?,
                controller: broker.id,
                brokers: vec![broker],
                topics: BTreeMap::new(),
                broker_configs: BTreeMap::new(),
                scram_credentials: BTreeMap::new(),
                acls: Vec::new(),
            },
            Err(e) => return Err(io("open metadata", &path, e)),
        };
        let mut store = EmbeddedStore { path, meta };
        store.save()?;
        Ok(store)
    }

    pub fn meta(&self) -> &ClusterMeta {
        &self.meta
    }

    /// Creates a topic: checks the name, the counts and the configs, assigns
    /// replicas, and (unless `validate_only`) persists it.
    pub fn create_topic(
        &mut self,
        name: &str,
        placement: &Placement,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<TopicMeta> {
        topic::validate_name(name)?;
        if self.meta.topics.contains_key(name) {
            return Err(ControllerError::TopicExists {
                topic: name.to_string(),
            });
        }
        for (k, v) in &configs {
            topic_config::validate(k, v)?;
        }
        let brokers: Vec<_> = self.meta.brokers.iter().map(|b| b.id).collect();
        let assigned = assignment::place(name, placement, &brokers, 0, None, (0, 0))?;
        let t = TopicMeta {
            name: name.to_string(),
            id: random_bytes()?,
            partitions: assigned
                .into_iter()
                .enumerate()
                .map(|(p, replicas)| partition(p as i32, replicas))
                .collect(),
            configs,
        };
        if !validate_only {
            self.meta.topics.insert(name.to_string(), t.clone());
            self.save()?;
        }
        Ok(t)
    }

    pub fn delete_topic(&mut self, name: &str) -> Result<TopicMeta> {
        let t = self
            .meta
            .topics
            .remove(name)
            .ok_or_else(|| ControllerError::UnknownTopic {
                topic: name.to_string(),
            })?;
        self.save()?;
        Ok(t)
    }

    /// Grows topic `name` to `total` partitions, placed by hand when
    /// `manual` lists the new ones' replicas.
    pub fn create_partitions(
        &mut self,
        name: &str,
        total: i32,
        manual: Option<Vec<Vec<BrokerId>>>,
        validate_only: bool,
    ) -> Result<TopicMeta> {
        let brokers: Vec<_> = self.meta.brokers.iter().map(|b| b.id).collect();
        let t = self
            .meta
            .topics
            .get(name)
            .ok_or_else(|| ControllerError::UnknownTopic {
                topic: name.to_string(),
            })?;
        let have = t.partitions.len() as i32;
        let rf = t.partitions.first().map(|p| p.replicas.len()).unwrap_or(1);
        let placement = assignment::growth(name, have, total, rf, manual)?;
        let added = assignment::place(name, &placement, &brokers, have, Some(rf), (0, 0))?;
        let mut t = t.clone();
        for (i, replicas) in added.into_iter().enumerate() {
            t.partitions.push(partition(have + i as i32, replicas));
        }
        if !validate_only {
            self.meta.topics.insert(name.to_string(), t.clone());
            self.save()?;
        }
        Ok(t)
    }

    /// Takes back the partitions that growing topic `name` added, keeping
    /// its first `keep` (the count before it grew): the undo of a
    /// [`Self::create_partitions`] whose new logs could not all be created.
    /// Only that undo shrinks a topic; its offsets never reached a client.
    pub fn remove_added_partitions(&mut self, name: &str, keep: usize) -> Result<TopicMeta> {
        let t = self
            .meta
            .topics
            .get_mut(name)
            .ok_or_else(|| ControllerError::UnknownTopic {
                topic: name.to_string(),
            })?;
        assert!(keep >= 1, "a topic keeps at least one partition");
        t.partitions.retain(|p| (p.partition as usize) < keep);
        let t = t.clone();
        self.save()?;
        Ok(t)
    }

    /// Applies config changes to a topic, all or nothing.
    pub fn alter_configs(&mut self, name: &str, ops: &[ConfigOp], validate_only: bool) -> Result<TopicMeta> {
        let t = self
            .meta
            .topics
            .get(name)
            .ok_or_else(|| ControllerError::UnknownTopic {
                topic: name.to_string(),
            })?;
        let mut t = t.clone();
        topic_config::apply_ops(&mut t.configs, ops)?;
        if !validate_only {
            self.meta.topics.insert(name.to_string(), t.clone());
            self.save()?;
        }
        Ok(t)
    }

    /// Applies dynamic config changes to a broker (or to the cluster's
    /// default), all or nothing; returns the entity's configs after.
    pub fn alter_broker_configs(
        &mut self,
        entity: BrokerEntity,
        ops: &[ConfigOp],
        validate_only: bool,
    ) -> Result<BTreeMap<String, String>> {
        let mut configs = self.meta.broker_configs.get(&entity).cloned().unwrap_or_default();
        broker_config::apply_ops(&mut configs, ops)?;
        if !validate_only {
            if configs.is_empty() {
                self.meta.broker_configs.remove(&entity);
            } else {
                self.meta.broker_configs.insert(entity, configs.clone());
            }
            self.save()?;
        }
        Ok(configs)
    }

    /// Sets (`Some`) or deletes (`None`) SCRAM credentials, (user,
    /// mechanism name, credential) each, all at once; the caller has
    /// checked them.
    pub fn alter_scram_credentials(&mut self, changes: &[(String, String, Option<String>)]) -> Result<()> {
        for (user, mechanism, credential) in changes {
            match credential {
                Some(c) => {
                    let user = self.meta.scram_credentials.entry(user.clone()).or_default();
                    user.insert(mechanism.clone(), c.clone());
                }
                None => {
                    if let Some(m) = self.meta.scram_credentials.get_mut(user) {
                        m.remove(mechanism);
                        if m.is_empty() {
                            self.meta.scram_credentials.remove(user);
                        }
                    }
                }
            }
        }
        self.save()
    }

    /// Adds `acls` (those already there stay once); removes those `remove`
    /// picks. Returns the ones removed.
    pub fn alter_acls(
        &mut self,
        add: &[crate::metadata::AclEntry],
        remove: &dyn Fn(&crate::metadata::AclEntry) -> bool,
    ) -> Result<Vec<crate::metadata::AclEntry>> {
        let (removed, mut kept): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.meta.acls).into_iter().partition(|a| remove(a));
        kept.extend(add.iter().cloned());
        kept.sort();
        kept.dedup();
        self.meta.acls = kept;
        self.save()?;
        Ok(removed)
    }

    /// Reserves the next block of producer ids (persisted before it is
    /// returned, so a restart never hands out the same ids again).
    pub fn allocate_producer_ids(&mut self) -> Result<crate::producer_ids::ProducerIdBlock> {
        use crate::producer_ids::ProducerIdBlock;
        let dir = self.path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let path = dir.join("producer-id-block");
        let previous = match std::fs::read(&path) {
            Ok(data) => Some(
                ProducerIdBlock::decode(&data).map_err(|reason| ControllerError::BadFile {
                    path: path.clone(),
                    reason,
                })?,
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io("read producer id block", &path, e)),
        };
        let next = ProducerIdBlock::after(previous.as_ref(), self.meta.controller);
        write_durably(&path, &next.encode())?;
        Ok(next)
    }

    fn save(&mut self) -> Result<()> {
        self.meta.version += 1;
        let data = serde_json::to_vec_pretty(&self.meta).map_err(|e| ControllerError::BadFile {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        write_durably(&self.path, &data)
    }
}

/// Replaces `path` with `data`: a temporary file, fsync'd, renamed over it,
/// and the directory fsync'd.
fn write_durably(path: &Path, data: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    // Readable by the broker's user only: it holds the SCRAM credentials
    // (salted, but open to a dictionary attack offline).
    let mut f = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| io("create", &tmp, e))?
    };
    f.write_all(data).map_err(|e| io("write", &tmp, e))?;
    f.sync_all().map_err(|e| io("fsync", &tmp, e))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| io("rename", path, e))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io("fsync directory", dir, e))
}

fn partition(p: i32, replicas: Vec<crate::metadata::BrokerId>) -> PartitionMeta {
    PartitionMeta {
        partition: p,
        leader: replicas.first().copied(),
        leader_epoch: 0,
        isr: replicas.clone(),
        replicas,
    }
}

fn io(op: &'static str, path: &Path, source: std::io::Error) -> ControllerError {
    ControllerError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// 16 random bytes from the kernel.
pub fn random_bytes() -> Result<[u8; 16]> {
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| io("read", Path::new("/dev/urandom"), e))?;
    Ok(b)
}

/// A Kafka-style cluster id: a random UUID in URL-safe base64, 22 characters.
pub fn new_cluster_id() -> Result<String> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let b = random_bytes()?;
    let mut bits: u128 = u128::from_be_bytes(b);
    let mut out = Vec::with_capacity(22);
    for _ in 0..22 {
        out.push(ALPHABET[(bits & 63) as usize]);
        bits >>= 6;
    }
    Ok(String::from_utf8(out).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::BrokerId;

    fn spread(count: i32, replication_factor: i16) -> Placement {
        Placement::Spread {
            count,
            replication_factor,
        }
    }

    fn broker() -> BrokerMeta {
        BrokerMeta {
            id: BrokerId(0),
            host: "127.0.0.1".into(),
            port: 9092,
            rack: None,
        }
    }

    #[test]
    fn topics_persist_and_are_validated() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = EmbeddedStore::open(dir.path(), broker()).unwrap();
        let cluster = s.meta().cluster_id.clone();
        assert_eq!(cluster.len(), 22);
        let t = s.create_topic("orders", &spread(3, 1), BTreeMap::new(), false).unwrap();
        assert_eq!(t.partitions.len(), 3);
        assert!(t.partitions.iter().all(|p| p.leader == Some(BrokerId(0))));
        assert!(matches!(
            s.create_topic("orders", &spread(1, 1), BTreeMap::new(), false),
            Err(ControllerError::TopicExists { .. })
        ));
        assert!(matches!(
            s.create_topic("bad name", &spread(1, 1), BTreeMap::new(), false),
            Err(ControllerError::InvalidTopic { .. })
        ));
        assert!(matches!(
            s.create_topic("x", &spread(1, 3), BTreeMap::new(), false),
            Err(ControllerError::InvalidReplicationFactor { .. })
        ));
        assert!(s.create_topic("y", &spread(1, 1), BTreeMap::new(), true).is_ok());
        s.create_partitions("orders", 5, None, false).unwrap();
        s.alter_configs("orders", &[ConfigOp::Set("retention.ms".into(), "1000".into())], false)
            .unwrap();
        assert!(s
            .alter_configs("orders", &[ConfigOp::Set("retention.ms".into(), "soon".into())], false)
            .is_err());
        drop(s);
        let mut s = EmbeddedStore::open(dir.path(), broker()).unwrap();
        assert_eq!(s.meta().cluster_id, cluster);
        assert!(s.meta().topic("y").is_none(), "validate_only created nothing");
        let t = s.meta().topic("orders").unwrap();
        assert_eq!(t.partitions.len(), 5);
        assert_eq!(t.configs.get("retention.ms").map(String::as_str), Some("1000"));
        s.delete_topic("orders").unwrap();
        assert!(matches!(
            s.delete_topic("orders"),
            Err(ControllerError::UnknownTopic { .. })
        ));
    }

    #[test]
    fn added_partitions_are_taken_back_and_stay_gone() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = EmbeddedStore::open(dir.path(), broker()).unwrap();
        s.create_topic("grown", &spread(2, 1), BTreeMap::new(), false).unwrap();
        assert_eq!(
            s.create_partitions("grown", 6, None, false).unwrap().partitions.len(),
            6
        );
        let t = s.remove_added_partitions("grown", 2).unwrap();
        let numbers: Vec<i32> = t.partitions.iter().map(|p| p.partition).collect();
        assert_eq!(numbers, vec![0, 1]);
        drop(s);
        let mut s = EmbeddedStore::open(dir.path(), broker()).unwrap();
        assert_eq!(s.meta().topic("grown").unwrap().partitions.len(), 2);
        assert!(matches!(
            s.remove_added_partitions("other", 1),
            Err(ControllerError::UnknownTopic { .. })
        ));
        // The topic can grow again from where it was.
        assert_eq!(
            s.create_partitions("grown", 3, None, false).unwrap().partitions.len(),
            3
        );
    }
}
