//! Helpers shared by the engine's integration tests.
#![allow(dead_code)]

use std::future::Future;
use std::path::Path;
use std::rc::Rc;

use bytes::BytesMut;
use ferrite_engine::batch::build_batch;
use ferrite_engine::clock::{Clock, ManualClock};
use ferrite_engine::{
    LeaderEpoch, LogConfig, Offset, OpenParams, PartitionLog, Repair, SizeLimit, TimestampMs, TopicPartition, WriteMode,
};

/// Runs `f` on a fresh glommio executor on this thread.
pub fn run<F, Fut, T>(f: F) -> T
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = T>,
{
    let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .make()
        .expect("executor");
    ex.run(async {
        let guard = ferrite_engine::stall_guard::guard_current_executor("engine-test");
        let out = f().await;
        if guard.kicks() > 0 {
            eprintln!("stall guard: this test's executor was kicked {} times", guard.kicks());
        }
        out
    })
}

pub fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

pub fn params(dir: &Path, config: LogConfig, mode: WriteMode, clock: Rc<dyn Clock>) -> OpenParams {
    OpenParams {
        tp: tp(),
        dir: dir.to_path_buf(),
        config,
        mode,
        clock,
        repair: Repair::Refuse,
        cache_budget: ferrite_engine::batch_cache::CacheBudget::unshared(),
        file_cache: ferrite_engine::file_cache::FileCache::unbounded(),
    }
}

pub fn manual_clock() -> Rc<ManualClock> {
    Rc::new(ManualClock::new(TimestampMs(1_700_000_000_000)))
}

/// A producer batch of `records` values of `value_len` bytes each, timestamps
/// starting at `ts`.
pub fn producer_batch(records: usize, value_len: usize, ts: i64, fill: u8) -> BytesMut {
    let value = vec![fill; value_len];
    let values: Vec<&[u8]> = (0..records).map(|_| &value[..]).collect();
    BytesMut::from(&build_batch(Offset(0), TimestampMs(ts), &values)[..])
}

pub const LEADER: ferrite_engine::AppendMode = ferrite_engine::AppendMode::Leader { epoch: LeaderEpoch(3) };

/// Reads the whole log from `from` to its end in chunks of `max_bytes`,
/// returning every batch's bytes in order.
pub async fn read_all(log: &PartitionLog, from: Offset, max_bytes: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = from;
    let end = log.log_end_offset();
    while at < end {
        let r = log
            .read(at, max_bytes, end, SizeLimit::AtLeastOneBatch)
            .await
            .expect("read");
        assert!(r.next_offset > at, "read at {at} made no progress: {r:?}");
        let bytes = r.to_vec().await.expect("bytes");
        out.extend(split_batches(&bytes));
        at = r.next_offset;
    }
    out
}

/// Splits concatenated whole batches.
pub fn split_batches(mut bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let size = ferrite_engine::batch::claimed_size(bytes).expect("batch length");
        assert!(size <= bytes.len(), "partial batch in a read");
        out.push(bytes[..size].to_vec());
        bytes = &bytes[size..];
    }
    out
}

#[allow(unused_imports)] // not every test file draws numbers
pub use ferrite_testkit::rng::Rng;

/// Runs `body(seed)` for each seed, printing the seed of the first failure.
pub fn for_seeds(seeds: std::ops::Range<u64>, body: impl Fn(u64)) {
    for seed in seeds {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(seed)));
        if let Err(e) = result {
            eprintln!("FAILED with seed={seed} (replay: FERRITE_SEED={seed})");
            std::panic::resume_unwind(e);
        }
    }
}

/// Seeds to run: `FERRITE_SEED` alone when set, else `default`.
pub fn seeds(default: std::ops::Range<u64>) -> std::ops::Range<u64> {
    match std::env::var("FERRITE_SEED").ok().and_then(|s| s.parse::<u64>().ok()) {
        Some(s) => s..s + 1,
        None => default,
    }
}

/// Checks that `batches` are valid and contiguous from `from`; returns the
/// offset after the last.
pub fn assert_contiguous(batches: &[Vec<u8>], from: Offset) -> Offset {
    let mut next = from;
    for b in batches {
        let info = ferrite_engine::batch::validate(b, 1 << 20, ferrite_engine::batch::Validation::Stored)
            .expect("a valid batch");
        assert_eq!(info.base_offset, next, "batches are not contiguous");
        next = info.next_offset();
    }
    next
}
