//! `ferrite-bench engine`: appends to one partition through the engine and,
//! in the same run, writes the same number of bytes with a plain sequential
//! O_DIRECT writer, so that the engine is judged against the disk it runs on.
//!
//! Both sides end with an fdatasync, so both figures are bytes on the device
//! per second. The raw writer runs before and after the engine and the mean
//! is the baseline, which evens out drift in the device's speed.

use std::alloc::Layout;
use std::cell::Cell;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::disk_busy::DiskStat;
use ferrite_engine::clock::SystemClock;
use ferrite_engine::{AppendMode, LeaderEpoch, LogConfig, OpenParams, PartitionLog, Repair, TopicPartition, WriteMode};

#[derive(Clone, Debug)]
pub struct EngineRunConfig {
    pub bytes: u64,
    pub dir: PathBuf,
    pub batch_records: usize,
    pub record_bytes: usize,
    /// Appends in flight at once (as produce requests from many clients).
    pub inflight: usize,
    pub mode: WriteMode,
    /// Print a progress line every second.
    pub progress: bool,
}

#[derive(Clone, Debug)]
pub struct EngineRunResult {
    pub append_mb_s: f64,
    pub raw_write_mb_s: f64,
    pub ratio: f64,
    pub recovery_mb_s: f64,
    pub bytes: u64,
    pub batches: u64,
    pub batch_bytes: usize,
    /// Fractions of each side's run the device had I/O in flight, where
    /// the directory's device has a stat file (see [`crate::disk_busy`]).
    pub append_device_busy: Option<f64>,
    pub raw_device_busy: Option<f64>,
}

impl EngineRunResult {
    pub fn to_json(&self, cfg: &EngineRunConfig) -> serde_json::Value {
        serde_json::json!({
            "bench": "engine",
            "mode": cfg.mode.name(),
            "bytes": self.bytes,
            "batches": self.batches,
            "batch_bytes": self.batch_bytes,
            "record_bytes": cfg.record_bytes,
            "inflight": cfg.inflight,
            "append_mb_s": round1(self.append_mb_s),
            "raw_write_mb_s": round1(self.raw_write_mb_s),
            "ratio": (self.ratio * 1000.0).round() / 1000.0,
            "recovery_mb_s": round1(self.recovery_mb_s),
            "append_device_busy": self.append_device_busy.map(round2),
            "raw_device_busy": self.raw_device_busy.map(round2),
        })
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn mb_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e6
}

/// What one raw write run measured.
#[derive(Clone, Copy, Debug)]
pub struct RawRun {
    pub mb_s: f64,
    /// Fraction of the run the device had I/O in flight, where known.
    pub device_busy: Option<f64>,
}

/// Writes `bytes` to `path` with O_DIRECT in 1 MiB aligned writes, then
/// fdatasyncs.
pub fn raw_direct_write(path: &Path, bytes: u64) -> std::io::Result<RawRun> {
    const CHUNK: usize = 1 << 20;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)?;
    let buf = AlignedBuf::new(CHUNK);
    let meter = DiskStat::for_dir(path.parent().unwrap_or(Path::new("."))).map(|d| d.start());
    let start = Instant::now();
    let mut pos = 0u64;
    while pos < bytes {
        let n = file.write_at(buf.as_slice(), pos)?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        pos += n as u64;
    }
    file.sync_data()?;
    let rate = RawRun {
        mb_s: mb_s(pos, start.elapsed()),
        device_busy: meter.and_then(|m| m.busy()),
    };
    drop(file);
    std::fs::remove_file(path)?;
    Ok(rate)
}

struct AlignedBuf {
    ptr: *mut u8,
    layout: Layout,
}

impl AlignedBuf {
    fn new(len: usize) -> AlignedBuf {
        let Ok(layout) = Layout::from_size_align(len, 4096) else {
            panic!("no layout for {len} bytes aligned to 4096");
        };
        // SAFETY: layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "allocation failed");
        // SAFETY: ptr points to `len` initialised bytes we own.
        let slice = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
        for (i, b) in slice.iter_mut().enumerate() {
            *b = (i * 31 % 251) as u8;
        }
        AlignedBuf { ptr, layout }
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr points to layout.size() initialised bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

/// What the engine side of a run measured.
struct AppendRun {
    append_mb_s: f64,
    recovery_mb_s: f64,
    bytes: u64,
    batches: u64,
    batch_bytes: usize,
    /// Fraction of the append (with its final flush) the device was busy.
    device_busy: Option<f64>,
}

/// The engine run's registered pool: 32 MiB, so its one partition writes
/// 4 MiB groups (`ferrite_engine::io_memory`), as the figures in
/// `docs/benchmarks.md` were taken.
const ENGINE_IO_MEMORY_BYTES: usize = 32 << 20;

/// Appends through the engine, then recovers the log as after a crash.
fn engine_append(cfg: &EngineRunConfig) -> Result<AppendRun, String> {
    let cfg = cfg.clone();
    let handle = glommio::LocalExecutorBuilder::new(glommio::Placement::Fixed(0))
        .name("bench-shard-0")
        .io_memory(ENGINE_IO_MEMORY_BYTES)
        .preempt_timer(Duration::from_micros(
            std::env::var("FERRITE_PREEMPT_US")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(100_000),
        ))
        .spawn(move || async move {
            ferrite_engine::io_memory::set_pool_bytes(ENGINE_IO_MEMORY_BYTES);
            let _guard = ferrite_engine::stall_guard::guard_current_executor("bench-shard-0");
            engine_append_on_shard(cfg).await
        })
        .map_err(|e| e.to_string())?;
    handle.join().map_err(|e| e.to_string())?
}

async fn engine_append_on_shard(cfg: EngineRunConfig) -> Result<AppendRun, String> {
    let dir = cfg.dir.join("bench-0");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| e.to_string())?;
    }
    let params = || OpenParams {
        tp: TopicPartition::new("bench", 0),
        dir: dir.clone(),
        config: LogConfig::default(),
        mode: cfg.mode,
        clock: Rc::new(SystemClock),
        repair: Repair::Refuse,
        cache_budget: ferrite_engine::batch_cache::CacheBudget::unshared(),
        file_cache: ferrite_engine::file_cache::FileCache::unbounded(),
    };
    let log = PartitionLog::open(params()).await.map_err(|e| e.to_string())?;
    let template = crate::batch_template(cfg.batch_records, cfg.record_bytes);
    let batch_bytes = template.len();
    let total = cfg.bytes.div_ceil(batch_bytes as u64);
    let issued = Rc::new(Cell::new(0u64));
    let done_bytes = Rc::new(Cell::new(0u64));
    let cpu_start = thread_cpu_s();
    let meter = DiskStat::for_dir(&cfg.dir).map(|d| d.start());
    let start = Instant::now();
    let reporter = cfg.progress.then(|| {
        let done = done_bytes.clone();
        glommio::spawn_local(async move {
            let mut last = 0u64;
            loop {
                glommio::timer::sleep(Duration::from_secs(1)).await;
                let now = done.get();
                println!(
                    "append: {:.0} MB/s, {} MB so far",
                    (now - last) as f64 / 1e6,
                    now / 1_000_000
                );
                last = now;
            }
        })
    });
    let mut tasks = Vec::new();
    for _ in 0..cfg.inflight.max(1) {
        let log = log.clone();
        let issued = issued.clone();
        let done = done_bytes.clone();
        let template = template.clone();
        tasks.push(glommio::spawn_local(async move {
            while issued.get() < total {
                issued.set(issued.get() + 1);
                let info = log
                    .append(template.clone(), AppendMode::Leader { epoch: LeaderEpoch(0) })
                    .await
                    .map_err(|e| e.to_string())?;
                done.set(done.get() + info.bytes as u64);
            }
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await?;
    }
    log.flush().await.map_err(|e| e.to_string())?;
    let append_time = start.elapsed();
    let device_busy = meter.and_then(|m| m.busy());
    if cfg.progress {
        let cpu = thread_cpu_s() - cpu_start;
        println!(
            "append: {:.2} s wall, {cpu:.2} s on the shard's CPU",
            append_time.as_secs_f64()
        );
    }
    drop(reporter);
    let bytes = log.size_bytes();
    // Unclean restart: the recovery point is the start, so recovery scans
    // (and CRC-checks) every byte.
    drop(log);
    let start = Instant::now();
    let (log, report) = PartitionLog::open_with_report(params())
        .await
        .map_err(|e| e.to_string())?;
    let recovery_time = start.elapsed();
    if report.segments_scanned == 0 {
        return Err("recovery did not scan".into());
    }
    log.close().await.map_err(|e| e.to_string())?;
    drop(log);
    std::fs::remove_dir_all(&dir).map_err(|e| e.to_string())?;
    Ok(AppendRun {
        append_mb_s: mb_s(bytes, append_time),
        recovery_mb_s: mb_s(bytes, recovery_time),
        bytes,
        batches: total,
        batch_bytes,
        device_busy,
    })
}

/// The whole comparison.
pub fn run(cfg: &EngineRunConfig) -> Result<EngineRunResult, String> {
    std::fs::create_dir_all(&cfg.dir).map_err(|e| e.to_string())?;
    let raw_path = cfg.dir.join("raw-direct.bin");
    let raw_before = raw_direct_write(&raw_path, cfg.bytes).map_err(|e| format!("raw writer: {e}"))?;
    if cfg.progress {
        println!(
            "raw O_DIRECT writer: {:.0} MB/s{}",
            raw_before.mb_s,
            busy_note(raw_before.device_busy)
        );
    }
    let engine = engine_append(cfg)?;
    let raw_after = raw_direct_write(&raw_path, cfg.bytes).map_err(|e| format!("raw writer: {e}"))?;
    if cfg.progress {
        println!(
            "engine append: {:.0} MB/s{}; recovery scan: {:.0} MB/s",
            engine.append_mb_s,
            busy_note(engine.device_busy),
            engine.recovery_mb_s
        );
        println!(
            "raw O_DIRECT writer again: {:.0} MB/s{}",
            raw_after.mb_s,
            busy_note(raw_after.device_busy)
        );
    }
    let raw_write_mb_s = (raw_before.mb_s + raw_after.mb_s) / 2.0;
    let raw_device_busy = raw_before
        .device_busy
        .zip(raw_after.device_busy)
        .map(|(a, b)| (a + b) / 2.0);
    Ok(EngineRunResult {
        append_mb_s: engine.append_mb_s,
        raw_write_mb_s,
        ratio: engine.append_mb_s / raw_write_mb_s,
        recovery_mb_s: engine.recovery_mb_s,
        bytes: engine.bytes,
        batches: engine.batches,
        batch_bytes: engine.batch_bytes,
        append_device_busy: engine.device_busy,
        raw_device_busy,
    })
}

fn busy_note(busy: Option<f64>) -> String {
    busy.map(|b| format!(" (device busy {:.0}% of the time)", b * 100.0))
        .unwrap_or_default()
}

/// CPU time of the calling thread, in seconds.
fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}
