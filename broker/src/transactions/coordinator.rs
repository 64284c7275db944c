//! The transaction coordinator of one shard: the transactional ids of the
//! `__transaction_state` partitions this shard owns (and, in a cluster,
//! leads), loaded from those partitions on first use.
//!
//! A transactional id lives on partition `abs(java_hash(id)) % partitions`
//! (Kafka's rule). Each change of an id's state is written to its
//! partition before it is taken as current and answered. While a write or
//! a transaction's completion is in flight the id is busy, and other
//! requests for it are answered CONCURRENT_TRANSACTIONS (the clients retry).
//!
//! Completing a transaction (after EndTxn, a timeout, or a new producer
//! instance) writes a marker to each of its partitions ([`super::markers`]),
//! then the Complete state. A partition loaded with a transaction in a
//! Prepare state completes it, so a coordinator that fails over finishes
//! what its predecessor decided.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use ferrite_engine::txn_state::Marker;
use ferrite_engine::{LeaderEpoch, ProducerId, TopicPartition};
use ferrite_replication::RoleKind;
use ferrite_transactions::log_format::{decode_key, decode_value, encode_key, encode_value};
use ferrite_transactions::metadata::{Caller, EndStep, InitStep};
use ferrite_transactions::{TxnConfig, TxnError, TxnMeta, TRANSACTION_STATE_TOPIC};

use crate::coordinator_log::{self, Loaded, Sink, TxnMarker, Writer};
use crate::groups::coordinator::{partition_for, wall_ms};
use crate::shard::BrokerShard;

/// Pause between two rounds of markers that did not all land.
const MARKER_RETRY_MS: u64 = 500;

/// A transactional id's state, and whether a change of it is in flight.
struct Entry {
    /// `None` while the id's first state is being written.
    meta: Option<TxnMeta>,
    busy: bool,
}

/// A loaded partition: its ids, and the leader epoch they were loaded under
/// (`None` standalone), which is the coordinator epoch of its markers.
struct Slot {
    epoch: Option<LeaderEpoch>,
    txns: BTreeMap<String, Entry>,
}

pub struct TxnCoordinator {
    pub config: TxnConfig,
    slots: RefCell<BTreeMap<i32, Slot>>,
    loading: glommio::sync::Semaphore,
    origin: std::time::Instant,
}

/// What a loaded transaction looks like from outside (Describe/List).
#[derive(Clone, Debug)]
pub struct TxnView {
    pub transactional_id: String,
    pub meta: TxnMeta,
}

impl TxnCoordinator {
    pub fn new(config: TxnConfig) -> TxnCoordinator {
        TxnCoordinator {
            config,
            slots: RefCell::new(BTreeMap::new()),
            loading: glommio::sync::Semaphore::new(1),
            origin: std::time::Instant::now(),
        }
    }

    pub fn partition_of(&self, transactional_id: &str) -> i32 {
        partition_for(transactional_id, self.config.partitions)
    }

    pub fn topic_partition(&self, transactional_id: &str) -> TopicPartition {
        TopicPartition::new(TRANSACTION_STATE_TOPIC, self.partition_of(transactional_id))
    }

    pub fn now(&self) -> ferrite_replication::MonoMs {
        ferrite_replication::MonoMs(self.origin.elapsed().as_millis() as u64)
    }

    /// Makes sure partition `p` is loaded for the current leadership.
    pub async fn ensure_loaded(&self, shard: &Rc<BrokerShard>, p: i32) -> Result<(), TxnError> {
        let sink = state_sink(shard, p)?;
        if self.slots.borrow().get(&p).is_some_and(|s| s.epoch == sink.epoch()) {
            return Ok(());
        }
        let _one = self
            .loading
            .acquire_permit(1)
            .await
            .map_err(|_| TxnError::CoordinatorNotAvailable)?;
        let sink = state_sink(shard, p)?;
        if self.slots.borrow().get(&p).is_some_and(|s| s.epoch == sink.epoch()) {
            return Ok(());
        }
        let txns = load(sink.log(), p).await?;
        // A reload under a new leader epoch of a partition this shard
        // still leads (the ISR changed, say): changes in flight go on and
        // settle into the new slot, and keep their ids busy meanwhile.
        let busy: BTreeSet<String> = self
            .slots
            .borrow()
            .get(&p)
            .map(|s| {
                s.txns
                    .iter()
                    .filter(|(_, e)| e.busy)
                    .map(|(id, _)| id.clone())
                    .collect()
            })
            .unwrap_or_default();
        let prepared: Vec<String> = txns
            .iter()
            .filter(|(id, m)| m.status.is_prepared() && !busy.contains(*id))
            .map(|(id, _)| id.clone())
            .collect();
        let entries = txns
            .into_iter()
            .map(|(id, meta)| {
                let busy = busy.contains(&id);
                (id, Entry { meta: Some(meta), busy })
            })
            .collect();
        self.slots.borrow_mut().insert(
            p,
            Slot {
                epoch: sink.epoch(),
                txns: entries,
            },
        );
        // What the previous coordinator decided and did not finish.
        for id in prepared {
            self.mark_busy(p, &id);
            spawn_completion(shard, p, id);
        }
        Ok(())
    }

    /// Runs `decide` on `id`'s state (`None`: unknown) unless a change of
    /// it is in flight; marks it busy when `decide` says a write follows.
    fn decide<T>(
        &self,
        p: i32,
        id: &str,
        decide: impl FnOnce(Option<&TxnMeta>) -> Result<(T, bool), TxnError>,
    ) -> Result<T, TxnError> {
        let mut slots = self.slots.borrow_mut();
        let slot = slots.get_mut(&p).ok_or(TxnError::CoordinatorLoadInProgress)?;
        let entry = slot.txns.get(id);
        if entry.is_some_and(|e| e.busy || e.meta.is_none()) {
            return Err(TxnError::ConcurrentTransactions);
        }
        let (out, writes) = decide(entry.and_then(|e| e.meta.as_ref()))?;
        if writes {
            slot.txns
                .entry(id.to_string())
                .or_insert(Entry {
                    meta: None,
                    busy: false,
                })
                .busy = true;
        }
        Ok(out)
    }

    fn mark_busy(&self, p: i32, id: &str) {
        if let Some(e) = self.slots.borrow_mut().get_mut(&p).and_then(|s| s.txns.get_mut(id)) {
            e.busy = true;
        }
    }

    /// Ends a change of `id`: its new state (`None`: the write failed, the
    /// old one stands; an id whose first write failed is forgotten).
    fn settle(&self, p: i32, id: &str, written: Option<TxnMeta>) {
        let mut slots = self.slots.borrow_mut();
        let Some(slot) = slots.get_mut(&p) else { return };
        match (slot.txns.get_mut(id), written) {
            (Some(e), Some(meta)) => {
                e.meta = Some(meta);
                e.busy = false;
            }
            (Some(e), None) if e.meta.is_some() => e.busy = false,
            (Some(_), None) => {
                slot.txns.remove(id);
            }
            // The slot was reloaded while the id's first state was written.
            (None, Some(meta)) => {
                slot.txns.insert(
                    id.to_string(),
                    Entry {
                        meta: Some(meta),
                        busy: false,
                    },
                );
            }
            (None, None) => {}
        }
    }

    /// Writes `meta` as `id`'s state (the id is busy); settles it.
    async fn write(&self, shard: &Rc<BrokerShard>, p: i32, id: &str, meta: TxnMeta) -> Result<(), TxnError> {
        let result = self.append_state(shard, p, id, &meta).await;
        self.settle(p, id, result.is_ok().then_some(meta));
        if result.is_err() {
            self.complete_if_left_prepared(shard, p, id);
        }
        result
    }

    /// After a failed write: a reload meanwhile may have read the record
    /// (in the local log though not acknowledged) and left the id in a
    /// Prepare state, skipped because it was busy: it is completed.
    fn complete_if_left_prepared(&self, shard: &Rc<BrokerShard>, p: i32, id: &str) {
        let prepared = {
            let mut slots = self.slots.borrow_mut();
            let entry = slots.get_mut(&p).and_then(|s| s.txns.get_mut(id));
            match entry {
                Some(e) if !e.busy && e.meta.as_ref().is_some_and(|m| m.status.is_prepared()) => {
                    e.busy = true;
                    true
                }
                _ => false,
            }
        };
        if prepared {
            spawn_completion(shard, p, id.to_string());
        }
    }

    /// Appends `meta` as `id`'s state to partition `p`.
    async fn append_state(&self, shard: &Rc<BrokerShard>, p: i32, id: &str, meta: &TxnMeta) -> Result<(), TxnError> {
        let sink = state_sink(shard, p)?;
        let record = (encode_key(id), Some(encode_value(meta)));
        sink.append(&[record], Writer::Coordinator, self.now())
            .await
            .map(|_| ())
            .map_err(|_| TxnError::CoordinatorNotAvailable)
    }

    /// Writes `meta` keeping `id` busy (a completion follows).
    async fn write_keeping_busy(
        &self,
        shard: &Rc<BrokerShard>,
        p: i32,
        id: &str,
        meta: TxnMeta,
    ) -> Result<(), TxnError> {
        self.write(shard, p, id, meta).await?;
        self.mark_busy(p, id);
        Ok(())
    }

    /// InitProducerId with a transactional id: its producer id and a
    /// raised epoch, fencing older instances.
    pub async fn init_producer_id(
        &self,
        shard: &Rc<BrokerShard>,
        id: &str,
        timeout_ms: i32,
        expected: Option<Caller>,
    ) -> Result<(ProducerId, i16), TxnError> {
        if id.is_empty() {
            return Err(TxnError::InvalidTransactionalId);
        }
        if timeout_ms <= 0 || timeout_ms > self.config.timeout_ms_max {
            return Err(TxnError::InvalidTransactionTimeout);
        }
        let p = self.partition_of(id);
        self.ensure_loaded(shard, p).await?;
        let now = wall_ms();
        let (step, current) = self.decide(p, id, |meta| {
            let step = TxnMeta::init(meta, timeout_ms, expected, now)?;
            let writes = !matches!(step, InitStep::Current);
            let current = meta.map(|m| (m.producer_id, m.producer_epoch));
            Ok(((step, current), writes))
        })?;
        match step {
            InitStep::Current => current.ok_or(TxnError::CoordinatorNotAvailable),
            InitStep::Write(meta) => {
                let answer = (meta.producer_id, meta.producer_epoch);
                self.write(shard, p, id, meta).await.map(|()| answer)
            }
            InitStep::FreshId => {
                let pid = match crate::handlers::init_producer_id::fresh_producer_id(shard).await {
                    Ok(pid) => pid,
                    Err(e) => {
                        self.settle(p, id, None);
                        return Err(e);
                    }
                };
                let meta = TxnMeta::fresh(pid, timeout_ms, now);
                self.write(shard, p, id, meta).await.map(|()| (pid, 0))
            }
            InitStep::AbortFirst(meta) => {
                self.write_keeping_busy(shard, p, id, meta).await?;
                spawn_completion(shard, p, id.to_string());
                Err(TxnError::ConcurrentTransactions)
            }
        }
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn.
    pub async fn add_partitions(
        &self,
        shard: &Rc<BrokerShard>,
        id: &str,
        caller: Caller,
        partitions: Vec<TopicPartition>,
    ) -> Result<(), TxnError> {
        let p = self.partition_of(id);
        self.ensure_loaded(shard, p).await?;
        let now = wall_ms();
        let next = self.decide(p, id, |meta| {
            let meta = meta.ok_or(TxnError::InvalidProducerIdMapping)?;
            let next = meta.add_partitions(caller, &partitions, now)?;
            let writes = next.is_some();
            Ok((next, writes))
        })?;
        match next {
            None => Ok(()),
            Some(meta) => self.write(shard, p, id, meta).await,
        }
    }

    /// KIP-890's verification of `partition` for `caller`'s transaction (see
    /// [`TxnMeta::verify`]), against the id's last written state even while
    /// a change is in flight (an AddPartitionsToTxn of other partitions
    /// does not hold up the produce to this one); an id whose first state
    /// is still being written is CONCURRENT_TRANSACTIONS.
    pub async fn verify(
        &self,
        shard: &Rc<BrokerShard>,
        id: &str,
        caller: Caller,
        partition: &TopicPartition,
    ) -> Result<(), TxnError> {
        let p = self.partition_of(id);
        self.ensure_loaded(shard, p).await?;
        let slots = self.slots.borrow();
        let slot = slots.get(&p).ok_or(TxnError::CoordinatorLoadInProgress)?;
        match slot.txns.get(id) {
            None => Err(TxnError::InvalidProducerIdMapping),
            Some(Entry { meta: None, .. }) => Err(TxnError::ConcurrentTransactions),
            Some(Entry { meta: Some(meta), .. }) => meta.verify(caller, partition),
        }
    }

    /// EndTxn: answered once the decision is written; the markers follow.
    pub async fn end_txn(
        &self,
        shard: &Rc<BrokerShard>,
        id: &str,
        caller: Caller,
        commit: bool,
    ) -> Result<(), TxnError> {
        let p = self.partition_of(id);
        self.ensure_loaded(shard, p).await?;
        let now = wall_ms();
        let step = self.decide(p, id, |meta| {
            let meta = meta.ok_or(TxnError::InvalidProducerIdMapping)?;
            let step = meta.end(caller, commit, now)?;
            let writes = matches!(step, EndStep::Prepare(_));
            Ok((step, writes))
        })?;
        match step {
            EndStep::Done => Ok(()),
            EndStep::Prepare(meta) => {
                self.write_keeping_busy(shard, p, id, meta).await?;
                spawn_completion(shard, p, id.to_string());
                Ok(())
            }
        }
    }

    /// Aborts the open transactions of the loaded partitions that are past
    /// their timeout, and drops partitions this shard no longer serves.
    pub async fn abort_expired(&self, shard: &Rc<BrokerShard>) {
        let now = wall_ms();
        let loaded: Vec<i32> = self.slots.borrow().keys().copied().collect();
        for p in loaded {
            if state_sink(shard, p).is_err() {
                self.slots.borrow_mut().remove(&p);
                continue;
            }
            let expired: Vec<String> = {
                let slots = self.slots.borrow();
                let Some(slot) = slots.get(&p) else { continue };
                slot.txns
                    .iter()
                    .filter(|(_, e)| !e.busy && e.meta.as_ref().is_some_and(|m| m.expire(now).is_some()))
                    .map(|(id, _)| id.clone())
                    .collect()
            };
            for id in expired {
                // Judged again now: the state may have moved on while an
                // earlier abort of this round was written.
                let abort = self.decide(p, &id, |meta| {
                    let abort = meta.and_then(|m| m.expire(now));
                    let writes = abort.is_some();
                    Ok((abort, writes))
                });
                let Ok(Some(abort)) = abort else { continue };
                tracing::info!(partition = p, transactional_id = %id, producer_id = %abort.producer_id,
                    "aborting a transaction past its timeout");
                if self.write_keeping_busy(shard, p, &id, abort).await.is_ok() {
                    spawn_completion(shard, p, id);
                }
            }
        }
    }

    /// Removes the state of the ids idle past `transactional.id.expiration.ms`
    /// (a tombstone in `__transaction_state`, then from memory), as Kafka
    /// does; a producer using one again starts over with a new producer id.
    pub async fn remove_expired_ids(&self, shard: &Rc<BrokerShard>) {
        let now = wall_ms();
        let expiration_ms = self.config.id_expiration_ms;
        let idle = |e: &Entry| !e.busy && e.meta.as_ref().is_some_and(|m| m.idle_past(now, expiration_ms));
        let expired: Vec<(i32, String)> = self
            .slots
            .borrow()
            .iter()
            .flat_map(|(p, slot)| {
                slot.txns
                    .iter()
                    .filter(|(_, e)| idle(e))
                    .map(|(id, _)| (*p, id.clone()))
            })
            .collect();
        for (p, id) in expired {
            // Judged again now: it may have been used meanwhile.
            let still = self.decide(p, &id, |meta| {
                let idle = meta.is_some_and(|m| m.idle_past(now, expiration_ms));
                Ok((idle, idle))
            });
            if still != Ok(true) {
                continue;
            }
            let removed = match state_sink(shard, p) {
                Ok(sink) => sink
                    .append(&[(encode_key(&id), None)], Writer::Coordinator, self.now())
                    .await
                    .is_ok(),
                Err(_) => false,
            };
            let mut slots = self.slots.borrow_mut();
            let Some(slot) = slots.get_mut(&p) else { continue };
            if removed {
                tracing::info!(partition = p, transactional_id = %id, "removed an expired transactional id");
                slot.txns.remove(&id);
            } else if let Some(e) = slot.txns.get_mut(&id) {
                e.busy = false;
            }
        }
    }

    /// Loads the partitions this shard serves and has not loaded, so a
    /// coordinator that takes over completes what was decided.
    pub async fn load_served(&self, shard: &Rc<BrokerShard>) {
        if shard.meta().topic(TRANSACTION_STATE_TOPIC).is_none() {
            return;
        }
        for p in 0..self.config.partitions {
            if !serves_state(shard, p) {
                continue;
            }
            let current = state_sink(shard, p).map(|s| s.epoch());
            let loaded = self.slots.borrow().get(&p).map(|s| s.epoch);
            if let Ok(epoch) = current {
                if loaded != Some(epoch) {
                    if let Err(e) = self.ensure_loaded(shard, p).await {
                        tracing::debug!(partition = p, error = %e, "transaction state partition not loaded yet");
                    }
                }
            }
        }
    }

    /// The state of `id` if this shard holds it.
    pub async fn describe(&self, shard: &Rc<BrokerShard>, id: &str) -> Result<TxnMeta, TxnError> {
        let p = self.partition_of(id);
        self.ensure_loaded(shard, p).await?;
        let slots = self.slots.borrow();
        let slot = slots.get(&p).ok_or(TxnError::CoordinatorLoadInProgress)?;
        slot.txns
            .get(id)
            .and_then(|e| e.meta.clone())
            .ok_or(TxnError::TransactionalIdNotFound)
    }

    /// Every transactional id this shard holds.
    pub fn list(&self) -> Vec<TxnView> {
        self.slots
            .borrow()
            .values()
            .flat_map(|s| s.txns.iter())
            .filter_map(|(id, e)| {
                Some(TxnView {
                    transactional_id: id.clone(),
                    meta: e.meta.clone()?,
                })
            })
            .collect()
    }

    fn prepared(&self, p: i32, id: &str) -> Option<(TxnMeta, i32)> {
        let slots = self.slots.borrow();
        let slot = slots.get(&p)?;
        let meta = slot.txns.get(id)?.meta.clone()?;
        let coordinator_epoch = slot.epoch.map_or(0, |e| e.0);
        meta.status.is_prepared().then_some((meta, coordinator_epoch))
    }

    /// Writes the markers of `id`'s prepared transaction until each has
    /// landed (or its partition is gone), then its Complete state.
    async fn complete(&self, shard: &Rc<BrokerShard>, p: i32, id: &str) {
        let Some((meta, coordinator_epoch)) = self.prepared(p, id) else {
            self.settle(p, id, None);
            return;
        };
        let marker = TxnMarker {
            producer_id: meta.producer_id,
            producer_epoch: meta.producer_epoch,
            result: if meta.status == ferrite_transactions::TxnStatus::PrepareCommit {
                Marker::Commit
            } else {
                Marker::Abort
            },
            coordinator_epoch,
        };
        let mut left: Vec<TopicPartition> = meta.partitions.iter().cloned().collect();
        while !left.is_empty() {
            if shard.stopping.get() || state_sink(shard, p).is_err() {
                // No longer the coordinator: the next one completes it.
                self.settle(p, id, None);
                return;
            }
            left = super::markers::write_all(shard, marker, left).await;
            if !left.is_empty() {
                glommio::timer::sleep(std::time::Duration::from_millis(MARKER_RETRY_MS)).await;
            }
        }
        // The Complete state, written until it is in (or this shard stops
        // being the coordinator: the next one completes it on load).
        let done = meta.complete(wall_ms());
        loop {
            if shard.stopping.get() || state_sink(shard, p).is_err() {
                self.settle(p, id, None);
                return;
            }
            match self.append_state(shard, p, id, &done).await {
                Ok(()) => {
                    self.settle(p, id, Some(done));
                    return;
                }
                Err(e) => {
                    tracing::warn!(partition = p, transactional_id = id, error = %e, "writing a transaction's completion failed; retrying");
                    glommio::timer::sleep(std::time::Duration::from_millis(MARKER_RETRY_MS)).await;
                }
            }
        }
    }
}

/// Completes `id`'s prepared transaction in the background.
fn spawn_completion(shard: &Rc<BrokerShard>, p: i32, id: String) {
    let shard = shard.clone();
    glommio::spawn_local(async move { shard.transactions.complete(&shard, p, &id).await }).detach();
}

/// Where writes to partition `p` of `__transaction_state` go, if this
/// shard serves it.
fn state_sink(shard: &BrokerShard, p: i32) -> Result<Sink, TxnError> {
    let tp = TopicPartition::new(TRANSACTION_STATE_TOPIC, p);
    if let Some(replicas) = &shard.replicas {
        let replica = replicas.get(&tp).ok_or(TxnError::NotCoordinator)?;
        if replica.role() != RoleKind::Leader {
            return Err(TxnError::NotCoordinator);
        }
        return Ok(Sink::Replica(replica));
    }
    let Some(log) = shard.local_log(&tp) else {
        return Err(if shard.meta().topic(TRANSACTION_STATE_TOPIC).is_some() {
            TxnError::CoordinatorLoadInProgress
        } else {
            TxnError::CoordinatorNotAvailable
        });
    };
    Ok(Sink::Log(log, LeaderEpoch(0)))
}

/// Whether this shard serves partition `p` of `__transaction_state`.
fn serves_state(shard: &BrokerShard, p: i32) -> bool {
    let tp = TopicPartition::new(TRANSACTION_STATE_TOPIC, p);
    if shard.owner(&tp) != shard.id {
        return false;
    }
    match &shard.replicas {
        Some(replicas) => replicas.get(&tp).is_some_and(|r| r.role() == RoleKind::Leader),
        None => shard.logs.get(&tp).is_some(),
    }
}

async fn load(log: &Rc<ferrite_engine::PartitionLog>, p: i32) -> Result<BTreeMap<String, TxnMeta>, TxnError> {
    let start = std::time::Instant::now();
    let batches = coordinator_log::read_all(log, TRANSACTION_STATE_TOPIC)
        .await
        .map_err(|e| {
            tracing::error!(partition = p, error = %e, "loading transaction state partition failed");
            TxnError::CoordinatorNotAvailable
        })?;
    let mut txns = BTreeMap::new();
    let mut skipped = 0u64;
    for b in batches {
        let Loaded::Records { records, .. } = b else { continue };
        for (key, value) in records {
            let Some(id) = key.and_then(|k| decode_key(&k).ok()) else {
                skipped += 1;
                continue;
            };
            match value.map(|v| decode_value(&v)) {
                None => {
                    txns.remove(&id);
                }
                Some(Ok(meta)) => {
                    txns.insert(id, meta);
                }
                Some(Err(_)) => skipped += 1,
            }
        }
    }
    tracing::info!(
        partition = p,
        transactional_ids = txns.len(),
        skipped,
        ms = start.elapsed().as_millis() as u64,
        "loaded transaction state partition"
    );
    Ok(txns)
}
