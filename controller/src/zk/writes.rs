//! Controller election and the controller's writes. Winning the election
//! means creating the ephemeral `/controller` and moving `/controller_epoch`
//! up by one, in one multi-op conditional on the epoch's version.
//! Every later controller write is a multi-op that first checks that
//! version ([`EpochGuard`]): once another broker has become controller and
//! moved the epoch on, the deposed one's writes fail as a whole
//! ([`ControllerError::NotController`]).

use ferrite_ids::TopicPartition;
use zookeeper_client::{CheckWriteError, Error as ZkError, MultiWriteError, MultiWriteResult};

use super::store::{bad, zk_err, ZkStore, EPHEMERAL, PERSISTENT};
use super::{json, paths};
use crate::control::{StateWrite, WriteOutcome, ZkChange};
use crate::error::{ControllerError, Result};
use crate::metadata::BrokerId;
use crate::partition_state::{ControllerEpoch, ZkVersion};

/// The controller epoch this controller won, and the version of
/// `/controller_epoch` that every write of its checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochGuard {
    pub epoch: ControllerEpoch,
    pub version: ZkVersion,
}

/// Most operations in one multi-op (ZooKeeper refuses requests over 1 MiB).
const MULTI_OPS_MAX: usize = 500;

impl ZkStore {
    /// The current controller, if any.
    pub async fn controller(&self) -> Result<Option<BrokerId>> {
        match self.data(paths::CONTROLLER).await? {
            Some((data, _)) => json::decode_controller(&data).map(Some).map_err(bad(paths::CONTROLLER)),
            None => Ok(None),
        }
    }

    pub async fn controller_epoch(&self) -> Result<Option<(ControllerEpoch, ZkVersion)>> {
        let Some((data, stat)) = self.data(paths::CONTROLLER_EPOCH).await? else {
            return Ok(None);
        };
        let epoch = json::decode_controller_epoch(&data).map_err(bad(paths::CONTROLLER_EPOCH))?;
        Ok(Some((epoch, ZkVersion(stat.version))))
    }

    /// Tries to become controller. `None`: another broker is.
    ///
    /// `/controller` is created and `/controller_epoch` bumped in one
    /// multi-op conditional on the epoch's version (as Kafka does since
    /// KAFKA-6082), so nobody sees the new controller beside the old epoch,
    /// and two brokers racing cannot both bump it.
    pub async fn try_elect(&self, id: BrokerId) -> Result<Option<EpochGuard>> {
        loop {
            let Some((epoch, version)) = self.controller_epoch().await? else {
                // The first election: the epoch starts at 0, so the first
                // controller's is 1.
                let data = json::encode_controller_epoch(ControllerEpoch(0));
                match self.client.create(paths::CONTROLLER_EPOCH, &data, &PERSISTENT).await {
                    Ok(_) | Err(ZkError::NodeExists) => continue,
                    Err(e) => return Err(zk_err("create", paths::CONTROLLER_EPOCH)(e)),
                }
            };
            let next = epoch.next();
            let mut multi = self.client.new_multi_writer();
            multi
                .add_create(paths::CONTROLLER, &json::encode_controller(id), &EPHEMERAL)
                .map_err(zk_err("prepare", paths::CONTROLLER))?;
            multi
                .add_set_data(
                    paths::CONTROLLER_EPOCH,
                    &json::encode_controller_epoch(next),
                    Some(version.0),
                )
                .map_err(zk_err("prepare", paths::CONTROLLER_EPOCH))?;
            match multi.commit().await {
                Ok(results) => {
                    let Some(MultiWriteResult::SetData { stat }) = results.get(1) else {
                        return Err(zk_err("elect", paths::CONTROLLER_EPOCH)(ZkError::UnexpectedError(
                            "the multi-op did not answer the epoch's new version".to_string(),
                        )));
                    };
                    tracing::info!(broker = id.0, epoch = %next, "became controller");
                    return Ok(Some(EpochGuard {
                        epoch: next,
                        version: ZkVersion(stat.version),
                    }));
                }
                // Another broker is controller.
                Err(MultiWriteError::OperationFailed {
                    source: ZkError::NodeExists,
                    ..
                }) => return Ok(None),
                // The epoch moved under us (an election raced ours): read again.
                Err(MultiWriteError::OperationFailed {
                    source: ZkError::BadVersion,
                    ..
                }) => continue,
                Err(e) => return Err(zk_err("elect", paths::CONTROLLER)(e.into())),
            }
        }
    }

    /// Gives up the controllership (deletes `/controller` if it is ours).
    pub async fn resign(&self, id: BrokerId) -> Result<()> {
        if self.controller().await? == Some(id) {
            match self.client.delete(paths::CONTROLLER, None).await {
                Ok(()) | Err(ZkError::NoNode) => {}
                Err(e) => return Err(zk_err("delete", paths::CONTROLLER)(e)),
            }
        }
        Ok(())
    }

    /// Conditional partition state writes, each checked against the epoch.
    pub async fn write_states(
        &self,
        guard: EpochGuard,
        writes: &[StateWrite],
    ) -> Result<Vec<(TopicPartition, WriteOutcome)>> {
        let mut out = Vec::with_capacity(writes.len());
        for chunk in writes.chunks(MULTI_OPS_MAX) {
            let futures = chunk.iter().map(|w| self.write_state(guard, w));
            for (w, r) in chunk.iter().zip(futures::future::join_all(futures).await) {
                out.push((w.partition.clone(), r?));
            }
        }
        Ok(out)
    }

    async fn write_state(&self, guard: EpochGuard, w: &StateWrite) -> Result<WriteOutcome> {
        let path = paths::state(&w.partition);
        let data = json::encode_state(&w.state);
        if w.expected.is_none() {
            let parent = paths::partition(&w.partition);
            self.client
                .mkdir(&parent, &PERSISTENT)
                .await
                .map_err(zk_err("mkdir", &parent))?;
        }
        let mut multi = self.guarded(guard)?;
        let added = match w.expected {
            None => multi.add_create(&path, &data, &PERSISTENT),
            Some(v) => multi.add_set_data(&path, &data, Some(v.0)),
        };
        added.map_err(zk_err("prepare", &path))?;
        match multi.commit().await {
            Ok(results) => {
                // A znode is created at version 0 (the multi's create stat
                // may be invalid: ZOOKEEPER-4026).
                let version = match results.first() {
                    Some(MultiWriteResult::SetData { stat }) => stat.version,
                    _ => 0,
                };
                Ok(WriteOutcome::Written(ZkVersion(version)))
            }
            Err(CheckWriteError::CheckFailed { .. }) => Err(ControllerError::NotController),
            Err(CheckWriteError::OperationFailed {
                source: ZkError::BadVersion | ZkError::NodeExists | ZkError::NoNode,
                ..
            }) => Ok(WriteOutcome::Conflict(self.partition_state(&w.partition).await?)),
            Err(e) => Err(zk_err("write", &path)(e.into())),
        }
    }

    fn guarded(&self, guard: EpochGuard) -> Result<zookeeper_client::CheckWriter<'_>> {
        let check = self
            .client
            .new_check_writer(paths::CONTROLLER_EPOCH, Some(guard.version.0));
        check.map_err(zk_err("check", paths::CONTROLLER_EPOCH))
    }

    /// Runs `ops` (path, data or `None` to delete) as guarded multi-ops.
    /// Deleting a znode that is already gone is not an error.
    async fn guarded_ops(&self, guard: EpochGuard, ops: &[(String, Option<Vec<u8>>)]) -> Result<()> {
        for chunk in ops.chunks(MULTI_OPS_MAX) {
            let mut remaining: Vec<&(String, Option<Vec<u8>>)> = chunk.iter().collect();
            while !remaining.is_empty() {
                let mut multi = self.guarded(guard)?;
                for (path, data) in &remaining {
                    let added = match data {
                        Some(d) => multi.add_set_data(path, d, None),
                        None => multi.add_delete(path, None),
                    };
                    added.map_err(zk_err("prepare", path))?;
                }
                match multi.commit().await {
                    Ok(_) => break,
                    Err(CheckWriteError::CheckFailed { .. }) => return Err(ControllerError::NotController),
                    Err(CheckWriteError::OperationFailed {
                        index,
                        source: ZkError::NoNode,
                    }) if remaining.get(index).is_some_and(|(_, d)| d.is_none()) => {
                        remaining.remove(index);
                    }
                    Err(e) => {
                        let path = remaining.first().map_or("", |(p, _)| p.as_str());
                        return Err(zk_err("multi", path)(e.into()));
                    }
                }
            }
        }
        Ok(())
    }

    /// Carries out a controller change, guarded by the epoch.
    pub async fn apply(&self, guard: EpochGuard, change: &ZkChange) -> Result<()> {
        match change {
            ZkChange::SetAssignment { topic, id, replicas } => {
                let data = json::encode_assignment(id, replicas);
                self.guarded_ops(guard, &[(paths::topic(topic), Some(data))]).await
            }
            ZkChange::DeleteTopic { topic } => self.delete_topic_znodes(guard, topic).await,
            ZkChange::DropDeletionRequest { topic } => self.guarded_ops(guard, &[(paths::deletion(topic), None)]).await,
            ZkChange::ReassignmentsLeft { moves } if moves.is_empty() => {
                self.guarded_ops(guard, &[(paths::REASSIGN.to_string(), None)]).await
            }
            ZkChange::ReassignmentsLeft { moves } => {
                let data = json::encode_reassignment(moves);
                match self.client.create(paths::REASSIGN, &data, &PERSISTENT).await {
                    Ok(_) => Ok(()),
                    Err(ZkError::NodeExists) => {
                        self.guarded_ops(guard, &[(paths::REASSIGN.to_string(), Some(data))])
                            .await
                    }
                    Err(e) => Err(zk_err("create", paths::REASSIGN)(e)),
                }
            }
            ZkChange::PreferredElectionDone => self.guarded_ops(guard, &[(paths::PREFERRED.to_string(), None)]).await,
        }
    }

    async fn delete_topic_znodes(&self, guard: EpochGuard, topic: &str) -> Result<()> {
        let mut ops = Vec::new();
        let parts_path = paths::partitions(topic);
        let partitions = match self.client.list_children(&parts_path).await {
            Ok(c) => c,
            Err(ZkError::NoNode) => Vec::new(),
            Err(e) => return Err(zk_err("list", &parts_path)(e)),
        };
        for p in partitions {
            let base = format!("{parts_path}/{p}");
            ops.push((format!("{base}/state"), None));
            ops.push((base, None));
        }
        ops.push((parts_path, None));
        ops.push((paths::topic(topic), None));
        ops.push((paths::topic_config(topic), None));
        ops.push((paths::deletion(topic), None));
        self.guarded_ops(guard, &ops).await
    }
}
