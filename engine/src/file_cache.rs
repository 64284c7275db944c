//! A shard's open-file cache: segment files are opened on demand and the
//! least recently used are closed once more than `open_files_max` are open,
//! so the number of partitions a shard holds is not bounded by the
//! process's open-files limit (Kafka keeps every segment open and needs an
//! open-files limit above twice its segment count).
//!
//! Each file a segment may need — the read descriptor of its `.log` file,
//! and the write descriptor of the active segment — is a [`FileSlot`]: a
//! path, a way to open it, and the open file while the cache keeps it.
//! `get` hands out an `Rc` of the open file; whoever holds one (a fetch
//! whose bytes are not yet sent, a write in flight) keeps the descriptor
//! open across an eviction, which only drops the cache's own reference.
//! So the cap bounds the descriptors the cache keeps, not the ones in use
//! at one instant; those are bounded by the requests in flight.
//!
//! Closing and reopening loses nothing: writes are positional, every
//! offset and size lives in memory, and an fdatasync through a new
//! descriptor flushes the file's pages whoever wrote them — a write-back
//! error no descriptor has seen yet is reported to the next fdatasync on
//! any descriptor of the file (Linux's `errseq`, since 4.13).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::{Rc, Weak};

use crate::error::Result;

/// Something the cache can close: a slot holding an open file.
trait Evict {
    /// Drops the slot's file (a holder of an `Rc` keeps it open until done).
    fn evict(&self);
}

/// Counters of one cache, for metrics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileCacheStats {
    /// Files the cache keeps open now.
    pub open: usize,
    /// Files opened (first opens and reopens).
    pub opens: u64,
    /// Files closed to stay within the cap.
    pub evictions: u64,
}

#[derive(Default)]
struct CacheState {
    /// Last use → the slot, oldest first.
    lru: BTreeMap<u64, Weak<dyn Evict>>,
    tick: u64,
    opens: u64,
    evictions: u64,
}

pub struct FileCache {
    open_files_max: usize,
    state: RefCell<CacheState>,
}

impl FileCache {
    /// A cache keeping at most `open_files_max` files open.
    pub fn new(open_files_max: usize) -> Rc<FileCache> {
        assert!(open_files_max >= 1, "a file cache must hold at least one file");
        Rc::new(FileCache {
            open_files_max,
            state: RefCell::new(CacheState::default()),
        })
    }

    /// A cache that never closes anything (tests, tools).
    pub fn unbounded() -> Rc<FileCache> {
        FileCache::new(usize::MAX)
    }

    pub fn open_files_max(&self) -> usize {
        self.open_files_max
    }

    pub fn stats(&self) -> FileCacheStats {
        let s = self.state.borrow();
        FileCacheStats {
            open: s.lru.len(),
            opens: s.opens,
            evictions: s.evictions,
        }
    }

    /// Moves a slot to the most recent end (`old`: its previous tick, if it
    /// was open) and closes the oldest while over the cap. Returns the
    /// slot's new tick.
    fn touch(&self, old: Option<u64>, slot: Weak<dyn Evict>) -> u64 {
        let mut evicted = Vec::new();
        let tick = {
            let mut s = self.state.borrow_mut();
            if let Some(old) = old {
                s.lru.remove(&old);
            }
            s.tick += 1;
            let tick = s.tick;
            s.lru.insert(tick, slot);
            while s.lru.len() > self.open_files_max {
                let Some((_, oldest)) = s.lru.pop_first() else {
                    break;
                };
                s.evictions += 1;
                evicted.push(oldest);
            }
            tick
        };
        // Outside the borrow: an evicted file's drop may run glommio code.
        for slot in evicted {
            if let Some(slot) = slot.upgrade() {
                slot.evict();
            }
        }
        tick
    }

    fn forget(&self, tick: u64) {
        self.state.borrow_mut().lru.remove(&tick);
    }

    fn count_open(&self) {
        self.state.borrow_mut().opens += 1;
    }
}

/// How a slot opens its file.
pub type OpenFn<T> = fn(PathBuf) -> Pin<Box<dyn Future<Output = Result<T>>>>;

struct SlotInner<T> {
    path: PathBuf,
    file: RefCell<Option<Rc<T>>>,
    /// The slot's place in the cache while its file is open.
    tick: Cell<Option<u64>>,
}

impl<T> Evict for SlotInner<T> {
    fn evict(&self) {
        self.tick.set(None);
        let file = self.file.borrow_mut().take();
        drop(file);
    }
}

/// One file the cache opens on demand; see the module doc.
pub struct FileSlot<T: 'static> {
    cache: Rc<FileCache>,
    open: OpenFn<T>,
    inner: Rc<SlotInner<T>>,
}

impl<T: 'static> FileSlot<T> {
    /// A slot for `path`, closed until first used.
    pub fn closed(cache: Rc<FileCache>, path: &Path, open: OpenFn<T>) -> FileSlot<T> {
        FileSlot {
            cache,
            open,
            inner: Rc::new(SlotInner {
                path: path.to_path_buf(),
                file: RefCell::new(None),
                tick: Cell::new(None),
            }),
        }
    }

    /// A slot holding `file`, opened by the caller.
    pub fn with_open(cache: Rc<FileCache>, path: &Path, open: OpenFn<T>, file: T) -> FileSlot<T> {
        let slot = FileSlot::closed(cache, path, open);
        slot.cache.count_open();
        slot.install(Rc::new(file));
        slot
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    pub fn is_open(&self) -> bool {
        self.inner.file.borrow().is_some()
    }

    /// The open file, if the cache still keeps it (marks it used).
    pub fn try_get(&self) -> Option<Rc<T>> {
        let file = self.inner.file.borrow().clone()?;
        self.mark_used();
        Some(file)
    }

    /// The open file, opening it again if the cache closed it.
    pub async fn get(&self) -> Result<Rc<T>> {
        if let Some(file) = self.try_get() {
            return Ok(file);
        }
        let opened = (self.open)(self.inner.path.clone()).await?;
        self.cache.count_open();
        // Another task may have opened it meanwhile: keep one.
        if let Some(file) = self.try_get() {
            return Ok(file);
        }
        let file = Rc::new(opened);
        self.install(file.clone());
        Ok(file)
    }

    /// Closes the file now (the cache forgets it); holders of an `Rc` keep
    /// it open until they drop it.
    pub fn close(&self) {
        if let Some(tick) = self.inner.tick.take() {
            self.cache.forget(tick);
        }
        let file = self.inner.file.borrow_mut().take();
        drop(file);
    }

    fn install(&self, file: Rc<T>) {
        *self.inner.file.borrow_mut() = Some(file);
        self.mark_used();
    }

    fn mark_used(&self) {
        let weak: Weak<SlotInner<T>> = Rc::downgrade(&self.inner);
        let weak: Weak<dyn Evict> = weak;
        let tick = self.cache.touch(self.inner.tick.get(), weak);
        // The newest entry is never the one evicted (the cap is at least one).
        assert!(
            self.inner.file.borrow().is_some(),
            "a file cache evicted its newest entry"
        );
        self.inner.tick.set(Some(tick));
    }
}

impl<T: 'static> Drop for FileSlot<T> {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake {
        path: PathBuf,
        open_now: Rc<Cell<usize>>,
    }

    impl Drop for Fake {
        fn drop(&mut self) {
            self.open_now.set(self.open_now.get() - 1);
        }
    }

    thread_local! {
        static OPEN_NOW: Rc<Cell<usize>> = Rc::new(Cell::new(0));
        static FAIL_OPEN: Cell<bool> = const { Cell::new(false) };
    }

    fn open_fake(path: PathBuf) -> Pin<Box<dyn Future<Output = Result<Fake>>>> {
        Box::pin(async move {
            if FAIL_OPEN.with(|f| f.get()) {
                return Err(crate::error::EngineError::io(
                    "open",
                    &path,
                    std::io::Error::from_raw_os_error(libc::EMFILE),
                ));
            }
            let open_now = OPEN_NOW.with(|o| o.clone());
            open_now.set(open_now.get() + 1);
            Ok(Fake { path, open_now })
        })
    }

    fn open_now() -> usize {
        OPEN_NOW.with(|o| o.get())
    }

    fn run<F: Future<Output = ()> + 'static>(f: impl FnOnce() -> F + Send + 'static) {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .spawn(move || async move { f().await })
            .expect("executor")
            .join()
            .expect("join");
    }

    fn slots(cache: &Rc<FileCache>, n: usize) -> Vec<FileSlot<Fake>> {
        (0..n)
            .map(|i| FileSlot::closed(cache.clone(), Path::new(&format!("f{i}")), open_fake))
            .collect()
    }

    #[test]
    fn the_least_recently_used_file_is_closed_first() {
        run(|| async {
            let cache = FileCache::new(3);
            let s = slots(&cache, 4);
            for slot in &s[..3] {
                slot.get().await.expect("open");
            }
            // f0 used again: f1 is now the oldest.
            s[0].get().await.expect("open");
            s[3].get().await.expect("open");
            let open: Vec<bool> = s.iter().map(FileSlot::is_open).collect();
            assert_eq!(open, [true, false, true, true]);
            assert_eq!(open_now(), 3, "f1's descriptor is closed");
            let st = cache.stats();
            assert_eq!((st.open, st.opens, st.evictions), (3, 4, 1));
            // f1 reopens on demand, and f2 (now the oldest) closes.
            let f1 = s[1].get().await.expect("reopen");
            assert_eq!(f1.path, Path::new("f1"));
            let open: Vec<bool> = s.iter().map(FileSlot::is_open).collect();
            assert_eq!(open, [true, true, false, true]);
            assert_eq!(cache.stats().opens, 5);
            assert_eq!(open_now(), 3);
        });
    }

    #[test]
    fn a_holder_keeps_an_evicted_file_open_until_it_drops_it() {
        run(|| async {
            let cache = FileCache::new(1);
            let s = slots(&cache, 2);
            let held = s[0].get().await.expect("open");
            s[1].get().await.expect("open");
            assert!(!s[0].is_open(), "evicted from the cache");
            assert_eq!(open_now(), 2, "but still open for its holder");
            assert_eq!(held.path, Path::new("f0"));
            drop(held);
            assert_eq!(open_now(), 1);
            assert_eq!(cache.stats().open, 1);
        });
    }

    #[test]
    fn a_dropped_or_closed_slot_leaves_the_cache() {
        run(|| async {
            let cache = FileCache::new(2);
            let mut s = slots(&cache, 3);
            s[0].get().await.expect("open");
            s[1].get().await.expect("open");
            s.remove(0);
            s[0].close();
            assert_eq!(cache.stats().open, 0);
            assert_eq!(open_now(), 0);
            // Room for two again: nothing is evicted.
            s[0].get().await.expect("open");
            s[1].get().await.expect("open");
            assert_eq!(cache.stats().evictions, 0);
            assert_eq!(open_now(), 2);
        });
    }

    #[test]
    fn a_failed_open_leaves_the_slot_closed_and_retries_next_time() {
        run(|| async {
            let cache = FileCache::new(2);
            let s = slots(&cache, 1);
            FAIL_OPEN.with(|f| f.set(true));
            assert!(s[0].get().await.is_err());
            assert!(!s[0].is_open());
            assert_eq!(cache.stats().open, 0);
            FAIL_OPEN.with(|f| f.set(false));
            s[0].get().await.expect("open");
            assert!(s[0].is_open());
        });
    }

    #[test]
    fn the_cache_never_keeps_more_than_its_cap() {
        run(|| async {
            let cache = FileCache::new(5);
            let s = slots(&cache, 50);
            let mut rng = 12345u64;
            for _ in 0..2000 {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let i = (rng >> 33) as usize % s.len();
                s[i].get().await.expect("open");
                assert!(cache.stats().open <= 5);
                assert_eq!(open_now(), cache.stats().open);
                assert_eq!(s.iter().filter(|x| x.is_open()).count(), cache.stats().open);
            }
        });
    }
}
