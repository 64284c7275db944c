//! The group coordinator of one shard: the groups of the `__consumer_offsets`
//! partitions this shard owns (and, in a cluster, leads), loaded from those
//! partitions on first use and written back to them.
//!
//! A group lives on the partition `abs(java_hash(group)) % partitions`
//! (Kafka's rule, so tools agree on where a group is); requests reach the
//! shard owning that partition by message. Membership is the
//! [`Group`](ferrite_groups::group::Group) state machine; this driver gives it the
//! clock, keeps the waiting JoinGroup and SyncGroup answers, and makes
//! writes durable before answering: an offset commit is answered once its
//! record is appended (in a cluster, once the ISR has it), and a leader's
//! assignment once the group record is.
//!
//! In a cluster a partition's groups are (re)loaded whenever this broker
//! leads it under a leader epoch it has not loaded, so a broker that lost
//! and regained the leadership never serves what it held before.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use ferrite_controller::ClusterMeta;
use ferrite_engine::txn_state::Marker;
use ferrite_engine::{LeaderEpoch, Offset, PartitionLog, TopicPartition};
use ferrite_replication::MonoMs;
use tokio::sync::oneshot;

use ferrite_groups::error::GroupError;
use ferrite_groups::group::{Delivery, GroupConfig, JoinAnswer, SyncAnswer};
use ferrite_groups::offsets_format::{encode_group, encode_key, RecordKey};
use ferrite_groups::partition_state::{PartitionGroups, PendingOffset, Replayed};
pub use ferrite_groups::OffsetsConfig;
use ferrite_groups::OFFSETS_TOPIC;
use ferrite_protocol::errors::ErrorCode;

/// How often the groups' clocks run.
pub const TICK_MS: u64 = 100;
/// Coordinator writes in flight per partition.
const WRITES_INFLIGHT_MAX: u64 = 1024;
pub use crate::coordinator_log::WRITE_TIMEOUT_MS;

/// A loaded partition: its groups, and the leader epoch they were loaded
/// under (`None` for a standalone broker).
struct Slot {
    epoch: Option<LeaderEpoch>,
    groups: PartitionGroups,
}

/// What the coordinator needs of the shard it runs on, which implements it
/// (`shard_groups.rs`): where writes to a partition of `__consumer_offsets`
/// go, which of them it serves, and the cluster metadata.
pub trait GroupHost {
    /// Where writes for partition `p` go, if this shard serves it.
    fn offsets_sink(&self, p: i32) -> Result<Sink, GroupError>;
    /// Whether this shard serves partition `p`: owns it and leads it (in a
    /// cluster) or has its log (standalone).
    fn serves_offsets(&self, p: i32) -> bool;
    fn cluster_meta(&self) -> Arc<ClusterMeta>;
}

pub use crate::coordinator_log::Sink;
use crate::coordinator_log::{Loaded, Writer};
pub use ferrite_groups::KeyValue;

type Waiters<T> = RefCell<BTreeMap<(String, String), oneshot::Sender<T>>>;

pub struct GroupCoordinator {
    pub config: GroupConfig,
    pub offsets: OffsetsConfig,
    slots: RefCell<BTreeMap<i32, Slot>>,
    loading: glommio::sync::Semaphore,
    joins: Waiters<JoinAnswer>,
    syncs: Waiters<SyncAnswer>,
    origin: std::time::Instant,
    ids_made: Cell<u64>,
    gates: RefCell<BTreeMap<i32, Rc<glommio::sync::Semaphore>>>,
}

/// Kafka's `Utils.abs(group.hashCode()) % partitions`, with Java's
/// `String.hashCode` over UTF-16 code units.
pub fn partition_for(group: &str, partitions: i32) -> i32 {
    let mut h: i32 = 0;
    for unit in group.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(i32::from(unit));
    }
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions.max(1)
}

pub fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl GroupCoordinator {
    pub fn new(config: GroupConfig, offsets: OffsetsConfig) -> GroupCoordinator {
        GroupCoordinator {
            config,
            offsets,
            slots: RefCell::new(BTreeMap::new()),
            loading: glommio::sync::Semaphore::new(1),
            joins: RefCell::new(BTreeMap::new()),
            syncs: RefCell::new(BTreeMap::new()),
            origin: std::time::Instant::now(),
            ids_made: Cell::new(0),
            gates: RefCell::new(BTreeMap::new()),
        }
    }

    pub fn now(&self) -> MonoMs {
        MonoMs(self.origin.elapsed().as_millis() as u64)
    }

    pub fn partition_of(&self, group: &str) -> i32 {
        partition_for(group, self.offsets.partitions)
    }

    pub fn topic_partition(&self, group: &str) -> TopicPartition {
        TopicPartition::new(OFFSETS_TOPIC.to_string(), self.partition_of(group))
    }

    /// A new member id: the client id and 32 hex digits nobody else has.
    pub fn fresh_member_id(&self, client_id: &str) -> String {
        use std::hash::{BuildHasher, Hasher};
        let n = self.ids_made.get() + 1;
        self.ids_made.set(n);
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(n);
        h.write_u128(self.origin.elapsed().as_nanos());
        let a = h.finish();
        h.write_u64(a);
        let prefix: String = client_id.chars().take(64).collect();
        format!("{prefix}-{a:016x}{:016x}", h.finish())
    }

    /// Makes sure partition `p`'s groups are loaded for the current
    /// leadership, loading them from the log if not.
    pub async fn ensure_loaded(&self, host: &dyn GroupHost, p: i32) -> Result<(), GroupError> {
        let sink = host.offsets_sink(p)?;
        if self.slots.borrow().get(&p).is_some_and(|s| s.epoch == sink.epoch()) {
            return Ok(());
        }
        let _one = self
            .loading
            .acquire_permit(1)
            .await
            .map_err(|_| GroupError::CoordinatorNotAvailable)?;
        let sink = host.offsets_sink(p)?;
        if self.slots.borrow().get(&p).is_some_and(|s| s.epoch == sink.epoch()) {
            return Ok(());
        }
        let groups = self.load(sink.log(), p).await?;
        self.answer_dropped(p);
        self.slots.borrow_mut().insert(
            p,
            Slot {
                epoch: sink.epoch(),
                groups,
            },
        );
        Ok(())
    }

    /// Waiting requests of groups about to be replaced by a reload are told
    /// to find the coordinator again.
    fn answer_dropped(&self, p: i32) {
        let Some(old) = self.slots.borrow_mut().remove(&p) else {
            return;
        };
        for id in old.groups.groups.keys() {
            self.fail_waiters(id, GroupError::NotCoordinator);
        }
    }

    fn fail_waiters(&self, group: &str, error: GroupError) {
        let mut joins = self.joins.borrow_mut();
        let keys: Vec<_> = joins.keys().filter(|(g, _)| g == group).cloned().collect();
        for k in keys {
            if let Some(tx) = joins.remove(&k) {
                let _ = tx.send(JoinAnswer::refused(error, &k.1));
            }
        }
        let mut syncs = self.syncs.borrow_mut();
        let keys: Vec<_> = syncs.keys().filter(|(g, _)| g == group).cloned().collect();
        for k in keys {
            if let Some(tx) = syncs.remove(&k) {
                let _ = tx.send(SyncAnswer::refused(error));
            }
        }
    }

    async fn load(&self, log: &Rc<PartitionLog>, p: i32) -> Result<PartitionGroups, GroupError> {
        let start = std::time::Instant::now();
        let loaded = crate::coordinator_log::read_all(log, OFFSETS_TOPIC)
            .await
            .map_err(|e| load_failed(p, &e))?;
        let items = loaded.iter().flat_map(|b| -> Box<dyn Iterator<Item = Replayed<'_>>> {
            match b {
                Loaded::Records {
                    base_offset,
                    transaction,
                    records,
                } => Box::new(records.iter().map(move |(k, v)| {
                    let (k, v) = (k.as_deref(), v.as_deref());
                    match transaction {
                        Some(pid) => Replayed::Transactional(*base_offset, *pid, k, v),
                        None => Replayed::Record(*base_offset, k, v),
                    }
                })),
                Loaded::Marker { producer_id, result } => Box::new(std::iter::once(Replayed::Marker(
                    *producer_id,
                    *result == Marker::Commit,
                ))),
            }
        });
        let (groups, report) = PartitionGroups::replay(items, self.now());
        tracing::info!(
            partition = p,
            groups = groups.groups.len(),
            open_transactions = groups.pending_txns.len(),
            records = report.records,
            skipped = report.skipped,
            ms = start.elapsed().as_millis() as u64,
            "loaded group coordinator partition"
        );
        Ok(groups)
    }

    /// Runs `f` on the loaded state of partition `p`.
    pub fn with_groups<R>(&self, p: i32, f: impl FnOnce(&mut PartitionGroups) -> R) -> Result<R, GroupError> {
        let mut slots = self.slots.borrow_mut();
        let slot = slots.get_mut(&p).ok_or(GroupError::CoordinatorLoadInProgress)?;
        Ok(f(&mut slot.groups))
    }

    /// A producer's transaction ended with a marker (just appended) on
    /// partition `p`: its pending offsets count if it committed. Done again
    /// once a load that may have read the log before the marker (and
    /// replaced the state ended here) is over; a partition not loaded here
    /// replays the marker when it loads.
    pub async fn end_txn(&self, p: i32, producer_id: ferrite_engine::ProducerId, commit: bool) {
        let _ = self.with_groups(p, |pg| pg.end_txn(producer_id, commit));
        self.after_loads().await;
        let _ = self.with_groups(p, |pg| pg.end_txn(producer_id, commit));
    }

    /// Returns once no load is running (a load started later reads what
    /// was appended before this call).
    async fn after_loads(&self) {
        let _one = self.loading.acquire_permit(1).await;
    }

    /// The partitions of `group` that an open transaction holds an offset
    /// of (empty when the group's partition is not loaded).
    pub fn pending_offsets(&self, group: &str) -> std::collections::BTreeSet<(String, i32)> {
        let p = self.partition_of(group);
        self.with_groups(p, |pg| {
            pg.pending_txns
                .values()
                .flatten()
                .filter(|o| o.group == group)
                .map(|o| (o.topic.clone(), o.partition))
                .collect()
        })
        .unwrap_or_default()
    }

    /// Every loaded partition's number.
    pub fn loaded_partitions(&self) -> Vec<i32> {
        self.slots.borrow().keys().copied().collect()
    }

    /// Appends records (key, value or `None` for a tombstone) to partition
    /// `p`; returns once durable as the broker defines it (the ISR has them
    /// in a cluster). Writers go through [`GroupCoordinator::write`].
    async fn append(
        &self,
        host: &dyn GroupHost,
        p: i32,
        records: Vec<KeyValue>,
        writer: Writer,
    ) -> Result<Option<Offset>, GroupError> {
        if records.is_empty() {
            return Ok(None);
        }
        let sink = host.offsets_sink(p)?;
        // The cause is logged by the sink.
        sink.append(&records, writer, self.now())
            .await
            .map(Some)
            .map_err(|code| match code {
                ErrorCode::InvalidProducerEpoch => GroupError::InvalidProducerEpoch,
                _ => GroupError::CoordinatorNotAvailable,
            })
    }

    /// The write gate of partition `p`: every write holds one permit from
    /// its append until its effect is in memory, which bounds a partition's
    /// writes in flight. (The log cleaner compacts the topic below the high
    /// watermark, keeping offsets: it needs no gate.)
    fn gate(&self, p: i32) -> Rc<glommio::sync::Semaphore> {
        self.gates
            .borrow_mut()
            .entry(p)
            .or_insert_with(|| Rc::new(glommio::sync::Semaphore::new(WRITES_INFLIGHT_MAX)))
            .clone()
    }

    /// Appends `records` to partition `p` and, once they are durable,
    /// applies their effect to the loaded state, given where they were
    /// written (`None`: there was nothing to write).
    pub async fn write(
        &self,
        host: &dyn GroupHost,
        p: i32,
        records: Vec<KeyValue>,
        apply: impl FnOnce(&mut PartitionGroups, Option<Offset>),
    ) -> Result<(), GroupError> {
        let gate = self.gate(p);
        let _permit = gate
            .acquire_permit(1)
            .await
            .map_err(|_| GroupError::CoordinatorNotAvailable)?;
        let at = self.append(host, p, records, Writer::Coordinator).await?;
        self.with_groups(p, |pg| apply(pg, at))
    }

    /// Appends a producer's transactional `records` (TxnOffsetCommit) to
    /// partition `p`, their offsets pending (`pending`) from before the
    /// append until the transaction's marker (as Kafka: a marker that
    /// lands while the append completes finds them), and taken back if
    /// the append fails. A producer of an older epoch than the partition
    /// knows is refused (INVALID_PRODUCER_EPOCH).
    pub async fn write_txn(
        &self,
        host: &dyn GroupHost,
        p: i32,
        (records, writer): (Vec<KeyValue>, Writer),
        pending: Vec<PendingOffset>,
    ) -> Result<(), GroupError> {
        let Writer::Transaction { producer_id, .. } = writer else {
            return Err(GroupError::CoordinatorNotAvailable);
        };
        let gate = self.gate(p);
        let _permit = gate
            .acquire_permit(1)
            .await
            .map_err(|_| GroupError::CoordinatorNotAvailable)?;
        self.with_groups(p, |pg| pg.add_pending(producer_id, pending.clone()))?;
        let at = match self.append(host, p, records, writer).await {
            Ok(Some(at)) => at,
            Ok(None) => return Ok(()),
            Err(e) => {
                let _ = self.with_groups(p, |pg| pg.remove_pending(producer_id, &pending));
                return Err(e);
            }
        };
        // A load that read the log before this batch may have replaced the
        // state the offsets were added to: they are added again (once),
        // with where they were written.
        self.after_loads().await;
        self.with_groups(p, |pg| pg.ensure_pending(producer_id, &pending, at))
    }

    /// Registers a waiting JoinGroup answer.
    pub fn wait_join(&self, group: &str, member: &str) -> oneshot::Receiver<JoinAnswer> {
        let (tx, rx) = oneshot::channel();
        let old = self
            .joins
            .borrow_mut()
            .insert((group.to_string(), member.to_string()), tx);
        if let Some(old) = old {
            let _ = old.send(JoinAnswer::refused(GroupError::RebalanceInProgress, member));
        }
        rx
    }

    pub fn wait_sync(&self, group: &str, member: &str) -> oneshot::Receiver<SyncAnswer> {
        let (tx, rx) = oneshot::channel();
        let old = self
            .syncs
            .borrow_mut()
            .insert((group.to_string(), member.to_string()), tx);
        if let Some(old) = old {
            let _ = old.send(SyncAnswer::refused(GroupError::RebalanceInProgress));
        }
        rx
    }

    /// Writes the group's record if it changed, then hands out the answers
    /// that became ready. Answers to SyncGroup carry the write's failure.
    pub async fn settle(&self, host: &dyn GroupHost, p: i32, group: &str) {
        let taken = self.with_groups(p, |pg| {
            pg.groups.get_mut(group).map(|e| {
                let deliveries = e.group.take_deliveries();
                let snapshot = e.group.take_persist().then(|| e.group.snapshot());
                (deliveries, snapshot)
            })
        });
        let Ok(Some((deliveries, snapshot))) = taken else {
            return;
        };
        let mut write_error = None;
        if let Some(snap) = snapshot {
            let key = encode_key(&RecordKey::Group {
                group: group.to_string(),
            });
            let value = encode_group(&snap, wall_ms());
            write_error = self.write(host, p, vec![(key, Some(value))], |_, _| {}).await.err();
        }
        self.deliver(group, deliveries, write_error);
    }

    fn deliver(&self, group: &str, deliveries: Vec<Delivery>, write_error: Option<GroupError>) {
        for d in deliveries {
            match d {
                Delivery::Join { member_id, answer } => {
                    if let Some(tx) = self.joins.borrow_mut().remove(&(group.to_string(), member_id)) {
                        let _ = tx.send(answer);
                    }
                }
                Delivery::Sync { member_id, mut answer } => {
                    if let (Some(e), None) = (write_error, answer.error) {
                        answer = SyncAnswer::refused(e);
                    }
                    if let Some(tx) = self.syncs.borrow_mut().remove(&(group.to_string(), member_id)) {
                        let _ = tx.send(answer);
                    }
                }
            }
        }
    }

    /// Loads the `__consumer_offsets` partitions this shard serves and has
    /// not loaded (at start, and after becoming their leader), as Kafka
    /// does, so that ListGroups sees every group.
    async fn load_served(&self, host: &dyn GroupHost) {
        // By name, not by a walk over every partition the shard holds:
        // this runs every tick, on brokers of tens of thousands of them.
        let owned: Vec<i32> = (0..self.offsets.partitions)
            .filter(|p| host.serves_offsets(*p))
            .collect();
        for p in owned {
            let current = host.offsets_sink(p).map(|s| s.epoch());
            let loaded = self.slots.borrow().get(&p).map(|s| s.epoch);
            if let Ok(epoch) = current {
                if loaded != Some(epoch) {
                    if let Err(e) = self.ensure_loaded(host, p).await {
                        tracing::debug!(partition = p, error = %e, "group partition not loaded yet");
                    }
                }
            }
        }
    }

    /// One round of the groups' clocks on every loaded partition.
    pub async fn tick(&self, host: &dyn GroupHost) {
        self.load_served(host).await;
        let now = self.now();
        for p in self.loaded_partitions() {
            if host.offsets_sink(p).is_err() {
                // No longer ours (a new leader elsewhere): drop the state.
                self.answer_dropped(p);
                continue;
            }
            let groups = self
                .with_groups(p, |pg| {
                    for e in pg.groups.values_mut() {
                        e.group.tick(now, &self.config);
                    }
                    pg.groups.keys().cloned().collect::<Vec<String>>()
                })
                .unwrap_or_default();
            for g in groups {
                self.settle(host, p, &g).await;
            }
        }
    }
}

fn load_failed(p: i32, e: &ferrite_engine::EngineError) -> GroupError {
    tracing::error!(partition = p, error = %e, "loading group coordinator partition failed");
    GroupError::CoordinatorNotAvailable
}
