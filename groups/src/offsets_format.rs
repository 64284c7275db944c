//! The records of `__consumer_offsets`, in Kafka's own layout so that the
//! topic reads the same as a Kafka broker's (all integers big-endian,
//! strings int16 length + UTF-8, nullable strings length -1 for null,
//! bytes int32 length + bytes, arrays int32 count). Each record's key
//! starts with an int16 version that says what it is:
//!
//! ```text
//! key v0/v1  offset commit:  version int16, group string, topic string, partition int32
//! key v2     group metadata: version int16, group string
//! ```
//!
//! A key with a null value (a tombstone) deletes what the key names. An
//! offset commit's value (written at v3, read at v0-v3):
//!
//! ```text
//! version int16 | offset int64 | leader_epoch int32 (v3) | metadata string
//! | commit_timestamp int64 | expire_timestamp int64 (v1 only)
//! ```
//!
//! A group's value (written at v3, read at v0-v3):
//!
//! ```text
//! version int16 | protocol_type string | generation int32
//! | protocol nullable string | leader nullable string
//! | current_state_timestamp int64 (v2+)
//! | members [member_id string | group_instance_id nullable string (v3+)
//!            | client_id string | client_host string
//!            | rebalance_timeout int32 (v1+) | session_timeout int32
//!            | subscription bytes | assignment bytes]
//! ```
//!
//! The later records of a key win, so loading a partition is replaying it
//! from its start.

use bytes::Bytes;
use ferrite_ids::MonoMs;

use super::group::GroupSnapshot;
use super::member::{Member, MemberPhase};
use ferrite_protocol::wire::{capacity, Reader, WireError, Writer};

const OFFSET_KEY_VERSION: i16 = 1;
const GROUP_KEY_VERSION: i16 = 2;
const OFFSET_VALUE_VERSION: i16 = 3;
const GROUP_VALUE_VERSION: i16 = 3;

/// What a record's key names.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RecordKey {
    Offset {
        group: String,
        topic: String,
        partition: i32,
    },
    Group {
        group: String,
    },
}

impl RecordKey {
    pub fn group(&self) -> &str {
        match self {
            RecordKey::Offset { group, .. } | RecordKey::Group { group } => group,
        }
    }
}

/// A committed offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
}

/// A decoded record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OffsetsRecord {
    Offset(CommittedOffset),
    Group(GroupSnapshot),
    /// The key's value is deleted.
    Tombstone,
}

pub fn encode_key(key: &RecordKey) -> Vec<u8> {
    let mut w = Writer::new();
    match key {
        RecordKey::Offset {
            group,
            topic,
            partition,
        } => {
            w.i16(OFFSET_KEY_VERSION);
            w.string(false, group);
            w.string(false, topic);
            w.i32(*partition);
        }
        RecordKey::Group { group } => {
            w.i16(GROUP_KEY_VERSION);
            w.string(false, group);
        }
    }
    w.as_slice().to_vec()
}

pub fn decode_key(bytes: &[u8]) -> Result<RecordKey, WireError> {
    let mut r = Reader::new(Bytes::copy_from_slice(bytes));
    match r.i16("key version")? {
        0 | 1 => Ok(RecordKey::Offset {
            group: r.string(false, "group")?,
            topic: r.string(false, "topic")?,
            partition: r.i32("partition")?,
        }),
        2 => Ok(RecordKey::Group {
            group: r.string(false, "group")?,
        }),
        v => Err(WireError::Invalid {
            what: "__consumer_offsets key version",
            value: i64::from(v),
        }),
    }
}

pub fn encode_offset(o: &CommittedOffset) -> Vec<u8> {
    let mut w = Writer::new();
    w.i16(OFFSET_VALUE_VERSION);
    w.i64(o.offset);
    w.i32(o.leader_epoch);
    w.string(false, &o.metadata);
    w.i64(o.commit_timestamp_ms);
    w.as_slice().to_vec()
}

fn decode_offset(r: &mut Reader) -> Result<CommittedOffset, WireError> {
    let version = r.i16("offset value version")?;
    if !(0..=3).contains(&version) {
        return Err(WireError::Invalid {
            what: "offset value version",
            value: i64::from(version),
        });
    }
    let offset = r.i64("offset")?;
    let leader_epoch = if version >= 3 { r.i32("leader_epoch")? } else { -1 };
    let metadata = r.string(false, "metadata")?;
    let commit_timestamp_ms = r.i64("commit_timestamp")?;
    if version == 1 {
        r.i64("expire_timestamp")?;
    }
    Ok(CommittedOffset {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp_ms,
    })
}

pub fn encode_group(g: &GroupSnapshot, state_timestamp_ms: i64) -> Vec<u8> {
    let mut w = Writer::new();
    w.i16(GROUP_VALUE_VERSION);
    w.string(false, &g.protocol_type);
    w.i32(g.generation);
    w.nullable_string(false, g.protocol.as_deref());
    w.nullable_string(false, g.leader.as_deref());
    w.i64(state_timestamp_ms);
    w.array_len(false, Some(g.members.len()));
    for m in &g.members {
        w.string(false, &m.member_id);
        w.nullable_string(false, m.instance_id.as_deref());
        w.string(false, &m.client_id);
        w.string(false, &m.client_host);
        w.i32(m.rebalance_timeout_ms.min(i32::MAX as u64) as i32);
        w.i32(m.session_timeout_ms.min(i32::MAX as u64) as i32);
        let subscription = g.protocol.as_deref().and_then(|p| m.metadata_for(p)).cloned();
        w.nullable_bytes(false, Some(subscription.as_deref().unwrap_or(&[])));
        w.nullable_bytes(false, Some(&m.assignment));
    }
    w.as_slice().to_vec()
}

fn decode_group(r: &mut Reader) -> Result<GroupSnapshot, WireError> {
    let version = r.i16("group value version")?;
    if !(0..=3).contains(&version) {
        return Err(WireError::Invalid {
            what: "group value version",
            value: i64::from(version),
        });
    }
    let protocol_type = r.string(false, "protocol_type")?;
    let generation = r.i32("generation")?;
    let protocol = r.nullable_string(false, "protocol")?;
    let leader = r.nullable_string(false, "leader")?;
    if version >= 2 {
        r.i64("current_state_timestamp")?;
    }
    let n = r.array_len_required(false, 24, "group members")?;
    let mut members = Vec::with_capacity(capacity(n));
    for _ in 0..n {
        members.push(decode_member(r, version, protocol.as_deref())?);
    }
    Ok(GroupSnapshot {
        protocol_type,
        generation,
        protocol,
        leader,
        members,
    })
}

fn decode_member(r: &mut Reader, version: i16, protocol: Option<&str>) -> Result<Member, WireError> {
    let member_id = r.string(false, "member_id")?;
    let instance_id = if version >= 3 {
        r.nullable_string(false, "group_instance_id")?
    } else {
        None
    };
    let client_id = r.string(false, "client_id")?;
    let client_host = r.string(false, "client_host")?;
    let rebalance_timeout = if version >= 1 { r.i32("rebalance_timeout")? } else { -1 };
    let session_timeout = r.i32("session_timeout")?;
    let subscription = r.nullable_bytes(false, "subscription")?.unwrap_or_default();
    let assignment = r.nullable_bytes(false, "assignment")?.unwrap_or_default();
    let session_timeout_ms = session_timeout.max(0) as u64;
    Ok(Member {
        member_id,
        instance_id,
        client_id,
        client_host,
        session_timeout_ms,
        rebalance_timeout_ms: if rebalance_timeout < 0 {
            session_timeout_ms
        } else {
            rebalance_timeout as u64
        },
        protocols: protocol
            .map(|p| vec![(p.to_string(), subscription)])
            .unwrap_or_default(),
        assignment,
        phase: MemberPhase::Settled,
        last_seen: MonoMs(0),
    })
}

/// Decodes a record's value for its key; `None` is a tombstone.
pub fn decode_value(key: &RecordKey, value: Option<&[u8]>) -> Result<OffsetsRecord, WireError> {
    let Some(value) = value else {
        return Ok(OffsetsRecord::Tombstone);
    };
    let mut r = Reader::new(Bytes::copy_from_slice(value));
    match key {
        RecordKey::Offset { .. } => Ok(OffsetsRecord::Offset(decode_offset(&mut r)?)),
        RecordKey::Group { .. } => Ok(OffsetsRecord::Group(decode_group(&mut r)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> GroupSnapshot {
        GroupSnapshot {
            protocol_type: "consumer".into(),
            generation: 7,
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            members: vec![Member {
                member_id: "m1".into(),
                instance_id: Some("i1".into()),
                client_id: "rdkafka".into(),
                client_host: "/127.0.0.1".into(),
                session_timeout_ms: 6_000,
                rebalance_timeout_ms: 30_000,
                protocols: vec![("range".into(), Bytes::from_static(b"sub"))],
                assignment: Bytes::from_static(b"asg"),
                phase: MemberPhase::Settled,
                last_seen: MonoMs(0),
            }],
        }
    }

    #[test]
    fn keys_round_trip() {
        for key in [
            RecordKey::Offset {
                group: "g".into(),
                topic: "t".into(),
                partition: 3,
            },
            RecordKey::Group { group: "g".into() },
        ] {
            assert_eq!(decode_key(&encode_key(&key)).ok(), Some(key));
        }
    }

    #[test]
    fn values_round_trip() {
        let o = CommittedOffset {
            offset: 42,
            leader_epoch: 3,
            metadata: "m".into(),
            commit_timestamp_ms: 1_700_000_000_000,
        };
        let key = RecordKey::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
        };
        assert_eq!(
            decode_value(&key, Some(&encode_offset(&o))).ok(),
            Some(OffsetsRecord::Offset(o))
        );
        let g = snapshot();
        let key = RecordKey::Group { group: "g".into() };
        assert_eq!(
            decode_value(&key, Some(&encode_group(&g, 5))).ok(),
            Some(OffsetsRecord::Group(g))
        );
        assert_eq!(decode_value(&key, None).ok(), Some(OffsetsRecord::Tombstone));
    }

    #[test]
    fn kafka_v1_offset_values_decode() {
        // version 1: offset, metadata, commit timestamp, expire timestamp.
        let mut w = Writer::new();
        w.i16(1);
        w.i64(9);
        w.string(false, "");
        w.i64(100);
        w.i64(200);
        let key = RecordKey::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
        };
        let got = decode_value(&key, Some(w.as_slice())).ok();
        assert_eq!(
            got,
            Some(OffsetsRecord::Offset(CommittedOffset {
                offset: 9,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp_ms: 100,
            }))
        );
    }

    #[test]
    fn truncated_values_are_errors() {
        let full = encode_group(&snapshot(), 5);
        let key = RecordKey::Group { group: "g".into() };
        for cut in 0..full.len() {
            assert!(decode_value(&key, Some(&full[..cut])).is_err(), "{cut}");
        }
        assert!(decode_key(&[0, 9, 0, 1, b'g']).is_err());
    }
}
