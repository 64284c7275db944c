//! Segment write modes, and what each needs from a segment's file: the
//! direct-mode block (the device's O_DIRECT alignment raised to the file
//! system's block), the bytes of the partial block a direct write rewrites
//! (`read_tail`), and how far a preallocated file grows (`preallocation`).
//! The appender ([`crate::segment_appender`]) plans its writes with these;
//! its module doc says why each mode writes as it does.

use std::path::Path;

use crate::error::{EngineError, Result};

/// How segment data reaches the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteMode {
    /// O_DIRECT writes from aligned buffers: acknowledged bytes are on the
    /// device, and the page cache is left to readers.
    Direct,
    /// Direct, with the file extended ahead of the writes (see
    /// [`crate::segment_appender`], "Preallocation").
    DirectPreallocated,
    /// Writes into the page cache, as Kafka does.
    Buffered,
}

impl WriteMode {
    /// A `log.write.mode` value (preallocation is `log.preallocate`).
    pub fn parse(s: &str) -> Option<WriteMode> {
        match s {
            "direct" => Some(WriteMode::Direct),
            "buffered" => Some(WriteMode::Buffered),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            WriteMode::Direct => "direct",
            WriteMode::DirectPreallocated => "direct-preallocated",
            WriteMode::Buffered => "buffered",
        }
    }
}

/// How far ahead of its writes a preallocated segment's file is extended
/// (file size included). An active segment holds up to this much disk
/// space beyond its data until it is sealed or closed.
pub const PREALLOCATE_BYTES: u64 = 16 << 20;
/// The largest file-system block used as the direct-mode block; a larger
/// (or odd) `st_blksize` falls back to the device's alignment.
const FS_BLOCK_BYTES_MAX: u64 = 64 << 10;

/// The size to extend a preallocated file to before a write that ends at
/// `padded_end`, if it must grow; records the new size in `allocated_end`.
pub(crate) fn preallocation(allocated_end: &mut Option<u64>, padded_end: u64) -> Option<u64> {
    let allocated = (*allocated_end)?;
    if padded_end <= allocated {
        return None;
    }
    let size = padded_end.div_ceil(PREALLOCATE_BYTES) * PREALLOCATE_BYTES;
    assert!(size >= padded_end, "preallocation falls short of the write");
    *allocated_end = Some(size);
    Some(size)
}

/// The direct-mode block for a file at `path`: the device's O_DIRECT
/// `alignment`, raised to the file system's block when that is a power of
/// two no larger than [`FS_BLOCK_BYTES_MAX`].
pub(crate) fn direct_block_bytes(alignment: u64, path: &Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let fs_block = std::fs::metadata(path)
        .map_err(|e| EngineError::io("stat segment", path, e))?
        .blksize();
    let usable = fs_block.is_power_of_two() && fs_block <= FS_BLOCK_BYTES_MAX;
    let block = if usable { alignment.max(fs_block) } else { alignment };
    assert!(
        block % alignment == 0,
        "the block is not a multiple of the device's alignment"
    );
    Ok(block)
}

/// The bytes of the block holding logical position `size`, from the block's
/// start up to `size` (direct mode rewrites them with the next write). Read
/// through the page cache: unaligned O_DIRECT reads are not supported.
pub(crate) async fn read_tail(path: &Path, size: u64, alignment: u64) -> Result<Vec<u8>> {
    let block_start = size - size % alignment;
    if block_start == size {
        return Ok(Vec::new());
    }
    let reader = crate::segment_reader::SegmentFile::open(path).await?;
    let tail = reader.read_at(block_start, (size - block_start) as usize).await?;
    if tail.len() as u64 != size - block_start {
        return Err(EngineError::BadFile {
            path: path.to_path_buf(),
            reason: format!("shorter than its logical size {size}"),
        });
    }
    Ok(tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preallocation_grows_in_whole_steps_only_when_a_write_passes_the_end() {
        let step = PREALLOCATE_BYTES;
        let mut off = None;
        assert_eq!(preallocation(&mut off, 4096), None, "off stays off");
        assert_eq!(off, None);
        let mut at = Some(0);
        assert_eq!(preallocation(&mut at, 4096), Some(step));
        assert_eq!(preallocation(&mut at, step), None, "up to the end: no growth");
        assert_eq!(preallocation(&mut at, step + 4096), Some(2 * step));
        assert_eq!(at, Some(2 * step));
        // After a truncation to an odd size, the next step rounds up again.
        let mut cut = Some(5000);
        assert_eq!(preallocation(&mut cut, 8192), Some(step));
    }
}
