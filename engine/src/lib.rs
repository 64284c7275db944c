//! Ferrite's storage engine.
//!
//! # Programming model
//!
//! The engine runs on *shards*: one glommio executor per CPU, pinned to it
//! ([`shard`]). Every partition belongs to exactly one shard, and its state —
//! a [`log::PartitionLog`] in that shard's [`log_manager::LogManager`] — lives
//! there as `Rc`/`RefCell`, so it is `!Send` by construction. Other shards and
//! other threads reach it only by sending a message to its shard.
//!
//! A partition's log stores Kafka RecordBatch v2 bytes verbatim ([`batch`]),
//! in segments ([`segment`]) with sparse offset and time indexes
//! ([`offset_index`], [`time_index`]). Appends go through glommio's io_uring
//! file API in groups ([`segment_appender`]); reads return file regions for
//! `sendfile` or cached batches ([`log_read`]). Durability follows Kafka's
//! `flush.messages` / `flush.ms` with group commits ([`flush`]); unclean
//! shutdowns are recovered by a CRC scan from the recovery point
//! ([`recovery`]); retention deletes whole old segments ([`retention`]).
//! Each log keeps its leader epochs and where each started
//! ([`leader_epoch`]), for OffsetForLeaderEpoch.
//!
//! The on-disk formats are documented byte by byte in the module of the file
//! that writes them: [`batch`], [`offset_index`], [`time_index`],
//! [`checkpoint`], [`leader_epoch`].
//!
//! Depends on: `ferrite-ids` only, of the workspace. Must not know of
//! replication, the controller, the wire protocol or the broker.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod batch;
pub mod batch_cache;
mod block_layout;
pub mod checkpoint;
pub mod clean_filter;
pub mod clean_job;
pub mod clean_map;
pub mod clean_swap;
pub mod clean_txn;
pub mod cleaner;
pub mod clock;
pub mod compression;
pub mod doomed_dirs;
pub mod error;
pub mod fifo;
pub mod file_cache;
pub mod flush;
pub mod index;
pub mod io_memory;
pub mod leader_epoch;
pub mod log;
pub mod log_config;
pub mod log_manager;
pub mod log_read;
pub mod notify;
pub mod offset_index;
pub mod offsets;
pub mod producer_scan;
pub mod producer_state;
pub mod record;
mod record_set;
pub mod recovery;
pub mod retention;
pub mod scan;
pub mod scrub;
pub mod segment;
pub mod segment_appender;
pub mod segment_load;
pub mod segment_reader;
pub mod shard;
pub mod stall_guard;
pub mod sys;
pub mod time_index;
pub mod truncate;
pub mod txn_index;
pub mod txn_state;
pub mod types;
pub mod write_mode;

pub use error::{BatchError, EngineError, Result};
pub use leader_epoch::{EpochEntry, LeaderEpochCache};
pub use log::{AppendInfo, AppendMode, PartitionLog};
pub use log_config::LogConfig;
pub use log_read::{FileRegion, LogRead, ReadRegion, SizeLimit};
pub use recovery::{OpenParams, Repair};
pub use types::{LeaderEpoch, Offset, ProducerId, ShardId, TimestampMs, TopicPartition};
pub use write_mode::WriteMode;
