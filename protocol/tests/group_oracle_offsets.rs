//! Differential tests of the consumer-group offsets and admin codecs
//! (group_offsets, groups_admin) against the `kafka-protocol` crate, as in
//! `group_oracle.rs` (whose module doc says how). The oracle no longer has
//! OffsetCommit v0-1 or OffsetFetch v0 (removed in Kafka 4.0): OffsetFetch
//! v0 has v1's layout and is checked against the oracle's v1 bytes;
//! OffsetCommit v0-1 are checked against hand-built bytes in their module.

mod group_oracle_common;

use ferrite_ids::{LeaderEpoch, Offset, TimestampMs};
use group_oracle_common::*;

fn offset_topic_results() -> Vec<OffsetTopicResult> {
    let partition = |partition_index, error_code| OffsetPartitionResult {
        partition_index,
        error_code,
    };
    vec![
        OffsetTopicResult {
            topic: "orders".into(),
            partitions: vec![partition(0, 0), partition(3, 3)],
        },
        OffsetTopicResult {
            topic: "été".into(),
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
            committed_offset: Offset(1_000 + i64::from(partition_index)),
            committed_leader_epoch: LeaderEpoch(since(v, 6, 7, UNSET)),
            commit_timestamp: TimestampMs::NONE,
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
                    topic: "orders".into(),
                    partitions: vec![partition(0, Some("meta".into())), partition(3, None)],
                },
                OffsetCommitTopic {
                    topic: "t".into(),
                    partitions: vec![],
                },
            ],
        };
        let topics = ours.topics.iter().map(|t| {
            let partitions = t.partitions.iter().map(|p| {
                OffsetCommitRequestPartition::default()
                    .with_partition_index(p.partition_index)
                    .with_committed_offset(p.committed_offset.0)
                    .with_committed_leader_epoch(p.committed_leader_epoch.0)
                    .with_committed_metadata(os(&p.committed_metadata))
            });
            OffsetCommitRequestTopic::default()
                .with_name(tn(&t.topic))
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
                .with_name(tn(&t.topic))
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
                .with_name(tn(&t.topic))
                .with_partition_indexes(t.partitions.clone())
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
                .with_committed_offset(p.committed_offset.0)
                .with_committed_leader_epoch(p.committed_leader_epoch.0)
                .with_metadata(os(&p.metadata))
                .with_error_code(p.error_code)
        });
        OffsetFetchResponseTopic::default()
            .with_name(tn(&t.topic))
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
            topic: "orders".into(),
            partitions: vec![0, 3],
        },
        OffsetFetchTopic {
            topic: "t".into(),
            partitions: vec![],
        },
    ]);
    let all = since(v, 2, vec![None], vec![]);
    let requests = std::iter::once(named).chain(all).map(|topics| OffsetFetchRequest {
        group_id: "g".into(),
        topics,
        require_stable: v >= 7,
    });
    let partition = |partition_index, committed_offset: i64, metadata| OffsetFetchPartitionResult {
        partition_index,
        committed_offset: Offset(committed_offset),
        committed_leader_epoch: LeaderEpoch(if committed_offset >= 0 {
            since(v, 5, 7, UNSET)
        } else {
            UNSET
        }),
        metadata,
        error_code: 0,
    };
    let response = OffsetFetchResponse {
        throttle_time_ms: since(v, 3, 5, 0),
        topics: vec![OffsetFetchTopicResult {
            topic: "orders".into(),
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
                    topic: "orders".into(),
                    partitions: vec![0, 3],
                },
                OffsetDeleteTopic {
                    topic: "t".into(),
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
                .with_name(tn(&t.topic))
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
                .with_name(tn(&t.topic))
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
            let types_filter: Vec<String> = since(v, 5, vec!["classic".to_string()], vec![]);
            let theirs = km::ListGroupsRequest::default()
                .with_states_filter(states_filter.iter().map(|x| s(x)).collect())
                .with_types_filter(types_filter.iter().map(|x| s(x)).collect());
            let ours = ListGroupsRequest {
                states_filter,
                types_filter,
            };
            check(v, &ours, &theirs);
        }
        let ours = ListGroupsResponse {
            throttle_time_ms: since(v, 1, 1, 0),
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
        let groups = ours.groups.iter().map(|g| {
            TheirListedGroup::default()
                .with_group_id(gid(&g.group_id))
                .with_protocol_type(s(&g.protocol_type))
                .with_group_state(s(&g.group_state))
                .with_group_type(s(&g.group_type))
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
