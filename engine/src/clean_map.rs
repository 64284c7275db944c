//! The cleaner's map from a key to the offset of its latest record.
//!
//! Keys are held as 128-bit hashes (two SipHash-1-3 runs under keys drawn
//! at random for each map), so the map's memory does not depend on key
//! sizes, and nobody can choose keys that collide in it: a collision would
//! let one key's newer record remove another key's latest one. Kafka's
//! cleaner keeps an MD5 of each key for the same reason.
//!
//! The map is bounded: it takes `entries_max` keys
//! (`log.cleaner.dedupe.buffer.size`), and the cleaner stops filling it
//! after the batch that fills it, leaving the rest dirty for the next pass.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use crate::types::Offset;

/// Bytes one entry is counted as against `log.cleaner.dedupe.buffer.size`:
/// 24 of hash and offset, and the hash table's slack (its load factor, and
/// the old table it copies from while it grows).
pub const ENTRY_BYTES: usize = 64;

pub struct KeyMap {
    seeds: (
        std::collections::hash_map::RandomState,
        std::collections::hash_map::RandomState,
    ),
    latest: HashMap<u128, Offset>,
    entries_max: usize,
}

impl KeyMap {
    pub fn new(entries_max: usize) -> KeyMap {
        assert!(entries_max > 0, "a key map that holds nothing cleans nothing");
        KeyMap {
            seeds: Default::default(),
            latest: HashMap::new(),
            entries_max,
        }
    }

    fn hash(&self, key: &[u8]) -> u128 {
        let mut a = self.seeds.0.build_hasher();
        a.write(key);
        let mut b = self.seeds.1.build_hasher();
        b.write(key);
        (u128::from(a.finish()) << 64) | u128::from(b.finish())
    }

    /// Records `offset` as the latest of `key`, unless the map has a later
    /// one already.
    pub fn put(&mut self, key: &[u8], offset: Offset) {
        let h = self.hash(key);
        let slot = self.latest.entry(h).or_insert(offset);
        *slot = (*slot).max(offset);
    }

    /// The offset of `key`'s latest record, if the map saw it.
    pub fn get(&self, key: &[u8]) -> Option<Offset> {
        self.latest.get(&self.hash(key)).copied()
    }

    pub fn len(&self) -> usize {
        self.latest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.latest.is_empty()
    }

    pub fn is_full(&self) -> bool {
        self.latest.len() >= self.entries_max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_offset_wins_and_keys_stay_apart() {
        let mut m = KeyMap::new(3);
        m.put(b"a", Offset(1));
        m.put(b"b", Offset(2));
        m.put(b"a", Offset(5));
        assert_eq!(m.get(b"a"), Some(Offset(5)));
        assert_eq!(m.get(b"b"), Some(Offset(2)));
        assert_eq!(m.get(b"c"), None);
        assert!(!m.is_full());
        m.put(b"", Offset(6));
        assert!(m.is_full());
        assert_eq!(m.len(), 3);
    }
}
