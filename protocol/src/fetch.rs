//! Fetch (key 1), v4-12. From v7 a request carries a fetch session's id
//! and epoch and the partitions it forgets, and the response the session's
//! id (KIP-227; kept by `handlers/fetch_session.rs`).

use ferrite_ids::{LeaderEpoch, Offset, ProducerId};

use super::response::{Chunk, ResponseBuilder};
use super::wire::{capacity, Reader, WireError, WireResult};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchPartition {
    pub partition: i32,
    /// -1 ([`LeaderEpoch::NONE`]): not checked (and before v9).
    pub current_leader_epoch: LeaderEpoch,
    pub fetch_offset: Offset,
    /// A follower's log start; -1 from consumers (and before v5).
    pub log_start_offset: Offset,
    pub partition_max_bytes: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchTopic {
    pub topic: String,
    pub partitions: Vec<FetchPartition>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchRequest {
    pub replica_id: i32,
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub isolation: Isolation,
    /// The fetch session (v7+; before: 0 and -1, a fetch without one).
    pub session_id: i32,
    pub session_epoch: i32,
    pub topics: Vec<FetchTopic>,
    /// Partitions an incremental fetch drops from its session.
    pub forgotten: Vec<(String, Vec<i32>)>,
}

/// What a consumer may read (`isolation.level`): Fetch and ListOffsets
/// carry it as an int8, 0 or 1; any other value is a malformed request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Isolation {
    /// Up to the high watermark, aborted transactions' records included.
    #[default]
    ReadUncommitted,
    /// Up to the last stable offset, told which transactions aborted.
    ReadCommitted,
}

impl Isolation {
    pub fn decode(r: &mut Reader) -> WireResult<Isolation> {
        match r.i8("isolation_level")? {
            0 => Ok(Isolation::ReadUncommitted),
            1 => Ok(Isolation::ReadCommitted),
            other => Err(WireError::Invalid {
                what: "isolation_level",
                value: i64::from(other),
            }),
        }
    }
}

/// A fetch without a session (before v7, or session id 0 and epoch -1).
pub const FINAL_EPOCH: i32 = -1;
/// A fetch that opens a session (epoch 0).
pub const INITIAL_EPOCH: i32 = 0;

impl FetchRequest {
    pub fn decode(r: &mut Reader, version: i16, flexible: bool) -> WireResult<FetchRequest> {
        let replica_id = r.i32("replica_id")?;
        let max_wait_ms = r.i32("max_wait_ms")?;
        let min_bytes = r.i32("min_bytes")?;
        let max_bytes = r.i32("max_bytes")?;
        let isolation = Isolation::decode(r)?;
        let (session_id, session_epoch) = if version >= 7 {
            (r.i32("session_id")?, r.i32("session_epoch")?)
        } else {
            (0, FINAL_EPOCH)
        };
        let n = r.array_len_required(flexible, 2, "fetch topics")?;
        let mut topics = Vec::with_capacity(capacity(n));
        for _ in 0..n {
            let topic = r.string(flexible, "topic")?;
            let np = r.array_len_required(flexible, 16, "fetch partitions")?;
            let mut partitions = Vec::with_capacity(capacity(np));
            for _ in 0..np {
                partitions.push(FetchPartition::decode(r, version, flexible)?);
            }
            r.tagged_fields_if(flexible)?;
            topics.push(FetchTopic { topic, partitions });
        }
        let forgotten = if version >= 7 {
            read_forgotten(r, flexible)?
        } else {
            Vec::new()
        };
        if version >= 11 {
            r.string(flexible, "rack_id")?;
        }
        r.tagged_fields_if(flexible)?;
        Ok(FetchRequest {
            replica_id,
            max_wait_ms,
            min_bytes,
            max_bytes,
            isolation,
            session_id,
            session_epoch,
            topics,
            forgotten,
        })
    }
}

impl FetchPartition {
    fn decode(r: &mut Reader, version: i16, flexible: bool) -> WireResult<FetchPartition> {
        let partition = r.i32("partition")?;
        let current_leader_epoch = if version >= 9 {
            LeaderEpoch(r.i32("current_leader_epoch")?)
        } else {
            LeaderEpoch::NONE
        };
        let fetch_offset = Offset(r.i64("fetch_offset")?);
        if version >= 12 {
            r.i32("last_fetched_epoch")?;
        }
        let log_start_offset = Offset(if version >= 5 { r.i64("log_start_offset")? } else { -1 });
        let partition_max_bytes = r.i32("partition_max_bytes")?;
        r.tagged_fields_if(flexible)?;
        Ok(FetchPartition {
            partition,
            current_leader_epoch,
            fetch_offset,
            log_start_offset,
            partition_max_bytes,
        })
    }
}

/// The partitions an incremental fetch drops from its session (v7+).
fn read_forgotten(r: &mut Reader, flexible: bool) -> WireResult<Vec<(String, Vec<i32>)>> {
    let nf = r.array_len_required(flexible, 2, "forgotten topics")?;
    let mut forgotten = Vec::with_capacity(capacity(nf));
    for _ in 0..nf {
        let topic = r.string(flexible, "forgotten topic")?;
        let partitions = r.i32_array(flexible, "forgotten partitions")?;
        r.tagged_fields_if(flexible)?;
        forgotten.push((topic, partitions));
    }
    Ok(forgotten)
}

/// One partition's answer; `records` is sent as it is.
#[derive(Debug)]
pub struct FetchPartitionResponse {
    pub index: i32,
    pub error: i16,
    pub high_watermark: Offset,
    pub last_stable_offset: Offset,
    pub log_start_offset: Offset,
    /// A `read_committed` read's aborted transactions overlapping what it
    /// read, as (producer id, first offset); `None` (null) otherwise.
    pub aborted_transactions: Option<Vec<(ProducerId, Offset)>>,
    pub records: Vec<Chunk>,
}

#[derive(Debug)]
pub struct FetchTopicResponse {
    pub topic: String,
    pub partitions: Vec<FetchPartitionResponse>,
}

/// Encodes the response body into `b`, the record chunks in place. A
/// partition without records gets an empty (not null) record set:
/// librdkafka rejects a null one.
pub fn encode_response(
    b: &mut ResponseBuilder,
    version: i16,
    flexible: bool,
    error: i16,
    session_id: i32,
    topics: Vec<FetchTopicResponse>,
) {
    b.w.i32(0);
    if version >= 7 {
        b.w.i16(error);
        b.w.i32(session_id);
    }
    b.w.array_len(flexible, Some(topics.len()));
    for t in topics {
        b.w.string(flexible, &t.topic);
        b.w.array_len(flexible, Some(t.partitions.len()));
        for p in t.partitions {
            b.w.i32(p.index);
            b.w.i16(p.error);
            b.w.i64(p.high_watermark.0);
            b.w.i64(p.last_stable_offset.0);
            if version >= 5 {
                b.w.i64(p.log_start_offset.0);
            }
            b.w.array_len(flexible, p.aborted_transactions.as_ref().map(Vec::len));
            for (producer_id, first_offset) in p.aborted_transactions.iter().flatten() {
                b.w.i64(producer_id.0);
                b.w.i64(first_offset.0);
                b.w.empty_tagged_fields_if(flexible);
            }
            if version >= 11 {
                b.w.i32(-1);
            }
            let len: u64 = p.records.iter().map(Chunk::len).sum();
            b.w.bytes_len(flexible, Some(len as usize));
            for c in p.records {
                b.push_chunk(c);
            }
            b.w.empty_tagged_fields_if(flexible);
        }
        b.w.empty_tagged_fields_if(flexible);
    }
    b.w.empty_tagged_fields_if(flexible);
}
