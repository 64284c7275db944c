//! Decompressing a batch's records, for the places the engine looks inside
//! compressed batches (finding the first record at or after a timestamp,
//! the log cleaner), and compressing them again (the cleaner rewrites a
//! batch it removed records from with the batch's own codec). Batches are
//! always *stored* compressed, as produced.
//!
//! Formats, as Kafka writes them: gzip (a gzip stream), snappy (either
//! Xerial's framing — the 8-byte magic `82 53 4e 41 50 50 59 00`, two int32
//! versions, then blocks of int32 length + raw snappy — as the Java client
//! writes, or one raw snappy block), lz4 (the LZ4 frame format), zstd (a
//! zstd frame). The output is bounded by `limit`: a small input that
//! inflates beyond it is refused, not followed.

use std::io::Read;

use crate::batch::Compression;
use crate::error::BatchError;

const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
/// Magic + version + compatible version.
const XERIAL_HEADER_BYTES: usize = 16;

/// The reason given when records inflate past the caller's limit (so a
/// caller can tell "too large to look at" from "damaged").
pub const BEYOND_LIMIT: &str = "records decompress beyond the limit";

fn invalid(reason: &'static str) -> BatchError {
    BatchError::Invalid { reason }
}

/// Reads all of `r`, refusing more than `limit` bytes.
fn read_bounded(mut r: impl Read, limit: usize) -> Result<Vec<u8>, BatchError> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = r.read(&mut chunk).map_err(|_| invalid("records do not decompress"))?;
        if n == 0 {
            return Ok(out);
        }
        if out.len() + n > limit {
            return Err(invalid(BEYOND_LIMIT));
        }
        out.extend_from_slice(&chunk[..n]);
    }
}

fn snappy_block(input: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), BatchError> {
    let len = snap::raw::decompress_len(input).map_err(|_| invalid("bad snappy block"))?;
    if out.len() + len > limit {
        return Err(invalid(BEYOND_LIMIT));
    }
    let start = out.len();
    out.resize(start + len, 0);
    snap::raw::Decoder::new()
        .decompress(input, &mut out[start..])
        .map_err(|_| invalid("bad snappy block"))?;
    Ok(())
}

fn snappy(input: &[u8], limit: usize) -> Result<Vec<u8>, BatchError> {
    let mut out = Vec::new();
    if !input.starts_with(XERIAL_MAGIC) {
        snappy_block(input, &mut out, limit)?;
        return Ok(out);
    }
    let mut at = XERIAL_HEADER_BYTES.min(input.len());
    while at < input.len() {
        let len_bytes = input.get(at..at + 4).ok_or(invalid("truncated snappy frame"))?;
        let len = u32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]) as usize;
        at += 4;
        let block = input.get(at..at + len).ok_or(invalid("truncated snappy frame"))?;
        snappy_block(block, &mut out, limit)?;
        at += len;
    }
    Ok(out)
}

/// The uncompressed records of a batch whose records section is `input`.
pub fn decompress(codec: Compression, input: &[u8], limit: usize) -> Result<Vec<u8>, BatchError> {
    match codec {
        Compression::None => Ok(input.to_vec()),
        Compression::Gzip => read_bounded(flate2::read::GzDecoder::new(input), limit),
        Compression::Snappy => snappy(input, limit),
        Compression::Lz4 => read_bounded(lz4_flex::frame::FrameDecoder::new(input), limit),
        Compression::Zstd => {
            let d = ruzstd::decoding::StreamingDecoder::new(input).map_err(|_| invalid("bad zstd frame"))?;
            read_bounded(d, limit)
        }
    }
}

/// Compresses a batch's records with `codec`, as Kafka's Java client writes
/// them (snappy in Xerial's framing, lz4 as an LZ4 frame).
pub fn compress(codec: Compression, input: &[u8]) -> Result<Vec<u8>, BatchError> {
    use std::io::Write;
    let failed = |_| invalid("records do not compress");
    match codec {
        Compression::None => Ok(input.to_vec()),
        Compression::Gzip => {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            gz.write_all(input).map_err(failed)?;
            gz.finish().map_err(failed)
        }
        Compression::Snappy => {
            let mut out = XERIAL_MAGIC.to_vec();
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            for part in input.chunks(XERIAL_BLOCK_BYTES) {
                let block = snap::raw::Encoder::new()
                    .compress_vec(part)
                    .map_err(|_| invalid("records do not compress"))?;
                out.extend_from_slice(&(block.len() as u32).to_be_bytes());
                out.extend_from_slice(&block);
            }
            Ok(out)
        }
        Compression::Lz4 => {
            let mut lz = lz4_flex::frame::FrameEncoder::new(Vec::new());
            lz.write_all(input).map_err(failed)?;
            lz.finish().map_err(|_| invalid("records do not compress"))
        }
        Compression::Zstd => Ok(ruzstd::encoding::compress_to_vec(
            input,
            ruzstd::encoding::CompressionLevel::Fastest,
        )),
    }
}

/// Uncompressed bytes per block of Xerial's snappy framing (its default).
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn gzip_lz4_snappy_round_trip_and_bombs_are_refused() {
        let data: Vec<u8> = (0..50_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&data).unwrap();
        let gz = gz.finish().unwrap();
        assert_eq!(decompress(Compression::Gzip, &gz, 1 << 20).unwrap(), data);
        assert!(decompress(Compression::Gzip, &gz, 1000).is_err(), "limit");
        let mut lz = lz4_flex::frame::FrameEncoder::new(Vec::new());
        lz.write_all(&data).unwrap();
        let lz = lz.finish().unwrap();
        assert_eq!(decompress(Compression::Lz4, &lz, 1 << 20).unwrap(), data);
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(decompress(Compression::Snappy, &raw, 1 << 20).unwrap(), data);
        let mut xerial = XERIAL_MAGIC.to_vec();
        xerial.extend_from_slice(&1i32.to_be_bytes());
        xerial.extend_from_slice(&1i32.to_be_bytes());
        for part in data.chunks(70_000) {
            let block = snap::raw::Encoder::new().compress_vec(part).unwrap();
            xerial.extend_from_slice(&(block.len() as u32).to_be_bytes());
            xerial.extend_from_slice(&block);
        }
        assert_eq!(decompress(Compression::Snappy, &xerial, 1 << 20).unwrap(), data);
        assert!(decompress(Compression::Zstd, b"not zstd", 1 << 20).is_err());
        assert!(decompress(Compression::Snappy, &xerial[..xerial.len() - 1], 1 << 20).is_err());
    }

    #[test]
    fn every_codec_compresses_what_it_decompresses() {
        let data: Vec<u8> = (0..100_000u32).flat_map(|i| (i % 97).to_le_bytes()).collect();
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let packed = compress(codec, &data).unwrap();
            assert_eq!(decompress(codec, &packed, 1 << 20).unwrap(), data, "{codec:?}");
        }
    }
}
