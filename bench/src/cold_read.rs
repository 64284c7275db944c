//! A cold read, and the disk's own speed to hold it against (#24): what
//! `ferrite-bench consume --cold DIR` does before it consumes.
//!
//! The disk's figure is what `dd iflag=direct bs=4M` gives: the broker's
//! segment files under DIR (largest first, up to [`DISK_READ_BYTES_MAX`])
//! read one after another with O_DIRECT in 4 MiB requests, one in flight,
//! bypassing the page cache. Then the page cache is dropped (`sync`, then
//! `3` into `/proc/sys/vm/drop_caches`: root only), so that the consume
//! that follows reads what a consumer far behind the tail reads.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Bytes of segment files read to time the disk.
pub const DISK_READ_BYTES_MAX: u64 = 2 << 30;
/// One read's size (as `dd bs=4M`).
pub const READ_BYTES: usize = 4 << 20;
/// O_DIRECT buffer alignment.
const ALIGN: usize = 4096;

/// Segment files (`*.log`) under `dir`, largest first.
pub fn segment_files(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let path = e.path();
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "log") && meta.len() > 0 {
                found.push((path, meta.len()));
            }
        }
    }
    found.sort_by_key(|f| std::cmp::Reverse(f.1));
    found
}

/// Reads the largest segment files under `dir` with O_DIRECT; MB/s
/// (10^6 bytes) and the bytes read.
pub fn disk_read_mb_per_sec(dir: &Path) -> Result<(f64, u64), String> {
    let files = segment_files(dir);
    if files.is_empty() {
        return Err(format!("no segment files under {}", dir.display()));
    }
    let mut storage = vec![0u8; READ_BYTES + ALIGN];
    let at = storage.as_ptr().align_offset(ALIGN);
    let buf = &mut storage[at..at + READ_BYTES];
    let started = Instant::now();
    let mut total = 0u64;
    for (path, _) in files {
        if total >= DISK_READ_BYTES_MAX {
            break;
        }
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .map_err(|e| format!("open {} with O_DIRECT: {e}", path.display()))?;
        loop {
            let n = file.read(buf).map_err(|e| format!("read {}: {e}", path.display()))?;
            total += n as u64;
            if n < READ_BYTES || total >= DISK_READ_BYTES_MAX {
                break;
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64().max(1e-9);
    Ok((total as f64 / seconds / 1e6, total))
}

/// Writes dirty pages back and drops the page cache (root only).
pub fn drop_caches() -> Result<(), String> {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| format!("drop the page cache (needs root): {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_segment_files_largest_first_and_reads_them_directly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let part = dir.path().join("t-0");
        std::fs::create_dir_all(&part).expect("mkdir");
        std::fs::write(part.join("00000000000000000000.log"), vec![1u8; 3 * ALIGN]).expect("write");
        std::fs::write(part.join("00000000000000000100.log"), vec![2u8; 5 * ALIGN + 10]).expect("write");
        std::fs::write(part.join("00000000000000000000.index"), vec![0u8; 99 * ALIGN]).expect("write");
        std::fs::write(part.join("00000000000000000200.log"), b"").expect("write");
        let files = segment_files(dir.path());
        let sizes: Vec<u64> = files.iter().map(|(_, n)| *n).collect();
        assert_eq!(
            sizes,
            vec![5 * ALIGN as u64 + 10, 3 * ALIGN as u64],
            "only non-empty .log files"
        );
        match disk_read_mb_per_sec(dir.path()) {
            Ok((rate, bytes)) => {
                assert_eq!(bytes, 8 * ALIGN as u64 + 10, "every byte of both files");
                assert!(rate > 0.0);
            }
            // tmpfs and some overlays refuse O_DIRECT.
            Err(e) => assert!(e.contains("O_DIRECT"), "{e}"),
        }
        let empty = tempfile::tempdir().expect("tempdir");
        assert!(disk_read_mb_per_sec(empty.path()).is_err());
    }
}
