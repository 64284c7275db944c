//! Produce (key 0), v3-9.

use bytes::Bytes;
use ferrite_ids::{Offset, TimestampMs};

use super::wire::{capacity, Reader, WireResult, Writer};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducePartition {
    pub index: i32,
    /// The record set, a zero-copy slice of the request frame.
    pub records: Option<Bytes>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProduceTopic {
    pub name: String,
    pub partitions: Vec<ProducePartition>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProduceRequest {
    pub transactional_id: Option<String>,
    pub acks: i16,
    pub timeout_ms: i32,
    pub topics: Vec<ProduceTopic>,
}

impl ProduceRequest {
    pub fn decode(r: &mut Reader, _version: i16, flexible: bool) -> WireResult<ProduceRequest> {
        let transactional_id = r.nullable_string(flexible, "transactional_id")?;
        let acks = r.i16("acks")?;
        let timeout_ms = r.i32("timeout_ms")?;
        let n = r.array_len_required(flexible, 2, "produce topics")?;
        let mut topics = Vec::with_capacity(capacity(n));
        for _ in 0..n {
            let name = r.string(flexible, "topic name")?;
            let np = r.array_len_required(flexible, 5, "produce partitions")?;
            let mut partitions = Vec::with_capacity(capacity(np));
            for _ in 0..np {
                let index = r.i32("partition")?;
                let records = r.nullable_bytes(flexible, "records")?;
                r.tagged_fields_if(flexible)?;
                partitions.push(ProducePartition { index, records });
            }
            r.tagged_fields_if(flexible)?;
            topics.push(ProduceTopic { name, partitions });
        }
        r.tagged_fields_if(flexible)?;
        Ok(ProduceRequest {
            transactional_id,
            acks,
            timeout_ms,
            topics,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducePartitionResponse {
    pub index: i32,
    pub error: i16,
    /// -1 ([`Offset::NONE`]) with an error.
    pub base_offset: Offset,
    /// -1 ([`TimestampMs::NONE`]): the topic keeps the producers' times.
    pub log_append_time_ms: TimestampMs,
    pub log_start_offset: Offset,
    pub error_message: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProduceTopicResponse {
    pub name: String,
    pub partitions: Vec<ProducePartitionResponse>,
}

pub fn encode_response(w: &mut Writer, version: i16, flexible: bool, topics: &[ProduceTopicResponse]) {
    w.array_len(flexible, Some(topics.len()));
    for t in topics {
        w.string(flexible, &t.name);
        w.array_len(flexible, Some(t.partitions.len()));
        for p in &t.partitions {
            w.i32(p.index);
            w.i16(p.error);
            w.i64(p.base_offset.0);
            w.i64(p.log_append_time_ms.0);
            if version >= 5 {
                w.i64(p.log_start_offset.0);
            }
            if version >= 8 {
                w.array_len(flexible, Some(0));
                w.nullable_string(flexible, p.error_message.as_deref());
            }
            w.empty_tagged_fields_if(flexible);
        }
        w.empty_tagged_fields_if(flexible);
    }
    w.i32(0);
    w.empty_tagged_fields_if(flexible);
}
