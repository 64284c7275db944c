//! Flushing: making appended bytes durable, in groups.
//!
//! `flush` fdatasyncs every segment with bytes not yet on the device (sealed
//! ones with their indexes; the active one's data only — its indexes are
//! rebuilt by recovery anyway) and, after segments were created or removed,
//! the directory. Concurrent callers share one round: whoever holds
//! `flush_lock` syncs everything in the kernel at that moment, and the others
//! find their offsets durable when they get the lock.
//!
//! Before the recovery point moves, the leader-epoch file is rewritten if
//! the cache changed, so that a recovery point never passes an epoch start
//! the file does not record.
//!
//! A failed fsync poisons the log. Retrying is unsafe: after a failed
//! fdatasync the kernel may have dropped the dirty pages and a second call
//! would report success for data that is gone.

use std::rc::Rc;

use crate::checkpoint::{self, RecoveryPoint, Shutdown};
use crate::error::Result;
use crate::log::{detached, PartitionLog};
use crate::types::Offset;

impl PartitionLog {
    /// Makes every batch appended before this call durable; returns the
    /// durable offset. Runs as its own task (see `append`).
    pub async fn flush(self: &Rc<Self>) -> Result<Offset> {
        let this = self.clone();
        detached(async move { this.flush_inner().await }).await
    }

    pub(crate) async fn flush_inner(&self) -> Result<Offset> {
        self.check_usable()?;
        let target = self.log_end_offset();
        if self.durable_offset() >= target {
            return Ok(self.durable_offset());
        }
        let _permit = self.lock(&self.flush_lock, "wait for flush lock").await?;
        self.check_usable()?;
        if self.durable_offset() >= target {
            return Ok(self.durable_offset());
        }
        match self.flush_round().await {
            Ok(d) => Ok(d),
            Err(e) => Err(self.poison_with(e)),
        }
    }

    /// One group commit. Caller holds `flush_lock`.
    async fn flush_round(&self) -> Result<Offset> {
        let records_before = self.flush_state.borrow().appended_records;
        let segments: Vec<_> = self.segments.borrow().iter().cloned().collect();
        let Some((active, sealed)) = segments.split_last() else {
            return Ok(self.durable_offset());
        };
        for s in sealed.iter().filter(|s| s.needs_sync()) {
            s.sync_all().await?;
        }
        let appender = active.appender();
        let covered_next = appender
            .as_ref()
            .map(|a| a.written_next())
            .unwrap_or(active.next_offset());
        let covered_pos = active.sync_data().await?;
        let dir_dirty = std::mem::replace(&mut self.flush_state.borrow_mut().dir_dirty, false);
        if dir_dirty {
            if let Err(e) = checkpoint::sync_dir(&self.dir).await {
                self.flush_state.borrow_mut().dir_dirty = true;
                return Err(e);
            }
        }
        // The recovery point must not pass an epoch start the leader-epoch
        // file does not record: recovery rebuilds only the entries of the
        // batches it scans, from the recovery point on.
        self.persist_epochs().await?;
        // What was in the kernel when the sync started is now durable. The
        // end offset may lag it by appends that have not returned yet; those
        // bytes are in the kernel, so the end may move up with it.
        self.advance_end(covered_next);
        self.offsets.borrow_mut().advance_durable(covered_next);
        self.recovery_point.set(RecoveryPoint {
            offset: covered_next,
            segment_base: active.base(),
            position: covered_pos,
        });
        self.recovered_tail.set(false);
        let mut fs = self.flush_state.borrow_mut();
        fs.flushed_records = fs.flushed_records.max(records_before);
        fs.last_flush = self.clock.mono_ms();
        fs.rounds += 1;
        Ok(self.durable_offset())
    }

    /// Group commits done since the log was opened.
    pub fn flush_rounds(&self) -> u64 {
        self.flush_state.borrow().rounds
    }

    /// Records appended since the last flush.
    pub fn unflushed_records(&self) -> i64 {
        let fs = self.flush_state.borrow();
        fs.appended_records - fs.flushed_records
    }

    /// Flushes when `flush.messages` records are waiting (called after each
    /// append, so the append returns only once durable).
    pub(crate) async fn flush_if_policy_says(&self) -> Result<()> {
        let flush_messages = self.config.borrow().flush_messages;
        if self.unflushed_records() >= flush_messages {
            self.flush_inner().await?;
        }
        Ok(())
    }

    /// Flushes when the last flush is `flush.ms` old and records wait
    /// (called by the log manager's periodic task).
    pub async fn flush_if_due(self: &Rc<Self>) -> Result<bool> {
        if self.flush_due() {
            self.flush().await?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Whether `flush.ms` has passed since the last flush with records
    /// still unflushed (no I/O: the scheduler asks every log each round).
    pub fn flush_due(&self) -> bool {
        if self.unflushed_records() == 0 {
            return false;
        }
        let flush_ms = self.config.borrow().flush_ms;
        let since_ms = self.clock.mono_ms().since(self.flush_state.borrow().last_flush);
        i64::try_from(since_ms).unwrap_or(i64::MAX) >= flush_ms
    }

    /// Flushes, persists the active segment's indexes, and writes the
    /// checkpoint marked clean. The log refuses further use. Runs as its own
    /// task (see `append`).
    pub async fn close(self: &Rc<Self>) -> Result<()> {
        let ticket = self.turns.ticket();
        let this = self.clone();
        detached(async move { this.close_inner(ticket).await }).await
    }

    async fn close_inner(&self, ticket: u64) -> Result<()> {
        let ticket = self.turns.hold(ticket);
        if self.closed.get() {
            return Ok(());
        }
        let _turn = ticket.turn().await;
        self.drain_reserved().await?;
        self.flush_inner().await?;
        // The flush may have found nothing new to sync; sealed segments
        // must be on the device all the same before the log is marked clean.
        let sealed: Vec<_> = self.segments.borrow().iter().rev().skip(1).cloned().collect();
        for s in sealed.iter().filter(|s| s.needs_sync()) {
            s.sync_all().await.map_err(|e| self.poison_with(e))?;
        }
        let active = self.active();
        if let Some(a) = active.appender() {
            // Direct mode leaves the last block zero-padded; cut it.
            a.truncate(a.written_end()).await.map_err(|e| self.poison_with(e))?;
        }
        active.meta_mut().push_time_entry(active.base());
        active.sync_all().await.map_err(|e| self.poison_with(e))?;
        self.persist_epochs().await.map_err(|e| self.poison_with(e))?;
        self.snapshot_producers(self.log_end_offset())
            .await
            .map_err(|e| self.poison_with(e))?;
        self.closed.set(true);
        self.write_checkpoint(Shutdown::Clean).await
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use bytes::BytesMut;

    use crate::batch::build_batch;
    use crate::clock::SystemClock;
    use crate::error::EngineError;
    use crate::log::{AppendMode, PartitionLog};
    use crate::log_config::LogConfig;
    use crate::recovery::{OpenParams, Repair};
    use crate::types::{LeaderEpoch, Offset, TimestampMs, TopicPartition};
    use crate::write_mode::WriteMode;

    const LEADER: AppendMode = AppendMode::Leader { epoch: LeaderEpoch(0) };

    fn batch() -> BytesMut {
        BytesMut::from(&build_batch(Offset(0), TimestampMs(0), &[b"value"])[..])
    }

    async fn open(dir: &std::path::Path, flush_messages: i64) -> Rc<PartitionLog> {
        PartitionLog::open(OpenParams {
            tp: TopicPartition::new("t", 0),
            dir: dir.to_path_buf(),
            config: LogConfig {
                flush_messages,
                ..LogConfig::default()
            },
            mode: WriteMode::Buffered,
            clock: Rc::new(SystemClock),
            repair: Repair::Refuse,
            cache_budget: crate::batch_cache::CacheBudget::unshared(),
            file_cache: crate::file_cache::FileCache::unbounded(),
        })
        .await
        .expect("open")
    }

    fn run<T>(f: impl std::future::Future<Output = T>) -> T {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .make()
            .expect("executor")
            .run(f)
    }

    #[test]
    fn flush_messages_1_makes_every_ack_durable_and_concurrent_appends_share_fsyncs() {
        let dir = tempfile::tempdir().expect("tempdir");
        run(async {
            let log = open(dir.path(), 1).await;
            let info = log.append(batch(), LEADER).await.expect("append");
            assert_eq!(log.durable_offset(), info.next_offset);
            let rounds_before = log.flush_rounds();
            let tasks: Vec<_> = (0..64)
                .map(|_| {
                    let log = log.clone();
                    glommio::spawn_local(async move {
                        let info = log.append(batch(), LEADER).await.expect("append");
                        assert!(log.durable_offset() >= info.next_offset, "acked before durable");
                    })
                })
                .collect();
            for t in tasks {
                t.await;
            }
            let rounds = log.flush_rounds() - rounds_before;
            assert!(rounds < 64, "64 appends took {rounds} fsyncs: no group commit");
            assert_eq!(log.durable_offset(), Offset(65));
            log.close().await.expect("close");
        });
    }

    #[test]
    fn default_policy_never_fsyncs_on_append() {
        let dir = tempfile::tempdir().expect("tempdir");
        run(async {
            let log = open(dir.path(), i64::MAX).await;
            for _ in 0..10 {
                log.append(batch(), LEADER).await.expect("append");
            }
            assert_eq!(log.flush_rounds(), 0);
            assert_eq!(log.durable_offset(), Offset(0));
            assert_eq!(log.flush().await.expect("flush"), Offset(10));
            log.close().await.expect("close");
        });
    }

    #[test]
    fn failed_fsync_poisons_the_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        run(async {
            let log = open(dir.path(), 1).await;
            log.append(batch(), LEADER).await.expect("append");
            crate::segment_reader::FAIL_NEXT_SYNC.with(|f| f.set(true));
            let err = log.append(batch(), LEADER).await.expect_err("fsync failed");
            assert!(
                matches!(
                    err,
                    EngineError::Io {
                        op: "fdatasync segment",
                        ..
                    }
                ),
                "{err}"
            );
            assert!(log.is_poisoned());
            // Never retried: later appends and flushes fail, naming the cause.
            let err = log.append(batch(), LEADER).await.expect_err("poisoned");
            assert!(
                matches!(
                    err,
                    EngineError::Poisoned {
                        op: "fdatasync segment",
                        ..
                    }
                ),
                "{err}"
            );
            assert!(matches!(log.flush().await, Err(EngineError::Poisoned { .. })));
            assert!(
                log.close().await.is_err(),
                "no clean shutdown marker for a poisoned log"
            );
            assert_eq!(log.durable_offset(), Offset(1));
        });
    }
}
