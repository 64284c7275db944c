//! Idempotent producers: retries deduplicated with their original offsets,
//! gaps and stale epochs refused, and the state kept across clean and
//! unclean reopens, segment rolls, truncation and replicated appends.

mod common;

use std::rc::Rc;

use bytes::BytesMut;
use common::*;
use ferrite_engine::clock::{Clock, SystemClock};
use ferrite_engine::{AppendMode, EngineError, LogConfig, Offset, PartitionLog, WriteMode};

/// An idempotent producer's batch: `records` records from sequence `seq`.
fn idempotent(pid: i64, epoch: i16, seq: i32, records: usize) -> BytesMut {
    let mut b = producer_batch(records, 20, 1_000, seq as u8);
    ferrite_engine::batch::set_producer(&mut b, ferrite_engine::ProducerId(pid), epoch, seq);
    b
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

async fn open(dir: &std::path::Path) -> Rc<PartitionLog> {
    let clock: Rc<dyn Clock> = Rc::new(SystemClock);
    PartitionLog::open(params(dir, config(), WriteMode::Buffered, clock))
        .await
        .expect("open")
}

/// Appends batches 0..n of producer 9 (5 records each).
async fn append_run(log: &Rc<PartitionLog>, from: i32, n: i32) {
    for i in from..from + n {
        let info = log.append(idempotent(9, 0, i * 5, 5), LEADER).await.expect("append");
        assert!(!info.duplicate);
    }
}

fn is_sequence_error(r: &Result<ferrite_engine::AppendInfo, EngineError>) -> bool {
    matches!(r, Err(EngineError::Sequence { .. }))
}

#[test]
fn retries_get_their_original_offsets_and_gaps_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let log = open(dir.path()).await;
        append_run(&log, 0, 3).await;
        let end = log.log_end_offset();
        let retry = log.append(idempotent(9, 0, 5, 5), LEADER).await.expect("retry");
        assert!(retry.duplicate);
        assert_eq!((retry.first_offset, retry.last_offset), (Offset(5), Offset(9)));
        assert_eq!(log.log_end_offset(), end, "nothing appended");
        assert!(is_sequence_error(&log.append(idempotent(9, 0, 20, 5), LEADER).await));
        assert_eq!(log.log_end_offset(), end, "refused batches write nothing");
        // A producer at epoch 2 is fenced from epoch 1.
        log.append(idempotent(10, 2, 0, 1), LEADER).await.expect("epoch 2");
        let end = log.log_end_offset();
        assert!(is_sequence_error(&log.append(idempotent(10, 1, 1, 1), LEADER).await));
        assert_eq!(log.log_end_offset(), end, "refused batches write nothing");
        // Two batches of an idempotent producer in one record set are refused.
        let mut two = idempotent(9, 0, 15, 5);
        two.extend_from_slice(&idempotent(9, 0, 20, 5));
        assert!(log.append(two, LEADER).await.is_err());
        log.close().await.unwrap();
    });
}

#[test]
fn the_state_survives_clean_and_unclean_reopens_and_rolls() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let log = open(dir.path()).await;
        append_run(&log, 0, 40).await;
        assert!(log.segment_count() > 3, "rolled: {}", log.segment_count());
        log.close().await.unwrap();
        let log = open(dir.path()).await;
        let retry = log.append(idempotent(9, 0, 39 * 5, 5), LEADER).await.unwrap();
        assert!(retry.duplicate, "clean reopen: the snapshot has the last batches");
        append_run(&log, 40, 10).await;
        // A crash: dropped without close. The snapshot of the last roll and
        // the batches after it rebuild the state.
        drop(log);
    });
    run(|| async {
        let log = open(dir.path()).await;
        let retry = log.append(idempotent(9, 0, 49 * 5, 5), LEADER).await.unwrap();
        assert!(retry.duplicate, "unclean reopen");
        assert_eq!(retry.first_offset, Offset(49 * 5));
        assert!(is_sequence_error(
            &log.append(idempotent(9, 0, 51 * 5, 5), LEADER).await
        ));
        log.close().await.unwrap();
    });
}

#[test]
fn a_missing_or_damaged_snapshot_is_rebuilt_from_the_whole_log() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let log = open(dir.path()).await;
        append_run(&log, 0, 30).await;
        log.close().await.unwrap();
    });
    std::fs::write(dir.path().join("producer-state"), b"FPS1garbage").unwrap();
    run(|| async {
        let log = open(dir.path()).await;
        let retry = log.append(idempotent(9, 0, 29 * 5, 5), LEADER).await.unwrap();
        assert!(retry.duplicate);
        log.close().await.unwrap();
    });
}

#[test]
fn truncation_forgets_the_batches_it_removes() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let log = open(dir.path()).await;
        append_run(&log, 0, 20).await;
        log.truncate_to(Offset(50)).await.unwrap();
        // Batch 10 (offsets 50..54) is gone: its retry is appended again,
        // where it belongs.
        let again = log.append(idempotent(9, 0, 50, 5), LEADER).await.unwrap();
        assert!(!again.duplicate);
        assert_eq!(again.first_offset, Offset(50));
        let retry = log.append(idempotent(9, 0, 45, 5), LEADER).await.unwrap();
        assert!(retry.duplicate, "batch 9 is still there");
        log.close().await.unwrap();
    });
}

#[test]
fn a_follower_learns_the_sequences_from_replicated_batches() {
    let leader_dir = tempfile::tempdir().unwrap();
    let follower_dir = tempfile::tempdir().unwrap();
    run(|| async {
        let leader = open(leader_dir.path()).await;
        append_run(&leader, 0, 5).await;
        let follower = open(follower_dir.path()).await;
        for b in read_all(&leader, Offset(0), 1 << 20).await {
            follower
                .append(BytesMut::from(&b[..]), AppendMode::Replica)
                .await
                .unwrap();
        }
        // The follower becomes leader: a retry of the last batch is known.
        let retry = follower.append(idempotent(9, 0, 20, 5), LEADER).await.unwrap();
        assert!(retry.duplicate);
        assert_eq!(retry.first_offset, Offset(20));
        leader.close().await.unwrap();
        follower.close().await.unwrap();
    });
}
