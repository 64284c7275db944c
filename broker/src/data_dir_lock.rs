//! The data directory's lock: one broker per `log.dirs`, as Kafka's `.lock`
//! file. Two processes writing one partition's files (two brokers started
//! on one directory, on different ports, or a new broker while a stopped
//! one still flushes) would corrupt them; the second is refused at start.
//!
//! The lock is an exclusive `flock` on `<data dir>/.lock`, held by an open
//! descriptor for the life of the broker: the kernel drops it when the
//! process ends, however it ends (kill -9 included), so a stale file never
//! blocks a restart.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::server::ServerError;

pub const FILE_NAME: &str = ".lock";

/// Holds the lock while alive.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

/// Takes the lock of `dir` (which exists), without waiting.
pub fn acquire(dir: &Path) -> Result<DataDirLock, ServerError> {
    let failed = |op: &str, e: std::io::Error| {
        ServerError::Other(format!("data directory {} (log.dirs): {op}: {e}", dir.display()))
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(FILE_NAME))
        .map_err(|e| failed("open its lock file", e))?;
    // SAFETY: flock on a descriptor this function owns; no memory is passed.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(DataDirLock { _file: file });
    }
    let e = std::io::Error::last_os_error();
    Err(match e.raw_os_error() {
        Some(libc::EWOULDBLOCK) => ServerError::Other(format!(
            "data directory {} (log.dirs) is in use by another process (another ferrite on it?): its {FILE_NAME} file is locked",
            dir.display()
        )),
        _ => failed("lock it", e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = acquire(dir.path()).expect("first lock");
        let second = acquire(dir.path());
        let refused = second.expect_err("a second lock").to_string();
        assert!(refused.contains("in use by another process"), "{refused}");
        drop(first);
        acquire(dir.path()).expect("lock after the first is dropped");
    }
}
