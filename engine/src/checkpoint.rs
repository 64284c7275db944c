//! The partition checkpoint file (`<topic>-<partition>/checkpoint`): where the
//! log starts, how far it is known to be on the device, and whether it was
//! closed cleanly.
//!
//! # Layout (44 bytes, big-endian)
//!
//! ```text
//! byte size field
//!    0    4 magic                "FRCP"
//!    4    2 version              1
//!    6    2 flags                bit 0: clean shutdown (all data and indexes
//!                                synced, indexes complete; open without scanning)
//!    8    8 logStartOffset       first readable offset (advanced by retention)
//!   16    8 recoveryOffset       every batch below it was fdatasync'd
//!   24    8 recoverySegmentBase  base offset of the segment holding that point
//!   32    8 recoveryPosition     byte position of that point in the segment
//!   40    4 crc                  CRC-32C of bytes 0..40
//! ```
//!
//! Unlike Kafka's per-directory text checkpoints, each partition has its own
//! file, because each partition belongs to one shard and no shard writes
//! another's files. The position beside the offset lets recovery tell a torn
//! tail (after the point) from corruption (before it) without any index.
//!
//! The file is replaced atomically: written to `checkpoint.tmp`, fdatasync'd,
//! renamed over `checkpoint`, and the directory fsync'd. A file that fails its
//! CRC is an error, never silently ignored: without it, recovery cannot know
//! what was durable.

use std::path::{Path, PathBuf};

use glommio::io::{Directory, OpenOptions};

use crate::error::{EngineError, Result};
use crate::index;
use crate::types::Offset;

pub const FILE_NAME: &str = "checkpoint";
const TMP_NAME: &str = "checkpoint.tmp";
const MAGIC: &[u8; 4] = b"FRCP";
const VERSION: u16 = 1;
pub const BYTES: usize = 44;
const FLAG_CLEAN: u16 = 1;
const _: () = assert!(BYTES == 4 + 2 + 2 + 8 + 8 + 8 + 8 + 4);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shutdown {
    Clean,
    Unclean,
}

/// A point in the log known to be on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoveryPoint {
    pub offset: Offset,
    pub segment_base: Offset,
    pub position: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub log_start: Offset,
    pub recovery: RecoveryPoint,
    pub shutdown: Shutdown,
}

impl Checkpoint {
    pub fn encode(&self) -> [u8; BYTES] {
        let mut out = [0u8; BYTES];
        out[0..4].copy_from_slice(MAGIC);
        out[4..6].copy_from_slice(&VERSION.to_be_bytes());
        let flags = match self.shutdown {
            Shutdown::Clean => FLAG_CLEAN,
            Shutdown::Unclean => 0,
        };
        out[6..8].copy_from_slice(&flags.to_be_bytes());
        out[8..16].copy_from_slice(&self.log_start.0.to_be_bytes());
        out[16..24].copy_from_slice(&self.recovery.offset.0.to_be_bytes());
        out[24..32].copy_from_slice(&self.recovery.segment_base.0.to_be_bytes());
        out[32..40].copy_from_slice(&self.recovery.position.to_be_bytes());
        let crc = crc32c::crc32c(&out[0..40]);
        out[40..44].copy_from_slice(&crc.to_be_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> std::result::Result<Checkpoint, String> {
        if bytes.len() != BYTES {
            return Err(format!("{} bytes, expected {BYTES}", bytes.len()));
        }
        let be64 = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[i..i + 8]);
            i64::from_be_bytes(b)
        };
        let stored = u32::from_be_bytes([bytes[40], bytes[41], bytes[42], bytes[43]]);
        let computed = crc32c::crc32c(&bytes[0..40]);
        if stored != computed {
            return Err(format!("CRC mismatch ({stored:#010x} != {computed:#010x})"));
        }
        if &bytes[0..4] != MAGIC {
            return Err("bad magic".into());
        }
        let version = u16::from_be_bytes([bytes[4], bytes[5]]);
        if version != VERSION {
            return Err(format!("unknown version {version}"));
        }
        let flags = u16::from_be_bytes([bytes[6], bytes[7]]);
        let c = Checkpoint {
            log_start: Offset(be64(8)),
            recovery: RecoveryPoint {
                offset: Offset(be64(16)),
                segment_base: Offset(be64(24)),
                position: be64(32) as u64,
            },
            shutdown: if flags & FLAG_CLEAN != 0 {
                Shutdown::Clean
            } else {
                Shutdown::Unclean
            },
        };
        if c.log_start.0 < 0 || c.recovery.offset.0 < 0 || c.recovery.segment_base.0 < 0 {
            return Err("negative offset".into());
        }
        if c.recovery.segment_base > c.recovery.offset {
            return Err("recovery segment above the recovery offset".into());
        }
        Ok(c)
    }

    /// Reads `dir/checkpoint`; `None` when there is none (a new partition).
    pub async fn load(dir: &Path) -> Result<Option<Checkpoint>> {
        let path = dir.join(FILE_NAME);
        let Some(bytes) = index::read_whole(&path, BYTES as u64).await? else {
            return Ok(None);
        };
        Checkpoint::decode(&bytes)
            .map(Some)
            .map_err(|reason| EngineError::BadFile { path, reason })
    }

    /// Replaces `dir/checkpoint` atomically and durably.
    pub async fn store(&self, dir: &Path) -> Result<()> {
        replace_file(
            dir,
            FILE_NAME,
            TMP_NAME,
            &self.encode(),
            &ReplaceOps {
                create: "create checkpoint",
                fdatasync: "fdatasync checkpoint",
                close: "close checkpoint",
            },
        )
        .await
    }
}

/// The operation names an atomic replacement reports in its errors.
pub(crate) struct ReplaceOps {
    pub create: &'static str,
    pub fdatasync: &'static str,
    pub close: &'static str,
}

/// Replaces `dir/name` with `bytes` atomically and durably: written to
/// `dir/tmp_name`, fdatasync'd, renamed over `dir/name`, and the directory
/// fsync'd. A crash leaves either the old file or the new one (and perhaps a
/// `.tmp` leftover, which opening removes). For small metadata files.
pub(crate) async fn replace_file(dir: &Path, name: &str, tmp_name: &str, bytes: &[u8], ops: &ReplaceOps) -> Result<()> {
    let tmp: PathBuf = dir.join(tmp_name);
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .buffered_open(&tmp)
        .await
        .map_err(|e| EngineError::io(ops.create, &tmp, e))?;
    index::write_all(&file, &tmp, bytes, 0).await?;
    file.fdatasync()
        .await
        .map_err(|e| EngineError::io(ops.fdatasync, &tmp, e))?;
    file.close().await.map_err(|e| EngineError::io(ops.close, &tmp, e))?;
    crate::sys::rename(&tmp, &dir.join(name))?;
    sync_dir(dir).await
}

/// fsync of a directory, making file creations, renames and removals in it
/// durable. A relative `dir` is taken from the working directory (glommio
/// opens a directory relative to no directory at all: EBADF).
pub async fn sync_dir(dir: &Path) -> Result<()> {
    let dir = &std::path::absolute(dir).map_err(|e| EngineError::io("resolve directory", dir, e))?;
    let d = Directory::open(dir)
        .await
        .map_err(|e| EngineError::io("open directory", dir, e))?;
    d.sync().await.map_err(|e| EngineError::io("fsync directory", dir, e))?;
    d.close().await.map_err(|e| EngineError::io("close directory", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_damage() {
        let c = Checkpoint {
            log_start: Offset(5),
            recovery: RecoveryPoint {
                offset: Offset(100),
                segment_base: Offset(90),
                position: 4321,
            },
            shutdown: Shutdown::Clean,
        };
        let bytes = c.encode();
        assert_eq!(Checkpoint::decode(&bytes), Ok(c));
        for i in 0..BYTES {
            let mut b = bytes;
            b[i] ^= 1;
            assert!(Checkpoint::decode(&b).is_err(), "flip at {i} accepted");
        }
        assert!(Checkpoint::decode(&bytes[..43]).is_err());
    }
}
