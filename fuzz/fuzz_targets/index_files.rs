//! Index (offset, time, transaction) and checkpoint files made of arbitrary bytes: decoding never
//! panics, accepted indexes are sorted, and look-ups never return an entry
//! past their target.
#![no_main]

use std::path::PathBuf;

use ferrite_engine::checkpoint::Checkpoint;
use ferrite_engine::offset_index::{self, OffsetIndex};
use ferrite_engine::time_index::{self, TimeIndex};
use ferrite_engine::txn_index::{self, TxnIndex};
use ferrite_engine::{Offset, TimestampMs};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let base = Offset(1000);
    if let Ok(idx) = OffsetIndex::decode(PathBuf::from("f.index"), data) {
        for w in idx.entries().windows(2) {
            assert!(w[0].relative_offset < w[1].relative_offset && w[0].position < w[1].position);
        }
        for e in idx.entries().iter().take(64) {
            for delta in [-1i64, 0, 1] {
                let target = Offset(base.0 + i64::from(e.relative_offset) + delta);
                let (o, _) = offset_index::lookup(&idx, base, target);
                assert!(o <= target.max(base));
            }
        }
    }
    if let Ok(idx) = TimeIndex::decode(PathBuf::from("f.timeindex"), data) {
        for e in idx.entries().iter().take(64) {
            let o = time_index::lookup(&idx, base, TimestampMs(e.timestamp.0.saturating_add(1)));
            assert!(o >= base);
        }
    }
    if let Ok(idx) = TxnIndex::decode(PathBuf::from("f.txnindex"), data) {
        for w in idx.entries().windows(2) {
            assert!(w[0].last_offset < w[1].last_offset);
        }
        for e in idx.entries().iter().take(64) {
            assert!(e.first_offset <= e.last_offset);
            let mut found = Vec::new();
            txn_index::collect(&idx, e.last_offset, Offset(i64::MAX), &mut found);
            assert!(found.first() == Some(e) || e.first_offset == Offset(i64::MAX));
        }
    }
    if let Ok(cp) = Checkpoint::decode(data) {
        assert_eq!(Checkpoint::decode(&cp.encode()), Ok(cp));
    }
});
