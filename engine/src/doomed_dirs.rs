//! Directories of deleted partitions, on their way out.
//!
//! Deleting a partition first renames its directory `<topic>-<partition>`
//! to `<topic>-<partition>.<stamp>-delete` (one `rename(2)`, which needs no
//! file descriptor), then removes the renamed tree. Removing can fail where
//! the rename did not: `remove_dir_all` opens every directory it walks, and
//! a broker out of descriptors (the limit that may have failed the
//! partition's creation) has none. The renamed directory then stays listed
//! here and is tried again each flush-scheduler tick, and a start removes
//! those a crash left. Meanwhile the partition's own name is free: a topic
//! created again at once gets an empty directory, and a restart never opens
//! the old data as a live partition (`TopicPartition::parse_dir_name`
//! does not read a name ending in `-delete`). Kafka deletes the same way.
//!
//! `<stamp>` is the time of the deletion in nanoseconds since the epoch,
//! in hex, then a per-process counter: two deletions of one partition in a
//! row get distinct names.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::types::TopicPartition;

const SUFFIX: &str = "-delete";

/// Directories a retry may hold at once; past this, the oldest are left
/// for the next start to sweep (each was logged when first left).
pub const DOOMED_DIRS_MAX: usize = 65_536;

/// The name a deleted partition's directory is renamed to.
pub fn doomed_name(tp: &TopicPartition) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{}.{nanos:x}{n:x}{SUFFIX}", tp.dir_name())
}

/// The partition a doomed directory's name was renamed from.
pub fn doomed_partition(name: &str) -> Option<TopicPartition> {
    let stem = name.strip_suffix(SUFFIX)?;
    let (dir_name, stamp) = stem.rsplit_once('.')?;
    if stamp.is_empty() || !stamp.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    TopicPartition::parse_dir_name(dir_name)
}

/// The doomed directories of one shard that could not be removed yet.
#[derive(Default)]
pub struct DoomedDirs {
    left: RefCell<Vec<PathBuf>>,
}

impl DoomedDirs {
    /// Removes `dir`, or keeps it for [`DoomedDirs::retry`].
    pub fn remove(&self, dir: PathBuf) {
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            if e.kind() == std::io::ErrorKind::NotFound {
                return;
            }
            tracing::warn!(dir = %dir.display(), error = %e, "deleted partition's directory not removed yet; trying again every tick");
            let mut left = self.left.borrow_mut();
            if left.len() >= DOOMED_DIRS_MAX {
                left.remove(0);
            }
            left.push(dir);
        }
    }

    /// Tries the directories left once more.
    pub fn retry(&self) {
        if self.left.borrow().is_empty() {
            return;
        }
        let left = std::mem::take(&mut *self.left.borrow_mut());
        let mut still = Vec::new();
        for dir in left {
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => tracing::info!(dir = %dir.display(), "deleted partition's directory removed"),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(_) => still.push(dir),
            }
        }
        self.left.borrow_mut().extend(still);
    }

    /// How many wait for a retry.
    pub fn len(&self) -> usize {
        self.left.borrow().len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.left.borrow().is_empty()
    }

    /// Removes the doomed directories under `data_dir` whose partition
    /// `owned` says this shard owns (what a crash or a full descriptor
    /// table left at the last run).
    pub fn sweep(&self, data_dir: &Path, owned: impl Fn(&TopicPartition) -> bool) {
        let Ok(entries) = std::fs::read_dir(data_dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            match doomed_partition(&name.to_string_lossy()) {
                Some(tp) if owned(&tp) => self.remove(entry.path()),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_doomed_name_gives_back_its_partition_and_is_no_partition_itself() {
        let tp = TopicPartition::new("orders.eu-west", 12);
        let a = doomed_name(&tp);
        let b = doomed_name(&tp);
        assert_ne!(a, b);
        assert_eq!(doomed_partition(&a), Some(tp.clone()));
        assert_eq!(TopicPartition::parse_dir_name(&a), None);
        assert_eq!(doomed_partition("orders-1"), None);
        assert_eq!(doomed_partition("orders-1.-delete"), None);
        assert_eq!(doomed_partition("orders-1.zz-delete"), None);
        // A live topic may end in "-delete" itself; its directories end in
        // the partition number.
        assert_eq!(doomed_partition("x-delete-0"), None);
    }

    #[test]
    fn a_sweep_removes_only_this_shards_doomed_directories() {
        let dir = std::env::temp_dir().join(format!("ferrite-doomed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mine = dir.join(doomed_name(&TopicPartition::new("t", 0)));
        let theirs = dir.join(doomed_name(&TopicPartition::new("t", 1)));
        let live = dir.join("t-0");
        for d in [&mine, &theirs, &live] {
            std::fs::create_dir_all(d.join("inner")).unwrap();
            std::fs::write(d.join("inner/f"), b"x").unwrap();
        }
        let doomed = DoomedDirs::default();
        doomed.sweep(&dir, |tp| tp.partition == 0);
        assert!(!mine.exists());
        assert!(theirs.exists());
        assert!(live.exists());
        assert!(doomed.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
