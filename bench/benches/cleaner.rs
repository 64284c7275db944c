//! The log cleaner's throughput: a 64 MiB compacted log of 1 KiB records
//! over 20,000 keys (16 records a batch, 16 MiB segments) cleaned in one
//! pass, against reading and CRC-checking the same segment files (the
//! baseline, taken in the same run).

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ferrite_engine::batch::build_batch_of_records;
use ferrite_engine::cleaner::CleanerParams;
use ferrite_engine::clock::SystemClock;
use ferrite_engine::log_config::{CleanupPolicy, DirtyRatio};
use ferrite_engine::record::Record;
use ferrite_engine::scan::scan_bytes;
use ferrite_engine::{
    AppendMode, LeaderEpoch, LogConfig, Offset, OpenParams, PartitionLog, Repair, TimestampMs, TopicPartition,
    WriteMode,
};

const LOG_BYTES: u64 = 64 << 20;
const KEYS: u64 = 20_000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 16 << 20,
        cleanup_policy: CleanupPolicy::Compact,
        min_cleanable_dirty_ratio: DirtyRatio(0),
        ..LogConfig::default()
    }
}

fn params(dir: &Path) -> OpenParams {
    OpenParams {
        tp: TopicPartition::new("bench", 0),
        dir: dir.to_path_buf(),
        config: config(),
        mode: WriteMode::Buffered,
        clock: Rc::new(SystemClock),
        repair: Repair::Refuse,
        cache_budget: ferrite_engine::batch_cache::CacheBudget::unshared(),
        file_cache: ferrite_engine::file_cache::FileCache::unbounded(),
    }
}

/// A batch of 16 records of 1000 bytes, keys drawn from `KEYS`.
fn batch(x: &mut u64) -> BytesMut {
    let value = vec![7u8; 1000];
    let keys: Vec<String> = (0..16)
        .map(|_| {
            *x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            format!("key-{}", (*x >> 33) % KEYS)
        })
        .collect();
    let records: Vec<Record<'_>> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| Record {
            offset_delta: i as i32,
            timestamp_delta: 0,
            key: Some(k.as_bytes()),
            value: Some(&value),
            headers: Vec::new(),
        })
        .collect();
    BytesMut::from(&build_batch_of_records(Offset(0), TimestampMs(1_700_000_000_000), &records)[..])
}

/// Writes the log (not timed); returns its directory.
async fn write_log(root: &Path) -> PathBuf {
    let dir = root.join("bench-0");
    let log = PartitionLog::open(params(&dir)).await.expect("open");
    let mut x = 1u64;
    while log.size_bytes() < LOG_BYTES {
        log.append(batch(&mut x), AppendMode::Leader { epoch: LeaderEpoch(0) })
            .await
            .expect("append");
    }
    log.close().await.expect("close");
    dir
}

fn bench_cleaner(c: &mut Criterion) {
    let mut g = c.benchmark_group("cleaner");
    g.throughput(Throughput::Bytes(LOG_BYTES));
    g.sample_size(10);
    let root = std::env::var("FERRITE_BENCH_DIR").unwrap_or_else(|_| ".".into());
    g.bench_function("clean_64MiB_20000_keys", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let root = root.clone();
                total += glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
                    .spawn(move || async move {
                        let tmp = tempfile::tempdir_in(root).expect("tempdir");
                        let dir = write_log(tmp.path()).await;
                        let log = PartitionLog::open(params(&dir)).await.expect("open");
                        let start = Instant::now();
                        let params = CleanerParams {
                            entries_max: 1 << 20,
                            bytes_per_second: None,
                        };
                        let outcome = log.clean(params).await.expect("clean").expect("a pass");
                        let took = start.elapsed();
                        assert!(outcome.records_removed > 0);
                        log.close().await.expect("close");
                        took
                    })
                    .expect("executor")
                    .join()
                    .expect("join");
            }
            total
        })
    });
    // The baseline: read the same files and CRC-check every batch.
    let tmp = tempfile::tempdir_in(&root).expect("tempdir");
    let root_dir = tmp.path().to_path_buf();
    let dir = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .spawn(move || async move { write_log(&root_dir).await })
        .expect("executor")
        .join()
        .expect("join");
    g.bench_function("read_and_crc_check_64MiB", |b| {
        b.iter(|| {
            let mut batches = 0;
            for entry in std::fs::read_dir(&dir).expect("dir") {
                let p = entry.expect("entry").path();
                if p.extension().is_some_and(|e| e == "log") {
                    let bytes = std::fs::read(&p).expect("read");
                    batches += scan_bytes(&bytes, Offset(0)).0.len();
                }
            }
            batches
        })
    });
    g.finish();
}

criterion_group!(benches, bench_cleaner);
criterion_main!(benches);
