//! Shared pieces of Ferrite's benchmarks: size parsing, batch templates,
//! and the engine throughput run behind `ferrite-bench engine`.
//!
//! Depends on: any crate of the workspace (it measures them all), and
//! `ferrite-testkit`. Nothing depends on it.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod appended;
pub mod cold_read;
pub mod disk_busy;
pub mod engine_run;
pub mod group_consume;
pub mod load;
pub mod loopback;
pub mod matrix;
pub mod partitions;
pub mod procs;
pub mod schedule;
pub mod size;

use bytes::BytesMut;
use ferrite_engine::batch::build_batch;
use ferrite_engine::{Offset, TimestampMs};

/// An uncompressed batch of `records` records of `record_bytes` each, the
/// kind a producer sends (offsets to be assigned by the log).
pub fn batch_template(records: usize, record_bytes: usize) -> BytesMut {
    let value: Vec<u8> = (0..record_bytes).map(|i| (i * 31 % 251) as u8).collect();
    let values: Vec<&[u8]> = (0..records).map(|_| &value[..]).collect();
    BytesMut::from(&build_batch(Offset(0), TimestampMs(1_700_000_000_000), &values)[..])
}
