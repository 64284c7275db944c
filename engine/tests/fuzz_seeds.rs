//! The fuzzers' seed inputs (written by `fuzz/make_seeds.py`) are what they
//! claim to be: valid batches, a valid segment with a torn copy, and sorted
//! indexes. A seed that silently stopped parsing would leave the fuzzers to
//! rediscover the format from scratch.

use std::path::PathBuf;

use ferrite_engine::batch::{validate, Validation};
use ferrite_engine::offset_index::OffsetIndex;
use ferrite_engine::scan::{scan_bytes, ScanStop};
use ferrite_engine::time_index::TimeIndex;
use ferrite_engine::Offset;

fn seed(target: &str, name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/seeds")
        .join(target)
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn seeds_parse_as_intended() {
    for name in ["one_record", "three_records"] {
        let b = seed("batch_header", name);
        let info = validate(&b, 1 << 20, Validation::Producer).expect(name);
        assert_eq!(info.size, b.len());
    }
    let (found, _, stop) = scan_bytes(&seed("segment_recovery", "four_batches"), Offset(0));
    assert_eq!((found.len(), stop), (4, ScanStop::End));
    let (found, _, stop) = scan_bytes(&seed("segment_recovery", "torn_tail"), Offset(0));
    assert_eq!(found.len(), 3);
    assert!(matches!(stop, ScanStop::Invalid { .. }));
    assert_eq!(
        OffsetIndex::decode(PathBuf::from("i"), &seed("index_files", "offset_index"))
            .unwrap()
            .entries()
            .len(),
        8
    );
    assert_eq!(
        TimeIndex::decode(PathBuf::from("t"), &seed("index_files", "time_index"))
            .unwrap()
            .entries()
            .len(),
        8
    );
}
