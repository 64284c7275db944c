//! Differential tests against the `kafka-protocol` crate (a test oracle
//! only): it encodes requests and we decode them; we encode responses and it
//! decodes them. Every supported version of every API is exercised.

use bytes::{Bytes, BytesMut};
use ferrite_ids::{LeaderEpoch, Offset, ProducerId, TimestampMs};
use ferrite_protocol::api::{ApiKey, SUPPORTED};
use ferrite_protocol::request::{decode_frame, Decoded, RequestBody};
use ferrite_protocol::response::{Chunk, ResponseBuilder};
use ferrite_protocol::wire::Writer;
use ferrite_protocol::{api_versions, configs, describe_cluster, fetch, list_offsets, metadata, produce, topics_admin};
use kafka_protocol::messages as km;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

fn tn(x: &str) -> km::TopicName {
    km::TopicName(s(x))
}

fn versions(api: ApiKey) -> std::ops::RangeInclusive<i16> {
    let sup = api.support();
    sup.min..=sup.max
}

/// Encodes a header + body with the oracle and decodes it with ours.
fn ours<R: Encodable + HeaderVersion>(key: i16, version: i16, body: &R) -> Box<ferrite_protocol::request::Request> {
    let mut buf = BytesMut::new();
    let header = km::RequestHeader::default()
        .with_request_api_key(key)
        .with_request_api_version(version)
        .with_correlation_id(77)
        .with_client_id(Some(s("oracle")));
    header.encode(&mut buf, R::header_version(version)).unwrap();
    body.encode(&mut buf, version).unwrap();
    match decode_frame(buf.freeze()).unwrap_or_else(|e| panic!("key {key} v{version}: {e}")) {
        Decoded::Request(r) => {
            assert_eq!(r.header.correlation_id, 77);
            assert_eq!(r.header.client_id.as_deref(), Some("oracle"));
            r
        }
        other => panic!("key {key} v{version}: {other:?}"),
    }
}

/// Decodes our response body with the oracle.
fn theirs<R: Decodable>(bytes: &[u8], version: i16) -> R {
    let mut b = Bytes::copy_from_slice(bytes);
    let r = R::decode(&mut b, version).unwrap_or_else(|e| panic!("v{version}: {e}"));
    assert_eq!(b.len(), 0, "v{version}: {} bytes left over", b.len());
    r
}

#[test]
fn api_versions_response_decodes_at_every_version() {
    for v in versions(ApiKey::ApiVersions) {
        let mut w = Writer::new();
        api_versions::encode_response(&mut w, v, ferrite_protocol::errors::ErrorCode::None);
        let r: km::ApiVersionsResponse = theirs(w.as_slice(), v);
        assert_eq!(r.api_keys.len(), SUPPORTED.len());
        let produce = r.api_keys.iter().find(|k| k.api_key == 0).unwrap();
        assert_eq!((produce.min_version, produce.max_version), (3, 9));
        // The request side: v3 carries the client's name and version.
        let req = km::ApiVersionsRequest::default()
            .with_client_software_name(s("librdkafka"))
            .with_client_software_version(s("2.0.2"));
        let r = ours(18, v, &req);
        let RequestBody::ApiVersions(a) = &r.body else { panic!() };
        if v >= 3 {
            assert_eq!(a.client_software_name.as_deref(), Some("librdkafka"));
        }
    }
}

#[test]
fn metadata_round_trips() {
    for v in versions(ApiKey::Metadata) {
        let req = km::MetadataRequest::default()
            .with_topics(Some(vec![
                km::metadata_request::MetadataRequestTopic::default().with_name(Some(tn("orders")))
            ]))
            .with_allow_auto_topic_creation(v < 4);
        let r = ours(3, v, &req);
        let RequestBody::Metadata(m) = &r.body else { panic!() };
        assert_eq!(m.topics.as_ref().unwrap()[0].name.as_deref(), Some("orders"));
        assert_eq!(m.allow_auto_topic_creation, v < 4, "v{v}");
        if v >= 1 {
            let all = ours(3, v, &km::MetadataRequest::default().with_topics(None));
            let RequestBody::Metadata(m) = &all.body else { panic!() };
            assert_eq!(m.topics, None);
        }
        let resp = metadata::MetadataResponse {
            brokers: vec![metadata::BrokerEntry {
                node_id: 0,
                host: "h".into(),
                port: 9092,
                rack: None,
            }],
            cluster_id: Some("c".into()),
            controller_id: 0,
            topics: vec![metadata::TopicEntry {
                error: 0,
                name: Some("orders".into()),
                id: [7; 16],
                is_internal: false,
                partitions: vec![metadata::PartitionEntry {
                    error: 0,
                    index: 2,
                    leader: 0,
                    leader_epoch: 5,
                    replicas: vec![0],
                    isr: vec![0],
                    offline: vec![],
                }],
            }],
            cluster_authorized_operations: 8096,
            topic_authorized_operations: 3576,
        };
        let mut w = Writer::new();
        resp.encode(&mut w, v, v >= 9);
        let t: km::MetadataResponse = theirs(w.as_slice(), v);
        assert_eq!(t.brokers[0].port, 9092);
        assert_eq!(t.topics[0].name.as_ref().unwrap().0.as_str(), "orders");
        assert_eq!(t.topics[0].partitions[0].partition_index, 2);
        if v >= 7 {
            assert_eq!(t.topics[0].partitions[0].leader_epoch, 5);
        }
        if v >= 2 {
            assert_eq!(t.cluster_id.as_ref().unwrap().as_str(), "c");
        }
        if v >= 8 {
            assert_eq!(t.topics[0].topic_authorized_operations, 3576);
        }
        if (8..=10).contains(&v) {
            assert_eq!(t.cluster_authorized_operations, 8096);
        }
        if v >= 8 {
            let asked = km::MetadataRequest::default()
                .with_topics(None)
                .with_include_topic_authorized_operations(true)
                .with_include_cluster_authorized_operations(v <= 10);
            let RequestBody::Metadata(m) = &ours(3, v, &asked).body else {
                panic!()
            };
            assert!(m.include_topic_authorized_operations);
            assert_eq!(m.include_cluster_authorized_operations, v <= 10);
        }
    }
}

#[test]
fn produce_round_trips() {
    let records = Bytes::from_static(b"not parsed by the codec");
    for v in versions(ApiKey::Produce) {
        let req = km::ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(1500)
            .with_topic_data(vec![km::produce_request::TopicProduceData::default()
                .with_name(tn("orders"))
                .with_partition_data(vec![km::produce_request::PartitionProduceData::default()
                    .with_index(3)
                    .with_records(Some(records.clone()))])]);
        let r = ours(0, v, &req);
        let RequestBody::Produce(p) = &r.body else { panic!() };
        assert_eq!((p.acks, p.timeout_ms), (-1, 1500));
        assert_eq!(p.topics[0].name, "orders");
        assert_eq!(p.topics[0].partitions[0].records.as_ref(), Some(&records));
        let mut w = Writer::new();
        produce::encode_response(
            &mut w,
            v,
            v >= 9,
            &[produce::ProduceTopicResponse {
                name: "orders".into(),
                partitions: vec![produce::ProducePartitionResponse {
                    index: 3,
                    error: 0,
                    base_offset: Offset(42),
                    log_append_time_ms: TimestampMs(-1),
                    log_start_offset: Offset(0),
                    error_message: None,
                }],
            }],
        );
        let t: km::ProduceResponse = theirs(w.as_slice(), v);
        assert_eq!(t.responses[0].partition_responses[0].base_offset, 42);
    }
}

#[test]
fn fetch_round_trips_with_record_chunks() {
    for v in versions(ApiKey::Fetch) {
        let req = km::FetchRequest::default()
            .with_max_wait_ms(500)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_isolation_level(1)
            .with_session_id(if v >= 7 { 77 } else { 0 })
            .with_session_epoch(if v >= 7 { 3 } else { -1 })
            .with_topics(vec![km::fetch_request::FetchTopic::default()
                .with_topic(tn("orders"))
                .with_partitions(vec![km::fetch_request::FetchPartition::default()
                    .with_partition(1)
                    .with_fetch_offset(99)
                    .with_partition_max_bytes(4096)])])
            .with_forgotten_topics_data(if v >= 7 {
                vec![km::fetch_request::ForgottenTopic::default()
                    .with_topic(tn("gone"))
                    .with_partitions(vec![4, 5])]
            } else {
                vec![]
            });
        let r = ours(1, v, &req);
        let RequestBody::Fetch(f) = &r.body else { panic!() };
        assert_eq!(f.max_wait_ms, 500);
        assert_eq!(f.isolation, fetch::Isolation::ReadCommitted);
        if v >= 7 {
            assert_eq!((f.session_id, f.session_epoch), (77, 3));
            assert_eq!(f.forgotten, vec![("gone".to_string(), vec![4, 5])]);
        } else {
            assert_eq!((f.session_id, f.session_epoch), (0, -1), "no session before v7");
        }
        assert_eq!(f.topics[0].partitions[0].fetch_offset, Offset(99));
        assert_eq!(f.topics[0].partitions[0].partition_max_bytes, 4096);
        let mut b = ResponseBuilder::new();
        fetch::encode_response(
            &mut b,
            v,
            v >= 12,
            0,
            77,
            vec![fetch::FetchTopicResponse {
                topic: "orders".into(),
                partitions: vec![
                    fetch::FetchPartitionResponse {
                        index: 1,
                        error: 0,
                        high_watermark: Offset(100),
                        last_stable_offset: Offset(90),
                        log_start_offset: Offset(0),
                        aborted_transactions: Some(vec![(ProducerId(7), Offset(40)), (ProducerId(8), Offset(45))]),
                        records: vec![
                            Chunk::Bytes(Bytes::from_static(b"abc")),
                            Chunk::Bytes(Bytes::from_static(b"de")),
                        ],
                    },
                    fetch::FetchPartitionResponse {
                        index: 2,
                        error: 0,
                        high_watermark: Offset(0),
                        last_stable_offset: Offset(0),
                        log_start_offset: Offset(0),
                        aborted_transactions: None,
                        records: vec![],
                    },
                ],
            }],
        );
        let (chunks, total) = b.finish();
        let mut flat = Vec::new();
        for c in chunks {
            let Chunk::Bytes(b) = c else { panic!() };
            flat.extend_from_slice(&b);
        }
        assert_eq!(flat.len() as u64, total);
        let t: km::FetchResponse = theirs(&flat, v);
        let p = &t.responses[0].partitions;
        assert_eq!(p[0].records.as_deref(), Some(&b"abcde"[..]));
        assert_eq!(p[1].records.as_deref(), Some(&b""[..]), "empty, not null");
        assert_eq!(p[0].high_watermark, 100);
        assert_eq!(p[0].last_stable_offset, 90);
        let aborted: Vec<(i64, i64)> = p[0]
            .aborted_transactions
            .iter()
            .flatten()
            .map(|a| (a.producer_id.0, a.first_offset))
            .collect();
        assert_eq!(aborted, vec![(7, 40), (8, 45)]);
        assert!(p[1].aborted_transactions.is_none(), "null for read_uncommitted");
        if v >= 7 {
            assert_eq!(t.session_id, 77);
        }
    }
}

#[test]
fn list_offsets_round_trips() {
    for v in versions(ApiKey::ListOffsets) {
        let req = km::ListOffsetsRequest::default()
            .with_replica_id(km::BrokerId(-1))
            .with_topics(vec![km::list_offsets_request::ListOffsetsTopic::default()
                .with_name(tn("t"))
                .with_partitions(vec![km::list_offsets_request::ListOffsetsPartition::default(
                )
                .with_partition_index(4)
                .with_timestamp(-2)])]);
        let r = ours(2, v, &req);
        let RequestBody::ListOffsets(l) = &r.body else { panic!() };
        assert_eq!(l.topics[0].partitions[0].timestamp, -2);
        let mut w = Writer::new();
        list_offsets::encode_response(
            &mut w,
            v,
            v >= 6,
            &[list_offsets::ListOffsetsTopicResponse {
                name: "t".into(),
                partitions: vec![list_offsets::ListOffsetsPartitionResponse {
                    index: 4,
                    error: 0,
                    timestamp: TimestampMs(-1),
                    offset: Offset(17),
                    leader_epoch: LeaderEpoch(0),
                }],
            }],
        );
        let t: km::ListOffsetsResponse = theirs(w.as_slice(), v);
        assert_eq!(t.topics[0].partitions[0].offset, 17);
    }
}

#[test]
fn topic_admin_round_trips() {
    for v in versions(ApiKey::CreateTopics) {
        let req = km::CreateTopicsRequest::default()
            .with_timeout_ms(100)
            .with_topics(vec![km::create_topics_request::CreatableTopic::default()
                .with_name(tn("new"))
                .with_num_partitions(6)
                .with_replication_factor(1)
                .with_configs(vec![km::create_topics_request::CreatableTopicConfig::default()
                    .with_name(s("retention.ms"))
                    .with_value(Some(s("1000")))])]);
        let r = ours(19, v, &req);
        let RequestBody::CreateTopics(c) = &r.body else {
            panic!()
        };
        assert_eq!(c.topics[0].num_partitions, 6);
        assert_eq!(c.topics[0].configs[0].1.as_deref(), Some("1000"));
        let mut w = Writer::new();
        topics_admin::encode_create_topics(
            &mut w,
            v,
            v >= 5,
            &[topics_admin::CreatableTopicResult {
                name: "new".into(),
                topic_id: [1; 16],
                error: 36,
                error_message: Some("exists".into()),
                num_partitions: 6,
                replication_factor: 1,
            }],
        );
        let t: km::CreateTopicsResponse = theirs(w.as_slice(), v);
        assert_eq!(t.topics[0].error_code, 36);
        if v >= 5 {
            // The Java admin client streams over this list: never null.
            assert_eq!(t.topics[0].configs.as_ref().map(|c| c.len()), Some(0));
        }
    }
    for v in versions(ApiKey::DeleteTopics) {
        let req = if v >= 6 {
            km::DeleteTopicsRequest::default().with_topics(vec![
                km::delete_topics_request::DeleteTopicState::default().with_name(Some(tn("old")))
            ])
        } else {
            km::DeleteTopicsRequest::default().with_topic_names(vec![tn("old")])
        };
        let r = ours(20, v, &req);
        let RequestBody::DeleteTopics(d) = &r.body else {
            panic!()
        };
        assert_eq!(d.topics[0].0.as_deref(), Some("old"));
        let mut w = Writer::new();
        topics_admin::encode_delete_topics(
            &mut w,
            v,
            v >= 4,
            &[topics_admin::DeletableTopicResult {
                name: Some("old".into()),
                topic_id: [0; 16],
                error: 3,
                error_message: None,
            }],
        );
        let t: km::DeleteTopicsResponse = theirs(w.as_slice(), v);
        assert_eq!(t.responses[0].error_code, 3);
    }
    for v in versions(ApiKey::CreatePartitions) {
        let req = km::CreatePartitionsRequest::default().with_topics(vec![
            km::create_partitions_request::CreatePartitionsTopic::default()
                .with_name(tn("t"))
                .with_count(9),
        ]);
        let r = ours(37, v, &req);
        let RequestBody::CreatePartitions(c) = &r.body else {
            panic!()
        };
        assert_eq!(c.topics[0].count, 9);
        let mut w = Writer::new();
        topics_admin::encode_create_partitions(&mut w, v >= 2, &[("t".into(), 37, Some("no".into()))]);
        let t: km::CreatePartitionsResponse = theirs(w.as_slice(), v);
        assert_eq!(t.results[0].error_code, 37);
    }
}

#[test]
fn configs_and_cluster_round_trip() {
    for v in versions(ApiKey::DescribeConfigs) {
        let req = km::DescribeConfigsRequest::default().with_resources(vec![
            km::describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("t"))
                .with_configuration_keys(None),
        ]);
        let r = ours(32, v, &req);
        let RequestBody::DescribeConfigs(d) = &r.body else {
            panic!()
        };
        assert_eq!(d.resources[0].keys, None);
        let mut w = Writer::new();
        configs::encode_describe(
            &mut w,
            v,
            v >= 4,
            &[configs::DescribeConfigsResult {
                error: 0,
                error_message: None,
                resource_type: 2,
                name: "t".into(),
                configs: vec![configs::ConfigEntry {
                    name: "retention.ms".into(),
                    value: Some("5".into()),
                    read_only: false,
                    source: configs::ConfigSource::DynamicTopic,
                    is_sensitive: false,
                    synonyms: vec![
                        configs::ConfigSynonym {
                            name: "retention.ms".into(),
                            value: Some("5".into()),
                            source: configs::ConfigSource::DynamicTopic,
                        },
                        configs::ConfigSynonym {
                            name: "log.retention.ms".into(),
                            value: Some("604800000".into()),
                            source: configs::ConfigSource::Default,
                        },
                    ],
                    config_type: 5,
                    documentation: Some("how long".into()),
                }],
            }],
        );
        let t: km::DescribeConfigsResponse = theirs(w.as_slice(), v);
        let c = &t.results[0].configs[0];
        assert_eq!(c.value.as_ref().unwrap().as_str(), "5");
        assert_eq!(c.synonyms.len(), 2);
        assert_eq!(c.synonyms[1].name.as_str(), "log.retention.ms");
        assert_eq!(c.synonyms[1].source, 5);
        if v >= 3 {
            assert_eq!(c.documentation.as_ref().map(|d| d.as_str()), Some("how long"));
            assert_eq!(c.config_type, 5);
        }
    }
    for v in versions(ApiKey::AlterConfigs) {
        let req = km::AlterConfigsRequest::default()
            .with_resources(vec![km::alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("t"))
                .with_configs(vec![km::alter_configs_request::AlterableConfig::default()
                    .with_name(s("retention.ms"))
                    .with_value(Some(s("9")))])])
            .with_validate_only(true);
        let r = ours(33, v, &req);
        let RequestBody::AlterConfigs(a) = &r.body else {
            panic!()
        };
        assert_eq!(
            a.resources[0].2,
            vec![("retention.ms".to_string(), Some("9".to_string()))]
        );
        assert!(a.validate_only);
        let mut w = Writer::new();
        configs::encode_alter(&mut w, v >= 2, &[(40, Some("bad".into()), 2, "t".into())]);
        let t: km::AlterConfigsResponse = theirs(w.as_slice(), v);
        assert_eq!(t.responses[0].error_code, 40);
    }
    for v in versions(ApiKey::IncrementalAlterConfigs) {
        let req = km::IncrementalAlterConfigsRequest::default().with_resources(vec![
            km::incremental_alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("t"))
                .with_configs(vec![km::incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(s("retention.ms"))
                    .with_config_operation(0)
                    .with_value(Some(s("9")))]),
        ]);
        let r = ours(44, v, &req);
        let RequestBody::IncrementalAlterConfigs(a) = &r.body else {
            panic!()
        };
        assert_eq!(a.resources[0].configs[0].value.as_deref(), Some("9"));
        let mut w = Writer::new();
        configs::encode_alter(&mut w, v >= 1, &[(40, Some("bad".into()), 2, "t".into())]);
        let t: km::IncrementalAlterConfigsResponse = theirs(w.as_slice(), v);
        assert_eq!(t.responses[0].error_code, 40);
    }
    for v in versions(ApiKey::DescribeCluster) {
        let asked = km::DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
        let r = ours(60, v, &asked);
        assert!(matches!(
            r.body,
            RequestBody::DescribeCluster {
                include_cluster_authorized_operations: true
            }
        ));
        let mut w = Writer::new();
        let brokers = [metadata::BrokerEntry {
            node_id: 0,
            host: "h".into(),
            port: 1,
            rack: None,
        }];
        let description = describe_cluster::ClusterDescription {
            cluster_id: "cid",
            controller_id: 0,
            brokers: &brokers,
            authorized_operations: 8096,
        };
        describe_cluster::encode_response(&mut w, v, &description);
        let t: km::DescribeClusterResponse = theirs(w.as_slice(), v);
        assert_eq!(t.cluster_id.as_str(), "cid");
        assert_eq!(t.cluster_authorized_operations, 8096);
    }
}
