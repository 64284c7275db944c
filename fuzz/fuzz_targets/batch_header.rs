//! The batch header parser and validator on arbitrary bytes: never panics,
//! and whatever it accepts really is a whole, CRC-correct batch that stays
//! valid after the log stamps its offset and epoch.
#![no_main]

use ferrite_engine::batch::{self, Validation, CRC_START};
use ferrite_engine::{LeaderEpoch, Offset};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = batch::peek(data);
    let _ = ferrite_engine::record::decode_records(data, data.first().copied().unwrap_or(0) as i32);
    for validation in [Validation::Producer, Validation::Stored] {
        let Ok(info) = batch::validate(data, 1 << 20, validation) else {
            continue;
        };
        assert!(info.size <= data.len());
        assert!(info.size >= batch::HEADER_BYTES);
        let stored = u32::from_be_bytes([data[17], data[18], data[19], data[20]]);
        assert_eq!(stored, crc32c::crc32c(&data[CRC_START..info.size]));
        let mut copy = data[..info.size].to_vec();
        batch::stamp(&mut copy, Offset(1 << 40), LeaderEpoch(9));
        let again = batch::validate(&copy, 1 << 20, validation).expect("stamping keeps a batch valid");
        assert_eq!(again.base_offset, Offset(1 << 40));
        assert_eq!(again.record_count, info.record_count);
    }
});
