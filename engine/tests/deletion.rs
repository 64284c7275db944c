//! Deleting partitions: the directory leaves the partition's name at once
//! and is removed, a new log of the same name starts empty, and what a
//! crash left half-deleted is swept at the next start.

mod common;

use std::path::Path;
use std::rc::Rc;

use common::*;
use ferrite_engine::clock::Clock;
use ferrite_engine::doomed_dirs::doomed_name;
use ferrite_engine::log_manager::{shard_for, LogManager, LogManagerConfig};
use ferrite_engine::{LogConfig, Offset, ShardId, TopicPartition};

fn names(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// A log manager over `dir` with one shard.
async fn one_shard_manager(dir: &Path) -> Rc<LogManager> {
    let clock: Rc<dyn Clock> = manual_clock();
    LogManager::open(LogManagerConfig::new(dir), ShardId(0), 1, clock, &|_| {
        LogConfig::default()
    })
    .await
    .unwrap()
}

#[test]
fn a_deleted_partition_leaves_nothing_and_a_new_one_of_its_name_starts_empty() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let manager = one_shard_manager(dir.path()).await;
        let log = manager.create(&tp(), LogConfig::default()).await.unwrap();
        log.append(producer_batch(5, 100, 0, 1), LEADER).await.unwrap();
        assert!(manager.delete(&tp()).await.unwrap());
        assert!(
            !names(dir.path()).iter().any(|n| n.starts_with("t-0")),
            "{:?}",
            names(dir.path())
        );
        assert_eq!(manager.doomed_dirs_left(), 0);
        // A reader still holding the old log does not keep its name.
        let again = manager.create(&tp(), LogConfig::default()).await.unwrap();
        assert_eq!(again.log_end_offset(), Offset(0));
        drop(log);
        // Nothing to delete twice; a directory a failed creation left (no
        // log served) is deleted too.
        assert!(manager.delete(&tp()).await.unwrap());
        assert!(!manager.delete(&tp()).await.unwrap());
        let leftover = TopicPartition::new("t", 7);
        std::fs::create_dir_all(dir.path().join("t-7")).unwrap();
        assert!(manager.delete(&leftover).await.unwrap());
        assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
        manager.shutdown().await;
    });
}

#[test]
fn a_start_sweeps_its_own_half_deleted_directories_and_opens_none_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let shards = 2;
    let mine = (0..8)
        .map(|p| TopicPartition::new("t", p))
        .find(|tp| shard_for(tp, shards) == ShardId(0))
        .unwrap();
    let theirs = (0..8)
        .map(|p| TopicPartition::new("t", p))
        .find(|tp| shard_for(tp, shards) == ShardId(1))
        .unwrap();
    // What a crash between the rename and the removal leaves: whole
    // segment files under a renamed directory.
    let doomed_mine = dir.path().join(doomed_name(&mine));
    let doomed_theirs = dir.path().join(doomed_name(&theirs));
    for d in [&doomed_mine, &doomed_theirs] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("00000000000000000000.log"), [0u8; 100]).unwrap();
    }
    run(|| async {
        let clock: Rc<dyn Clock> = manual_clock();
        let mc = LogManagerConfig::new(dir.path());
        let manager = LogManager::open(mc, ShardId(0), shards, clock, &|_| LogConfig::default())
            .await
            .unwrap();
        assert!(!doomed_mine.exists());
        assert!(doomed_theirs.exists(), "another shard's directory is left to it");
        assert!(manager.get(&mine).is_none());
        assert!(manager.offline().is_empty());
        manager.shutdown().await;
    });
}

#[test]
fn a_partition_deleted_while_it_is_created_is_not_served_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let manager = one_shard_manager(dir.path()).await;
        // The creation runs until its first wait for I/O; the delete comes
        // then (a StopReplica behind a LeaderAndIsr).
        let target = tp();
        let (created, deleted) = futures::join!(manager.create(&target, LogConfig::default()), async {
            manager.delete(&target).await
        });
        assert!(deleted.unwrap(), "the delete found the creation");
        assert!(
            matches!(created, Err(ferrite_engine::EngineError::DeletedWhileCreated { .. })),
            "{:?}",
            created.map(|_| ())
        );
        assert!(manager.get(&tp()).is_none(), "a deleted partition is served");
        assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
        // Created again afterwards: an empty log.
        let again = manager.create(&tp(), LogConfig::default()).await.unwrap();
        assert_eq!(again.log_end_offset(), Offset(0));
        manager.shutdown().await;
    });
}
