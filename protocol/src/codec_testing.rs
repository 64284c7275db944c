//! Helpers for the codec tests: round trips, truncation at every prefix, and
//! proptest strategies for the values the inter-broker RPCs carry.

use std::fmt::Debug;

use bytes::Bytes;
use ferrite_ids::BrokerId;
use proptest::prelude::*;

use super::wire::{Reader, WireResult, Writer};

/// `value` encodes to bytes that decode back to it, with nothing left over;
/// returns the bytes.
pub fn round_trip<T: PartialEq + Debug>(
    value: &T,
    encode: impl Fn(&T, &mut Writer),
    decode: impl Fn(&mut Reader) -> WireResult<T>,
) -> Bytes {
    let mut w = Writer::new();
    encode(value, &mut w);
    let bytes = w.into_bytes().freeze();
    let mut r = Reader::new(bytes.clone());
    let back = decode(&mut r).unwrap_or_else(|e| panic!("{e} decoding {value:?}"));
    assert_eq!(&back, value);
    assert_eq!(r.remaining(), 0, "bytes left over");
    bytes
}

/// Every strict prefix of `full` is refused with an error (never a panic).
pub fn every_prefix_fails<T: Debug>(full: &[u8], decode: impl Fn(&mut Reader) -> WireResult<T>) {
    for cut in 0..full.len() {
        let mut r = Reader::new(Bytes::copy_from_slice(&full[..cut]));
        let got = decode(&mut r);
        assert!(got.is_err(), "a {cut}-byte prefix of {} decoded: {got:?}", full.len());
    }
}

/// The unsigned varint of `n + 1`: a compact array or string length.
pub fn compact_len(n: u32) -> Vec<u8> {
    let mut w = Writer::new();
    w.unsigned_varint(n + 1);
    w.as_slice().to_vec()
}

/// A compact count of 2^31 - 1, then `tail`.
pub fn huge_compact_count(prefix: &[u8], tail: &[u8]) -> Bytes {
    let mut v = prefix.to_vec();
    v.extend_from_slice(&compact_len(i32::MAX as u32));
    v.extend_from_slice(tail);
    Bytes::from(v)
}

pub fn name() -> impl Strategy<Value = String> {
    "\\PC{0,6}"
}

pub fn broker_id() -> impl Strategy<Value = BrokerId> {
    prop_oneof![(-2i32..8).prop_map(BrokerId), any::<i32>().prop_map(BrokerId)]
}

pub fn broker_ids() -> impl Strategy<Value = Vec<BrokerId>> {
    prop::collection::vec(broker_id(), 0..4)
}
