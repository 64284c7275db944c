//! Metadata (key 3), v0-12.

use super::wire::{capacity, Reader, WireResult, Writer};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataTopic {
    pub name: Option<String>,
    pub id: [u8; 16],
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataRequest {
    /// `None`: all topics.
    pub topics: Option<Vec<MetadataTopic>>,
    pub allow_auto_topic_creation: bool,
    pub include_cluster_authorized_operations: bool,
    pub include_topic_authorized_operations: bool,
}

impl MetadataRequest {
    pub fn decode(r: &mut Reader, version: i16, flexible: bool) -> WireResult<MetadataRequest> {
        let n = r.array_len(flexible, 2, "metadata topics")?;
        let mut topics = None;
        if let Some(n) = n {
            let mut v = Vec::with_capacity(capacity(n));
            for _ in 0..n {
                let id = if version >= 10 { r.uuid("topic_id")? } else { [0; 16] };
                let name = if version >= 10 {
                    r.nullable_string(flexible, "topic name")?
                } else {
                    Some(r.string(flexible, "topic name")?)
                };
                r.tagged_fields_if(flexible)?;
                v.push(MetadataTopic { name, id });
            }
            // v0: an empty list means every topic.
            topics = if version == 0 && v.is_empty() { None } else { Some(v) };
        } else if version == 0 {
            return Err(super::wire::WireError::UnexpectedNull {
                what: "metadata topics",
            });
        }
        let allow_auto_topic_creation = if version >= 4 {
            r.bool("allow_auto_topic_creation")?
        } else {
            true
        };
        let include_cluster_authorized_operations =
            (8..=10).contains(&version) && r.bool("include_cluster_authorized_operations")?;
        let include_topic_authorized_operations = version >= 8 && r.bool("include_topic_authorized_operations")?;
        r.tagged_fields_if(flexible)?;
        Ok(MetadataRequest {
            topics,
            allow_auto_topic_creation,
            include_cluster_authorized_operations,
            include_topic_authorized_operations,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerEntry {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionEntry {
    pub error: i16,
    pub index: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub offline: Vec<i32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicEntry {
    pub error: i16,
    pub name: Option<String>,
    pub id: [u8; 16],
    pub is_internal: bool,
    pub partitions: Vec<PartitionEntry>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataResponse {
    pub brokers: Vec<BrokerEntry>,
    pub cluster_id: Option<String>,
    pub controller_id: i32,
    pub topics: Vec<TopicEntry>,
    /// v8-10 (see `authorized_operations`).
    pub cluster_authorized_operations: i32,
    /// Every topic's, v8+.
    pub topic_authorized_operations: i32,
}

pub fn write_i32_array(w: &mut Writer, flexible: bool, v: &[i32]) {
    w.array_len(flexible, Some(v.len()));
    for x in v {
        w.i32(*x);
    }
}

impl MetadataResponse {
    pub fn encode(&self, w: &mut Writer, version: i16, flexible: bool) {
        if version >= 3 {
            w.i32(0);
        }
        w.array_len(flexible, Some(self.brokers.len()));
        for b in &self.brokers {
            w.i32(b.node_id);
            w.string(flexible, &b.host);
            w.i32(b.port);
            if version >= 1 {
                w.nullable_string(flexible, b.rack.as_deref());
            }
            w.empty_tagged_fields_if(flexible);
        }
        if version >= 2 {
            w.nullable_string(flexible, self.cluster_id.as_deref());
        }
        if version >= 1 {
            w.i32(self.controller_id);
        }
        w.array_len(flexible, Some(self.topics.len()));
        for t in &self.topics {
            w.i16(t.error);
            if version >= 12 {
                w.nullable_string(flexible, t.name.as_deref());
            } else {
                w.string(flexible, t.name.as_deref().unwrap_or(""));
            }
            if version >= 10 {
                w.uuid(&t.id);
            }
            if version >= 1 {
                w.bool(t.is_internal);
            }
            w.array_len(flexible, Some(t.partitions.len()));
            for p in &t.partitions {
                w.i16(p.error);
                w.i32(p.index);
                w.i32(p.leader);
                if version >= 7 {
                    w.i32(p.leader_epoch);
                }
                write_i32_array(w, flexible, &p.replicas);
                write_i32_array(w, flexible, &p.isr);
                if version >= 5 {
                    write_i32_array(w, flexible, &p.offline);
                }
                w.empty_tagged_fields_if(flexible);
            }
            if version >= 8 {
                w.i32(self.topic_authorized_operations);
            }
            w.empty_tagged_fields_if(flexible);
        }
        if (8..=10).contains(&version) {
            w.i32(self.cluster_authorized_operations);
        }
        w.empty_tagged_fields_if(flexible);
    }
}
