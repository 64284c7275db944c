//! The request fuzzer's seeds (`fuzz/seeds/request_frame`, written by
//! `fuzz/make_seeds.py`) are requests the decoder takes whole: mutation
//! starts from inputs that reach each API's body, SASL's among them.

use bytes::Bytes;
use ferrite_protocol::request::{decode_frame, Decoded};

#[test]
fn every_request_seed_decodes() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/seeds/request_frame");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).expect("seeds") {
        let path = entry.expect("entry").path();
        let data = std::fs::read(&path).expect("seed");
        let decoded = decode_frame(Bytes::from(data));
        assert!(
            matches!(decoded, Ok(Decoded::Request(_))),
            "{}: {:?}",
            path.display(),
            decoded.err()
        );
        names.push(path.file_name().expect("name").to_string_lossy().into_owned());
    }
    for wanted in ["sasl_handshake_v1", "sasl_authenticate_v2", "alter_user_scram_v0"] {
        assert!(names.iter().any(|n| n == wanted), "no seed {wanted}");
    }
}
