//! The coordinator's operations, one per group API, run on the shard that
//! owns the group's `__consumer_offsets` partition.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::coordinator::{wall_ms, GroupCoordinator, GroupHost};
use crate::coordinator_log::Writer;
use ferrite_groups::error::GroupError;
use ferrite_groups::group::{GroupState, JoinAnswer, JoinRequest, Outcome, SyncAnswer, SyncRequest};
use ferrite_groups::offsets_format::{encode_key, encode_offset, CommittedOffset, RecordKey};
use ferrite_groups::partition_state::PendingOffset;

/// One partition's offset in an OffsetCommit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitEntry {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// Who commits: a member of the current generation, or (generation -1,
/// no member) a consumer that only stores offsets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committer {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
}

pub type PartitionResults = Vec<(String, i32, Result<(), GroupError>)>;
/// An offset as written: its partition and value.
type Written = ((String, i32), CommittedOffset);

/// A member as DescribeGroups shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDescription {
    pub state: &'static str,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<MemberDescription>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupListing {
    pub group_id: String,
    pub protocol_type: String,
    pub state: &'static str,
}

fn check_group_id(group: &str) -> Result<(), GroupError> {
    if group.is_empty() {
        return Err(GroupError::InvalidGroupId);
    }
    Ok(())
}

impl GroupCoordinator {
    pub async fn join(&self, host: &dyn GroupHost, group: &str, req: JoinRequest) -> JoinAnswer {
        let member = req.member_id.clone();
        if let Err(e) = check_group_id(group) {
            return JoinAnswer::refused(e, &member);
        }
        let p = self.partition_of(group);
        if let Err(e) = self.ensure_loaded(host, p).await {
            return JoinAnswer::refused(e, &member);
        }
        let fresh = self.fresh_member_id(&req.client_id);
        let now = self.now();
        let outcome = self.with_groups(p, |pg| {
            pg.get_or_create(group).group.join(req, fresh, now, &self.config)
        });
        let waiting = match outcome {
            Err(e) => return JoinAnswer::refused(e, &member),
            Ok(Outcome::Now(answer)) => {
                self.settle(host, p, group).await;
                return answer;
            }
            Ok(Outcome::Later { member_id }) => (self.wait_join(group, &member_id), member_id),
        };
        self.settle(host, p, group).await;
        let (rx, member_id) = waiting;
        rx.await
            .unwrap_or_else(|_| JoinAnswer::refused(GroupError::CoordinatorNotAvailable, &member_id))
    }

    pub async fn sync(&self, host: &dyn GroupHost, group: &str, req: SyncRequest) -> SyncAnswer {
        if let Err(e) = check_group_id(group) {
            return SyncAnswer::refused(e);
        }
        let p = self.partition_of(group);
        if let Err(e) = self.ensure_loaded(host, p).await {
            return SyncAnswer::refused(e);
        }
        let now = self.now();
        let outcome = self.with_groups(p, |pg| match pg.groups.get_mut(group) {
            Some(e) => e.group.sync(req, now),
            None => Outcome::Now(SyncAnswer::refused(GroupError::UnknownMemberId)),
        });
        let waiting = match outcome {
            Err(e) => return SyncAnswer::refused(e),
            Ok(Outcome::Now(answer)) => {
                self.settle(host, p, group).await;
                return answer;
            }
            Ok(Outcome::Later { member_id }) => self.wait_sync(group, &member_id),
        };
        self.settle(host, p, group).await;
        waiting
            .await
            .unwrap_or_else(|_| SyncAnswer::refused(GroupError::CoordinatorNotAvailable))
    }

    pub async fn heartbeat(
        &self,
        host: &dyn GroupHost,
        group: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), GroupError> {
        check_group_id(group)?;
        let p = self.partition_of(group);
        self.ensure_loaded(host, p).await?;
        let now = self.now();
        self.with_groups(p, |pg| match pg.groups.get_mut(group) {
            Some(e) => e.group.heartbeat(member_id, instance_id, generation, now),
            None => Err(GroupError::UnknownMemberId),
        })?
    }

    pub async fn leave(
        &self,
        host: &dyn GroupHost,
        group: &str,
        members: Vec<(String, Option<String>)>,
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        check_group_id(group)?;
        let p = self.partition_of(group);
        self.ensure_loaded(host, p).await?;
        let now = self.now();
        let results = self.with_groups(p, |pg| match pg.groups.get_mut(group) {
            Some(e) => e.group.leave(&members, now, &self.config),
            None => members.iter().map(|_| Err(GroupError::UnknownMemberId)).collect(),
        })?;
        self.settle(host, p, group).await;
        Ok(results)
    }

    pub async fn commit(
        &self,
        host: &dyn GroupHost,
        group: &str,
        who: Committer,
        entries: Vec<CommitEntry>,
    ) -> Result<PartitionResults, GroupError> {
        let p = self.partition_of(group);
        self.ensure_loaded(host, p).await?;
        let now = self.now();
        let checked = self.with_groups(p, |pg| match pg.groups.get_mut(group) {
            Some(e) => e
                .group
                .check_commit(&who.member_id, who.instance_id.as_deref(), who.generation, now),
            None if who.generation < 0 => Ok(()),
            None => Err(GroupError::IllegalGeneration),
        })?;
        checked?;
        let (mut results, records, written) = self.offset_records(host, group, entries);
        let written = self
            .write(host, p, records, |pg, at| {
                if let Some(at) = at {
                    pg.get_or_create(group).set_offsets(written, at);
                }
            })
            .await;
        if let Err(e) = written {
            for r in results.iter_mut().filter(|r| r.2.is_ok()) {
                r.2 = Err(e);
            }
        }
        Ok(results)
    }

    /// The records of an offset commit, each partition's check, and what
    /// the written records hold.
    fn offset_records(
        &self,
        host: &dyn GroupHost,
        group: &str,
        entries: Vec<CommitEntry>,
    ) -> (PartitionResults, Vec<super::KeyValue>, Vec<Written>) {
        let meta = host.cluster_meta();
        let stamp = wall_ms();
        let mut results = Vec::with_capacity(entries.len());
        let mut records = Vec::new();
        let mut written = Vec::new();
        for c in entries {
            let metadata = c.metadata.clone().unwrap_or_default();
            let known = meta.topic(&c.topic).and_then(|t| t.partition(c.partition)).is_some();
            let check = if metadata.len() > self.offsets.metadata_bytes_max {
                Err(GroupError::OffsetMetadataTooLarge)
            } else if !known {
                Err(GroupError::UnknownTopicOrPartition)
            } else {
                Ok(())
            };
            if check.is_ok() {
                let value = CommittedOffset {
                    offset: c.offset,
                    leader_epoch: c.leader_epoch,
                    metadata,
                    commit_timestamp_ms: stamp,
                };
                let key = RecordKey::Offset {
                    group: group.to_string(),
                    topic: c.topic.clone(),
                    partition: c.partition,
                };
                records.push((encode_key(&key), Some(encode_offset(&value))));
                written.push(((c.topic.clone(), c.partition), value));
            }
            results.push((c.topic, c.partition, check));
        }
        (results, records, written)
    }

    /// TxnOffsetCommit: a producer's offsets, written as part of its
    /// transaction; they count once its commit marker reaches this
    /// partition (`end_txn`). A member's generation is checked when given.
    pub async fn txn_commit(
        &self,
        host: &dyn GroupHost,
        group: &str,
        (who, producer): (Committer, Writer),
        entries: Vec<CommitEntry>,
    ) -> Result<PartitionResults, GroupError> {
        let p = self.partition_of(group);
        self.ensure_loaded(host, p).await?;
        let now = self.now();
        if who.generation >= 0 {
            let checked = self.with_groups(p, |pg| match pg.groups.get_mut(group) {
                Some(e) => e
                    .group
                    .check_commit(&who.member_id, who.instance_id.as_deref(), who.generation, now),
                None => Err(GroupError::IllegalGeneration),
            })?;
            checked?;
        }
        let (mut results, records, written) = self.offset_records(host, group, entries);
        let pending = written
            .into_iter()
            .map(|((topic, partition), offset)| PendingOffset {
                group: group.to_string(),
                topic,
                partition,
                offset,
                position: None,
            })
            .collect();
        let done = self.write_txn(host, p, (records, producer), pending).await;
        if let Err(e) = done {
            for r in results.iter_mut().filter(|r| r.2.is_ok()) {
                r.2 = Err(e);
            }
        }
        Ok(results)
    }

    /// Committed offsets: of the partitions named, or of every partition
    /// the group has committed (`None`).
    pub async fn fetch_offsets(
        &self,
        host: &dyn GroupHost,
        group: &str,
        wanted: Option<Vec<(String, Vec<i32>)>>,
    ) -> Result<Vec<(String, i32, Option<CommittedOffset>)>, GroupError> {
        let p = self.partition_of(group);
        self.ensure_loaded(host, p).await?;
        self.with_groups(p, |pg| {
            let offsets = pg.groups.get(group).map(|e| &e.offsets);
            match wanted {
                Some(topics) => topics
                    .into_iter()
                    .flat_map(|(t, parts)| parts.into_iter().map(move |q| (t.clone(), q)))
                    .map(|(t, q)| {
                        let o = offsets.and_then(|m| m.get(&(t.clone(), q))).cloned();
                        (t, q, o)
                    })
                    .collect(),
                None => offsets
                    .map(|m| m.iter().map(|((t, q), o)| (t.clone(), *q, Some(o.clone()))).collect())
                    .unwrap_or_default(),
            }
        })
    }

    pub async fn describe(&self, host: &dyn GroupHost, group: &str) -> Result<GroupDescription, GroupError> {
        let p = self.partition_of(group);
        self.ensure_loaded(host, p).await?;
        self.with_groups(p, |pg| {
            let Some(e) = pg.groups.get(group) else {
                return GroupDescription {
                    state: GroupState::Dead.name(),
                    protocol_type: String::new(),
                    protocol: String::new(),
                    members: Vec::new(),
                };
            };
            let g = &e.group;
            let protocol = g.protocol().unwrap_or_default().to_string();
            let stable = g.state() == GroupState::Stable;
            GroupDescription {
                state: g.state().name(),
                protocol_type: g.protocol_type().unwrap_or_default().to_string(),
                protocol: protocol.clone(),
                members: g
                    .members()
                    .map(|m| MemberDescription {
                        member_id: m.member_id.clone(),
                        instance_id: m.instance_id.clone(),
                        client_id: m.client_id.clone(),
                        client_host: m.client_host.clone(),
                        metadata: m.metadata_for(&protocol).cloned().unwrap_or_default(),
                        assignment: if stable { m.assignment.clone() } else { Bytes::new() },
                    })
                    .collect(),
            }
        })
    }

    /// The groups of every partition this shard has loaded.
    pub fn list(&self) -> Vec<GroupListing> {
        let mut out = Vec::new();
        for p in self.loaded_partitions() {
            let _ = self.with_groups(p, |pg| {
                for (id, e) in &pg.groups {
                    if e.group.state() == GroupState::Dead {
                        continue;
                    }
                    out.push(GroupListing {
                        group_id: id.clone(),
                        protocol_type: e.group.protocol_type().unwrap_or_default().to_string(),
                        state: e.group.state().name(),
                    });
                }
            });
        }
        out
    }

    /// Deletes an empty group and its offsets.
    pub async fn delete(&self, host: &dyn GroupHost, group: &str) -> Result<(), GroupError> {
        let p = self.partition_of(group);
        self.ensure_loaded(host, p).await?;
        let keys = self.with_groups(p, |pg| {
            let Some(e) = pg.groups.get(group) else {
                return Err(GroupError::GroupIdNotFound);
            };
            match e.group.state() {
                GroupState::Empty => {}
                GroupState::Dead => return Err(GroupError::GroupIdNotFound),
                _ => return Err(GroupError::NonEmptyGroup),
            }
            Ok(e.offsets.keys().cloned().collect::<Vec<_>>())
        })??;
        let mut records: Vec<super::coordinator::KeyValue> = keys
            .into_iter()
            .map(|(topic, partition)| {
                let key = RecordKey::Offset {
                    group: group.to_string(),
                    topic,
                    partition,
                };
                (encode_key(&key), None)
            })
            .collect();
        records.push((
            encode_key(&RecordKey::Group {
                group: group.to_string(),
            }),
            None,
        ));
        self.write(host, p, records, |pg, _| {
            if let Some(mut e) = pg.groups.remove(group) {
                e.group.mark_dead();
            }
        })
        .await
    }

    /// Deletes committed offsets of partitions the group no longer consumes.
    pub async fn delete_offsets(
        &self,
        host: &dyn GroupHost,
        group: &str,
        partitions: Vec<(String, i32)>,
    ) -> Result<PartitionResults, GroupError> {
        let p = self.partition_of(group);
        self.ensure_loaded(host, p).await?;
        let subscribed = self.with_groups(p, |pg| {
            let Some(e) = pg.groups.get(group) else {
                return Err(GroupError::GroupIdNotFound);
            };
            if e.group.state() == GroupState::Dead {
                return Err(GroupError::GroupIdNotFound);
            }
            Ok(subscribed_topics(&e.group))
        })??;
        let mut results = Vec::with_capacity(partitions.len());
        let mut records = Vec::new();
        for (topic, partition) in partitions {
            let r = if subscribed.contains(&topic) {
                Err(GroupError::GroupSubscribedToTopic)
            } else {
                let key = RecordKey::Offset {
                    group: group.to_string(),
                    topic: topic.clone(),
                    partition,
                };
                records.push((encode_key(&key), None));
                Ok(())
            };
            results.push((topic, partition, r));
        }
        self.write(host, p, records, |pg, _| {
            if let Some(e) = pg.groups.get_mut(group) {
                for (t, q, r) in &results {
                    if r.is_ok() {
                        e.remove_offset(&(t.clone(), *q));
                    }
                }
            }
        })
        .await?;
        Ok(results)
    }

    /// Removes offsets of deleted topics, and of groups that have been
    /// empty longer than `offsets.retention.minutes`; then the groups left
    /// with nothing.
    pub async fn expire_offsets(&self, host: &dyn GroupHost) {
        let meta = host.cluster_meta();
        let cutoff = wall_ms() - self.offsets.retention_ms.min(i64::MAX as u64) as i64;
        for p in self.loaded_partitions() {
            let doomed = self
                .with_groups(p, |pg| {
                    let mut doomed: BTreeMap<String, Vec<(String, i32)>> = BTreeMap::new();
                    for (id, e) in &pg.groups {
                        let empty = e.group.state() == GroupState::Empty;
                        for ((t, q), o) in &e.offsets {
                            let topic_gone = meta.topic(t).is_none();
                            if topic_gone || (empty && o.commit_timestamp_ms < cutoff) {
                                doomed.entry(id.clone()).or_default().push((t.clone(), *q));
                            }
                        }
                    }
                    doomed
                })
                .unwrap_or_default();
            for (group, parts) in doomed {
                let records = parts
                    .iter()
                    .map(|(topic, partition)| {
                        let key = RecordKey::Offset {
                            group: group.clone(),
                            topic: topic.clone(),
                            partition: *partition,
                        };
                        (encode_key(&key), None)
                    })
                    .collect();
                let removed = self
                    .write(host, p, records, |pg, _| {
                        if let Some(e) = pg.groups.get_mut(&group) {
                            for k in &parts {
                                e.remove_offset(k);
                            }
                        }
                    })
                    .await;
                if removed.is_ok() {
                    tracing::info!(group = %group, partitions = parts.len(), "expired committed offsets");
                }
            }
            let _ = self.with_groups(p, |pg| pg.drop_finished());
        }
    }
}

/// The topics a consumer group's members subscribe to, from their
/// subscriptions.
fn subscribed_topics(g: &ferrite_groups::group::Group) -> std::collections::BTreeSet<String> {
    use ferrite_protocol::consumer_protocol::Subscription;
    let mut out = std::collections::BTreeSet::new();
    if g.protocol_type() != Some("consumer") {
        return out;
    }
    let protocol = g.protocol().unwrap_or_default().to_string();
    for m in g.members() {
        if let Some(s) = m.metadata_for(&protocol).and_then(|b| Subscription::decode(b).ok()) {
            out.extend(s.topics);
        }
    }
    out
}
