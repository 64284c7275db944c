//! Many logs sharing a file cache far smaller than their files: every
//! append, read, roll, truncation and retention still works, the cache
//! never keeps more than its cap open, and the process's descriptors stay
//! bounded — across a clean and an unclean reopen.

mod common;

use std::collections::BTreeMap;
use std::rc::Rc;

use common::*;
use ferrite_engine::clock::{Clock, SystemClock};
use ferrite_engine::file_cache::FileCache;
use ferrite_engine::{LogConfig, Offset, PartitionLog, SizeLimit, TopicPartition, WriteMode};

const LOGS: usize = 12;
const OPEN_FILES_MAX: usize = 3;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd").count()
}

use ferrite_testkit::rng::Rng;

async fn open_all(root: &std::path::Path, mode: WriteMode, cache: &Rc<FileCache>) -> Vec<Rc<PartitionLog>> {
    let mut logs = Vec::new();
    for i in 0..LOGS {
        let clock: Rc<dyn Clock> = Rc::new(SystemClock);
        let config = LogConfig {
            segment_bytes: 24 << 10,
            ..LogConfig::default()
        };
        let mut p = params(&root.join(format!("p-{i}")), config, mode, clock);
        p.tp = TopicPartition::new("p", i as i32);
        p.file_cache = cache.clone();
        logs.push(PartitionLog::open(p).await.expect("open"));
    }
    logs
}

/// Every log holds exactly what `sent` says, from its log start on.
async fn check(logs: &[Rc<PartitionLog>], sent: &[BTreeMap<Offset, Vec<u8>>], cache: &FileCache) {
    for (log, sent) in logs.iter().zip(sent) {
        let start = log.log_start_offset();
        let stored = read_all(log, start, 64 << 10).await;
        let expected: Vec<_> = sent.range(start..).collect();
        assert_eq!(stored.len(), expected.len(), "batches in {}", log.topic_partition());
        for (b, (first, s)) in stored.iter().zip(expected) {
            assert_eq!(b[16..], s[16..], "batch at {first} of {}", log.topic_partition());
        }
        assert!(cache.stats().open <= OPEN_FILES_MAX);
    }
}

fn workload(seed: u64, mode: WriteMode) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    let fds_before = open_fds();
    let sent = run(|| async {
        let cache = FileCache::new(OPEN_FILES_MAX);
        let logs = open_all(&root, mode, &cache).await;
        let mut sent: Vec<BTreeMap<Offset, Vec<u8>>> = vec![BTreeMap::new(); LOGS];
        let mut rng = Rng::new(seed);
        // A read whose file region is held while other files open and close.
        let mut held = None;
        for round in 0..600u64 {
            let i = rng.below(LOGS as u64) as usize;
            let log = &logs[i];
            match rng.below(10) {
                0..=5 => {
                    // A few appends at once, of odd sizes.
                    let n = 1 + rng.below(3);
                    let batches: Vec<_> = (0..n)
                        .map(|k| {
                            producer_batch(
                                1 + rng.below(4) as usize,
                                1 + rng.below(3000) as usize,
                                1000,
                                (round + k) as u8,
                            )
                        })
                        .collect();
                    let appends: Vec<_> = batches
                        .into_iter()
                        .map(|b| {
                            let copy = b.to_vec();
                            let log = log.clone();
                            glommio::spawn_local(async move { (log.append(b, LEADER).await.expect("append"), copy) })
                        })
                        .collect();
                    for task in appends {
                        let (info, copy) = task.await;
                        sent[i].insert(info.first_offset, copy);
                    }
                }
                6..=7 => {
                    let end = log.log_end_offset();
                    if end > Offset(0) {
                        let from = Offset(rng.below(end.0 as u64) as i64).max(log.log_start_offset());
                        let r = log
                            .read(from, 8 << 10, end, SizeLimit::AtLeastOneBatch)
                            .await
                            .expect("read");
                        if held.is_none() {
                            held = Some((i, r));
                        } else {
                            let bytes = r.to_vec().await.expect("bytes");
                            assert!(!split_batches(&bytes).is_empty());
                        }
                    }
                }
                8 => {
                    if let Some((j, r)) = held.take() {
                        // Its file may have been evicted since; the bytes
                        // still come back whole.
                        let bytes = r.to_vec().await.expect("held read");
                        let batches = split_batches(&bytes);
                        assert!(!batches.is_empty(), "held read of log {j} came back empty");
                    }
                }
                _ => {
                    let end = log.log_end_offset();
                    if end.0 > 4 && rng.below(2) == 0 {
                        // Cut the last few records (a follower's truncation).
                        let to = Offset(end.0 - 1 - rng.below(3) as i64);
                        let cut = log.truncate_to(to).await.expect("truncate");
                        sent[i].retain(|first, _| *first < cut);
                    } else if log.segment_count() > 2 {
                        let below = log.segment_bases()[1];
                        log.follow_log_start(below).await.expect("retention");
                    }
                }
            }
            assert!(
                cache.stats().open <= OPEN_FILES_MAX,
                "round {round}: {:?}",
                cache.stats()
            );
        }
        drop(held);
        let stats = cache.stats();
        assert!(stats.evictions > 100, "the cap was never in play: {stats:?}");
        assert!(
            open_fds() <= fds_before + OPEN_FILES_MAX + 8,
            "descriptors: {} before, {} now",
            fds_before,
            open_fds()
        );
        check(&logs, &sent, &cache).await;
        for log in &logs {
            log.close().await.expect("close");
        }
        sent
    });
    // A clean reopen, then an unclean one (dropped without close).
    for _ in 0..2 {
        run(|| async {
            let cache = FileCache::new(OPEN_FILES_MAX);
            let logs = open_all(&root, mode, &cache).await;
            check(&logs, &sent, &cache).await;
        });
    }
}

#[test]
fn logs_sharing_a_small_file_cache_keep_every_record() {
    for_seeds(seeds(0..2), |seed| {
        for mode in [WriteMode::Direct, WriteMode::DirectPreallocated, WriteMode::Buffered] {
            workload(seed, mode);
        }
    });
}
