//! Small disks of their own for the brokers, so that one can be filled up.
//!
//! Each is an ext4 file system in an image file under the run's directory,
//! loop-mounted on the broker's data directory, with no blocks reserved for
//! root (the broker and the filler see the same free space). The mounts
//! live in the run's own mount namespace ([`enter_private_mounts`]): they
//! vanish with the run's process, whatever way it ends, and the host never
//! sees them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::ChaosError;
use crate::net::run;

/// Bytes of each broker's disk.
pub const DISK_BYTES: u64 = 256 << 20;

/// Name of the file that fills a disk.
const FILLER: &str = ".ferrite-chaos-filler";

/// Moves this process into a mount namespace of its own, its mounts
/// private (nothing mounted here propagates to the host). Call it before
/// any thread starts, as [`crate::net::enter_private_namespace`].
pub fn enter_private_mounts() -> Result<(), ChaosError> {
    // SAFETY: unshare(2) takes flags only; no memory is involved.
    let rc = unsafe { libc::unshare(libc::CLONE_NEWNS) };
    if rc != 0 {
        return Err(ChaosError::Io {
            op: "unshare(CLONE_NEWNS) (needs root)",
            source: std::io::Error::last_os_error(),
        });
    }
    run("mount", &["--make-rprivate", "/"])
}

/// One broker's disk: `image` mounted on `mount`.
pub struct OwnDisk {
    mount: PathBuf,
}

impl OwnDisk {
    /// Makes an ext4 file system of [`DISK_BYTES`] in `image` and mounts it
    /// on `mount` (created if missing), owned by `uid`.
    pub fn create(image: &Path, mount: &Path, uid: u32) -> Result<OwnDisk, ChaosError> {
        let io = |op| move |source| ChaosError::Io { op, source };
        let file = std::fs::File::create(image).map_err(io("create a disk image"))?;
        file.set_len(DISK_BYTES).map_err(io("size a disk image"))?;
        drop(file);
        let image_arg = image.to_string_lossy();
        run("mkfs.ext4", &["-q", "-F", "-m", "0", &image_arg])?;
        std::fs::create_dir_all(mount).map_err(io("create a mount point"))?;
        run("mount", &["-o", "loop", &image_arg, &mount.to_string_lossy()])?;
        // A partition directory is all a data directory holds.
        std::fs::remove_dir(mount.join("lost+found")).map_err(io("remove lost+found"))?;
        std::os::unix::fs::chown(mount, Some(uid), Some(uid)).map_err(io("chown a disk"))?;
        Ok(OwnDisk {
            mount: mount.to_path_buf(),
        })
    }

    /// Writes a file until the disk has no room left; returns its size.
    pub fn fill(&self) -> Result<u64, ChaosError> {
        let path = self.mount.join(FILLER);
        let mut file = std::fs::File::create(&path).map_err(|source| ChaosError::Io {
            op: "create the filler",
            source,
        })?;
        let chunk = vec![0u8; 1 << 20];
        let mut written = 0u64;
        loop {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(source) => {
                    return Err(ChaosError::Io {
                        op: "fill a disk",
                        source,
                    })
                }
            }
        }
        // What is left is smaller than a chunk: take it too.
        let mut small = vec![0u8; 4096];
        while let Ok(n) = file.write(&small) {
            if n == 0 {
                break;
            }
            written += n as u64;
            small.truncate(n);
        }
        let _ = file.sync_all();
        Ok(written)
    }

    /// Removes the filler: the disk has room again.
    pub fn free(&self) -> Result<(), ChaosError> {
        match std::fs::remove_file(self.mount.join(FILLER)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(ChaosError::Io {
                op: "remove the filler",
                source,
            }),
        }
    }
}

impl Drop for OwnDisk {
    fn drop(&mut self) {
        // Lazily: a broker killed a moment ago may still hold files. The
        // namespace's end would unmount it anyway.
        let _ = Command::new("umount").arg("-l").arg(&self.mount).output();
    }
}
