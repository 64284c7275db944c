//! ListOffsets (key 2), v1-7. Timestamps -1 (latest) and -2 (earliest) are
//! special; -3 (v7+) asks for the record with the largest timestamp.

use ferrite_ids::{LeaderEpoch, Offset, TimestampMs};

use super::fetch::Isolation;
use super::wire::{capacity, Reader, WireResult, Writer};

pub const LATEST: i64 = -1;
/// Kafka's debugging replica id: a ListOffsets from it reads the broker's
/// own replica of each partition, leader or not.
pub const DEBUGGING_REPLICA_ID: i32 = -2;
pub const EARLIEST: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListOffsetsPartition {
    pub index: i32,
    /// -1 ([`LeaderEpoch::NONE`]): not checked (and before v4).
    pub current_leader_epoch: LeaderEpoch,
    /// A time, or [`LATEST`], [`EARLIEST`], [`MAX_TIMESTAMP`].
    pub timestamp: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListOffsetsTopic {
    pub name: String,
    pub partitions: Vec<ListOffsetsPartition>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListOffsetsRequest {
    pub replica_id: i32,
    pub isolation: Isolation,
    pub topics: Vec<ListOffsetsTopic>,
}

impl ListOffsetsRequest {
    pub fn decode(r: &mut Reader, version: i16, flexible: bool) -> WireResult<ListOffsetsRequest> {
        let replica_id = r.i32("replica_id")?;
        let isolation = if version >= 2 {
            Isolation::decode(r)?
        } else {
            Isolation::ReadUncommitted
        };
        let n = r.array_len_required(flexible, 2, "list offsets topics")?;
        let mut topics = Vec::with_capacity(capacity(n));
        for _ in 0..n {
            let name = r.string(flexible, "topic")?;
            let np = r.array_len_required(flexible, 12, "list offsets partitions")?;
            let mut partitions = Vec::with_capacity(capacity(np));
            for _ in 0..np {
                let index = r.i32("partition")?;
                let current_leader_epoch = if version >= 4 {
                    LeaderEpoch(r.i32("current_leader_epoch")?)
                } else {
                    LeaderEpoch::NONE
                };
                let timestamp = r.i64("timestamp")?;
                r.tagged_fields_if(flexible)?;
                partitions.push(ListOffsetsPartition {
                    index,
                    current_leader_epoch,
                    timestamp,
                });
            }
            r.tagged_fields_if(flexible)?;
            topics.push(ListOffsetsTopic { name, partitions });
        }
        r.tagged_fields_if(flexible)?;
        Ok(ListOffsetsRequest {
            replica_id,
            isolation,
            topics,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListOffsetsPartitionResponse {
    pub index: i32,
    pub error: i16,
    pub timestamp: TimestampMs,
    /// -1 ([`Offset::NONE`]) with an error.
    pub offset: Offset,
    pub leader_epoch: LeaderEpoch,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListOffsetsTopicResponse {
    pub name: String,
    pub partitions: Vec<ListOffsetsPartitionResponse>,
}

pub fn encode_response(w: &mut Writer, version: i16, flexible: bool, topics: &[ListOffsetsTopicResponse]) {
    if version >= 2 {
        w.i32(0);
    }
    w.array_len(flexible, Some(topics.len()));
    for t in topics {
        w.string(flexible, &t.name);
        w.array_len(flexible, Some(t.partitions.len()));
        for p in &t.partitions {
            w.i32(p.index);
            w.i16(p.error);
            w.i64(p.timestamp.0);
            w.i64(p.offset.0);
            if version >= 4 {
                w.i32(p.leader_epoch.0);
            }
            w.empty_tagged_fields_if(flexible);
        }
        w.empty_tagged_fields_if(flexible);
    }
    w.empty_tagged_fields_if(flexible);
}
