//! Compares the replicas of each partition on disk, after the run: every
//! broker's segment files (`<data>/<topic>-<p>/<base>.log`) are scanned
//! batch by batch, and below the final high watermark every replica must
//! hold the same batches — the same base offsets, lengths and CRCs, hence
//! the same bytes (a follower copies its leader's batches verbatim).
//!
//! A scan stops at the first bytes that are not a whole batch: the zero
//! padding an O_DIRECT segment may end with, or a tail past the high
//! watermark that was being written.

use std::path::Path;

use ferrite_engine::batch::{self, HEADER_BYTES, LOG_OVERHEAD_BYTES};

use crate::checker::FinalLog;
use crate::cluster::Cluster;
use crate::workload::TOPIC;

/// One batch as a replica holds it: (base offset, length, CRC).
pub type BatchId = (i64, i32, u32);

/// The batches of one replica's segment files, in offset order, that end
/// below `end` (an offset).
pub fn batches(partition_dir: &Path, end: i64) -> Vec<BatchId> {
    let mut logs: Vec<_> = std::fs::read_dir(partition_dir)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    logs.retain(|p| p.extension().is_some_and(|e| e == "log"));
    logs.sort();
    let mut out = Vec::new();
    for path in logs {
        let Ok(bytes) = std::fs::read(&path) else { continue };
        let mut at = 0;
        while bytes.len() - at >= HEADER_BYTES {
            let Ok(h) = batch::read_header(&bytes[at..]) else { break };
            let length = h.batch_length.get();
            let size = LOG_OVERHEAD_BYTES + length.max(0) as usize;
            if size < HEADER_BYTES || at + size > bytes.len() {
                break;
            }
            let last = h.base_offset.get() + i64::from(h.last_offset_delta.get());
            if last < end {
                out.push((h.base_offset.get(), length, h.crc.get()));
            }
            at += size;
        }
    }
    out
}

/// The partitions whose replicas differ below the end of the final read,
/// each with what differs.
pub fn divergent(cluster: &Cluster, partitions: i32, final_log: &FinalLog) -> Vec<String> {
    let mut out = Vec::new();
    for p in 0..partitions {
        let end = final_log
            .get(&p)
            .and_then(|r| r.last())
            .map_or(0, |(offset, _)| offset + 1);
        let dir = format!("{TOPIC}-{p}");
        let replicas: Vec<(i32, Vec<BatchId>)> = cluster
            .brokers
            .iter()
            .map(|b| (b.id(), batches(&b.data_dir().join(&dir), end)))
            .collect();
        let Some((first_id, first)) = replicas.first() else {
            continue;
        };
        for (id, other) in &replicas[1..] {
            if other != first {
                let at = first.iter().zip(other).position(|(a, b)| a != b);
                out.push(format!(
                    "{dir}: broker {id} differs from broker {first_id} ({} and {} batches below offset {end}; first difference at batch {at:?})",
                    other.len(),
                    first.len()
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_engine::types::{Offset, TimestampMs};

    #[test]
    fn a_scan_stops_at_padding_and_skips_batches_past_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = batch::build_batch(Offset(0), TimestampMs(0), &[b"a", b"b"]);
        bytes.extend(batch::build_batch(Offset(2), TimestampMs(0), &[b"c"]));
        bytes.extend(vec![0u8; 4096]);
        std::fs::write(dir.path().join("00000000000000000000.log"), &bytes).unwrap();
        let all = batches(dir.path(), 10);
        assert_eq!(all.iter().map(|b| b.0).collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(
            batches(dir.path(), 2).len(),
            1,
            "the batch at 2 ends at or past offset 2"
        );
    }
}
