//! Differential tests of the consumer-group membership codecs
//! (group_membership; the offsets and admin ones are in
//! `group_oracle_offsets.rs`) against the `kafka-protocol` crate (a test
//! oracle only), on message bodies without a frame header.
//!
//! Both directions, at every version we speak that the oracle also speaks:
//! the oracle encodes a request or response and we decode it to the value
//! expected; we encode that value, byte for byte as the oracle did, and the
//! oracle decodes it back to its own value.

mod group_oracle_common;

use group_oracle_common::*;

#[test]
fn find_coordinator_matches_the_oracle() {
    for v in versions::<km::FindCoordinatorRequest>(FIND_COORDINATOR_MAX_VERSION) {
        for key_type in since(v, 1, vec![KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION], vec![KEY_TYPE_GROUP]) {
            let ours = FindCoordinatorRequest {
                key: "orders-app".into(),
                key_type,
            };
            let theirs = km::FindCoordinatorRequest::default()
                .with_key(s(&ours.key))
                .with_key_type(key_type);
            check(v, &ours, &theirs);
        }
        for error_message in [id(v, 1, "loading"), None] {
            let ours = FindCoordinatorResponse {
                throttle_time_ms: since(v, 1, 12, 0),
                error_code: 14,
                error_message,
                node_id: 2,
                host: "broker-2".into(),
                port: 9092,
            };
            // Absent in v0, the oracle's message is its default, "".
            let message = since(v, 1, os(&ours.error_message), Some(s("")));
            let theirs = km::FindCoordinatorResponse::default()
                .with_throttle_time_ms(ours.throttle_time_ms)
                .with_error_code(ours.error_code)
                .with_error_message(message)
                .with_node_id(km::BrokerId(ours.node_id))
                .with_host(s(&ours.host))
                .with_port(ours.port);
            check(v, &ours, &theirs);
        }
    }
}

#[test]
fn join_group_request_matches_the_oracle() {
    use km::join_group_request::JoinGroupRequestProtocol;
    for v in versions::<km::JoinGroupRequest>(JOIN_GROUP_MAX_VERSION) {
        let ours = JoinGroupRequest {
            group_id: "g".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: since(v, 1, 300_000, NO_REBALANCE_TIMEOUT),
            member_id: since(v, 4, "m-1", "").into(),
            group_instance_id: id(v, 5, "instance-1"),
            protocol_type: "consumer".into(),
            protocols: vec![
                JoinGroupProtocol {
                    name: "range".into(),
                    metadata: Bytes::from_static(b"\x00\x01\x00\x00"),
                },
                JoinGroupProtocol {
                    name: "cooperative-sticky".into(),
                    metadata: Bytes::new(),
                },
            ],
        };
        let protocols = ours.protocols.iter().map(|p| {
            JoinGroupRequestProtocol::default()
                .with_name(s(&p.name))
                .with_metadata(p.metadata.clone())
        });
        let theirs = km::JoinGroupRequest::default()
            .with_group_id(gid(&ours.group_id))
            .with_session_timeout_ms(ours.session_timeout_ms)
            .with_rebalance_timeout_ms(ours.rebalance_timeout_ms)
            .with_member_id(s(&ours.member_id))
            .with_group_instance_id(os(&ours.group_instance_id))
            .with_protocol_type(s(&ours.protocol_type))
            .with_protocols(protocols.collect());
        check(v, &ours, &theirs);
    }
}

#[test]
fn join_group_response_matches_the_oracle() {
    use km::join_group_response::JoinGroupResponseMember;
    for v in versions::<km::JoinGroupResponse>(JOIN_GROUP_MAX_VERSION) {
        let failed = since(v, 7, vec![None], vec![]);
        for protocol_name in std::iter::once(Some("range".to_string())).chain(failed) {
            let ours = JoinGroupResponse {
                throttle_time_ms: since(v, 2, 3, 0),
                error_code: 0,
                generation_id: 5,
                protocol_type: id(v, 7, "consumer"),
                protocol_name,
                leader: "m-1".into(),
                member_id: "m-2".into(),
                members: vec![
                    JoinGroupMember {
                        member_id: "m-1".into(),
                        group_instance_id: id(v, 5, "instance-1"),
                        metadata: Bytes::from_static(b"sub-1"),
                    },
                    JoinGroupMember {
                        member_id: "m-2".into(),
                        group_instance_id: None,
                        metadata: Bytes::new(),
                    },
                ],
            };
            let members = ours.members.iter().map(|m| {
                JoinGroupResponseMember::default()
                    .with_member_id(s(&m.member_id))
                    .with_group_instance_id(os(&m.group_instance_id))
                    .with_metadata(m.metadata.clone())
            });
            let theirs = km::JoinGroupResponse::default()
                .with_throttle_time_ms(ours.throttle_time_ms)
                .with_error_code(ours.error_code)
                .with_generation_id(ours.generation_id)
                .with_protocol_type(os(&ours.protocol_type))
                .with_protocol_name(os(&ours.protocol_name))
                .with_leader(s(&ours.leader))
                .with_member_id(s(&ours.member_id))
                .with_members(members.collect());
            check(v, &ours, &theirs);
        }
    }
}

#[test]
fn heartbeat_matches_the_oracle() {
    for v in versions::<km::HeartbeatRequest>(HEARTBEAT_MAX_VERSION) {
        let ours = HeartbeatRequest {
            group_id: "g".into(),
            generation_id: 5,
            member_id: "m-1".into(),
            group_instance_id: id(v, 3, "instance-1"),
        };
        let theirs = km::HeartbeatRequest::default()
            .with_group_id(gid(&ours.group_id))
            .with_generation_id(ours.generation_id)
            .with_member_id(s(&ours.member_id))
            .with_group_instance_id(os(&ours.group_instance_id));
        check(v, &ours, &theirs);
        let ours = HeartbeatResponse {
            throttle_time_ms: since(v, 1, 4, 0),
            error_code: 27, // REBALANCE_IN_PROGRESS
        };
        let theirs = km::HeartbeatResponse::default()
            .with_throttle_time_ms(ours.throttle_time_ms)
            .with_error_code(ours.error_code);
        check(v, &ours, &theirs);
    }
}

#[test]
fn leave_group_matches_the_oracle() {
    use km::leave_group_request::MemberIdentity;
    use km::leave_group_response::MemberResponse;
    for v in versions::<km::LeaveGroupRequest>(LEAVE_GROUP_MAX_VERSION) {
        let mut members = vec![LeaveMember {
            member_id: "m-1".into(),
            group_instance_id: id(v, 3, "instance-1"),
        }];
        if v >= 3 {
            members.push(LeaveMember {
                member_id: "m-2".into(),
                group_instance_id: None,
            });
        }
        let ours = LeaveGroupRequest {
            group_id: "g".into(),
            members,
        };
        let theirs = km::LeaveGroupRequest::default().with_group_id(gid(&ours.group_id));
        let theirs = if v >= 3 {
            let identities = ours.members.iter().map(|m| {
                MemberIdentity::default()
                    .with_member_id(s(&m.member_id))
                    .with_group_instance_id(os(&m.group_instance_id))
            });
            theirs.with_members(identities.collect())
        } else {
            theirs.with_member_id(s(&ours.members[0].member_id))
        };
        check(v, &ours, &theirs);

        let members = vec![
            LeaveMemberResponse {
                member: LeaveMember {
                    member_id: "m-1".into(),
                    group_instance_id: Some("instance-1".into()),
                },
                error_code: 0,
            },
            LeaveMemberResponse {
                member: LeaveMember {
                    member_id: "m-9".into(),
                    group_instance_id: None,
                },
                error_code: 25, // UNKNOWN_MEMBER_ID
            },
        ];
        let ours = LeaveGroupResponse {
            throttle_time_ms: since(v, 1, 6, 0),
            error_code: 0,
            members: since(v, 3, members, vec![]),
        };
        let members = ours.members.iter().map(|m| {
            MemberResponse::default()
                .with_member_id(s(&m.member.member_id))
                .with_group_instance_id(os(&m.member.group_instance_id))
                .with_error_code(m.error_code)
        });
        let theirs = km::LeaveGroupResponse::default()
            .with_throttle_time_ms(ours.throttle_time_ms)
            .with_error_code(ours.error_code)
            .with_members(members.collect());
        check(v, &ours, &theirs);
    }
}

#[test]
fn sync_group_matches_the_oracle() {
    use km::sync_group_request::SyncGroupRequestAssignment;
    for v in versions::<km::SyncGroupRequest>(SYNC_GROUP_MAX_VERSION) {
        let ours = SyncGroupRequest {
            group_id: "g".into(),
            generation_id: 5,
            member_id: "m-1".into(),
            group_instance_id: id(v, 3, "instance-1"),
            protocol_type: id(v, 5, "consumer"),
            protocol_name: id(v, 5, "range"),
            assignments: vec![
                SyncGroupAssignment {
                    member_id: "m-1".into(),
                    assignment: Bytes::from_static(b"\x00\x01assigned"),
                },
                SyncGroupAssignment {
                    member_id: "m-2".into(),
                    assignment: Bytes::new(),
                },
            ],
        };
        let assignments = ours.assignments.iter().map(|a| {
            SyncGroupRequestAssignment::default()
                .with_member_id(s(&a.member_id))
                .with_assignment(a.assignment.clone())
        });
        let theirs = km::SyncGroupRequest::default()
            .with_group_id(gid(&ours.group_id))
            .with_generation_id(ours.generation_id)
            .with_member_id(s(&ours.member_id))
            .with_group_instance_id(os(&ours.group_instance_id))
            .with_protocol_type(os(&ours.protocol_type))
            .with_protocol_name(os(&ours.protocol_name))
            .with_assignments(assignments.collect());
        check(v, &ours, &theirs);
        let ours = SyncGroupResponse {
            throttle_time_ms: since(v, 1, 2, 0),
            error_code: 0,
            protocol_type: id(v, 5, "consumer"),
            protocol_name: id(v, 5, "range"),
            assignment: Bytes::from_static(b"\x00\x01assigned"),
        };
        let theirs = km::SyncGroupResponse::default()
            .with_throttle_time_ms(ours.throttle_time_ms)
            .with_error_code(ours.error_code)
            .with_protocol_type(os(&ours.protocol_type))
            .with_protocol_name(os(&ours.protocol_name))
            .with_assignment(ours.assignment.clone());
        check(v, &ours, &theirs);
    }
}
