use super::super::codec_testing::{every_prefix_fails, round_trip};
use super::super::wire::WireError;
use super::*;

fn since<T>(version: i16, from: i16, v: T, default: T) -> T {
    if version >= from {
        v
    } else {
        default
    }
}

fn id(version: i16, from: i16, s: &str) -> Option<String> {
    since(version, from, Some(s.to_string()), None)
}

trait Codec: Sized + PartialEq + std::fmt::Debug {
    fn enc(&self, w: &mut Writer, version: i16);
    fn dec(r: &mut Reader, version: i16) -> WireResult<Self>;
}

macro_rules! codec {
    ($($t:ty),*) => {$(
        impl Codec for $t {
            fn enc(&self, w: &mut Writer, version: i16) {
                self.encode(w, version)
            }
            fn dec(r: &mut Reader, version: i16) -> WireResult<Self> {
                <$t>::decode(r, version)
            }
        }
    )*};
}

codec!(
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse
);

/// Round-trips `req` and `resp` at `version`, and refuses every strict
/// prefix of the request.
fn check<Q: Codec, P: Codec>(version: i16, req: &Q, resp: &P) {
    let bytes = round_trip(req, |q, w| q.enc(w, version), |r| Q::dec(r, version));
    every_prefix_fails(&bytes, |r| Q::dec(r, version));
    round_trip(resp, |p, w| p.enc(w, version), |r| P::dec(r, version));
}

#[test]
fn find_coordinator_round_trips_at_every_version() {
    for v in 0..=FIND_COORDINATOR_MAX_VERSION {
        let req = FindCoordinatorRequest {
            key: "orders-app".into(),
            key_type: since(v, 1, KEY_TYPE_TRANSACTION, KEY_TYPE_GROUP),
        };
        let resp = FindCoordinatorResponse {
            throttle_time_ms: since(v, 1, 3, 0),
            error_code: 15,
            error_message: id(v, 1, "not yet"),
            node_id: 2,
            host: "broker-2".into(),
            port: 9092,
        };
        check(v, &req, &resp);
    }
}

fn join_request(v: i16) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: "g".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: since(v, 1, 30_000, NO_REBALANCE_TIMEOUT),
        member_id: String::new(),
        group_instance_id: id(v, 5, "instance-1"),
        protocol_type: "consumer".into(),
        protocols: vec![
            JoinGroupProtocol {
                name: "range".into(),
                metadata: Bytes::from_static(b"\x00\x01sub"),
            },
            JoinGroupProtocol {
                name: "roundrobin".into(),
                metadata: Bytes::new(),
            },
        ],
    }
}

fn join_response(v: i16) -> JoinGroupResponse {
    JoinGroupResponse {
        throttle_time_ms: since(v, 2, 7, 0),
        error_code: 0,
        generation_id: 4,
        protocol_type: id(v, 7, "consumer"),
        protocol_name: Some("range".into()),
        leader: "m-1".into(),
        member_id: "m-2".into(),
        members: vec![JoinGroupMember {
            member_id: "m-1".into(),
            group_instance_id: id(v, 5, "instance-1"),
            metadata: Bytes::from_static(b"meta"),
        }],
    }
}

#[test]
fn join_group_round_trips_at_every_version() {
    for v in 0..=JOIN_GROUP_MAX_VERSION {
        check(v, &join_request(v), &join_response(v));
    }
}

#[test]
fn a_null_protocol_name_is_empty_before_v7() {
    let failed = JoinGroupResponse {
        protocol_name: None,
        ..join_response(6)
    };
    let mut w = Writer::new();
    failed.encode(&mut w, 6);
    let back = JoinGroupResponse::decode(&mut Reader::new(w.into_bytes().freeze()), 6).unwrap();
    assert_eq!(back.protocol_name.as_deref(), Some(""));
    let failed7 = JoinGroupResponse {
        protocol_name: None,
        ..join_response(7)
    };
    round_trip(&failed7, |p, w| p.encode(w, 7), |r| JoinGroupResponse::decode(r, 7));
}

#[test]
fn join_group_v6_bytes_follow_the_schema() {
    let req = JoinGroupRequest {
        protocols: vec![JoinGroupProtocol {
            name: "r".into(),
            metadata: Bytes::from_static(b"m"),
        }],
        group_instance_id: None,
        ..join_request(6)
    };
    let mut w = Writer::new();
    req.encode(&mut w, 6);
    #[rustfmt::skip]
    let expected: &[u8] = &[
        2, b'g',                    // group_id
        0, 0, 0x27, 0x10,           // session_timeout_ms 10000
        0, 0, 0x75, 0x30,           // rebalance_timeout_ms 30000
        1,                          // member_id ""
        0,                          // group_instance_id null
        9, b'c', b'o', b'n', b's', b'u', b'm', b'e', b'r',
        2,                          // protocols: 1
        2, b'r', 2, b'm', 0,        // name, metadata, tagged fields
        0,                          // tagged fields
    ];
    assert_eq!(w.as_slice(), expected);
}

#[test]
fn heartbeat_round_trips_at_every_version() {
    for v in 0..=HEARTBEAT_MAX_VERSION {
        let req = HeartbeatRequest {
            group_id: "g".into(),
            generation_id: 3,
            member_id: "m-1".into(),
            group_instance_id: id(v, 3, "i"),
        };
        let resp = HeartbeatResponse {
            throttle_time_ms: since(v, 1, 1, 0),
            error_code: 27,
        };
        check(v, &req, &resp);
    }
}

#[test]
fn leave_group_round_trips_at_every_version() {
    for v in 0..=LEAVE_GROUP_MAX_VERSION {
        let mut members = vec![LeaveMember {
            member_id: "m-1".into(),
            group_instance_id: id(v, 3, "i-1"),
        }];
        if v >= 3 {
            members.push(LeaveMember {
                member_id: "m-2".into(),
                group_instance_id: None,
            });
        }
        let req = LeaveGroupRequest {
            group_id: "g".into(),
            members,
        };
        let resp = LeaveGroupResponse {
            throttle_time_ms: since(v, 1, 2, 0),
            error_code: 0,
            members: since(
                v,
                3,
                vec![LeaveMemberResponse {
                    member: LeaveMember {
                        member_id: "m-1".into(),
                        group_instance_id: Some("i-1".into()),
                    },
                    error_code: 25,
                }],
                vec![],
            ),
        };
        check(v, &req, &resp);
    }
}

#[test]
#[should_panic(expected = "carries one member")]
fn leave_group_v2_cannot_carry_a_batch() {
    let req = LeaveGroupRequest {
        group_id: "g".into(),
        members: vec![],
    };
    req.encode(&mut Writer::new(), 2);
}

#[test]
fn sync_group_round_trips_at_every_version() {
    for v in 0..=SYNC_GROUP_MAX_VERSION {
        let req = SyncGroupRequest {
            group_id: "g".into(),
            generation_id: 4,
            member_id: "m-1".into(),
            group_instance_id: id(v, 3, "i-1"),
            protocol_type: id(v, 5, "consumer"),
            protocol_name: id(v, 5, "range"),
            assignments: vec![
                SyncGroupAssignment {
                    member_id: "m-1".into(),
                    assignment: Bytes::from_static(b"\x00\x01a"),
                },
                SyncGroupAssignment {
                    member_id: "m-2".into(),
                    assignment: Bytes::new(),
                },
            ],
        };
        let resp = SyncGroupResponse {
            throttle_time_ms: since(v, 1, 5, 0),
            error_code: 0,
            protocol_type: id(v, 5, "consumer"),
            protocol_name: id(v, 5, "range"),
            assignment: Bytes::from_static(b"\x00\x01a"),
        };
        check(v, &req, &resp);
    }
}

#[test]
fn null_bytes_and_huge_counts_are_refused() {
    // SyncGroup v0 response: error_code, then a null assignment.
    let null = Bytes::from_static(&[0, 0, 0xff, 0xff, 0xff, 0xff]);
    assert!(matches!(
        SyncGroupResponse::decode(&mut Reader::new(null), 0),
        Err(WireError::UnexpectedNull { .. })
    ));
    // JoinGroup v0 request claiming 2^31 - 1 protocols.
    let huge = Bytes::from_static(&[0, 1, b'g', 0, 0, 0, 1, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff]);
    assert!(matches!(
        JoinGroupRequest::decode(&mut Reader::new(huge), 0),
        Err(WireError::Truncated { .. })
    ));
}
