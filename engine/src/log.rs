//! A partition's log: an ordered run of segments, the offsets that describe
//! it, and the append path.
//!
//! # Ownership and concurrency
//!
//! A `PartitionLog` lives on one shard (`Rc`, `!Send`); every method is called
//! from that shard's executor. Appends are ordered by `turns` (first come, first
//! served, in call order), held only
//! while offsets are assigned and bytes reserved (and while the active segment
//! rolls); the writes themselves are grouped by the active segment's appender,
//! so many appends share one io_uring write. Flushes are grouped the same way
//! by `flush_lock`: one fdatasync covers every append before it. Truncation
//! takes both locks.
//!
//! The leader-epoch cache ([`crate::leader_epoch`]) is updated in the append
//! turn, batch by batch, and its file is rewritten (under `epoch_file_lock`,
//! after `flush_lock` and `checkpoint_lock` when those are held) before an
//! append that changed it returns and before a flush moves the recovery
//! point.
//!
//! The other concerns live in their own files, as further `impl` blocks:
//! reads ([`crate::log_read`]), opening and recovery ([`crate::recovery`]),
//! flushing ([`crate::flush`]), retention ([`crate::retention`]) and
//! truncation ([`crate::truncate`]).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use glommio::sync::Semaphore;

use crate::batch::{self, BatchInfo};
use crate::batch_cache::{BatchCache, CachedBatch};
use crate::checkpoint::{Checkpoint, RecoveryPoint, Shutdown};
use crate::clock::Clock;
use crate::error::{EngineError, Result};
use crate::leader_epoch::{EpochEntry, LeaderEpochCache};
use crate::log_config::LogConfig;
use crate::offsets::LogOffsets;
use crate::producer_state::ProducerStates;
use crate::segment::Segment;
use crate::types::{LeaderEpoch, Offset, TimestampMs, TopicPartition};
use crate::write_mode::WriteMode;
use ferrite_ids::MonoMs;

/// Who is appending, which decides how offsets are set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendMode {
    /// A leader appending a producer's batches: the log assigns offsets and
    /// stamps this epoch.
    Leader { epoch: LeaderEpoch },
    /// A leader appending what a coordinator writes for a producer: its
    /// transaction markers, or its transactional offset commits. Given
    /// offsets and this epoch as a producer's batches are, but fenced by
    /// producer epoch instead of sequence.
    Coordinator { epoch: LeaderEpoch },
    /// A follower appending batches fetched from its leader: offsets and
    /// epochs are kept as they are.
    Replica,
}

impl AppendMode {
    /// The epoch a leader's append stamps; `None` for a follower's.
    pub fn leader_epoch(self) -> Option<LeaderEpoch> {
        match self {
            AppendMode::Leader { epoch } | AppendMode::Coordinator { epoch } => Some(epoch),
            AppendMode::Replica => None,
        }
    }
}

/// The bytes of an append. A leader's are stamped in place (offsets and
/// epoch), so they come owned; a follower's are stored as they came, so a
/// slice of the fetch response will do and is not copied.
pub(crate) enum RecordBytes {
    Owned(BytesMut),
    Shared(Bytes),
}

impl RecordBytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            RecordBytes::Owned(m) => m,
            RecordBytes::Shared(b) => b,
        }
    }

    /// The bytes to stamp; shared ones are copied first (not expected:
    /// only a leader stamps, and its bytes come owned).
    fn to_mut(&mut self) -> &mut BytesMut {
        if let RecordBytes::Shared(b) = self {
            *self = RecordBytes::Owned(BytesMut::from(&b[..]));
        }
        match self {
            RecordBytes::Owned(m) => m,
            RecordBytes::Shared(_) => unreachable!("made owned above"),
        }
    }

    fn freeze(self) -> Bytes {
        match self {
            RecordBytes::Owned(m) => m.freeze(),
            RecordBytes::Shared(b) => b,
        }
    }
}

/// What an append did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: Offset,
    pub last_offset: Offset,
    /// The log end offset after this append.
    pub next_offset: Offset,
    pub max_timestamp: TimestampMs,
    pub batches: usize,
    pub records: i64,
    pub bytes: usize,
    /// A retried idempotent batch already in the log: nothing was written,
    /// the offsets are the original ones.
    pub duplicate: bool,
}

/// Runs `fut` as a detached task and waits for it. Dropping the returned
/// future does not cancel the work.
///
/// Spawns at the call, not at the first poll: the caller's own future then
/// never holds `fut` (an append's state would otherwise carry its ~1.8 KiB
/// twice, and every spawn above it copies that).
pub(crate) fn detached<T: 'static>(
    fut: impl std::future::Future<Output = Result<T>> + 'static,
) -> impl std::future::Future<Output = Result<T>> {
    let task = glommio::spawn_local(fut).detach();
    async move {
        match task.await {
            Some(r) => r,
            None => Err(EngineError::ShardGone { shard: usize::MAX }),
        }
    }
}

/// Why the log refuses to go on.
#[derive(Clone, Debug)]
pub(crate) struct Poison {
    pub op: &'static str,
    pub path: PathBuf,
    pub cause: String,
}

/// Flush bookkeeping for `flush.messages` and `flush.ms`.
#[derive(Debug)]
pub(crate) struct FlushState {
    pub appended_records: i64,
    pub flushed_records: i64,
    /// Monotonic: a wall clock stepped back must not hold `flush.ms` off.
    pub last_flush: MonoMs,
    /// Files were created or removed in the directory since its last fsync.
    pub dir_dirty: bool,
    /// Group commits done (each one fdatasync round).
    pub rounds: u64,
}

pub struct PartitionLog {
    pub(crate) tp: TopicPartition,
    pub(crate) dir: PathBuf,
    pub(crate) config: RefCell<LogConfig>,
    pub(crate) mode: WriteMode,
    /// The shard's open-file cache, for the segments this log creates.
    pub(crate) file_cache: Rc<crate::file_cache::FileCache>,
    pub(crate) clock: Rc<dyn Clock>,
    pub(crate) segments: RefCell<VecDeque<Rc<Segment>>>,
    pub(crate) offsets: RefCell<LogOffsets>,
    pub(crate) recovery_point: Cell<RecoveryPoint>,
    pub(crate) cache: Rc<RefCell<BatchCache>>,
    pub(crate) flush_state: RefCell<FlushState>,
    pub(crate) poison: RefCell<Option<Poison>>,
    /// A range the scrubber found damaged, not served ([`crate::scrub`]).
    pub(crate) damage: RefCell<Option<crate::scrub::Damage>>,
    /// Counts each truncation of this log as it begins and as it ends (the
    /// scrubber discards what it read while one ran).
    pub(crate) truncations: Cell<u64>,
    pub(crate) closed: Cell<bool>,
    /// The order in which appends (and truncation, and close) take their
    /// turn to assign offsets and reserve bytes.
    pub(crate) turns: crate::fifo::TurnOrder,
    pub(crate) flush_lock: Semaphore,
    pub(crate) checkpoint_lock: Semaphore,
    /// What the checkpoint file says, once a store succeeded.
    pub(crate) last_checkpoint: std::cell::Cell<Option<Checkpoint>>,
    /// The leader epochs of the log and where each starts.
    pub(crate) epochs: RefCell<LeaderEpochCache>,
    /// `epochs` differs from the leader-epoch file (or may: a write of it
    /// is under way).
    pub(crate) epochs_dirty: Cell<bool>,
    /// Retention deletes nothing at or above this offset (replication sets
    /// it to the high watermark); `None`: up to the log end.
    pub(crate) retention_limit: Cell<Option<Offset>>,
    /// Serialises writes of the leader-epoch file.
    pub(crate) epoch_file_lock: Semaphore,
    /// Recovery kept the recovery point before the log end (it synced
    /// nothing): the log manager's next checkpoint round flushes the tail.
    pub(crate) recovered_tail: Cell<bool>,
    /// Idempotent producers' sequences, for deduplication.
    pub(crate) producers: RefCell<ProducerStates>,
    /// Signalled whenever the log end moves up: long-polling fetches of
    /// this partition wait on it instead of polling.
    pub(crate) end_moved: crate::notify::Notify,
    /// Signalled whenever an append reserves bytes: followers' long polls
    /// wait on it, since they may read batches not yet written.
    pub(crate) reserved_moved: crate::notify::Notify,
    /// The log cleaner's progress ([`crate::cleaner`]).
    pub(crate) cleaner: RefCell<crate::cleaner::CleanerState>,
}

impl PartitionLog {
    pub fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> LogConfig {
        self.config.borrow().clone()
    }

    pub fn set_config(&self, config: LogConfig) {
        self.cache.borrow_mut().set_bytes_max(config.cache_bytes_max);
        *self.config.borrow_mut() = config;
    }

    pub fn log_start_offset(&self) -> Offset {
        self.offsets.borrow().log_start()
    }

    /// The signal of the log end moving up (see [`crate::notify::Notify`]):
    /// read its generation, check the end, then wait for a change.
    pub fn end_moved(&self) -> &crate::notify::Notify {
        &self.end_moved
    }

    /// The signal of an append reserving bytes (the reserved end moving up).
    pub fn reserved_moved(&self) -> &crate::notify::Notify {
        &self.reserved_moved
    }

    /// The log was closed (shut down or deleted): nothing reads or writes it.
    pub fn is_closed(&self) -> bool {
        self.closed.get()
    }

    /// The offset after the last batch appended, written or not: what a
    /// follower may read from the cache ([`PartitionLog::read_for_replica`]).
    pub fn reserved_end_offset(&self) -> Offset {
        self.active().next_offset()
    }

    /// Moves the log end up to `end` (never down) and wakes what waits on
    /// [`PartitionLog::end_moved`].
    pub(crate) fn advance_end(&self, end: Offset) {
        let before = self.log_end_offset();
        self.offsets.borrow_mut().advance_end(end);
        if self.log_end_offset() > before {
            self.end_moved.notify_all();
        }
    }

    /// The log end offset: every batch below it is in the kernel.
    pub fn log_end_offset(&self) -> Offset {
        self.offsets.borrow().end()
    }

    /// Bounds retention: no segment holding an offset at or above `limit`
    /// is deleted, so that a leader never deletes records not yet committed
    /// (Kafka deletes only below the high watermark). `None`: the log end.
    pub fn set_retention_limit(&self, limit: Option<Offset>) {
        self.retention_limit.set(limit);
    }

    /// Every batch below this offset is on the device.
    pub fn durable_offset(&self) -> Offset {
        self.offsets.borrow().durable()
    }

    pub fn recovery_point(&self) -> RecoveryPoint {
        self.recovery_point.get()
    }

    pub fn segment_count(&self) -> usize {
        self.segments.borrow().len()
    }

    /// Base offsets of the segments, oldest first.
    pub fn segment_bases(&self) -> Vec<Offset> {
        self.segments.borrow().iter().map(|s| s.base()).collect()
    }

    /// Bytes in all segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments.borrow().iter().map(|s| s.size()).sum()
    }

    pub fn is_poisoned(&self) -> bool {
        self.poison.borrow().is_some()
    }

    pub(crate) fn active(&self) -> Rc<Segment> {
        let segs = self.segments.borrow();
        let last = segs.back().cloned();
        assert!(last.is_some(), "a log always has an active segment");
        last.unwrap_or_else(|| unreachable!())
    }

    pub(crate) fn check_usable(&self) -> Result<()> {
        if let Some(p) = self.poison.borrow().as_ref() {
            return Err(EngineError::Poisoned {
                tp: self.tp.clone(),
                op: p.op,
                path: p.path.clone(),
                cause: p.cause.clone(),
            });
        }
        if self.closed.get() {
            return Err(EngineError::Poisoned {
                tp: self.tp.clone(),
                op: "use after close",
                path: self.dir.clone(),
                cause: "the log is closed".into(),
            });
        }
        Ok(())
    }

    /// Records a failed write or fsync: the log refuses everything from now
    /// on. Returns the error to hand back.
    pub(crate) fn poison_with(&self, err: EngineError) -> EngineError {
        let (op, path) = match &err {
            EngineError::Io { op, path, .. } => (*op, path.clone()),
            _ => ("write", self.dir.clone()),
        };
        tracing::error!(tp = %self.tp, %op, path = %path.display(), error = %err, "log poisoned");
        let mut poison = self.poison.borrow_mut();
        if poison.is_none() {
            *poison = Some(Poison {
                op,
                path,
                cause: err.to_string(),
            });
        }
        err
    }

    /// Appends a record set (one or more batches). All batches are validated
    /// first; if any is refused nothing is written. Returns once the bytes are
    /// in the kernel, and, when the flush policy asks, on the device.
    ///
    /// The append runs as its own task: a caller that goes away (a dropped
    /// future, a closed connection) cannot stop it half-way through a roll
    /// or a group write and leave the log stuck.
    ///
    /// Appends are placed in the order of the calls (`append` takes its turn
    /// ticket before its first await), whatever each then waits for.
    pub async fn append(self: &Rc<Self>, records: BytesMut, mode: AppendMode) -> Result<AppendInfo> {
        let records = match mode {
            AppendMode::Leader { .. } | AppendMode::Coordinator { .. } => RecordBytes::Owned(records),
            AppendMode::Replica => RecordBytes::Shared(records.freeze()),
        };
        self.append_bytes(records, mode).await
    }

    /// A follower's append ([`AppendMode::Replica`]) of batches fetched
    /// from its leader, taking them as shared bytes: they are stored as
    /// they came, so a slice of the fetch response is written without a
    /// copy. They are not kept in the batch cache: once written, the
    /// caller's buffer is free again.
    pub async fn append_replica(self: &Rc<Self>, records: Bytes) -> Result<AppendInfo> {
        self.append_bytes(RecordBytes::Shared(records), AppendMode::Replica)
            .await
    }

    async fn append_bytes(self: &Rc<Self>, records: RecordBytes, mode: AppendMode) -> Result<AppendInfo> {
        let ticket = self.turns.ticket();
        let this = self.clone();
        detached(async move { this.append_inner(records, mode, ticket).await }).await
    }

    async fn append_inner(&self, records: RecordBytes, mode: AppendMode, ticket: u64) -> Result<AppendInfo> {
        let ticket = self.turns.hold(ticket);
        self.check_usable()?;
        let batches = self.validate_record_set(records.as_slice(), mode)?;
        let permit = ticket.turn().await;
        self.check_usable()?;
        match mode {
            AppendMode::Leader { .. } => {
                if let Some(original) = self.check_sequences(&batches)? {
                    return Ok(original);
                }
            }
            AppendMode::Coordinator { .. } => self.check_marker_epochs(records.as_slice(), &batches)?,
            AppendMode::Replica => {}
        }
        let base = match mode {
            AppendMode::Leader { .. } | AppendMode::Coordinator { .. } => self.active().next_offset(),
            AppendMode::Replica => batches[0].1.base_offset,
        };
        if mode == AppendMode::Replica && base < self.active().next_offset() {
            return Err(EngineError::NonContiguousAppend {
                tp: self.tp.clone(),
                batch_base: base,
                log_end: self.active().next_offset(),
            });
        }
        if self.should_roll(records.as_slice().len() as u64, &batches, base, mode) {
            self.roll(base).await?;
        }
        let (info, appender, end_pos) = self.reserve(records, &batches, mode);
        drop(permit);
        if let Err(e) = appender.write_through(end_pos).await {
            return Err(self.poison_with(e));
        }
        self.advance_end(appender.written_next());
        self.flush_state.borrow_mut().appended_records += info.records;
        // A batch that started an epoch is acknowledged only once the
        // leader-epoch file says so.
        self.persist_epochs().await.map_err(|e| self.poison_with(e))?;
        self.flush_if_policy_says().await?;
        Ok(info)
    }

    /// What a new leader calls: its epoch starts at the log end offset (after
    /// every append called before this one). Takes its turn like appends
    /// and truncation; the leader-epoch file records the epoch when this
    /// returns. An epoch at or below the latest one changes nothing.
    pub async fn assign_leader_epoch(self: &Rc<Self>, epoch: LeaderEpoch) -> Result<()> {
        let ticket = self.turns.ticket();
        let this = self.clone();
        detached(async move { this.assign_leader_epoch_inner(epoch, ticket).await }).await
    }

    async fn assign_leader_epoch_inner(&self, epoch: LeaderEpoch, ticket: u64) -> Result<()> {
        let ticket = self.turns.hold(ticket);
        self.check_usable()?;
        let turn = ticket.turn().await;
        self.check_usable()?;
        // Appends before this one have reserved their offsets; once written,
        // the log end is where the new epoch starts.
        self.drain_reserved().await?;
        let start = self.log_end_offset();
        self.note_epoch(epoch, start);
        drop(turn);
        self.persist_epochs().await.map_err(|e| self.poison_with(e))?;
        tracing::info!(tp = %self.tp, %epoch, start = %start, "leader epoch assigned");
        Ok(())
    }

    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.epochs.borrow().latest_epoch()
    }

    /// The leader-epoch cache's entries, oldest first.
    pub fn epoch_entries(&self) -> Vec<EpochEntry> {
        self.epochs.borrow().entries().to_vec()
    }

    /// Records that `epoch` covers the batch at `start`; marks the file
    /// dirty when the cache changed.
    pub(crate) fn note_epoch(&self, epoch: LeaderEpoch, start: Offset) {
        if self.epochs.borrow_mut().assign(epoch, start) {
            self.epochs_dirty.set(true);
        }
    }

    /// Marks the leader-epoch file dirty when `changed`.
    pub(crate) fn epochs_changed(&self, changed: bool) {
        if changed {
            self.epochs_dirty.set(true);
        }
    }

    /// Rewrites the leader-epoch file if the cache changed since it was
    /// last written; returns once it is durable. Cheap when nothing
    /// changed. The caller poisons the log on failure.
    pub(crate) async fn persist_epochs(&self) -> Result<()> {
        if !self.epochs_dirty.get() {
            return Ok(());
        }
        let _permit = self
            .lock(&self.epoch_file_lock, "wait for leader-epoch file lock")
            .await?;
        // Another task may have written it meanwhile. `epochs_dirty` stays
        // set while a write is under way, so nobody returns before it ends.
        if !self.epochs_dirty.get() {
            return Ok(());
        }
        let snapshot = self.epochs.borrow().clone();
        snapshot.store(&self.dir).await?;
        // Changes made during the write need another one.
        self.epochs_dirty.set(*self.epochs.borrow() != snapshot);
        Ok(())
    }

    fn should_roll(&self, bytes: u64, batches: &[(usize, BatchInfo)], base: Offset, mode: AppendMode) -> bool {
        let active = self.active();
        let last = match mode {
            AppendMode::Leader { .. } | AppendMode::Coordinator { .. } => {
                let span: i64 = batches.iter().map(|(_, b)| i64::from(b.last_offset_delta) + 1).sum();
                base.plus(span - 1)
            }
            AppendMode::Replica => batches[batches.len() - 1].1.last_offset(),
        };
        // Relative offsets are u32: a replicated batch far above an empty
        // segment's base still needs a segment of its own.
        let offsets_overflow = last.0 - active.base().0 > i64::from(u32::MAX);
        if active.is_empty() {
            return offsets_overflow;
        }
        let config = self.config.borrow();
        let meta = active.meta();
        let too_big = meta.size + bytes > config.segment_bytes;
        let too_old = meta
            .first_append
            .is_some_and(|t| self.clock.now_ms().0 - t.0 >= config.segment_ms);
        let index_full = meta.index_bytes() + 8 > config.segment_index_bytes;
        too_big || too_old || index_full || offsets_overflow
    }

    /// Seals the active segment and starts a new one at `base`.
    pub(crate) async fn roll(&self, base: Offset) -> Result<()> {
        // Every batch below `base` has its offsets: the producer state as of
        // `base` is this one (a crash that loses some of those batches
        // leaves a snapshot past the log end, which opening ignores).
        if let Err(e) = self.snapshot_producers(base).await {
            return Err(self.poison_with(e));
        }
        let old = self.active();
        if let Err(e) = old.seal().await {
            return Err(self.poison_with(e));
        }
        let new = match Segment::create(&self.dir, base, self.mode, &self.file_cache).await {
            Ok(s) => s,
            Err(e) => return Err(self.poison_with(e)),
        };
        tracing::debug!(tp = %self.tp, old = %old.base(), new = %base, "rolled segment");
        self.segments.borrow_mut().push_back(Rc::new(new));
        self.flush_state.borrow_mut().dir_dirty = true;
        Ok(())
    }

    /// Assigns offsets (leader), accounts for every batch in the active
    /// segment and (leader appends only) the cache, and queues the bytes.
    /// Synchronous: the append order is decided here.
    fn reserve(
        &self,
        mut records: RecordBytes,
        batches: &[(usize, BatchInfo)],
        mode: AppendMode,
    ) -> (AppendInfo, Rc<crate::segment_appender::SegmentAppender>, u64) {
        let active = self.active();
        let appender = active.appender();
        assert!(appender.is_some(), "the last segment is active");
        let appender = appender.unwrap_or_else(|| unreachable!());
        let interval = self.config.borrow().index_interval_bytes;
        let mut next = active.next_offset();
        let mut stamped = Vec::with_capacity(batches.len());
        let mut stale_epoch = None;
        // Transactions these batches abort: entries of the segment's
        // transaction index once the batches are its.
        let mut aborted = Vec::new();
        for (pos, info) in batches {
            let mut info = *info;
            if let Some(epoch) = mode.leader_epoch() {
                batch::stamp(&mut records.to_mut()[*pos..], next, epoch);
                info.base_offset = next;
                info.leader_epoch = epoch;
            }
            if self
                .epochs
                .borrow()
                .latest_epoch()
                .is_some_and(|l| info.leader_epoch.0 >= 0 && info.leader_epoch < l)
            {
                stale_epoch = Some(info.leader_epoch);
            }
            self.note_epoch(info.leader_epoch, info.base_offset);
            self.producers.borrow_mut().record(&info);
            if info.is_transactional {
                let bytes = &records.as_slice()[*pos..*pos + info.size];
                let marker = crate::txn_state::marker_if_control(bytes, &info);
                let mut producers = self.producers.borrow_mut();
                aborted.extend(producers.apply_txn(&info, marker));
                producers.note_coordinator_epoch(&info, crate::txn_state::coordinator_epoch_of(bytes, &info));
            }
            next = info.next_offset();
            stamped.push((*pos, info));
        }
        if let Some(epoch) = stale_epoch {
            tracing::warn!(tp = %self.tp, %epoch, latest = ?self.latest_epoch(), ?mode,
                "appended a batch of an epoch older than the latest; the leader-epoch cache ignores it");
        }
        let bytes = records.freeze();
        let now = self.clock.now_ms();
        let mut meta = active.meta_mut();
        if meta.first_append.is_none() {
            meta.first_append = Some(now);
        }
        // Nothing reads a follower's tail (consumers and followers fetch
        // from the leader), and holding its batches would keep every fetch
        // response they came in alive. A follower that becomes leader
        // starts caching at its log end.
        let caching = mode.leader_epoch().is_some();
        let mut cache = self.cache.borrow_mut();
        if !caching {
            cache.clear();
        }
        for (pos, info) in &stamped {
            let seg_pos = meta.size;
            meta.note_batch(active.base(), info, seg_pos, interval);
            if caching {
                let batch = CachedBatch {
                    base: info.base_offset,
                    next: info.next_offset(),
                    bytes: bytes.slice(*pos..*pos + info.size),
                };
                cache.push(&self.cache, batch);
            }
        }
        for a in aborted {
            meta.push_aborted(a);
        }
        let budget = cache.budget();
        drop(cache);
        budget.enforce();
        let first = stamped[0].1;
        let last = stamped[stamped.len() - 1].1;
        let info = AppendInfo {
            first_offset: first.base_offset,
            last_offset: last.last_offset(),
            next_offset: last.next_offset(),
            max_timestamp: stamped
                .iter()
                .map(|(_, b)| b.max_timestamp)
                .max()
                .unwrap_or(TimestampMs::NONE),
            batches: stamped.len(),
            records: stamped.iter().map(|(_, b)| i64::from(b.record_count)).sum(),
            bytes: bytes.len(),
            duplicate: false,
        };
        let end_pos = appender.reserve(bytes, info.next_offset);
        assert!(end_pos == meta.size, "appender and segment disagree on the size");
        self.reserved_moved.notify_all();
        (info, appender, end_pos)
    }

    /// Waits for one of the log's locks.
    pub(crate) async fn lock<'a>(&self, lock: &'a Semaphore, what: &'static str) -> Result<glommio::sync::Permit<'a>> {
        lock.acquire_permit(1)
            .await
            .map_err(|e| EngineError::io(what, &self.dir, e))
    }

    /// Writes every reserved byte of the active segment and moves the log end
    /// over it. Called with the append lock held (close, truncation).
    pub(crate) async fn drain_reserved(&self) -> Result<()> {
        if let Some(a) = self.active().appender() {
            a.write_through(a.reserved_end())
                .await
                .map_err(|e| self.poison_with(e))?;
            self.advance_end(a.written_next());
        }
        Ok(())
    }

    /// Whether recovery left bytes after the recovery point that no flush
    /// has synced yet.
    pub fn has_recovered_tail(&self) -> bool {
        self.recovered_tail.get()
    }

    /// Writes the checkpoint file with the current log start and recovery
    /// point.
    pub async fn write_checkpoint(&self, shutdown: Shutdown) -> Result<()> {
        let _permit = self.lock(&self.checkpoint_lock, "wait for checkpoint lock").await?;
        self.store_checkpoint(shutdown).await
    }

    /// Writes the checkpoint; the caller holds `checkpoint_lock`.
    pub(crate) async fn store_checkpoint(&self, shutdown: Shutdown) -> Result<()> {
        self.store_checkpoint_with_start(shutdown, self.log_start_offset())
            .await
    }

    pub(crate) async fn store_checkpoint_with_start(&self, shutdown: Shutdown, log_start: Offset) -> Result<()> {
        let cp = Checkpoint {
            log_start,
            recovery: self.recovery_point.get(),
            shutdown,
        };
        // Unknown until this store succeeds (a failed one may have left
        // either file).
        self.last_checkpoint.set(None);
        cp.store(&self.dir).await?;
        self.last_checkpoint.set(Some(cp));
        Ok(())
    }

    /// The periodic checkpoint: written only when it would say something
    /// new (an idle partition's costs nothing; a shard of thousands of
    /// partitions otherwise fsyncs each of them every interval).
    pub async fn refresh_checkpoint(&self) -> Result<bool> {
        let _permit = self.lock(&self.checkpoint_lock, "wait for checkpoint lock").await?;
        let now = Checkpoint {
            log_start: self.log_start_offset(),
            recovery: self.recovery_point.get(),
            shutdown: Shutdown::Unclean,
        };
        if self.last_checkpoint.get() == Some(now) {
            return Ok(false);
        }
        self.store_checkpoint(Shutdown::Unclean).await?;
        Ok(true)
    }
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
