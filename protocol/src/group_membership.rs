//! The classic consumer-group membership APIs: finding the coordinator,
//! joining, syncing, heartbeating and leaving. Both directions: the broker
//! decodes requests and encodes answers; Ferrite's own client does the
//! reverse. Fields absent from a version decode as the schema's default.
//!
//! FindCoordinator (key 10), v0-3, flexible from v3.
//! Request: key string, key_type int8 (v1+; 0 group, 1 transaction).
//! Response: throttle_time_ms int32 (v1+), error_code int16,
//! error_message nullable string (v1+), node_id int32, host string,
//! port int32.
//!
//! JoinGroup (key 11), v0-7, flexible from v6.
//! Request: group_id string, session_timeout_ms int32,
//! rebalance_timeout_ms int32 (v1+; -1 when absent: use the session
//! timeout), member_id string, group_instance_id nullable string (v5+),
//! protocol_type string, protocols [name string, metadata bytes].
//! Response: throttle_time_ms int32 (v2+), error_code int16,
//! generation_id int32, protocol_type nullable string (v7+), protocol_name
//! string (nullable from v7; null is written as "" before), leader string,
//! member_id string, members [member_id string, group_instance_id nullable
//! string (v5+), metadata bytes].
//!
//! Heartbeat (key 12), v0-4, flexible from v4.
//! Request: group_id string, generation_id int32, member_id string,
//! group_instance_id nullable string (v3+).
//! Response: throttle_time_ms int32 (v1+), error_code int16.
//!
//! LeaveGroup (key 13), v0-4, flexible from v4.
//! Request: group_id string, then member_id string (v0-2) or members
//! [member_id string, group_instance_id nullable string] (v3+).
//! Response: throttle_time_ms int32 (v1+), error_code int16, members (v3+)
//! [member_id string, group_instance_id nullable string, error_code int16].
//!
//! SyncGroup (key 14), v0-5, flexible from v4.
//! Request: group_id string, generation_id int32, member_id string,
//! group_instance_id nullable string (v3+), protocol_type nullable string
//! (v5+), protocol_name nullable string (v5+), assignments [member_id string,
//! assignment bytes].
//! Response: throttle_time_ms int32 (v1+), error_code int16, protocol_type
//! nullable string (v5+), protocol_name nullable string (v5+), assignment
//! bytes.
//!
//! No tagged fields are defined in these versions; unknown ones are skipped
//! and none are written.

use bytes::Bytes;

use super::wire::{Reader, WireResult, Writer};

pub const FIND_COORDINATOR_KEY: i16 = 10;
pub const FIND_COORDINATOR_MAX_VERSION: i16 = 3;
pub const FIND_COORDINATOR_FLEXIBLE_FROM: i16 = 3;
pub const JOIN_GROUP_KEY: i16 = 11;
pub const JOIN_GROUP_MAX_VERSION: i16 = 7;
pub const JOIN_GROUP_FLEXIBLE_FROM: i16 = 6;
pub const HEARTBEAT_KEY: i16 = 12;
pub const HEARTBEAT_MAX_VERSION: i16 = 4;
pub const HEARTBEAT_FLEXIBLE_FROM: i16 = 4;
pub const LEAVE_GROUP_KEY: i16 = 13;
pub const LEAVE_GROUP_MAX_VERSION: i16 = 4;
pub const LEAVE_GROUP_FLEXIBLE_FROM: i16 = 4;
pub const SYNC_GROUP_KEY: i16 = 14;
pub const SYNC_GROUP_MAX_VERSION: i16 = 5;
pub const SYNC_GROUP_FLEXIBLE_FROM: i16 = 4;

/// FindCoordinator `key_type`: a consumer group.
pub const KEY_TYPE_GROUP: i8 = 0;
/// FindCoordinator `key_type`: a transactional id.
pub const KEY_TYPE_TRANSACTION: i8 = 1;
/// JoinGroup `rebalance_timeout_ms` when v0 carries none.
pub const NO_REBALANCE_TIMEOUT: i32 = -1;

/// A nullable string, if the version carries it (`None` if not). The
/// decoders build their structs field by field: Rust evaluates a struct
/// expression's fields in the order written, which is the wire order.
fn opt_string(r: &mut Reader, f: bool, present: bool, what: &'static str) -> WireResult<Option<String>> {
    if present {
        r.nullable_string(f, what)
    } else {
        Ok(None)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FindCoordinatorRequest {
    pub key: String,
    pub key_type: i8,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FindCoordinatorResponse {
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub error_message: Option<String>,
    pub node_id: i32,
    pub host: String,
    pub port: i32,
}

impl FindCoordinatorRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<FindCoordinatorRequest> {
        let f = version >= FIND_COORDINATOR_FLEXIBLE_FROM;
        let key = r.string(f, "key")?;
        let key_type = if version >= 1 {
            r.i8("key_type")?
        } else {
            KEY_TYPE_GROUP
        };
        r.tagged_fields_if(f)?;
        Ok(FindCoordinatorRequest { key, key_type })
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= FIND_COORDINATOR_FLEXIBLE_FROM;
        w.string(f, &self.key);
        if version >= 1 {
            w.i8(self.key_type);
        }
        w.empty_tagged_fields_if(f);
    }
}

impl FindCoordinatorResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= FIND_COORDINATOR_FLEXIBLE_FROM;
        if version >= 1 {
            w.i32(self.throttle_time_ms);
        }
        w.i16(self.error_code);
        if version >= 1 {
            w.nullable_string(f, self.error_message.as_deref());
        }
        w.i32(self.node_id);
        w.string(f, &self.host);
        w.i32(self.port);
        w.empty_tagged_fields_if(f);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<FindCoordinatorResponse> {
        let f = version >= FIND_COORDINATOR_FLEXIBLE_FROM;
        let resp = FindCoordinatorResponse {
            throttle_time_ms: if version >= 1 { r.i32("throttle_time_ms")? } else { 0 },
            error_code: r.i16("error_code")?,
            error_message: opt_string(r, f, version >= 1, "error_message")?,
            node_id: r.i32("node_id")?,
            host: r.string(f, "host")?,
            port: r.i32("port")?,
        };
        r.tagged_fields_if(f)?;
        Ok(resp)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinGroupProtocol {
    pub name: String,
    pub metadata: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinGroupRequest {
    pub group_id: String,
    pub session_timeout_ms: i32,
    /// [`NO_REBALANCE_TIMEOUT`] in v0.
    pub rebalance_timeout_ms: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol_type: String,
    pub protocols: Vec<JoinGroupProtocol>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinGroupMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinGroupResponse {
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    /// Always `Some` when decoded below v7; `None` is written as "" there.
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    pub members: Vec<JoinGroupMember>,
}

impl JoinGroupRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<JoinGroupRequest> {
        let f = version >= JOIN_GROUP_FLEXIBLE_FROM;
        let mut req = JoinGroupRequest {
            group_id: r.string(f, "group_id")?,
            session_timeout_ms: r.i32("session_timeout_ms")?,
            rebalance_timeout_ms: if version >= 1 {
                r.i32("rebalance_timeout_ms")?
            } else {
                NO_REBALANCE_TIMEOUT
            },
            member_id: r.string(f, "member_id")?,
            group_instance_id: opt_string(r, f, version >= 5, "group_instance_id")?,
            protocol_type: r.string(f, "protocol_type")?,
            protocols: Vec::new(),
        };
        req.protocols = r.structs(f, 3, "join group protocols", |r| {
            Ok(JoinGroupProtocol {
                name: r.string(f, "protocol name")?,
                metadata: r.bytes(f, "protocol metadata")?,
            })
        })?;
        r.tagged_fields_if(f)?;
        Ok(req)
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= JOIN_GROUP_FLEXIBLE_FROM;
        w.string(f, &self.group_id);
        w.i32(self.session_timeout_ms);
        if version >= 1 {
            w.i32(self.rebalance_timeout_ms);
        }
        w.string(f, &self.member_id);
        if version >= 5 {
            w.nullable_string(f, self.group_instance_id.as_deref());
        }
        w.string(f, &self.protocol_type);
        w.structs(f, &self.protocols, |w, p| {
            w.string(f, &p.name);
            w.nullable_bytes(f, Some(&p.metadata));
        });
        w.empty_tagged_fields_if(f);
    }
}

impl JoinGroupResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= JOIN_GROUP_FLEXIBLE_FROM;
        if version >= 2 {
            w.i32(self.throttle_time_ms);
        }
        w.i16(self.error_code);
        w.i32(self.generation_id);
        if version >= 7 {
            w.nullable_string(f, self.protocol_type.as_deref());
            w.nullable_string(f, self.protocol_name.as_deref());
        } else {
            w.string(f, self.protocol_name.as_deref().unwrap_or(""));
        }
        w.string(f, &self.leader);
        w.string(f, &self.member_id);
        w.structs(f, &self.members, |w, m| {
            w.string(f, &m.member_id);
            if version >= 5 {
                w.nullable_string(f, m.group_instance_id.as_deref());
            }
            w.nullable_bytes(f, Some(&m.metadata));
        });
        w.empty_tagged_fields_if(f);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<JoinGroupResponse> {
        let f = version >= JOIN_GROUP_FLEXIBLE_FROM;
        let mut resp = JoinGroupResponse {
            throttle_time_ms: if version >= 2 { r.i32("throttle_time_ms")? } else { 0 },
            error_code: r.i16("error_code")?,
            generation_id: r.i32("generation_id")?,
            protocol_type: opt_string(r, f, version >= 7, "protocol_type")?,
            protocol_name: if version >= 7 {
                r.nullable_string(f, "protocol_name")?
            } else {
                Some(r.string(f, "protocol_name")?)
            },
            leader: r.string(f, "leader")?,
            member_id: r.string(f, "member_id")?,
            members: Vec::new(),
        };
        resp.members = r.structs(f, 3, "join group members", |r| {
            Ok(JoinGroupMember {
                member_id: r.string(f, "member_id")?,
                group_instance_id: opt_string(r, f, version >= 5, "group_instance_id")?,
                metadata: r.bytes(f, "member metadata")?,
            })
        })?;
        r.tagged_fields_if(f)?;
        Ok(resp)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatResponse {
    pub throttle_time_ms: i32,
    pub error_code: i16,
}

impl HeartbeatRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<HeartbeatRequest> {
        let f = version >= HEARTBEAT_FLEXIBLE_FROM;
        let req = HeartbeatRequest {
            group_id: r.string(f, "group_id")?,
            generation_id: r.i32("generation_id")?,
            member_id: r.string(f, "member_id")?,
            group_instance_id: opt_string(r, f, version >= 3, "group_instance_id")?,
        };
        r.tagged_fields_if(f)?;
        Ok(req)
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= HEARTBEAT_FLEXIBLE_FROM;
        w.string(f, &self.group_id);
        w.i32(self.generation_id);
        w.string(f, &self.member_id);
        if version >= 3 {
            w.nullable_string(f, self.group_instance_id.as_deref());
        }
        w.empty_tagged_fields_if(f);
    }
}

impl HeartbeatResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= HEARTBEAT_FLEXIBLE_FROM;
        if version >= 1 {
            w.i32(self.throttle_time_ms);
        }
        w.i16(self.error_code);
        w.empty_tagged_fields_if(f);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<HeartbeatResponse> {
        let f = version >= HEARTBEAT_FLEXIBLE_FROM;
        let throttle_time_ms = if version >= 1 { r.i32("throttle_time_ms")? } else { 0 };
        let error_code = r.i16("error_code")?;
        r.tagged_fields_if(f)?;
        Ok(HeartbeatResponse {
            throttle_time_ms,
            error_code,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaveMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaveGroupRequest {
    pub group_id: String,
    /// Exactly one member, without an instance id, in v0-2.
    pub members: Vec<LeaveMember>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaveMemberResponse {
    pub member: LeaveMember,
    pub error_code: i16,
}

impl LeaveMember {
    fn read(r: &mut Reader, f: bool) -> WireResult<LeaveMember> {
        Ok(LeaveMember {
            member_id: r.string(f, "member_id")?,
            group_instance_id: r.nullable_string(f, "group_instance_id")?,
        })
    }

    fn write(&self, w: &mut Writer, f: bool) {
        w.string(f, &self.member_id);
        w.nullable_string(f, self.group_instance_id.as_deref());
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaveGroupResponse {
    pub throttle_time_ms: i32,
    pub error_code: i16,
    /// Empty below v3.
    pub members: Vec<LeaveMemberResponse>,
}

impl LeaveGroupRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<LeaveGroupRequest> {
        let f = version >= LEAVE_GROUP_FLEXIBLE_FROM;
        let group_id = r.string(f, "group_id")?;
        let members = if version >= 3 {
            r.structs(f, 3, "leaving members", |r| LeaveMember::read(r, f))?
        } else {
            vec![LeaveMember {
                member_id: r.string(f, "member_id")?,
                group_instance_id: None,
            }]
        };
        r.tagged_fields_if(f)?;
        Ok(LeaveGroupRequest { group_id, members })
    }

    /// Panics below v3 unless there is exactly one member (whose instance
    /// id, if any, v0-2 cannot carry): a batch needs v3.
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= LEAVE_GROUP_FLEXIBLE_FROM;
        w.string(f, &self.group_id);
        if version >= 3 {
            w.structs(f, &self.members, |w, m| m.write(w, f));
        } else {
            assert_eq!(self.members.len(), 1, "LeaveGroup v{version} carries one member");
            w.string(f, &self.members[0].member_id);
        }
        w.empty_tagged_fields_if(f);
    }
}

impl LeaveGroupResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= LEAVE_GROUP_FLEXIBLE_FROM;
        if version >= 1 {
            w.i32(self.throttle_time_ms);
        }
        w.i16(self.error_code);
        if version >= 3 {
            w.structs(f, &self.members, |w, m| {
                m.member.write(w, f);
                w.i16(m.error_code);
            });
        }
        w.empty_tagged_fields_if(f);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<LeaveGroupResponse> {
        let f = version >= LEAVE_GROUP_FLEXIBLE_FROM;
        let throttle_time_ms = if version >= 1 { r.i32("throttle_time_ms")? } else { 0 };
        let error_code = r.i16("error_code")?;
        let members = if version >= 3 {
            r.structs(f, 5, "left members", |r| {
                Ok(LeaveMemberResponse {
                    member: LeaveMember::read(r, f)?,
                    error_code: r.i16("error_code")?,
                })
            })?
        } else {
            Vec::new()
        };
        r.tagged_fields_if(f)?;
        Ok(LeaveGroupResponse {
            throttle_time_ms,
            error_code,
            members,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncGroupAssignment {
    pub member_id: String,
    pub assignment: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncGroupRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// The leader's assignments; empty from the other members.
    pub assignments: Vec<SyncGroupAssignment>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncGroupResponse {
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncGroupRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<SyncGroupRequest> {
        let f = version >= SYNC_GROUP_FLEXIBLE_FROM;
        let mut req = SyncGroupRequest {
            group_id: r.string(f, "group_id")?,
            generation_id: r.i32("generation_id")?,
            member_id: r.string(f, "member_id")?,
            group_instance_id: opt_string(r, f, version >= 3, "group_instance_id")?,
            protocol_type: opt_string(r, f, version >= 5, "protocol_type")?,
            protocol_name: opt_string(r, f, version >= 5, "protocol_name")?,
            assignments: Vec::new(),
        };
        req.assignments = r.structs(f, 3, "sync group assignments", |r| {
            Ok(SyncGroupAssignment {
                member_id: r.string(f, "member_id")?,
                assignment: r.bytes(f, "assignment")?,
            })
        })?;
        r.tagged_fields_if(f)?;
        Ok(req)
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= SYNC_GROUP_FLEXIBLE_FROM;
        w.string(f, &self.group_id);
        w.i32(self.generation_id);
        w.string(f, &self.member_id);
        if version >= 3 {
            w.nullable_string(f, self.group_instance_id.as_deref());
        }
        if version >= 5 {
            w.nullable_string(f, self.protocol_type.as_deref());
            w.nullable_string(f, self.protocol_name.as_deref());
        }
        w.structs(f, &self.assignments, |w, a| {
            w.string(f, &a.member_id);
            w.nullable_bytes(f, Some(&a.assignment));
        });
        w.empty_tagged_fields_if(f);
    }
}

impl SyncGroupResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= SYNC_GROUP_FLEXIBLE_FROM;
        if version >= 1 {
            w.i32(self.throttle_time_ms);
        }
        w.i16(self.error_code);
        if version >= 5 {
            w.nullable_string(f, self.protocol_type.as_deref());
            w.nullable_string(f, self.protocol_name.as_deref());
        }
        w.nullable_bytes(f, Some(&self.assignment));
        w.empty_tagged_fields_if(f);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<SyncGroupResponse> {
        let f = version >= SYNC_GROUP_FLEXIBLE_FROM;
        let resp = SyncGroupResponse {
            throttle_time_ms: if version >= 1 { r.i32("throttle_time_ms")? } else { 0 },
            error_code: r.i16("error_code")?,
            protocol_type: opt_string(r, f, version >= 5, "protocol_type")?,
            protocol_name: opt_string(r, f, version >= 5, "protocol_name")?,
            assignment: r.bytes(f, "assignment")?,
        };
        r.tagged_fields_if(f)?;
        Ok(resp)
    }
}

#[cfg(test)]
#[path = "group_membership_tests.rs"]
mod tests;
