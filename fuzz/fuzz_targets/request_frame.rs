//! Arbitrary bytes as a request frame: decoding never panics, never
//! aborts, and never allocates from a length it has not checked against
//! the bytes present (libFuzzer's -rss_limit_mb and -malloc_limit_mb catch
//! the latter).
#![no_main]

use bytes::Bytes;
use ferrite_protocol::request::decode_frame;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = decode_frame(Bytes::copy_from_slice(data));
});
