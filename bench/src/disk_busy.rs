//! How much of a stretch of time the disk under a directory had I/O in
//! flight, from the `io_ticks` field (milliseconds with at least one request
//! in flight; the 10th field) of Linux's `/sys/dev/block/MAJ:MIN/stat`.
//!
//! The engine benchmark prints it beside each rate: a rate below the raw
//! writer's with the device busy all along points at the device, one with
//! the device idle part of the time points at the engine.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The stat file of the block device holding a directory.
#[derive(Clone, Debug)]
pub struct DiskStat {
    path: PathBuf,
}

impl DiskStat {
    /// `None` where the directory's device has no stat file (tmpfs,
    /// overlay, not Linux).
    pub fn for_dir(dir: &Path) -> Option<DiskStat> {
        let dev = std::fs::metadata(dir).ok()?.dev();
        let path = PathBuf::from(format!("/sys/dev/block/{}:{}/stat", libc::major(dev), libc::minor(dev)));
        let stat = DiskStat { path };
        stat.io_ticks_ms().map(|_| stat)
    }

    fn io_ticks_ms(&self) -> Option<u64> {
        let text = std::fs::read_to_string(&self.path).ok()?;
        text.split_whitespace().nth(9)?.parse().ok()
    }

    /// Starts measuring.
    pub fn start(&self) -> BusyMeter {
        BusyMeter {
            stat: self.clone(),
            ticks: self.io_ticks_ms(),
            at: Instant::now(),
        }
    }
}

pub struct BusyMeter {
    stat: DiskStat,
    ticks: Option<u64>,
    at: Instant,
}

impl BusyMeter {
    /// The fraction of the time since `start` the device was busy.
    pub fn busy(&self) -> Option<f64> {
        let wall_ms = self.at.elapsed().as_secs_f64() * 1e3;
        let ticks = self.stat.io_ticks_ms()?.checked_sub(self.ticks?)?;
        (wall_ms > 0.0).then(|| (ticks as f64 / wall_ms).min(1.0))
    }
}
