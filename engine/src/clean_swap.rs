//! Putting a cleaned segment in place of the segments it replaces, so that
//! a crash at any point leaves either the old segments or the new one —
//! never both, never neither.
//!
//! # Files
//!
//! A cleaned group based at B is written beside the log as
//! `<B>.log.cleaned`, `<B>.index.cleaned`, `<B>.timeindex.cleaned` and
//! `<B>.txnindex.cleaned` (the segment's own names plus `.cleaned`; the
//! transaction index holds the replaced segments' entries, and is written
//! even when empty so that it replaces B's), each fsynced. The swap is
//! then committed by one small file, `cleaner-swap`, replaced atomically
//! (temporary file, fdatasync, rename, directory fsync):
//!
//! ```text
//! line 1   0                 version
//! line 2   <B>               the cleaned segment's base offset
//! line 3   <n>               how many segments it replaces
//! n lines  <base>            each replaced segment's base offset, ascending, B first
//! ```
//!
//! decimal, `\n`-terminated. After it: the replaced segments other than B
//! are deleted, the three `.cleaned` files are renamed over B's, the
//! directory is fsynced and `cleaner-swap` is removed.
//!
//! # Recovery ([`finish_interrupted`], before a log opens)
//!
//! - `cleaner-swap` present: the swap was committed. Every `.cleaned` file
//!   of B still there is renamed over B's file, every other listed segment
//!   still there is deleted, then `cleaner-swap` goes. Each step is safe to
//!   repeat.
//! - Otherwise any `.cleaned` file is an unfinished cleaning: deleted.
//!
//! A `cleaner-swap` that does not parse stops the partition from opening
//! (it was written whole or not at all, so that is damage, not a crash).

use std::path::{Path, PathBuf};

use crate::error::{EngineError, Result};
use crate::index::IndexEntry;
use crate::segment::{self, SegmentMeta, SegmentPaths};
use crate::types::Offset;

/// The commit record of a swap.
pub const MANIFEST_FILE: &str = "cleaner-swap";
const SUFFIX: &str = ".cleaned";

/// Where the cleaned files of a group based at `base` are written.
pub fn cleaned_paths(dir: &Path, base: Offset) -> SegmentPaths {
    let p = SegmentPaths::new(dir, base);
    let add = |p: &Path| PathBuf::from(format!("{}{SUFFIX}", p.display()));
    SegmentPaths {
        log: add(&p.log),
        index: add(&p.index),
        time_index: add(&p.time_index),
        txn_index: add(&p.txn_index),
    }
}

/// Removes a group's cleaned files (an abandoned cleaning).
pub fn remove_cleaned(dir: &Path, base: Offset) {
    let c = cleaned_paths(dir, base);
    for p in c.all() {
        let _ = std::fs::remove_file(p);
    }
}

/// Writes the indexes of `meta` to the cleaned index files (fsynced) and
/// marks them persisted.
pub fn write_indexes(cleaned: &SegmentPaths, meta: &mut SegmentMeta) -> Result<()> {
    let offsets = encode(meta.offset_index.entries());
    write_synced(&cleaned.index, &offsets)?;
    let times = encode(meta.time_index.entries());
    write_synced(&cleaned.time_index, &times)?;
    let aborted = encode(meta.txn_index.entries());
    write_synced(&cleaned.txn_index, &aborted)?;
    if let Some(plan) = meta.offset_index.plan_persist() {
        meta.offset_index.mark_persisted(&plan);
    }
    if let Some(plan) = meta.time_index.plan_persist() {
        meta.time_index.mark_persisted(&plan);
    }
    if let Some(plan) = meta.txn_index.plan_persist() {
        meta.txn_index.mark_persisted(&plan);
    }
    meta.txn_index_durable = true;
    Ok(())
}

fn encode<E: IndexEntry>(entries: &[E]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * E::BYTES);
    for e in entries {
        e.encode(&mut out);
    }
    out
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::create(path).map_err(|e| EngineError::io("create cleaned index", path, e))?;
    f.write_all(bytes)
        .map_err(|e| EngineError::io("write cleaned index", path, e))?;
    f.sync_all()
        .map_err(|e| EngineError::io("fdatasync cleaned index", path, e))
}

/// A committed swap: the cleaned segment's base and what it replaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    pub base: Offset,
    pub replaces: Vec<Offset>,
}

impl Manifest {
    fn encode(&self) -> String {
        let mut s = format!("0\n{}\n{}\n", self.base.0, self.replaces.len());
        for b in &self.replaces {
            s.push_str(&format!("{}\n", b.0));
        }
        s
    }

    fn decode(text: &str) -> std::result::Result<Manifest, String> {
        let mut lines = text.split_terminator('\n');
        let mut number = |what: &str| -> std::result::Result<i64, String> {
            let line = lines.next().ok_or_else(|| format!("missing {what}"))?;
            line.parse().map_err(|_| format!("{what} is not a number: {line:?}"))
        };
        if number("version")? != 0 {
            return Err("unknown version".into());
        }
        let base = Offset(number("base offset")?);
        let n = number("segment count")?;
        if !(1..=1_000_000).contains(&n) {
            return Err(format!("segment count {n} out of range"));
        }
        let replaces = (0..n)
            .map(|_| number("segment base").map(Offset))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        if lines.next().is_some() {
            return Err("trailing lines".into());
        }
        if replaces.first() != Some(&base) || replaces.windows(2).any(|w| w[0] >= w[1]) {
            return Err("segments not ascending from the base".into());
        }
        Ok(Manifest { base, replaces })
    }

    /// Commits the swap: the manifest is on the device when this returns.
    pub async fn store(&self, dir: &Path) -> Result<()> {
        crate::checkpoint::replace_file(
            dir,
            MANIFEST_FILE,
            &format!("{MANIFEST_FILE}.tmp"),
            self.encode().as_bytes(),
            &crate::checkpoint::ReplaceOps {
                create: "create cleaner-swap",
                fdatasync: "fdatasync cleaner-swap",
                close: "close cleaner-swap",
            },
        )
        .await
    }

    fn load(dir: &Path) -> Result<Option<Manifest>> {
        let path = dir.join(MANIFEST_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(EngineError::io("read cleaner-swap", &path, e)),
        };
        Manifest::decode(&text)
            .map(Some)
            .map_err(|reason| EngineError::BadFile { path, reason })
    }

    /// Carries the committed swap out (idempotent): renames the cleaned
    /// files into place, deletes the other replaced segments.
    pub fn carry_out(&self, dir: &Path) -> Result<()> {
        let cleaned = cleaned_paths(dir, self.base);
        let target = SegmentPaths::new(dir, self.base);
        for base in self.replaces.iter().skip(1) {
            let p = SegmentPaths::new(dir, *base);
            for f in p.all() {
                crate::sys::remove_if_present(f, "remove replaced segment file")?;
            }
        }
        // The indexes first: a log renamed before them would be read with
        // the old indexes if the rename of an index failed.
        for (from, to) in [
            (&cleaned.index, &target.index),
            (&cleaned.time_index, &target.time_index),
            (&cleaned.txn_index, &target.txn_index),
            (&cleaned.log, &target.log),
        ] {
            if from.exists() {
                std::fs::rename(from, to).map_err(|e| EngineError::io("rename cleaned segment", from, e))?;
            }
        }
        Ok(())
    }

    /// Ends the swap: the manifest goes once the renames are durable.
    pub async fn finish(dir: &Path) -> Result<()> {
        crate::checkpoint::sync_dir(dir).await?;
        crate::sys::remove_if_present(&dir.join(MANIFEST_FILE), "remove cleaner-swap")?;
        crate::checkpoint::sync_dir(dir).await
    }
}

/// Completes a committed swap and removes unfinished cleanings' files;
/// called before a log's segments are listed.
pub async fn finish_interrupted(dir: &Path) -> Result<()> {
    if let Some(m) = Manifest::load(dir)? {
        tracing::info!(dir = %dir.display(), base = %m.base, replaced = m.replaces.len(),
            "completing a cleaner swap interrupted by a crash");
        m.carry_out(dir)?;
        Manifest::finish(dir).await?;
    }
    let entries = std::fs::read_dir(dir).map_err(|e| EngineError::io("list partition directory", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| EngineError::io("list partition directory", dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(SUFFIX) else {
            continue;
        };
        let is_segment_file = ["log", "index", "timeindex", crate::txn_index::EXTENSION]
            .iter()
            .any(|ext| segment::parse_file_name(stem, ext).is_some());
        if is_segment_file {
            crate::sys::remove_if_present(&entry.path(), "remove unfinished cleaned file")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_round_trips_and_refuses_garbage() {
        let m = Manifest {
            base: Offset(10),
            replaces: vec![Offset(10), Offset(20), Offset(35)],
        };
        assert_eq!(Manifest::decode(&m.encode()), Ok(m.clone()));
        for bad in [
            "",
            "1\n10\n1\n10\n",
            "0\n10\n2\n10\n",
            "0\n10\n2\n20\n10\n",
            "0\n10\n1\n10\n7\n",
            "0\nx\n",
        ] {
            assert!(Manifest::decode(bad).is_err(), "{bad:?}");
        }
    }
}
