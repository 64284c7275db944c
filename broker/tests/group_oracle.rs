//! Differential tests of the consumer-group codecs (group_membership,
//! group_offsets, groups_admin) against the `kafka-protocol` crate (a test
//! oracle only), on message bodies without a frame header.
//!
//! Both directions, at every version we speak that the oracle also speaks:
//! the oracle encodes a request or response and we decode it to the value
//! expected; we encode that value, byte for byte as the oracle did, and the
//! oracle decodes it back to its own value. The oracle no longer has
//! OffsetCommit v0-1 or OffsetFetch v0 (removed in Kafka 4.0): OffsetFetch
//! v0 has v1's layout and is checked against the oracle's v1 bytes;
//! OffsetCommit v0-1 are checked against hand-built bytes in their module.

use std::fmt::Debug;
use std::ops::RangeInclusive;

use bytes::{Bytes, BytesMut};
use ferrite_broker::protocol::group_membership::*;
use ferrite_broker::protocol::group_offsets::*;
use ferrite_broker::protocol::groups_admin::*;
use ferrite_broker::protocol::wire::{Reader, WireResult, Writer};
use kafka_protocol::messages as km;
use kafka_protocol::protocol::{Decodable, Encodable, Message, StrBytes};

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

fn os(x: &Option<String>) -> Option<StrBytes> {
    x.as_deref().map(s)
}

fn gid(x: &str) -> km::GroupId {
    km::GroupId(s(x))
}

fn tn(x: &str) -> km::TopicName {
    km::TopicName(s(x))
}

fn since<T>(version: i16, from: i16, v: T, default: T) -> T {
    if version >= from {
        v
    } else {
        default
    }
}

fn id(version: i16, from: i16, x: &str) -> Option<String> {
    since(version, from, Some(x.to_string()), None)
}

trait Codec: Sized + PartialEq + Debug {
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
    SyncGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse
);

/// The versions of `M` both we (up to `max`) and the oracle speak.
fn versions<M: Message>(max: i16) -> RangeInclusive<i16> {
    assert!(M::VERSIONS.max >= max, "the oracle stops at v{}", M::VERSIONS.max);
    M::VERSIONS.min.max(0)..=max
}

fn oracle_encode<O: Encodable>(theirs: &O, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    theirs
        .encode(&mut buf, version)
        .unwrap_or_else(|e| panic!("oracle encoding v{version}: {e}"));
    buf.freeze()
}

/// Both directions at `version` (see the module doc).
fn check<T: Codec, O: Encodable + Decodable + PartialEq + Debug>(version: i16, ours: &T, theirs: &O) {
    let bytes = oracle_encode(theirs, version);
    let mut r = Reader::new(bytes.clone());
    let decoded = T::dec(&mut r, version).unwrap_or_else(|e| panic!("v{version}: {e}"));
    assert_eq!(&decoded, ours, "v{version}");
    assert_eq!(r.remaining(), 0, "v{version}: bytes left over");
    let mut w = Writer::new();
    ours.enc(&mut w, version);
    assert_eq!(w.as_slice(), &bytes[..], "v{version}");
    let mut b = Bytes::copy_from_slice(w.as_slice());
    let back = O::decode(&mut b, version).unwrap_or_else(|e| panic!("oracle decoding v{version}: {e}"));
    assert_eq!(b.len(), 0, "v{version}: {} bytes left over", b.len());
    assert_eq!(&back, theirs, "v{version}");
}

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
                member_id: "m-1".into(),
                group_instance_id: Some("instance-1".into()),
                error_code: 0,
            },
            LeaveMemberResponse {
                member_id: "m-9".into(),
                group_instance_id: None,
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
                .with_member_id(s(&m.member_id))
                .with_group_instance_id(os(&m.group_instance_id))
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

fn offset_topic_results() -> Vec<OffsetTopicResult> {
    let partition = |partition_index, error_code| OffsetPartitionResult {
        partition_index,
        error_code,
    };
    vec![
        OffsetTopicResult {
            name: "orders".into(),
            partitions: vec![partition(0, 0), partition(3, 3)],
        },
        OffsetTopicResult {
            name: "été".into(),
            partitions: vec![],
        },
    ]
}

#[test]
fn offset_commit_request_matches_the_oracle() {
    use km::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
    for v in versions::<km::OffsetCommitRequest>(OFFSET_COMMIT_MAX_VERSION) {
        let partition = |partition_index, committed_metadata| OffsetCommitPartition {
            partition_index,
            committed_offset: 1_000 + i64::from(partition_index),
            committed_leader_epoch: since(v, 6, 7, UNSET),
            commit_timestamp: -1,
            committed_metadata,
        };
        let ours = OffsetCommitRequest {
            group_id: "g".into(),
            generation_id: 5,
            member_id: "m-1".into(),
            group_instance_id: id(v, 7, "instance-1"),
            retention_time_ms: if v <= 4 { 604_800_000 } else { -1 },
            topics: vec![
                OffsetCommitTopic {
                    name: "orders".into(),
                    partitions: vec![partition(0, Some("meta".into())), partition(3, None)],
                },
                OffsetCommitTopic {
                    name: "t".into(),
                    partitions: vec![],
                },
            ],
        };
        let topics = ours.topics.iter().map(|t| {
            let partitions = t.partitions.iter().map(|p| {
                OffsetCommitRequestPartition::default()
                    .with_partition_index(p.partition_index)
                    .with_committed_offset(p.committed_offset)
                    .with_committed_leader_epoch(p.committed_leader_epoch)
                    .with_committed_metadata(os(&p.committed_metadata))
            });
            OffsetCommitRequestTopic::default()
                .with_name(tn(&t.name))
                .with_partitions(partitions.collect())
        });
        let theirs = km::OffsetCommitRequest::default()
            .with_group_id(gid(&ours.group_id))
            .with_generation_id_or_member_epoch(ours.generation_id)
            .with_member_id(s(&ours.member_id))
            .with_group_instance_id(os(&ours.group_instance_id))
            .with_retention_time_ms(ours.retention_time_ms)
            .with_topics(topics.collect());
        check(v, &ours, &theirs);
    }
}

#[test]
fn offset_commit_response_matches_the_oracle() {
    use km::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
    for v in versions::<km::OffsetCommitResponse>(OFFSET_COMMIT_MAX_VERSION) {
        let ours = OffsetCommitResponse {
            throttle_time_ms: since(v, 3, 8, 0),
            topics: offset_topic_results(),
        };
        let topics = ours.topics.iter().map(|t| {
            let partitions = t.partitions.iter().map(|p| {
                OffsetCommitResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(p.error_code)
            });
            OffsetCommitResponseTopic::default()
                .with_name(tn(&t.name))
                .with_partitions(partitions.collect())
        });
        let theirs = km::OffsetCommitResponse::default()
            .with_throttle_time_ms(ours.throttle_time_ms)
            .with_topics(topics.collect());
        check(v, &ours, &theirs);
    }
}

fn offset_fetch_request_oracle(ours: &OffsetFetchRequest) -> km::OffsetFetchRequest {
    use km::offset_fetch_request::OffsetFetchRequestTopic;
    let topics = ours.topics.as_ref().map(|topics| {
        let topics = topics.iter().map(|t| {
            OffsetFetchRequestTopic::default()
                .with_name(tn(&t.name))
                .with_partition_indexes(t.partition_indexes.clone())
        });
        topics.collect()
    });
    km::OffsetFetchRequest::default()
        .with_group_id(gid(&ours.group_id))
        .with_topics(topics)
        .with_require_stable(ours.require_stable)
}

fn offset_fetch_response_oracle(ours: &OffsetFetchResponse) -> km::OffsetFetchResponse {
    use km::offset_fetch_response::{OffsetFetchResponsePartition, OffsetFetchResponseTopic};
    let topics = ours.topics.iter().map(|t| {
        let partitions = t.partitions.iter().map(|p| {
            OffsetFetchResponsePartition::default()
                .with_partition_index(p.partition_index)
                .with_committed_offset(p.committed_offset)
                .with_committed_leader_epoch(p.committed_leader_epoch)
                .with_metadata(os(&p.metadata))
                .with_error_code(p.error_code)
        });
        OffsetFetchResponseTopic::default()
            .with_name(tn(&t.name))
            .with_partitions(partitions.collect())
    });
    km::OffsetFetchResponse::default()
        .with_throttle_time_ms(ours.throttle_time_ms)
        .with_topics(topics.collect())
        .with_error_code(ours.error_code)
}

fn offset_fetch_samples(v: i16) -> (Vec<OffsetFetchRequest>, OffsetFetchResponse) {
    let named = Some(vec![
        OffsetFetchTopic {
            name: "orders".into(),
            partition_indexes: vec![0, 3],
        },
        OffsetFetchTopic {
            name: "t".into(),
            partition_indexes: vec![],
        },
    ]);
    let all = since(v, 2, vec![None], vec![]);
    let requests = std::iter::once(named).chain(all).map(|topics| OffsetFetchRequest {
        group_id: "g".into(),
        topics,
        require_stable: v >= 7,
    });
    let partition = |partition_index, committed_offset, metadata| OffsetFetchPartitionResult {
        partition_index,
        committed_offset,
        committed_leader_epoch: if committed_offset >= 0 {
            since(v, 5, 7, UNSET)
        } else {
            UNSET
        },
        metadata,
        error_code: 0,
    };
    let response = OffsetFetchResponse {
        throttle_time_ms: since(v, 3, 5, 0),
        topics: vec![OffsetFetchTopicResult {
            name: "orders".into(),
            partitions: vec![partition(0, 1_000, Some("meta".into())), partition(3, -1, None)],
        }],
        error_code: 0,
    };
    (requests.collect(), response)
}

#[test]
fn offset_fetch_matches_the_oracle() {
    for v in versions::<km::OffsetFetchRequest>(OFFSET_FETCH_MAX_VERSION) {
        let (requests, response) = offset_fetch_samples(v);
        for ours in &requests {
            check(v, ours, &offset_fetch_request_oracle(ours));
        }
        check(v, &response, &offset_fetch_response_oracle(&response));
        if v >= 2 {
            let failed = OffsetFetchResponse {
                topics: vec![],
                error_code: 16, // NOT_COORDINATOR
                ..response
            };
            check(v, &failed, &offset_fetch_response_oracle(&failed));
        }
    }
}

#[test]
fn offset_fetch_v0_has_the_layout_of_v1() {
    let (requests, response) = offset_fetch_samples(0);
    let mut w = Writer::new();
    requests[0].encode(&mut w, 0);
    assert_eq!(
        w.as_slice(),
        &oracle_encode(&offset_fetch_request_oracle(&requests[0]), 1)[..]
    );
    let mut w = Writer::new();
    response.encode(&mut w, 0);
    assert_eq!(
        w.as_slice(),
        &oracle_encode(&offset_fetch_response_oracle(&response), 1)[..]
    );
}

#[test]
fn offset_delete_matches_the_oracle() {
    use km::offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
    use km::offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic};
    for v in versions::<km::OffsetDeleteRequest>(OFFSET_DELETE_MAX_VERSION) {
        let ours = OffsetDeleteRequest {
            group_id: "g".into(),
            topics: vec![
                OffsetDeleteTopic {
                    name: "orders".into(),
                    partitions: vec![0, 3],
                },
                OffsetDeleteTopic {
                    name: "t".into(),
                    partitions: vec![],
                },
            ],
        };
        let topics = ours.topics.iter().map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| OffsetDeleteRequestPartition::default().with_partition_index(*p));
            OffsetDeleteRequestTopic::default()
                .with_name(tn(&t.name))
                .with_partitions(partitions.collect())
        });
        let theirs = km::OffsetDeleteRequest::default()
            .with_group_id(gid(&ours.group_id))
            .with_topics(topics.collect());
        check(v, &ours, &theirs);

        let ours = OffsetDeleteResponse {
            error_code: 0,
            throttle_time_ms: 9,
            topics: offset_topic_results(),
        };
        let topics = ours.topics.iter().map(|t| {
            let partitions = t.partitions.iter().map(|p| {
                OffsetDeleteResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(p.error_code)
            });
            OffsetDeleteResponseTopic::default()
                .with_name(tn(&t.name))
                .with_partitions(partitions.collect())
        });
        let theirs = km::OffsetDeleteResponse::default()
            .with_error_code(ours.error_code)
            .with_throttle_time_ms(ours.throttle_time_ms)
            .with_topics(topics.collect());
        check(v, &ours, &theirs);
    }
}

#[test]
fn list_groups_matches_the_oracle() {
    use km::list_groups_response::ListedGroup as TheirListedGroup;
    for v in versions::<km::ListGroupsRequest>(LIST_GROUPS_MAX_VERSION) {
        let filters = since(v, 4, vec![vec!["Stable".to_string(), "Empty".into()]], vec![]);
        for states_filter in std::iter::once(vec![]).chain(filters) {
            let theirs =
                km::ListGroupsRequest::default().with_states_filter(states_filter.iter().map(|x| s(x)).collect());
            check(v, &ListGroupsRequest { states_filter }, &theirs);
        }
        let ours = ListGroupsResponse {
            throttle_time_ms: since(v, 1, 1, 0),
            error_code: 0,
            groups: vec![
                ListedGroup {
                    group_id: "g".into(),
                    protocol_type: "consumer".into(),
                    group_state: since(v, 4, "Stable", "").into(),
                },
                ListedGroup {
                    group_id: "connect-x".into(),
                    protocol_type: String::new(),
                    group_state: since(v, 4, "Empty", "").into(),
                },
            ],
        };
        let groups = ours.groups.iter().map(|g| {
            TheirListedGroup::default()
                .with_group_id(gid(&g.group_id))
                .with_protocol_type(s(&g.protocol_type))
                .with_group_state(s(&g.group_state))
        });
        let theirs = km::ListGroupsResponse::default()
            .with_throttle_time_ms(ours.throttle_time_ms)
            .with_error_code(ours.error_code)
            .with_groups(groups.collect());
        check(v, &ours, &theirs);
    }
}

fn described_groups(v: i16) -> Vec<DescribedGroup> {
    let stable = DescribedGroup {
        error_code: 0,
        group_id: "g".into(),
        group_state: "Stable".into(),
        protocol_type: "consumer".into(),
        protocol_data: "range".into(),
        members: vec![DescribedGroupMember {
            member_id: "m-1".into(),
            group_instance_id: id(v, 4, "instance-1"),
            client_id: "rdkafka".into(),
            client_host: "/10.0.0.7".into(),
            member_metadata: Bytes::from_static(b"\x00\x01sub"),
            member_assignment: Bytes::from_static(b"\x00\x01assigned"),
        }],
        authorized_operations: since(v, 3, 0x1f8, AUTHORIZED_OPERATIONS_OMITTED),
    };
    let dead = DescribedGroup {
        error_code: 69, // GROUP_ID_NOT_FOUND
        group_id: "missing".into(),
        group_state: "Dead".into(),
        protocol_type: String::new(),
        protocol_data: String::new(),
        members: vec![],
        authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
    };
    vec![stable, dead]
}

#[test]
fn describe_groups_matches_the_oracle() {
    use km::describe_groups_response::{DescribedGroup as TheirGroup, DescribedGroupMember as TheirMember};
    for v in versions::<km::DescribeGroupsRequest>(DESCRIBE_GROUPS_MAX_VERSION) {
        let ours = DescribeGroupsRequest {
            groups: vec!["g".into(), "missing".into()],
            include_authorized_operations: v >= 3,
        };
        let theirs = km::DescribeGroupsRequest::default()
            .with_groups(ours.groups.iter().map(|g| gid(g)).collect())
            .with_include_authorized_operations(ours.include_authorized_operations);
        check(v, &ours, &theirs);

        let ours = DescribeGroupsResponse {
            throttle_time_ms: since(v, 1, 2, 0),
            groups: described_groups(v),
        };
        let groups = ours.groups.iter().map(|g| {
            let members = g.members.iter().map(|m| {
                TheirMember::default()
                    .with_member_id(s(&m.member_id))
                    .with_group_instance_id(os(&m.group_instance_id))
                    .with_client_id(s(&m.client_id))
                    .with_client_host(s(&m.client_host))
                    .with_member_metadata(m.member_metadata.clone())
                    .with_member_assignment(m.member_assignment.clone())
            });
            TheirGroup::default()
                .with_error_code(g.error_code)
                .with_group_id(gid(&g.group_id))
                .with_group_state(s(&g.group_state))
                .with_protocol_type(s(&g.protocol_type))
                .with_protocol_data(s(&g.protocol_data))
                .with_members(members.collect())
                .with_authorized_operations(g.authorized_operations)
        });
        let theirs = km::DescribeGroupsResponse::default()
            .with_throttle_time_ms(ours.throttle_time_ms)
            .with_groups(groups.collect());
        check(v, &ours, &theirs);
    }
}

#[test]
fn delete_groups_matches_the_oracle() {
    use km::delete_groups_response::DeletableGroupResult as TheirResult;
    for v in versions::<km::DeleteGroupsRequest>(DELETE_GROUPS_MAX_VERSION) {
        let ours = DeleteGroupsRequest {
            groups_names: vec!["g".into(), "busy".into()],
        };
        let theirs =
            km::DeleteGroupsRequest::default().with_groups_names(ours.groups_names.iter().map(|g| gid(g)).collect());
        check(v, &ours, &theirs);
        let ours = DeleteGroupsResponse {
            throttle_time_ms: 3,
            results: vec![
                DeletableGroupResult {
                    group_id: "g".into(),
                    error_code: 0,
                },
                DeletableGroupResult {
                    group_id: "busy".into(),
                    error_code: 68, // NON_EMPTY_GROUP
                },
            ],
        };
        let results = ours.results.iter().map(|r| {
            TheirResult::default()
                .with_group_id(gid(&r.group_id))
                .with_error_code(r.error_code)
        });
        let theirs = km::DeleteGroupsResponse::default()
            .with_throttle_time_ms(ours.throttle_time_ms)
            .with_results(results.collect());
        check(v, &ours, &theirs);
    }
}

/// Decodes what the oracle encoded with unknown tagged fields at every
/// level, which must be skipped.
fn decodes_despite_tags<T: Codec, O: Encodable>(version: i16, expected: &T, tagged: &O) {
    let mut r = Reader::new(oracle_encode(tagged, version));
    assert_eq!(&T::dec(&mut r, version).unwrap(), expected, "v{version}");
    assert_eq!(r.remaining(), 0, "v{version}");
}

#[test]
fn unknown_tagged_fields_from_the_oracle_are_skipped() {
    let tag = |n| Bytes::from(vec![7u8; n]);
    let ours = JoinGroupResponse {
        throttle_time_ms: 0,
        error_code: 0,
        generation_id: 1,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        leader: "m".into(),
        member_id: "m".into(),
        members: vec![JoinGroupMember {
            member_id: "m".into(),
            group_instance_id: None,
            metadata: Bytes::from_static(b"x"),
        }],
    };
    let member = km::join_group_response::JoinGroupResponseMember::default()
        .with_member_id(s("m"))
        .with_metadata(Bytes::from_static(b"x"))
        .with_unknown_tagged_field(4, tag(2));
    let theirs = km::JoinGroupResponse::default()
        .with_generation_id(1)
        .with_protocol_type(Some(s("consumer")))
        .with_protocol_name(Some(s("range")))
        .with_leader(s("m"))
        .with_member_id(s("m"))
        .with_members(vec![member])
        .with_unknown_tagged_field(0, tag(0))
        .with_unknown_tagged_field(300, tag(200));
    decodes_despite_tags(7, &ours, &theirs);

    let (requests, _) = offset_fetch_samples(7);
    let mut theirs = offset_fetch_request_oracle(&requests[0]).with_unknown_tagged_field(9, tag(3));
    if let Some(topics) = theirs.topics.as_mut() {
        topics[1].unknown_tagged_fields.insert(1, tag(1));
    }
    decodes_despite_tags(7, &requests[0], &theirs);

    let ours = DeleteGroupsRequest {
        groups_names: vec!["g".into()],
    };
    let theirs = km::DeleteGroupsRequest::default()
        .with_groups_names(vec![gid("g")])
        .with_unknown_tagged_field(5, tag(5));
    decodes_despite_tags(2, &ours, &theirs);
}
