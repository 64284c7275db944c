//! Metadata system calls made directly on the shard's thread.
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
    let len = libc::off_t::try_from(len).map_err(|_| {
        EngineError::io("truncate", path, std::io::Error::from(std::io::ErrorKind::InvalidInput))
    })?;
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
