//! Retention by time and by size, driven by a manual clock.

mod common;

use std::rc::Rc;
use std::time::Duration;

use common::*;
use ferrite_engine::clock::Clock;
use ferrite_engine::log_manager::{LogManager, LogManagerConfig};
use ferrite_engine::{EngineError, LogConfig, Offset, PartitionLog, ShardId, SizeLimit, WriteMode};

const HOUR_MS: i64 = 3_600_000;

fn config(retention_ms: i64, retention_bytes: i64) -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        retention_ms,
        retention_bytes,
        ..LogConfig::default()
    }
}

#[test]
fn time_retention_deletes_old_sealed_segments_and_persists_the_log_start() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock = manual_clock();
        let dyn_clock: Rc<dyn Clock> = clock.clone();
        let log = PartitionLog::open(params(
            dir.path(),
            config(HOUR_MS, -1),
            WriteMode::Buffered,
            dyn_clock.clone(),
        ))
        .await
        .unwrap();
        // Old data: timestamps "now"; then two hours pass and new data comes.
        for _ in 0..20 {
            log.append(producer_batch(1, 900, clock.now_ms().0, 1), LEADER)
                .await
                .unwrap();
        }
        let old_end = log.log_end_offset();
        clock.advance_ms(2 * HOUR_MS);
        for _ in 0..10 {
            log.append(producer_batch(1, 900, clock.now_ms().0, 2), LEADER)
                .await
                .unwrap();
        }
        let segments = log.segment_count();
        let outcome = log.apply_retention().await.unwrap();
        assert!(outcome.segments_deleted > 0);
        assert!(log.segment_count() < segments);
        // Every segment that held only old data is gone, the one holding the
        // boundary stays (its largest timestamp is new).
        assert!(log.log_start_offset() <= old_end && log.log_start_offset() > Offset(0));
        let start = log.log_start_offset();
        assert!(matches!(
            log.read(Offset(start.0 - 1), 1000, log.log_end_offset(), SizeLimit::Strict)
                .await,
            Err(EngineError::OffsetOutOfRange { .. })
        ));
        assert_eq!(
            read_all(&log, start, 1 << 20).await.len() as i64,
            log.log_end_offset().0 - start.0
        );
        // Nothing left to delete now; the active segment is never deleted.
        clock.advance_ms(10 * HOUR_MS);
        log.apply_retention().await.unwrap();
        assert_eq!(log.segment_count(), 1);
        let start = log.log_start_offset();
        drop(log); // unclean: the log start must come from the checkpoint
        let log = PartitionLog::open(params(dir.path(), config(HOUR_MS, -1), WriteMode::Buffered, dyn_clock))
            .await
            .unwrap();
        assert_eq!(log.log_start_offset(), start);
        log.close().await.unwrap();
    });
}

#[test]
fn size_retention_keeps_at_least_retention_bytes() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock: Rc<dyn Clock> = manual_clock();
        let limit = 20_000;
        let log = PartitionLog::open(params(dir.path(), config(-1, limit), WriteMode::Buffered, clock))
            .await
            .unwrap();
        for _ in 0..100 {
            log.append(producer_batch(1, 900, 0, 1), LEADER).await.unwrap();
        }
        let before = log.size_bytes();
        assert!(before > 4 * limit as u64);
        let outcome = log.apply_retention().await.unwrap();
        assert!(outcome.segments_deleted > 0);
        let after = log.size_bytes();
        assert!(after >= limit as u64, "deleted too much: {after}");
        assert!(after < limit as u64 + 4096, "kept too much: {after}");
        assert_eq!(before - after, outcome.bytes_deleted);
        log.close().await.unwrap();
    });
}

#[test]
fn retention_deletes_nothing_at_or_above_the_retention_limit() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock: Rc<dyn Clock> = manual_clock();
        let log = PartitionLog::open(params(dir.path(), config(-1, 1), WriteMode::Buffered, clock))
            .await
            .unwrap();
        for _ in 0..40 {
            log.append(producer_batch(1, 900, 0, 1), LEADER).await.unwrap();
        }
        let bases = log.segment_bases();
        assert!(bases.len() > 4, "{bases:?}");
        // A high watermark inside the third segment: only the two below it
        // may go, however small retention.bytes is.
        let hw = Offset(bases[2].0 + 1);
        log.set_retention_limit(Some(hw));
        log.apply_retention().await.unwrap();
        assert_eq!(log.log_start_offset(), bases[2]);
        // With the limit lifted, everything but the active segment goes.
        log.set_retention_limit(None);
        log.apply_retention().await.unwrap();
        assert_eq!(log.segment_count(), 1);
        log.close().await.unwrap();
    });
}

#[test]
fn the_log_manager_runs_retention_every_check_interval() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock = manual_clock();
        let dyn_clock: Rc<dyn Clock> = clock.clone();
        let mut mc = LogManagerConfig::new(dir.path());
        mc.retention_check_interval_ms = 20;
        let manager = LogManager::open(mc, ShardId(0), 1, dyn_clock, &|_| config(HOUR_MS, -1))
            .await
            .unwrap();
        manager.start_background();
        let log = manager.create(&tp(), config(HOUR_MS, -1)).await.unwrap();
        for _ in 0..20 {
            log.append(producer_batch(1, 900, clock.now_ms().0, 1), LEADER)
                .await
                .unwrap();
        }
        glommio::timer::sleep(Duration::from_millis(100)).await;
        assert_eq!(log.log_start_offset(), Offset(0), "nothing is old yet");
        clock.advance_ms(2 * HOUR_MS);
        let mut waited = 0;
        while log.log_start_offset() == Offset(0) {
            assert!(waited < 5000, "retention did not run");
            glommio::timer::sleep(Duration::from_millis(20)).await;
            waited += 20;
        }
        assert_eq!(log.segment_count(), 1);
        manager.shutdown().await;
        drop(log);
        // Reopened by a new manager: clean shutdown, same log start.
        let mc = LogManagerConfig::new(dir.path());
        let manager = LogManager::open(mc, ShardId(0), 1, clock.clone(), &|_| config(HOUR_MS, -1))
            .await
            .unwrap();
        let log = manager.get(&tp()).expect("log reopened");
        assert!(log.log_start_offset() > Offset(0));
        manager.delete(&tp()).await.unwrap();
        assert!(!dir.path().join("t-0").exists());
        manager.shutdown().await;
    });
}

#[test]
fn delete_records_moves_the_log_start_inside_a_segment_and_not_past_the_hw() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock: Rc<dyn Clock> = manual_clock();
        let log = PartitionLog::open(params(dir.path(), config(-1, -1), WriteMode::Buffered, clock.clone()))
            .await
            .unwrap();
        for _ in 0..100 {
            log.append(producer_batch(1, 300, 0, 1), LEADER).await.unwrap();
        }
        let segments = log.segment_count();
        log.set_retention_limit(Some(Offset(50)));
        assert!(matches!(
            log.delete_records(Offset(51)).await,
            Err(EngineError::OffsetOutOfRange { .. })
        ));
        assert_eq!(log.delete_records(Offset(37)).await.unwrap(), Offset(37));
        assert!(log.segment_count() < segments, "segments wholly below went");
        assert!(log.segment_bases()[0] <= Offset(37), "the segment holding 37 stays");
        assert!(matches!(
            log.read(Offset(36), 1000, Offset(50), SizeLimit::Strict).await,
            Err(EngineError::OffsetOutOfRange { .. })
        ));
        let r = log
            .read(Offset(37), 1000, Offset(50), SizeLimit::AtLeastOneBatch)
            .await
            .unwrap();
        assert_eq!(r.first_offset, Offset(37));
        assert_eq!(log.delete_records(Offset(10)).await.unwrap(), Offset(37), "never back");
        // A follower takes a leader's log start up to its own end.
        assert_eq!(log.follow_log_start(Offset(45)).await.unwrap(), Offset(45));
        assert_eq!(log.follow_log_start(Offset(500)).await.unwrap(), log.log_end_offset());
        let start = log.log_start_offset();
        drop(log); // unclean: the log start comes from the checkpoint
        let log = PartitionLog::open(params(dir.path(), config(-1, -1), WriteMode::Buffered, clock))
            .await
            .unwrap();
        assert_eq!(log.log_start_offset(), start);
        log.close().await.unwrap();
    });
}
