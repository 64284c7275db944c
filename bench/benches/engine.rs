//! Criterion benches of the storage engine's hot paths: append of 16 KiB
//! batches, batch validation, offset index look-up, and the recovery scan.

use std::cell::Cell;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ferrite_bench::batch_template;
use ferrite_engine::batch::{self, stamp, Validation};
use ferrite_engine::clock::SystemClock;
use ferrite_engine::offset_index::{self, OffsetEntry, OffsetIndex};
use ferrite_engine::scan::scan_bytes;
use ferrite_engine::{
    AppendMode, LeaderEpoch, LogConfig, Offset, OpenParams, PartitionLog, Repair, TopicPartition, WriteMode,
};

/// Appends `iters` 16 KiB batches with 32 in flight; returns the time taken.
fn append_run(mode: WriteMode, iters: u64) -> Duration {
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .spawn(move || async move {
            let dir = tempfile::tempdir_in(std::env::var("FERRITE_BENCH_DIR").unwrap_or_else(|_| ".".into()))
                .expect("tempdir");
            let log = PartitionLog::open(OpenParams {
                tp: TopicPartition::new("bench", 0),
                dir: dir.path().join("bench-0"),
                config: LogConfig::default(),
                mode,
                clock: Rc::new(SystemClock),
                repair: Repair::Refuse,
                cache_budget: ferrite_engine::batch_cache::CacheBudget::unshared(),
                file_cache: ferrite_engine::file_cache::FileCache::unbounded(),
            })
            .await
            .expect("open");
            let template = batch_template(16, 1000);
            let issued = Rc::new(Cell::new(0u64));
            let start = Instant::now();
            let tasks: Vec<_> = (0..32)
                .map(|_| {
                    let log = log.clone();
                    let issued = issued.clone();
                    let template = template.clone();
                    glommio::spawn_local(async move {
                        while issued.get() < iters {
                            issued.set(issued.get() + 1);
                            log.append(template.clone(), AppendMode::Leader { epoch: LeaderEpoch(0) })
                                .await
                                .expect("append");
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await;
            }
            let elapsed = start.elapsed();
            log.close().await.expect("close");
            elapsed
        })
        .expect("executor")
        .join()
        .expect("join")
}

fn bench_append(c: &mut Criterion) {
    let mut g = c.benchmark_group("append_16KiB_batches");
    g.throughput(Throughput::Bytes(batch_template(16, 1000).len() as u64));
    g.sample_size(10);
    for mode in [WriteMode::Buffered, WriteMode::Direct] {
        g.bench_function(BenchmarkId::from_parameter(mode.name()), |b| {
            b.iter_custom(|iters| append_run(mode, iters))
        });
    }
    g.finish();
}

fn bench_validate(c: &mut Criterion) {
    let b16 = batch_template(16, 1000);
    let mut g = c.benchmark_group("validate_batch");
    g.throughput(Throughput::Bytes(b16.len() as u64));
    g.bench_function("16KiB_crc_and_header", |b| {
        b.iter(|| batch::validate(std::hint::black_box(&b16), 1 << 20, Validation::Producer).expect("valid"))
    });
    g.finish();
}

fn bench_index_lookup(c: &mut Criterion) {
    // A full 1 GiB segment: one entry per 4 KiB.
    let mut idx = OffsetIndex::new(PathBuf::from("bench.index"));
    for i in 0..262_144u32 {
        idx.push(OffsetEntry {
            relative_offset: i * 4,
            position: i * 4096,
        });
    }
    let base = Offset(1_000_000);
    let mut x = 0x9E37_79B9u64;
    c.bench_function("offset_index_lookup_262144_entries", |b| {
        b.iter(|| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            let target = Offset(base.0 + (x >> 33) as i64 % (262_144 * 4));
            offset_index::lookup(&idx, base, std::hint::black_box(target))
        })
    });
}

fn segment_bytes(total: usize) -> Vec<u8> {
    let template = batch_template(16, 1000);
    let mut out = Vec::with_capacity(total + template.len());
    let mut next = 0i64;
    while out.len() < total {
        let mut b = template.to_vec();
        stamp(&mut b, Offset(next), LeaderEpoch(0));
        next += 16;
        out.extend_from_slice(&b);
    }
    out
}

fn bench_recovery_scan(c: &mut Criterion) {
    let bytes = segment_bytes(64 << 20);
    let mut g = c.benchmark_group("recovery_scan");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.sample_size(20);
    g.bench_function("in_memory_64MiB", |b| {
        b.iter(|| {
            let (found, end, _) = scan_bytes(std::hint::black_box(&bytes), Offset(0));
            assert_eq!(end as usize, bytes.len());
            found.len()
        })
    });
    // The real thing: open a 256 MiB log after an unclean shutdown (page
    // cache warm), which reads, CRC-checks and re-indexes every batch.
    let dir = tempfile::tempdir_in(std::env::var("FERRITE_BENCH_DIR").unwrap_or_else(|_| ".".into())).expect("tempdir");
    let part = dir.path().join("bench-0");
    std::fs::create_dir_all(&part).expect("mkdir");
    let file_bytes = segment_bytes(256 << 20);
    std::fs::write(part.join("00000000000000000000.log"), &file_bytes).expect("write");
    g.throughput(Throughput::Bytes(file_bytes.len() as u64));
    g.sample_size(10);
    g.bench_function("open_unclean_256MiB", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let part = part.clone();
                total += glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
                    .spawn(move || async move {
                        // Forget any checkpoint so the whole file is scanned.
                        let _ = std::fs::remove_file(part.join("checkpoint"));
                        for ext in ["index", "timeindex"] {
                            let _ = std::fs::remove_file(part.join(format!("00000000000000000000.{ext}")));
                        }
                        let start = Instant::now();
                        let log = PartitionLog::open(OpenParams {
                            tp: TopicPartition::new("bench", 0),
                            dir: part.clone(),
                            config: LogConfig::default(),
                            mode: WriteMode::Buffered,
                            clock: Rc::new(SystemClock),
                            repair: Repair::Refuse,
                            cache_budget: ferrite_engine::batch_cache::CacheBudget::unshared(),
                            file_cache: ferrite_engine::file_cache::FileCache::unbounded(),
                        })
                        .await
                        .expect("open");
                        let took = start.elapsed();
                        drop(log);
                        took
                    })
                    .expect("executor")
                    .join()
                    .expect("join");
            }
            total
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    bench_validate,
    bench_index_lookup,
    bench_recovery_scan,
    bench_append
);
criterion_main!(benches);
