//! Consumer-group administration: listing, describing and deleting groups.
//! Both directions: the broker decodes requests and encodes answers;
//! Ferrite's own client does the reverse. Fields absent from a version
//! decode as the schema's default.
//!
//! ListGroups (key 16), v0-5, flexible from v3.
//! Request: states_filter [string] (v4+; empty: every state), types_filter
//! [string] (v5+; empty: every type).
//! Response: throttle_time_ms int32 (v1+), error_code int16, groups
//! [group_id string, protocol_type string, group_state string (v4+; ""
//! when absent), group_type string (v5+; "" when absent)].
//!
//! DescribeGroups (key 15), v0-5, flexible from v5.
//! Request: groups [string], include_authorized_operations bool (v3+).
//! Response: throttle_time_ms int32 (v1+), groups [error_code int16,
//! group_id string, group_state string, protocol_type string, protocol_data
//! string, members [member_id string, group_instance_id nullable string
//! (v4+), client_id string, client_host string, member_metadata bytes,
//! member_assignment bytes], authorized_operations int32 (v3+;
//! [`AUTHORIZED_OPERATIONS_OMITTED`] when absent)].
//!
//! DeleteGroups (key 42), v0-2, flexible from v2.
//! Request: groups_names [string].
//! Response: throttle_time_ms int32, results [group_id string,
//! error_code int16].
//!
//! No tagged fields are defined in these versions; unknown ones are skipped
//! and none are written.

use bytes::Bytes;

use super::wire::{capacity, Reader, WireResult, Writer};

pub const LIST_GROUPS_KEY: i16 = 16;
pub const LIST_GROUPS_MAX_VERSION: i16 = 5;
pub const LIST_GROUPS_FLEXIBLE_FROM: i16 = 3;
pub const DESCRIBE_GROUPS_KEY: i16 = 15;
pub const DESCRIBE_GROUPS_MAX_VERSION: i16 = 5;
pub const DESCRIBE_GROUPS_FLEXIBLE_FROM: i16 = 5;
pub const DELETE_GROUPS_KEY: i16 = 42;
pub const DELETE_GROUPS_MAX_VERSION: i16 = 2;
pub const DELETE_GROUPS_FLEXIBLE_FROM: i16 = 2;

/// `authorized_operations` when not requested (or before v3).
pub const AUTHORIZED_OPERATIONS_OMITTED: i32 = super::authorized_operations::OMITTED;

/// The type of every group Ferrite serves (the classic protocol; KIP-848's
/// `consumer` groups are not built).
pub const GROUP_TYPE_CLASSIC: &str = "classic";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListGroupsRequest {
    /// Empty: groups in every state.
    pub states_filter: Vec<String>,
    /// Empty: groups of every type.
    pub types_filter: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub group_state: String,
    pub group_type: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListGroupsResponse {
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub groups: Vec<ListedGroup>,
}

impl ListGroupsRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<ListGroupsRequest> {
        let f = version >= LIST_GROUPS_FLEXIBLE_FROM;
        let states_filter = if version >= 4 {
            r.strings(f, "states_filter")?
        } else {
            Vec::new()
        };
        let types_filter = if version >= 5 {
            r.strings(f, "types_filter")?
        } else {
            Vec::new()
        };
        r.tagged_fields_if(f)?;
        Ok(ListGroupsRequest {
            states_filter,
            types_filter,
        })
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= LIST_GROUPS_FLEXIBLE_FROM;
        if version >= 4 {
            w.strings(f, &self.states_filter);
        }
        if version >= 5 {
            w.strings(f, &self.types_filter);
        }
        w.empty_tagged_fields_if(f);
    }
}

impl ListGroupsResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= LIST_GROUPS_FLEXIBLE_FROM;
        if version >= 1 {
            w.i32(self.throttle_time_ms);
        }
        w.i16(self.error_code);
        w.array_len(f, Some(self.groups.len()));
        for g in &self.groups {
            w.string(f, &g.group_id);
            w.string(f, &g.protocol_type);
            if version >= 4 {
                w.string(f, &g.group_state);
            }
            if version >= 5 {
                w.string(f, &g.group_type);
            }
            w.empty_tagged_fields_if(f);
        }
        w.empty_tagged_fields_if(f);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<ListGroupsResponse> {
        let f = version >= LIST_GROUPS_FLEXIBLE_FROM;
        let throttle_time_ms = if version >= 1 { r.i32("throttle_time_ms")? } else { 0 };
        let error_code = r.i16("error_code")?;
        let n = r.array_len_required(f, 2, "listed groups")?;
        let mut groups = Vec::with_capacity(capacity(n));
        for _ in 0..n {
            let group_id = r.string(f, "group_id")?;
            let protocol_type = r.string(f, "protocol_type")?;
            let group_state = if version >= 4 {
                r.string(f, "group_state")?
            } else {
                String::new()
            };
            let group_type = if version >= 5 {
                r.string(f, "group_type")?
            } else {
                String::new()
            };
            r.tagged_fields_if(f)?;
            groups.push(ListedGroup {
                group_id,
                protocol_type,
                group_state,
                group_type,
            });
        }
        r.tagged_fields_if(f)?;
        Ok(ListGroupsResponse {
            throttle_time_ms,
            error_code,
            groups,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeGroupsRequest {
    pub groups: Vec<String>,
    pub include_authorized_operations: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedGroupMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub member_metadata: Bytes,
    pub member_assignment: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedGroup {
    pub error_code: i16,
    pub group_id: String,
    pub group_state: String,
    pub protocol_type: String,
    pub protocol_data: String,
    pub members: Vec<DescribedGroupMember>,
    pub authorized_operations: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeGroupsResponse {
    pub throttle_time_ms: i32,
    pub groups: Vec<DescribedGroup>,
}

impl DescribeGroupsRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<DescribeGroupsRequest> {
        let f = version >= DESCRIBE_GROUPS_FLEXIBLE_FROM;
        let groups = r.strings(f, "groups")?;
        let include_authorized_operations = version >= 3 && r.bool("include_authorized_operations")?;
        r.tagged_fields_if(f)?;
        Ok(DescribeGroupsRequest {
            groups,
            include_authorized_operations,
        })
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= DESCRIBE_GROUPS_FLEXIBLE_FROM;
        w.strings(f, &self.groups);
        if version >= 3 {
            w.bool(self.include_authorized_operations);
        }
        w.empty_tagged_fields_if(f);
    }
}

impl DescribedGroupMember {
    fn encode(&self, w: &mut Writer, version: i16, f: bool) {
        w.string(f, &self.member_id);
        if version >= 4 {
            w.nullable_string(f, self.group_instance_id.as_deref());
        }
        w.string(f, &self.client_id);
        w.string(f, &self.client_host);
        w.nullable_bytes(f, Some(&self.member_metadata));
        w.nullable_bytes(f, Some(&self.member_assignment));
        w.empty_tagged_fields_if(f);
    }

    fn decode(r: &mut Reader, version: i16, f: bool) -> WireResult<DescribedGroupMember> {
        let member_id = r.string(f, "member_id")?;
        let group_instance_id = if version >= 4 {
            r.nullable_string(f, "group_instance_id")?
        } else {
            None
        };
        let client_id = r.string(f, "client_id")?;
        let client_host = r.string(f, "client_host")?;
        let member_metadata = r.bytes(f, "member_metadata")?;
        let member_assignment = r.bytes(f, "member_assignment")?;
        r.tagged_fields_if(f)?;
        Ok(DescribedGroupMember {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            member_metadata,
            member_assignment,
        })
    }
}

impl DescribedGroup {
    fn encode(&self, w: &mut Writer, version: i16, f: bool) {
        w.i16(self.error_code);
        w.string(f, &self.group_id);
        w.string(f, &self.group_state);
        w.string(f, &self.protocol_type);
        w.string(f, &self.protocol_data);
        w.array_len(f, Some(self.members.len()));
        for m in &self.members {
            m.encode(w, version, f);
        }
        if version >= 3 {
            w.i32(self.authorized_operations);
        }
        w.empty_tagged_fields_if(f);
    }

    fn decode(r: &mut Reader, version: i16, f: bool) -> WireResult<DescribedGroup> {
        let error_code = r.i16("error_code")?;
        let group_id = r.string(f, "group_id")?;
        let group_state = r.string(f, "group_state")?;
        let protocol_type = r.string(f, "protocol_type")?;
        let protocol_data = r.string(f, "protocol_data")?;
        let n = r.array_len_required(f, 6, "described group members")?;
        let mut members = Vec::with_capacity(capacity(n));
        for _ in 0..n {
            members.push(DescribedGroupMember::decode(r, version, f)?);
        }
        let authorized_operations = if version >= 3 {
            r.i32("authorized_operations")?
        } else {
            AUTHORIZED_OPERATIONS_OMITTED
        };
        r.tagged_fields_if(f)?;
        Ok(DescribedGroup {
            error_code,
            group_id,
            group_state,
            protocol_type,
            protocol_data,
            members,
            authorized_operations,
        })
    }
}

impl DescribeGroupsResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= DESCRIBE_GROUPS_FLEXIBLE_FROM;
        if version >= 1 {
            w.i32(self.throttle_time_ms);
        }
        w.array_len(f, Some(self.groups.len()));
        for g in &self.groups {
            g.encode(w, version, f);
        }
        w.empty_tagged_fields_if(f);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<DescribeGroupsResponse> {
        let f = version >= DESCRIBE_GROUPS_FLEXIBLE_FROM;
        let throttle_time_ms = if version >= 1 { r.i32("throttle_time_ms")? } else { 0 };
        let n = r.array_len_required(f, 8, "described groups")?;
        let mut groups = Vec::with_capacity(capacity(n));
        for _ in 0..n {
            groups.push(DescribedGroup::decode(r, version, f)?);
        }
        r.tagged_fields_if(f)?;
        Ok(DescribeGroupsResponse {
            throttle_time_ms,
            groups,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeleteGroupsRequest {
    pub groups_names: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeletableGroupResult {
    pub group_id: String,
    pub error_code: i16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeleteGroupsResponse {
    pub throttle_time_ms: i32,
    pub results: Vec<DeletableGroupResult>,
}

impl DeleteGroupsRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<DeleteGroupsRequest> {
        let f = version >= DELETE_GROUPS_FLEXIBLE_FROM;
        let groups_names = r.strings(f, "groups_names")?;
        r.tagged_fields_if(f)?;
        Ok(DeleteGroupsRequest { groups_names })
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= DELETE_GROUPS_FLEXIBLE_FROM;
        w.strings(f, &self.groups_names);
        w.empty_tagged_fields_if(f);
    }
}

impl DeleteGroupsResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= DELETE_GROUPS_FLEXIBLE_FROM;
        w.i32(self.throttle_time_ms);
        w.array_len(f, Some(self.results.len()));
        for g in &self.results {
            w.string(f, &g.group_id);
            w.i16(g.error_code);
            w.empty_tagged_fields_if(f);
        }
        w.empty_tagged_fields_if(f);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<DeleteGroupsResponse> {
        let f = version >= DELETE_GROUPS_FLEXIBLE_FROM;
        let throttle_time_ms = r.i32("throttle_time_ms")?;
        let n = r.array_len_required(f, 4, "delete groups results")?;
        let mut results = Vec::with_capacity(capacity(n));
        for _ in 0..n {
            let group_id = r.string(f, "group_id")?;
            let error_code = r.i16("error_code")?;
            r.tagged_fields_if(f)?;
            results.push(DeletableGroupResult { group_id, error_code });
        }
        r.tagged_fields_if(f)?;
        Ok(DeleteGroupsResponse {
            throttle_time_ms,
            results,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::codec_testing::{every_prefix_fails, round_trip};
    use super::*;

    fn since<T>(version: i16, from: i16, v: T, default: T) -> T {
        if version >= from {
            v
        } else {
            default
        }
    }

    #[test]
    fn list_groups_round_trips_at_every_version() {
        for v in 0..=LIST_GROUPS_MAX_VERSION {
            let req = ListGroupsRequest {
                states_filter: since(v, 4, vec!["Stable".into(), "Empty".into()], vec![]),
                types_filter: since(v, 5, vec!["classic".into()], vec![]),
            };
            let bytes = round_trip(&req, |q, w| q.encode(w, v), |r| ListGroupsRequest::decode(r, v));
            every_prefix_fails(&bytes, |r| ListGroupsRequest::decode(r, v));
            let resp = ListGroupsResponse {
                throttle_time_ms: since(v, 1, 2, 0),
                error_code: 0,
                groups: vec![
                    ListedGroup {
                        group_id: "g".into(),
                        protocol_type: "consumer".into(),
                        group_state: since(v, 4, "Stable", "").into(),
                        group_type: since(v, 5, "classic", "").into(),
                    },
                    ListedGroup {
                        group_id: "connect-x".into(),
                        protocol_type: String::new(),
                        group_state: since(v, 4, "Empty", "").into(),
                        group_type: since(v, 5, "classic", "").into(),
                    },
                ],
            };
            round_trip(&resp, |p, w| p.encode(w, v), |r| ListGroupsResponse::decode(r, v));
        }
    }

    fn described(v: i16) -> DescribedGroup {
        DescribedGroup {
            error_code: 0,
            group_id: "g".into(),
            group_state: "Stable".into(),
            protocol_type: "consumer".into(),
            protocol_data: "range".into(),
            members: vec![DescribedGroupMember {
                member_id: "m-1".into(),
                group_instance_id: since(v, 4, Some("i-1".into()), None),
                client_id: "rdkafka".into(),
                client_host: "/127.0.0.1".into(),
                member_metadata: Bytes::from_static(b"\x00\x01sub"),
                member_assignment: Bytes::new(),
            }],
            authorized_operations: since(v, 3, 0b1_1000, AUTHORIZED_OPERATIONS_OMITTED),
        }
    }

    #[test]
    fn describe_groups_round_trips_at_every_version() {
        for v in 0..=DESCRIBE_GROUPS_MAX_VERSION {
            let req = DescribeGroupsRequest {
                groups: vec!["g".into(), "missing".into()],
                include_authorized_operations: v >= 3,
            };
            let bytes = round_trip(&req, |q, w| q.encode(w, v), |r| DescribeGroupsRequest::decode(r, v));
            every_prefix_fails(&bytes, |r| DescribeGroupsRequest::decode(r, v));
            let missing = DescribedGroup {
                error_code: 69,
                group_id: "missing".into(),
                group_state: "Dead".into(),
                protocol_type: String::new(),
                protocol_data: String::new(),
                members: vec![],
                authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
            };
            let resp = DescribeGroupsResponse {
                throttle_time_ms: since(v, 1, 3, 0),
                groups: vec![described(v), missing],
            };
            round_trip(&resp, |p, w| p.encode(w, v), |r| DescribeGroupsResponse::decode(r, v));
        }
    }

    #[test]
    fn describe_groups_v5_bytes_follow_the_schema() {
        let resp = DescribeGroupsResponse {
            throttle_time_ms: 0,
            groups: vec![DescribedGroup {
                group_state: "S".into(),
                protocol_type: String::new(),
                protocol_data: String::new(),
                members: vec![DescribedGroupMember {
                    member_id: "m".into(),
                    group_instance_id: None,
                    client_id: "c".into(),
                    client_host: "h".into(),
                    member_metadata: Bytes::from_static(b"x"),
                    member_assignment: Bytes::new(),
                }],
                authorized_operations: -1,
                ..described(5)
            }],
        };
        let mut w = Writer::new();
        resp.encode(&mut w, 5);
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 0, 0, 0,                 // throttle_time_ms
            2,                          // groups: 1
            0, 0,                       // error_code
            2, b'g', 2, b'S', 1, 1,     // group_id, group_state, protocol_type, protocol_data
            2,                          // members: 1
            2, b'm', 0, 2, b'c', 2, b'h', // member_id, group_instance_id null, client_id, client_host
            2, b'x', 1, 0,              // member_metadata, member_assignment, tagged fields
            0xff, 0xff, 0xff, 0xff,     // authorized_operations
            0,                          // group tagged fields
            0,                          // tagged fields
        ];
        assert_eq!(w.as_slice(), expected);
    }

    #[test]
    fn delete_groups_round_trips_at_every_version() {
        for v in 0..=DELETE_GROUPS_MAX_VERSION {
            let req = DeleteGroupsRequest {
                groups_names: vec!["g".into(), String::new()],
            };
            let bytes = round_trip(&req, |q, w| q.encode(w, v), |r| DeleteGroupsRequest::decode(r, v));
            every_prefix_fails(&bytes, |r| DeleteGroupsRequest::decode(r, v));
            let resp = DeleteGroupsResponse {
                throttle_time_ms: 1,
                results: vec![
                    DeletableGroupResult {
                        group_id: "g".into(),
                        error_code: 0,
                    },
                    DeletableGroupResult {
                        group_id: String::new(),
                        error_code: 68,
                    },
                ],
            };
            round_trip(&resp, |p, w| p.encode(w, v), |r| DeleteGroupsResponse::decode(r, v));
        }
    }
}
