//! The per-shard registry of partition logs, and the periodic work on them.
//!
//! Each shard has one `LogManager`, holding the logs of the partitions the
//! shard owns ([`shard_for`]). It opens them at start (recovering those not
//! closed cleanly), creates and deletes them, and runs three periodic tasks
//! under Kafka's broker settings:
//!
//! | setting                                   | default | task |
//! |-------------------------------------------|---------|------|
//! | `log.retention.check.interval.ms`         | 300000  | apply `retention.ms` / `retention.bytes` |
//! | `log.flush.scheduler.interval.ms`         | 1000    | flush logs whose `flush.ms` is due; retry removing deleted partitions' directories ([`crate::doomed_dirs`]) |
//! | `log.flush.offset.checkpoint.interval.ms` | 60000   | write each log's checkpoint (recovery point, log start) |
//! | `log.cleaner.backoff.ms`                  | 15000   | a cleaner pass over the compacted logs ([`crate::cleaner`]), one log at a time |
//!
//! (Kafka's default for the flush scheduler is "never", which makes
//! `flush.ms` inert; Ferrite checks every second.)

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use futures::StreamExt;

use crate::batch_cache::CacheBudget;
use crate::clock::Clock;
use crate::doomed_dirs::{doomed_name, DoomedDirs};
use crate::error::{EngineError, Result};
use crate::file_cache::{FileCache, FileCacheStats};
use crate::log::PartitionLog;
use crate::log_config::LogConfig;
use crate::recovery::{OpenParams, Repair};
use crate::types::{ShardId, TopicPartition};
use crate::write_mode::WriteMode;

#[derive(Clone, Debug)]
pub struct LogManagerConfig {
    pub data_dir: PathBuf,
    pub write_mode: WriteMode,
    pub repair: Repair,
    pub retention_check_interval_ms: u64,
    pub flush_scheduler_interval_ms: u64,
    pub checkpoint_interval_ms: u64,
    /// Bytes of cached batches the shard's logs hold together
    /// (`ferrite.log.cache.bytes.per.shard`).
    pub cache_bytes_per_shard: usize,
    /// Segment files the shard keeps open at most; the least recently used
    /// close beyond it (`ferrite.log.open.files.per.shard`).
    pub open_files_per_shard: usize,
    /// How fast the shard's scrubber reads closed segments; 0 turns it off
    /// (`ferrite.scrub.bytes.per.second`, see [`crate::scrub`]).
    pub scrub_bytes_per_second: u64,
    /// From the end of one scrub pass over the shard's logs to the start of
    /// the next; the first starts one interval after the shard opened
    /// (`ferrite.scrub.interval.ms`).
    pub scrub_interval_ms: u64,
    /// The log cleaner's settings; `None` turns it off
    /// (`log.cleaner.enable=false`).
    pub cleaner: Option<crate::cleaner::CleanerParams>,
    /// Pause between two cleaner passes (`log.cleaner.backoff.ms`).
    pub cleaner_backoff_ms: u64,
}

/// What a shard's cleaner has done since the broker started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanerStats {
    /// Logs cleaned (passes that swapped something in).
    pub logs_cleaned: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_removed: u64,
    pub failures: u64,
}

/// The default of [`LogManagerConfig::scrub_bytes_per_second`]: a pass
/// over 1 TB takes about a day.
pub const SCRUB_BYTES_PER_SECOND_DEFAULT: u64 = 16 << 20;

/// The default of [`LogManagerConfig::scrub_interval_ms`]: one hour.
pub const SCRUB_INTERVAL_MS_DEFAULT: u64 = 3_600_000;

/// What a shard's scrubber has done since the broker started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScrubStats {
    pub bytes_verified: u64,
    pub damage_found: u64,
    pub passes: u64,
}

/// The default of [`LogManagerConfig::cache_bytes_per_shard`].
pub const CACHE_BYTES_PER_SHARD_DEFAULT: usize = 64 << 20;

/// Partitions a shard opens, creates or closes at once. Opening a log waits on a
/// few fsyncs (its directory, its checkpoint files); one at a time, a
/// shard created about 140 partitions a second on the development
/// machine, while concurrent fsyncs share the file system's journal
/// commits.
pub const OPENS_IN_FLIGHT_MAX: usize = 64;

/// The default of [`LogManagerConfig::open_files_per_shard`] when nothing
/// derives it from the process's open-files limit.
pub const OPEN_FILES_PER_SHARD_DEFAULT: usize = 4096;

impl LogManagerConfig {
    pub fn new(data_dir: impl Into<PathBuf>) -> LogManagerConfig {
        LogManagerConfig {
            data_dir: data_dir.into(),
            write_mode: WriteMode::Buffered,
            repair: Repair::Refuse,
            retention_check_interval_ms: 300_000,
            flush_scheduler_interval_ms: 1_000,
            checkpoint_interval_ms: 60_000,
            cache_bytes_per_shard: CACHE_BYTES_PER_SHARD_DEFAULT,
            open_files_per_shard: OPEN_FILES_PER_SHARD_DEFAULT,
            scrub_bytes_per_second: SCRUB_BYTES_PER_SECOND_DEFAULT,
            scrub_interval_ms: SCRUB_INTERVAL_MS_DEFAULT,
            cleaner: Some(crate::cleaner::CleanerParams {
                entries_max: (64 << 20) / crate::clean_map::ENTRY_BYTES,
                bytes_per_second: None,
            }),
            cleaner_backoff_ms: 15_000,
        }
    }
}

/// The shard that owns a partition: a stable hash of the topic, plus the
/// partition number, so a topic's partitions spread round-robin over shards.
pub fn shard_for(tp: &TopicPartition, shard_count: usize) -> ShardId {
    shard_for_hashed(topic_hash(&tp.topic), tp.partition, shard_count)
}

/// The topic's part of [`shard_for`]: a request's partitions of one topic
/// hash its name once.
pub fn topic_hash(topic: &str) -> u64 {
    u64::from(crc32c::crc32c(topic.as_bytes()))
}

/// [`shard_for`] with the topic's [`topic_hash`] taken already.
pub fn shard_for_hashed(topic_hash: u64, partition: i32, shard_count: usize) -> ShardId {
    assert!(shard_count > 0, "no shards");
    // Wrapping: a partition number off the wire may be negative (a request
    // for an unknown partition still asks who would own it).
    ShardId((topic_hash.wrapping_add(partition as u64) % shard_count as u64) as usize)
}

/// Decides the config of a log found on disk at start.
pub type ConfigFor = dyn Fn(&TopicPartition) -> LogConfig;

pub struct LogManager {
    config: LogManagerConfig,
    shard: ShardId,
    shard_count: usize,
    clock: Rc<dyn Clock>,
    /// The bytes of cached batches this shard's logs share.
    cache_budget: Rc<CacheBudget>,
    /// The segment files this shard's logs keep open.
    file_cache: Rc<FileCache>,
    logs: RefCell<BTreeMap<TopicPartition, Rc<PartitionLog>>>,
    /// Partitions that failed to open, and why. They stay offline: nothing
    /// is created over their files.
    offline: RefCell<BTreeMap<TopicPartition, String>>,
    /// Deleted partitions' directories not removed yet.
    doomed: DoomedDirs,
    /// Partitions being created now, each with whether a delete came for it
    /// meanwhile (the creation then takes back what it made).
    creating: RefCell<BTreeMap<TopicPartition, bool>>,
    stopping: Cell<bool>,
    tasks: RefCell<Vec<glommio::task::JoinHandle<()>>>,
    scrub_stats: Cell<ScrubStats>,
    cleaner_stats: Cell<CleanerStats>,
}

impl LogManager {
    /// Opens every partition directory under the data dir that this shard
    /// owns.
    pub async fn open(
        config: LogManagerConfig,
        shard: ShardId,
        shard_count: usize,
        clock: Rc<dyn Clock>,
        config_for: &ConfigFor,
    ) -> Result<Rc<LogManager>> {
        let mut config = config;
        // Every path below is absolute: the working directory may change.
        config.data_dir = std::path::absolute(&config.data_dir)
            .map_err(|e| EngineError::io("resolve data directory", &config.data_dir, e))?;
        std::fs::create_dir_all(&config.data_dir)
            .map_err(|e| EngineError::io("create data directory", &config.data_dir, e))?;
        // Before anything opens files concurrently: glommio learns the
        // device from the first O_DIRECT file a thread opens (reading sysfs,
        // and panicking if that read fails, as it does out of descriptors).
        crate::sys::prime_dma_probe(&config.data_dir).await?;
        let cache_budget = CacheBudget::new(config.cache_bytes_per_shard);
        let file_cache = FileCache::new(config.open_files_per_shard);
        let manager = Rc::new(LogManager {
            config,
            shard,
            shard_count,
            clock,
            cache_budget,
            file_cache,
            logs: RefCell::new(BTreeMap::new()),
            offline: RefCell::new(BTreeMap::new()),
            doomed: DoomedDirs::default(),
            creating: RefCell::new(BTreeMap::new()),
            stopping: Cell::new(false),
            tasks: RefCell::new(Vec::new()),
            scrub_stats: Cell::new(ScrubStats::default()),
            cleaner_stats: Cell::new(CleanerStats::default()),
        });
        manager
            .doomed
            .sweep(&manager.config.data_dir, |tp| shard_for(tp, shard_count) == shard);
        let mine: Vec<(TopicPartition, OpenParams)> = manager
            .partitions_on_disk()?
            .into_iter()
            .filter(|tp| shard_for(tp, shard_count) == shard)
            .map(|tp| {
                let params = manager.params(&tp, config_for(&tp));
                (tp, params)
            })
            .collect();
        let opened = futures::stream::iter(mine)
            .map(|(tp, params)| async move { (tp, PartitionLog::open(params).await) })
            .buffer_unordered(OPENS_IN_FLIGHT_MAX)
            .collect::<Vec<_>>()
            .await;
        for (tp, opened) in opened {
            // One damaged partition must not keep the others offline.
            match opened {
                Ok(log) => {
                    manager.logs.borrow_mut().insert(tp, log);
                }
                Err(e) => {
                    tracing::error!(tp = %tp, error = %e, "partition offline: it failed to open");
                    manager.offline.borrow_mut().insert(tp, e.to_string());
                }
            }
        }
        Ok(manager)
    }

    fn partitions_on_disk(&self) -> Result<Vec<TopicPartition>> {
        let dir = &self.config.data_dir;
        let entries = std::fs::read_dir(dir).map_err(|e| EngineError::io("list data directory", dir, e))?;
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| EngineError::io("list data directory", dir, e))?;
            if !entry.path().is_dir() {
                continue;
            }
            if let Some(tp) = TopicPartition::parse_dir_name(&entry.file_name().to_string_lossy()) {
                out.push(tp);
            }
        }
        out.sort();
        Ok(out)
    }

    fn params(&self, tp: &TopicPartition, config: LogConfig) -> OpenParams {
        OpenParams {
            tp: tp.clone(),
            dir: self.partition_dir(tp),
            config,
            mode: self.config.write_mode,
            clock: self.clock.clone(),
            repair: self.config.repair,
            cache_budget: self.cache_budget.clone(),
            file_cache: self.file_cache.clone(),
        }
    }

    pub fn partition_dir(&self, tp: &TopicPartition) -> PathBuf {
        self.config.data_dir.join(tp.dir_name())
    }

    /// The shard's open-file cache counters.
    pub fn file_cache_stats(&self) -> FileCacheStats {
        self.file_cache.stats()
    }

    pub fn shard(&self) -> ShardId {
        self.shard
    }

    pub fn data_dir(&self) -> &Path {
        &self.config.data_dir
    }

    pub fn get(&self, tp: &TopicPartition) -> Option<Rc<PartitionLog>> {
        self.logs.borrow().get(tp).cloned()
    }

    pub fn partitions(&self) -> Vec<TopicPartition> {
        self.logs.borrow().keys().cloned().collect()
    }

    /// How many partitions the shard serves (without listing them).
    pub fn partition_count(&self) -> usize {
        self.logs.borrow().len()
    }

    fn check_owned(&self, tp: &TopicPartition) -> Result<()> {
        if shard_for(tp, self.shard_count) != self.shard {
            return Err(EngineError::UnknownPartition { tp: tp.clone() });
        }
        Ok(())
    }

    /// The log of `tp` for reads and writes: PartitionOffline when it
    /// failed to open (KAFKA_STORAGE_ERROR to clients, as Kafka answers for
    /// a replica on a failed log directory), else UnknownPartition when
    /// this shard has no such log.
    pub fn served(&self, tp: &TopicPartition) -> Result<Rc<PartitionLog>> {
        if let Some(log) = self.get(tp) {
            return Ok(log);
        }
        match self.offline.borrow().get(tp) {
            Some(reason) => Err(EngineError::PartitionOffline {
                tp: tp.clone(),
                reason: reason.clone(),
            }),
            None => Err(EngineError::UnknownPartition { tp: tp.clone() }),
        }
    }

    /// Partitions that failed to open.
    pub fn offline(&self) -> Vec<(TopicPartition, String)> {
        self.offline
            .borrow()
            .iter()
            .map(|(t, r)| (t.clone(), r.clone()))
            .collect()
    }

    /// Creates a new, empty log.
    pub async fn create(&self, tp: &TopicPartition, config: LogConfig) -> Result<Rc<PartitionLog>> {
        self.check_owned(tp)?;
        if let Some(reason) = self.offline.borrow().get(tp) {
            return Err(EngineError::PartitionOffline {
                tp: tp.clone(),
                reason: reason.clone(),
            });
        }
        if self.logs.borrow().contains_key(tp) {
            return Err(EngineError::PartitionExists { tp: tp.clone() });
        }
        if self.creating.borrow().contains_key(tp) {
            return Err(EngineError::PartitionExists { tp: tp.clone() });
        }
        let dir = self.partition_dir(tp);
        let fresh = !dir.exists();
        self.creating.borrow_mut().insert(tp.clone(), false);
        let opened = PartitionLog::open(self.params(tp, config)).await;
        let deleted_meanwhile = self.creating.borrow_mut().remove(tp).unwrap_or(false);
        if deleted_meanwhile {
            if let Ok(log) = &opened {
                log.closed.set(true);
            }
            drop(opened);
            self.remove_dir(tp).await?;
            return Err(EngineError::DeletedWhileCreated { tp: tp.clone() });
        }
        let log = match opened {
            Ok(log) => log,
            Err(e) => {
                // A partition that could not be created leaves nothing
                // behind (a directory left would be opened at restart).
                // When even that fails (out of descriptors, say), the
                // partition is held offline: nothing is created over the
                // directory, and deleting the partition removes it.
                if fresh {
                    if let Err(rm) = std::fs::remove_dir_all(&dir) {
                        tracing::warn!(tp = %tp, error = %rm, "removing a partition that could not be created");
                        self.offline.borrow_mut().insert(
                            tp.clone(),
                            format!("could not be created ({e}), and its directory not removed ({rm})"),
                        );
                    }
                }
                return Err(e);
            }
        };
        crate::checkpoint::sync_dir(&self.config.data_dir).await?;
        self.logs.borrow_mut().insert(tp.clone(), log.clone());
        Ok(log)
    }

    /// [`LogManager::get_or_create`] for many partitions, up to
    /// [`OPENS_IN_FLIGHT_MAX`] at once; the results in the order given.
    pub async fn get_or_create_many(
        &self,
        wanted: Vec<(TopicPartition, LogConfig)>,
    ) -> Vec<(TopicPartition, Result<Rc<PartitionLog>>)> {
        futures::stream::iter(wanted)
            .map(|(tp, config)| async move {
                let log = self.get_or_create(&tp, config).await;
                (tp, log)
            })
            .buffered(OPENS_IN_FLIGHT_MAX)
            .collect()
            .await
    }

    /// The log of `tp`, created with `config` if it does not exist.
    pub async fn get_or_create(&self, tp: &TopicPartition, config: LogConfig) -> Result<Rc<PartitionLog>> {
        if let Some(log) = self.get(tp) {
            return Ok(log);
        }
        self.create(tp, config).await
    }

    /// Stops serving a partition and closes its files (once no reader
    /// holds them), leaving its directory: the first step of undoing a
    /// creation, which frees the descriptors the rest needs.
    pub fn close(&self, tp: &TopicPartition) -> bool {
        let Some(log) = self.logs.borrow_mut().remove(tp) else {
            return false;
        };
        log.closed.set(true);
        true
    }

    /// Removes what a partition whose creation failed left on disk (its
    /// removal can fail too, for the reason the creation did: no file
    /// descriptor left). `false` when there was nothing; a partition this
    /// manager serves or holds offline is left alone.
    pub async fn remove_leftover(&self, tp: &TopicPartition) -> Result<bool> {
        let held = self.logs.borrow().contains_key(tp) || self.offline.borrow().contains_key(tp);
        if held || self.creating.borrow().contains_key(tp) {
            return Ok(false);
        }
        let dir = self.partition_dir(tp);
        if !dir.exists() {
            return Ok(false);
        }
        std::fs::remove_dir_all(&dir).map_err(|e| EngineError::io("delete partition directory", &dir, e))?;
        crate::checkpoint::sync_dir(&self.config.data_dir).await?;
        Ok(true)
    }

    /// Removes a partition: forgets its log (served or offline) and
    /// deletes its directory, also one a failed creation left behind.
    /// The directory is renamed out of the partition's name first
    /// ([`crate::doomed_dirs`]), so a removal that fails (no descriptor
    /// left) is tried again later and never leaves data a restart or a new
    /// topic of the same name would pick up. `false` when there was
    /// nothing to delete.
    pub async fn delete(&self, tp: &TopicPartition) -> Result<bool> {
        // Being created: the creation takes back what it made when it ends.
        if let Some(deleted) = self.creating.borrow_mut().get_mut(tp) {
            *deleted = true;
            return Ok(true);
        }
        let was_offline = self.offline.borrow_mut().remove(tp).is_some();
        if let Some(log) = self.logs.borrow_mut().remove(tp) {
            log.closed.set(true);
        }
        let removed = self.remove_dir(tp).await?;
        Ok(removed || was_offline)
    }

    /// Renames the partition's directory out of its name and removes it
    /// ([`crate::doomed_dirs`]); `false` when there was none.
    async fn remove_dir(&self, tp: &TopicPartition) -> Result<bool> {
        let dir = self.partition_dir(tp);
        if !dir.exists() {
            return Ok(false);
        }
        let doomed = self.config.data_dir.join(doomed_name(tp));
        if let Err(e) = std::fs::rename(&dir, &doomed) {
            // Held offline: nothing is created over it, and deleting the
            // partition again tries again.
            self.offline.borrow_mut().insert(
                tp.clone(),
                format!("deleted, but its directory could not be renamed ({e})"),
            );
            return Err(EngineError::io("rename deleted partition directory", &dir, e));
        }
        self.doomed.remove(doomed);
        crate::checkpoint::sync_dir(&self.config.data_dir).await?;
        Ok(true)
    }

    /// Deleted partitions' directories waiting to be removed again.
    pub fn doomed_dirs_left(&self) -> usize {
        self.doomed.len()
    }

    fn snapshot(&self) -> Vec<Rc<PartitionLog>> {
        self.logs.borrow().values().cloned().collect()
    }

    /// Runs retention on every log now.
    pub async fn run_retention(&self) {
        for log in self.snapshot() {
            if let Err(e) = log.apply_retention().await {
                tracing::warn!(tp = %log.topic_partition(), error = %e, "retention failed");
            }
        }
    }

    async fn run_flush_check(&self) {
        // Picked without I/O or a task switch per log: most logs of a
        // broker with many partitions have nothing to flush.
        let due: Vec<Rc<PartitionLog>> = self.logs.borrow().values().filter(|l| l.flush_due()).cloned().collect();
        for log in due {
            if let Err(e) = log.flush_if_due().await {
                tracing::error!(tp = %log.topic_partition(), error = %e, "scheduled flush failed");
            }
        }
    }

    /// What the scrubber has done so far.
    pub fn scrub_stats(&self) -> ScrubStats {
        self.scrub_stats.get()
    }

    /// One scrub pass: every log's closed segments, at the configured rate.
    pub async fn run_scrub(&self) {
        let rate = self.config.scrub_bytes_per_second;
        if rate == 0 {
            return;
        }
        let mut pacer = crate::scrub::ScrubPacer::new(rate);
        for log in self.snapshot() {
            if self.stopping.get() {
                return;
            }
            let outcome = log.scrub(&mut pacer).await;
            let mut stats = self.scrub_stats.get();
            match outcome {
                Ok(o) => {
                    stats.bytes_verified += o.bytes_verified;
                    stats.damage_found += u64::from(o.damage.is_some());
                }
                Err(e) => tracing::warn!(tp = %log.topic_partition(), error = %e, "scrub failed"),
            }
            self.scrub_stats.set(stats);
        }
        let mut stats = self.scrub_stats.get();
        stats.passes += 1;
        self.scrub_stats.set(stats);
    }

    /// What the cleaner has done so far.
    pub fn cleaner_stats(&self) -> CleanerStats {
        self.cleaner_stats.get()
    }

    /// One cleaner pass: each compacted log worth cleaning, one at a time.
    pub async fn run_cleaner(&self) {
        let Some(params) = self.config.cleaner else { return };
        for log in self.snapshot() {
            if self.stopping.get() {
                return;
            }
            let result = log.clean(params).await;
            let mut stats = self.cleaner_stats.get();
            match result {
                Ok(Some(o)) => {
                    stats.logs_cleaned += u64::from(o.segments_written > 0);
                    stats.bytes_read += o.bytes_read;
                    stats.bytes_written += o.bytes_written;
                    stats.records_removed += o.records_removed;
                }
                Ok(None) => {}
                Err(e) => {
                    stats.failures += 1;
                    tracing::warn!(tp = %log.topic_partition(), error = %e, "cleaning failed; retried next pass");
                }
            }
            self.cleaner_stats.set(stats);
        }
    }

    async fn run_checkpoints(&self) {
        for log in self.snapshot() {
            if log.is_poisoned() {
                continue;
            }
            // A tail that recovery did not sync (to restart quickly) is
            // synced here, one interval after start, so the recovery point
            // does not stay where the last clean close left it.
            if log.has_recovered_tail() {
                if let Err(e) = log.flush().await {
                    tracing::error!(tp = %log.topic_partition(), error = %e, "flushing a recovered tail failed");
                    continue;
                }
            }
            if let Err(e) = log.refresh_checkpoint().await {
                tracing::error!(tp = %log.topic_partition(), error = %e, "checkpoint failed");
            }
        }
    }

    /// Starts the periodic retention, flush and checkpoint tasks.
    pub fn start_background(self: &Rc<Self>) {
        let intervals = [
            (Task::Retention, self.config.retention_check_interval_ms),
            (Task::Flush, self.config.flush_scheduler_interval_ms),
            (Task::Checkpoint, self.config.checkpoint_interval_ms),
            (Task::Scrub, self.config.scrub_interval_ms),
            (Task::Clean, self.config.cleaner_backoff_ms),
        ];
        for (task, ms) in intervals {
            let me = self.clone();
            let handle = glommio::spawn_local(async move {
                let period = Duration::from_millis(ms.max(1));
                while !me.stopping.get() {
                    glommio::timer::sleep(period).await;
                    if me.stopping.get() {
                        break;
                    }
                    match task {
                        Task::Retention => me.run_retention().await,
                        Task::Flush => {
                            me.doomed.retry();
                            me.run_flush_check().await
                        }
                        Task::Checkpoint => me.run_checkpoints().await,
                        Task::Scrub => me.run_scrub().await,
                        Task::Clean => me.run_cleaner().await,
                    }
                }
            })
            .detach();
            self.tasks.borrow_mut().push(handle);
        }
    }

    /// Stops the periodic tasks and closes every log cleanly.
    pub async fn shutdown(&self) {
        self.stopping.set(true);
        for t in self.tasks.borrow_mut().drain(..) {
            t.cancel();
        }
        // Each close waits on a few fsyncs: many at once share the file
        // system's journal commits.
        futures::stream::iter(self.snapshot())
            .for_each_concurrent(OPENS_IN_FLIGHT_MAX, |log| async move {
                if let Err(e) = log.close().await {
                    tracing::error!(tp = %log.topic_partition(), error = %e, "close failed; the log will be recovered on the next start");
                }
            })
            .await;
    }
}

impl crate::shard::ShardService for LogManager {
    fn shutdown(self: Rc<Self>) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
        Box::pin(async move { LogManager::shutdown(&self).await })
    }
}

#[derive(Clone, Copy)]
enum Task {
    Retention,
    Flush,
    Checkpoint,
    Scrub,
    Clean,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_spread_over_shards() {
        let mut counts = [0usize; 4];
        for p in 0..64 {
            counts[shard_for(&TopicPartition::new("t", p), 4).0] += 1;
        }
        assert_eq!(counts, [16, 16, 16, 16]);
        assert_eq!(shard_for(&TopicPartition::new("t", 3), 1), ShardId(0));
    }

    /// A negative partition number (off the wire) maps to some shard
    /// without overflowing (the dispatch fuzzer's Fetch for partition
    /// 0x80000004 panicked here in a checked build).
    #[test]
    fn negative_partitions_map_to_a_shard() {
        for p in [-1, i32::MIN, i32::MIN + 4] {
            assert!(shard_for(&TopicPartition::new("fuzz", p), 3).0 < 3);
        }
    }
}
