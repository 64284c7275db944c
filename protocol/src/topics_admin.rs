//! Topic administration: CreateTopics (key 19, v2-7), DeleteTopics (key 20,
//! v1-6), CreatePartitions (key 37, v0-3).

use super::wire::{capacity, Reader, WireResult, Writer};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreatableTopic {
    pub name: String,
    /// -1: the broker's `num.partitions`.
    pub num_partitions: i32,
    /// -1: the broker's `default.replication.factor`.
    pub replication_factor: i16,
    /// Manual assignment: (partition, brokers).
    pub assignments: Vec<(i32, Vec<i32>)>,
    pub configs: Vec<(String, Option<String>)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateTopicsRequest {
    pub topics: Vec<CreatableTopic>,
    pub timeout_ms: i32,
    pub validate_only: bool,
}

fn read_i32_array(r: &mut Reader, flexible: bool, what: &'static str) -> WireResult<Vec<i32>> {
    let n = r.array_len_required(flexible, 4, what)?;
    (0..n).map(|_| r.i32(what)).collect()
}

impl CreateTopicsRequest {
    pub fn decode(r: &mut Reader, _version: i16, flexible: bool) -> WireResult<CreateTopicsRequest> {
        let n = r.array_len_required(flexible, 9, "create topics")?;
        let mut topics = Vec::with_capacity(capacity(n));
        for _ in 0..n {
            let name = r.string(flexible, "topic")?;
            let num_partitions = r.i32("num_partitions")?;
            let replication_factor = r.i16("replication_factor")?;
            let na = r.array_len_required(flexible, 5, "assignments")?;
            let mut assignments = Vec::with_capacity(capacity(na));
            for _ in 0..na {
                let p = r.i32("partition_index")?;
                let brokers = read_i32_array(r, flexible, "broker_ids")?;
                r.tagged_fields_if(flexible)?;
                assignments.push((p, brokers));
            }
            let nc = r.array_len_required(flexible, 2, "configs")?;
            let mut configs = Vec::with_capacity(capacity(nc));
            for _ in 0..nc {
                let k = r.string(flexible, "config name")?;
                let v = r.nullable_string(flexible, "config value")?;
                r.tagged_fields_if(flexible)?;
                configs.push((k, v));
            }
            r.tagged_fields_if(flexible)?;
            topics.push(CreatableTopic {
                name,
                num_partitions,
                replication_factor,
                assignments,
                configs,
            });
        }
        let timeout_ms = r.i32("timeout_ms")?;
        let validate_only = r.bool("validate_only")?;
        r.tagged_fields_if(flexible)?;
        Ok(CreateTopicsRequest {
            topics,
            timeout_ms,
            validate_only,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreatableTopicResult {
    pub name: String,
    pub topic_id: [u8; 16],
    pub error: i16,
    pub error_message: Option<String>,
    pub num_partitions: i32,
    pub replication_factor: i16,
}

pub fn encode_create_topics(w: &mut Writer, version: i16, flexible: bool, results: &[CreatableTopicResult]) {
    w.i32(0);
    w.array_len(flexible, Some(results.len()));
    for t in results {
        w.string(flexible, &t.name);
        if version >= 7 {
            w.uuid(&t.topic_id);
        }
        w.i16(t.error);
        w.nullable_string(flexible, t.error_message.as_deref());
        if version >= 5 {
            w.i32(t.num_partitions);
            w.i16(t.replication_factor);
            // An empty list, not null: the Java admin client streams over it
            // whenever TopicConfigErrorCode is 0. Clients describe configs
            // separately.
            w.array_len(flexible, Some(0));
        }
        w.empty_tagged_fields_if(flexible);
    }
    w.empty_tagged_fields_if(flexible);
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeleteTopicsRequest {
    /// Names, or (v6) topic ids for entries without a name.
    pub topics: Vec<(Option<String>, [u8; 16])>,
    pub timeout_ms: i32,
}

impl DeleteTopicsRequest {
    pub fn decode(r: &mut Reader, version: i16, flexible: bool) -> WireResult<DeleteTopicsRequest> {
        let mut topics = Vec::new();
        if version >= 6 {
            let n = r.array_len_required(flexible, 17, "delete topics")?;
            for _ in 0..n {
                let name = r.nullable_string(flexible, "topic")?;
                let id = r.uuid("topic_id")?;
                r.tagged_fields_if(flexible)?;
                topics.push((name, id));
            }
        } else {
            let n = r.array_len_required(flexible, 1, "delete topic names")?;
            for _ in 0..n {
                topics.push((Some(r.string(flexible, "topic")?), [0; 16]));
            }
        }
        let timeout_ms = r.i32("timeout_ms")?;
        r.tagged_fields_if(flexible)?;
        Ok(DeleteTopicsRequest { topics, timeout_ms })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeletableTopicResult {
    pub name: Option<String>,
    pub topic_id: [u8; 16],
    pub error: i16,
    pub error_message: Option<String>,
}

pub fn encode_delete_topics(w: &mut Writer, version: i16, flexible: bool, results: &[DeletableTopicResult]) {
    w.i32(0);
    w.array_len(flexible, Some(results.len()));
    for t in results {
        if version >= 6 {
            w.nullable_string(flexible, t.name.as_deref());
            w.uuid(&t.topic_id);
        } else {
            w.string(flexible, t.name.as_deref().unwrap_or(""));
        }
        w.i16(t.error);
        if version >= 5 {
            w.nullable_string(flexible, t.error_message.as_deref());
        }
        w.empty_tagged_fields_if(flexible);
    }
    w.empty_tagged_fields_if(flexible);
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreatePartitionsTopic {
    pub name: String,
    /// The new total.
    pub count: i32,
    pub assignments: Option<Vec<Vec<i32>>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreatePartitionsRequest {
    pub topics: Vec<CreatePartitionsTopic>,
    pub timeout_ms: i32,
    pub validate_only: bool,
}

impl CreatePartitionsRequest {
    pub fn decode(r: &mut Reader, _version: i16, flexible: bool) -> WireResult<CreatePartitionsRequest> {
        let n = r.array_len_required(flexible, 6, "create partitions topics")?;
        let mut topics = Vec::with_capacity(capacity(n));
        for _ in 0..n {
            let name = r.string(flexible, "topic")?;
            let count = r.i32("count")?;
            let assignments = match r.array_len(flexible, 1, "assignments")? {
                None => None,
                Some(na) => {
                    let mut v = Vec::with_capacity(capacity(na));
                    for _ in 0..na {
                        v.push(read_i32_array(r, flexible, "broker_ids")?);
                        r.tagged_fields_if(flexible)?;
                    }
                    Some(v)
                }
            };
            r.tagged_fields_if(flexible)?;
            topics.push(CreatePartitionsTopic {
                name,
                count,
                assignments,
            });
        }
        let timeout_ms = r.i32("timeout_ms")?;
        let validate_only = r.bool("validate_only")?;
        r.tagged_fields_if(flexible)?;
        Ok(CreatePartitionsRequest {
            topics,
            timeout_ms,
            validate_only,
        })
    }
}

/// CreatePartitions results: (name, error, message).
pub fn encode_create_partitions(w: &mut Writer, flexible: bool, results: &[(String, i16, Option<String>)]) {
    w.i32(0);
    w.array_len(flexible, Some(results.len()));
    for (name, error, message) in results {
        w.string(flexible, name);
        w.i16(*error);
        w.nullable_string(flexible, message.as_deref());
        w.empty_tagged_fields_if(flexible);
    }
    w.empty_tagged_fields_if(flexible);
}
