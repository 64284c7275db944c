//! Recovery's scanner on a segment made of arbitrary bytes: never panics,
//! keeps only a valid prefix (every batch it keeps validates on its own, and
//! they tile the prefix from byte 0), and gives the same answer however the
//! bytes are chunked.
#![no_main]

use ferrite_engine::batch::{self, Validation};
use ferrite_engine::scan::{scan_bytes, ScanStop, Scanner};
use ferrite_engine::Offset;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (found, valid_end, stop) = scan_bytes(data, Offset(0));
    assert!(valid_end as usize <= data.len());
    let mut pos = 0u64;
    let mut next = Offset(0);
    for (at, info) in &found {
        assert_eq!(*at, pos, "batches tile the prefix");
        let bytes = &data[pos as usize..pos as usize + info.size];
        let again = batch::validate(bytes, usize::MAX, Validation::Stored).expect("kept batch is valid");
        assert!(again.base_offset >= next);
        next = again.next_offset();
        pos += info.size as u64;
    }
    assert_eq!(pos, valid_end);
    match &stop {
        ScanStop::End => assert_eq!(valid_end as usize, data.len()),
        ScanStop::Invalid { position, .. } => assert_eq!(*position, valid_end),
    }
    // Chunked feeding agrees.
    let chunk = 1 + data.first().copied().unwrap_or(0) as usize;
    let mut s = Scanner::new(0, Offset(0));
    let mut n = 0;
    for c in data.chunks(chunk) {
        s.feed(c, &mut |_, _| n += 1);
    }
    assert_eq!(n, found.len());
    assert_eq!(s.valid_end(), valid_end);
    assert_eq!(s.finish(), stop);
});
