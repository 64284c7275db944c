//! Metadata system calls made directly on the shard's thread, and a fix-up
//! for glommio's device probe.
//!
//! glommio runs `ftruncate` and `rename` on its blocking thread pool, and
//! under the property tests a shard waiting on one of them once slept
//! forever (the completion's wake-up was lost, with no other event pending to
//! wake the reactor). These calls are rare (segment seal, truncation,
//! checkpoint replacement) and take microseconds, so the engine makes them
//! inline instead.

use std::os::unix::io::RawFd;
use std::path::Path;

use crate::error::{EngineError, Result};

/// `ftruncate(fd, len)`.
pub fn truncate_fd(fd: RawFd, len: u64, path: &Path) -> Result<()> {
    let len = libc::off_t::try_from(len)
        .map_err(|_| EngineError::io("truncate", path, std::io::Error::from(std::io::ErrorKind::InvalidInput)))?;
    // SAFETY: ftruncate on a descriptor we own, with no pointers involved.
    let rc = unsafe { libc::ftruncate(fd, len) };
    if rc != 0 {
        return Err(EngineError::io("truncate", path, std::io::Error::last_os_error()));
    }
    Ok(())
}

/// `rename(from, to)`.
pub fn rename(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to).map_err(|e| EngineError::io("rename", to, e))
}

/// Removes `path`; one already gone is fine.
pub fn remove_if_present(path: &Path, op: &'static str) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(EngineError::io(op, path, e)),
    }
}

thread_local! {
    static PROBED: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Makes glommio's "does this device support polled I/O" probe see a real
/// read, once per thread and device.
///
/// glommio decides per device (and per thread) from the first `DmaFile`
/// opened there: it reads the file's first block on a polled ring and
/// treats success as support. When that first file is empty — a new segment
/// — the read succeeds without touching the device, the device is marked
/// pollable, and from then on every O_DIRECT request goes to the polled
/// ring: reads fail with EOPNOTSUPP on devices without poll queues (virtio
/// here), and the shard busy-polls for write completions. Opening a file
/// with one block of data first gives the probe an honest answer.
pub async fn prime_dma_probe(dir: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(dir)
        .map_err(|e| EngineError::io("stat", dir, e))?
        .dev();
    if PROBED.with(|p| p.borrow().contains(&dev)) {
        return Ok(());
    }
    // A name of its own: shards probe the same directory at once.
    static PROBES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!(".ferrite-dma-probe-{n}"));
    std::fs::write(&path, vec![0u8; 4096]).map_err(|e| EngineError::io("write probe file", &path, e))?;
    let opened = glommio::io::DmaFile::open(&path).await;
    let _ = std::fs::remove_file(&path);
    let file = opened.map_err(|e| EngineError::io("open probe file", &path, e))?;
    file.close()
        .await
        .map_err(|e| EngineError::io("close probe file", &path, e))?;
    PROBED.with(|p| p.borrow_mut().push(dev));
    Ok(())
}
