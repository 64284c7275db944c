//! Situations found in review: cancelled callers, replicated offsets far
//! above an empty segment, batches without timestamps under time retention,
//! and one damaged partition among healthy ones.

mod common;

use std::rc::Rc;
use std::time::Duration;

use bytes::BytesMut;
use common::*;
use ferrite_engine::batch::{build_batch, stamp};
use ferrite_engine::checkpoint::Shutdown;
use ferrite_engine::clock::{Clock, SystemClock};
use ferrite_engine::log_manager::{LogManager, LogManagerConfig};
use ferrite_engine::{AppendMode, LeaderEpoch, LogConfig, Offset, PartitionLog, ShardId, TimestampMs, WriteMode};

#[test]
fn appends_whose_callers_go_away_still_finish_and_the_log_goes_on() {
    for mode in [WriteMode::Direct, WriteMode::DirectPreallocated, WriteMode::Buffered] {
        let dir = tempfile::tempdir().unwrap();
        run(|| async {
            let clock: Rc<dyn Clock> = Rc::new(SystemClock);
            let config = LogConfig {
                segment_bytes: 8192,
                ..LogConfig::default()
            };
            let log = PartitionLog::open(params(dir.path(), config, mode, clock))
                .await
                .unwrap();
            // Start 200 appends and cancel every other caller at once.
            let mut kept = Vec::new();
            for i in 0..200 {
                let log = log.clone();
                let task = glommio::spawn_local(async move { log.append(producer_batch(2, 300, i, 1), LEADER).await });
                if i % 2 == 0 {
                    kept.push(task);
                }
            }
            for t in kept {
                t.await.unwrap();
            }
            glommio::timer::sleep(Duration::from_millis(50)).await;
            // Every append ran to the end: nothing stuck, offsets dense.
            assert_eq!(log.log_end_offset(), Offset(400));
            let next = log.append(producer_batch(1, 10, 0, 2), LEADER).await.unwrap();
            assert_eq!(next.first_offset, Offset(400));
            assert_contiguous(&read_all(&log, Offset(0), 1 << 20).await, Offset(0));
            log.close().await.unwrap();
        });
    }
}

#[test]
fn a_replicated_batch_far_above_an_empty_segment_gets_its_own_segment() {
    let dir = tempfile::tempdir().unwrap();
    let far = Offset(5 << 32);
    run(|| async {
        let clock: Rc<dyn Clock> = Rc::new(SystemClock);
        let log = PartitionLog::open(params(
            dir.path(),
            LogConfig::default(),
            WriteMode::Direct,
            clock.clone(),
        ))
        .await
        .unwrap();
        let mut b = build_batch(Offset(0), TimestampMs(1), &[b"a", b"b"]);
        stamp(&mut b, far, LeaderEpoch(4));
        let info = log.append(BytesMut::from(&b[..]), AppendMode::Replica).await.unwrap();
        assert_eq!(info.first_offset, far);
        assert_eq!(*log.segment_bases().last().unwrap(), far);
        log.close().await.unwrap();
        drop(log);
        let log = PartitionLog::open(params(dir.path(), LogConfig::default(), WriteMode::Direct, clock))
            .await
            .unwrap();
        assert_eq!(log.log_end_offset(), far.plus(2));
        log.close().await.unwrap();
    });
}

#[test]
fn batches_without_timestamps_are_aged_by_file_time_not_deleted_at_once() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let now = SystemClock.now_ms();
        let clock = Rc::new(ferrite_engine::clock::ManualClock::new(now));
        let dyn_clock: Rc<dyn Clock> = clock.clone();
        let config = LogConfig {
            segment_bytes: 2048,
            retention_ms: 3_600_000,
            ..LogConfig::default()
        };
        let log = PartitionLog::open(params(dir.path(), config, WriteMode::Buffered, dyn_clock))
            .await
            .unwrap();
        for _ in 0..20 {
            // Timestamp -1: "no timestamp".
            log.append(producer_batch(1, 500, -1, 1), LEADER).await.unwrap();
        }
        assert!(log.segment_count() > 3);
        let outcome = log.apply_retention().await.unwrap();
        assert_eq!(
            outcome.segments_deleted, 0,
            "fresh segments without timestamps were deleted"
        );
        clock.advance_ms(2 * 3_600_000);
        let outcome = log.apply_retention().await.unwrap();
        assert!(
            outcome.segments_deleted > 0,
            "old segments without timestamps are kept forever"
        );
        log.close().await.unwrap();
    });
}

#[test]
fn a_damaged_partition_stays_offline_and_the_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock: Rc<dyn Clock> = Rc::new(SystemClock);
        let manager = LogManager::open(LogManagerConfig::new(dir.path()), ShardId(0), 1, clock.clone(), &|_| {
            LogConfig::default()
        })
        .await
        .unwrap();
        for name in ["good", "bad"] {
            let log = manager
                .create(&ferrite_engine::TopicPartition::new(name, 0), LogConfig::default())
                .await
                .unwrap();
            for i in 0..10 {
                log.append(producer_batch(1, 200, i, 1), LEADER).await.unwrap();
            }
            log.flush().await.unwrap();
            log.write_checkpoint(Shutdown::Unclean).await.unwrap();
        }
        drop(manager);
        // Damage a fsynced batch of "bad".
        let seg = dir.path().join("bad-0").join("00000000000000000000.log");
        let mut bytes = std::fs::read(&seg).unwrap();
        bytes[100] ^= 0xff;
        std::fs::write(&seg, bytes).unwrap();
        let manager = LogManager::open(LogManagerConfig::new(dir.path()), ShardId(0), 1, clock, &|_| {
            LogConfig::default()
        })
        .await
        .expect("the shard opens despite one damaged partition");
        assert!(manager.get(&ferrite_engine::TopicPartition::new("good", 0)).is_some());
        assert!(manager.get(&ferrite_engine::TopicPartition::new("bad", 0)).is_none());
        let offline = manager.offline();
        assert_eq!(offline.len(), 1);
        assert!(offline[0].1.contains("recovery point"), "{}", offline[0].1);
        // Nothing is created over the damaged files.
        assert!(manager
            .create(&ferrite_engine::TopicPartition::new("bad", 0), LogConfig::default())
            .await
            .is_err());
        manager.shutdown().await;
    });
}

#[test]
fn appends_take_offsets_in_call_order_across_rolls() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock: Rc<dyn Clock> = Rc::new(SystemClock);
        let config = LogConfig {
            segment_bytes: 3000,
            ..LogConfig::default()
        };
        let log = PartitionLog::open(params(dir.path(), config, WriteMode::Direct, clock))
            .await
            .unwrap();
        // Each task calls append as soon as it runs; tasks run in spawn order.
        let tasks: Vec<_> = (0..150u8)
            .map(|i| {
                let log = log.clone();
                glommio::spawn_local(async move { log.append(producer_batch(1, 700, 0, i), LEADER).await.unwrap() })
            })
            .collect();
        for (i, t) in tasks.into_iter().enumerate() {
            assert_eq!(t.await.first_offset, Offset(i as i64), "append {i} was reordered");
        }
        assert!(log.segment_count() > 20, "the test should roll often");
        log.close().await.unwrap();
    });
}

/// A data directory given relative to the working directory (as README's
/// `--data-dir ./ferrite-data`) serves a partition: creation, appends, a
/// checkpoint (which fsyncs the partition's directory) and reopening.
#[test]
fn a_relative_data_dir_serves_partitions() {
    let cwd = std::env::current_dir().unwrap();
    let dir = tempfile::tempdir_in(&cwd).unwrap();
    let relative = std::path::PathBuf::from(".")
        .join(dir.path().strip_prefix(&cwd).unwrap())
        .join("data");
    assert!(relative.is_relative());
    let tp = ferrite_engine::TopicPartition::new("first", 0);
    run(|| async {
        let clock: Rc<dyn Clock> = Rc::new(SystemClock);
        let open = || {
            LogManager::open(LogManagerConfig::new(&relative), ShardId(0), 1, clock.clone(), &|_| {
                LogConfig::default()
            })
        };
        let manager = open().await.expect("open with a relative data dir");
        let log = manager
            .create(&tp, LogConfig::default())
            .await
            .expect("create a partition");
        log.append(producer_batch(1, 200, 0, 1), LEADER).await.expect("append");
        log.flush().await.unwrap();
        log.write_checkpoint(Shutdown::Unclean).await.expect("checkpoint");
        drop(log);
        manager.shutdown().await;
        let manager = open().await.expect("reopen");
        let log = manager.get(&tp).expect("the partition is found again");
        assert_eq!(log.log_end_offset().0, 1);
        manager.shutdown().await;
    });
}

/// `max.message.bytes` bounds producers, not replication: a follower whose
/// topic's limit was lowered still stores a larger batch its leader has
/// (else it could never catch up and would leave the ISR for good).
#[test]
fn a_follower_stores_a_batch_larger_than_the_topics_limit() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock: Rc<dyn Clock> = Rc::new(SystemClock);
        let config = LogConfig {
            max_message_bytes: 1024,
            ..LogConfig::default()
        };
        let log = PartitionLog::open(params(dir.path(), config, WriteMode::Buffered, clock))
            .await
            .unwrap();
        let large = producer_batch(1, 4000, 0, 1);
        assert!(
            log.append(large.clone(), LEADER).await.is_err(),
            "a producer's batch over the limit is refused"
        );
        let mut replicated = large.to_vec();
        stamp(&mut replicated, Offset(0), LeaderEpoch(0));
        let info = log
            .append_replica(bytes::Bytes::from(replicated))
            .await
            .expect("the follower stores its leader's batch");
        assert_eq!(info.first_offset, Offset(0));
        assert_eq!(log.log_end_offset(), Offset(1));
    });
}
