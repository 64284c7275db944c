//! Differential tests of the inter-broker RPC codecs against the
//! `kafka-protocol` crate (a test oracle only). It has OffsetForLeaderEpoch;
//! it has no LeaderAndIsr, UpdateMetadata, StopReplica or ControlledShutdown,
//! whose codecs are checked against hand-built bytes in their own files.
//!
//! Both directions, at every version we speak: the oracle encodes and we
//! decode, we encode and the oracle decodes, and the two values are equal.

use bytes::{Bytes, BytesMut};
use ferrite_ids::{BrokerId, LeaderEpoch, Offset};
use ferrite_protocol::offset_for_leader_epoch::{
    self as ofle, EpochEndOffset, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, OffsetForLeaderPartition,
    OffsetForLeaderTopic, OffsetForLeaderTopicResult,
};
use ferrite_protocol::wire::{Reader, Writer};
use kafka_protocol::messages as km;
use kafka_protocol::messages::offset_for_leader_epoch_request as kreq;
use kafka_protocol::messages::offset_for_leader_epoch_response as kresp;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use proptest::prelude::*;

fn to_oracle_request(r: &OffsetForLeaderEpochRequest) -> km::OffsetForLeaderEpochRequest {
    km::OffsetForLeaderEpochRequest::default()
        .with_replica_id(km::BrokerId(r.replica_id.0))
        .with_topics(
            r.topics
                .iter()
                .map(|t| {
                    kreq::OffsetForLeaderTopic::default()
                        .with_topic(km::TopicName(StrBytes::from_string(t.topic.clone())))
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    kreq::OffsetForLeaderPartition::default()
                                        .with_partition(p.partition)
                                        .with_current_leader_epoch(p.current_leader_epoch.0)
                                        .with_leader_epoch(p.leader_epoch.0)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

fn from_oracle_request(r: &km::OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochRequest {
    OffsetForLeaderEpochRequest {
        replica_id: BrokerId(r.replica_id.0),
        topics: r
            .topics
            .iter()
            .map(|t| OffsetForLeaderTopic {
                topic: t.topic.0.to_string(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| OffsetForLeaderPartition {
                        partition: p.partition,
                        current_leader_epoch: LeaderEpoch(p.current_leader_epoch),
                        leader_epoch: LeaderEpoch(p.leader_epoch),
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn to_oracle_response(r: &OffsetForLeaderEpochResponse) -> km::OffsetForLeaderEpochResponse {
    km::OffsetForLeaderEpochResponse::default()
        .with_throttle_time_ms(r.throttle_time_ms)
        .with_topics(
            r.topics
                .iter()
                .map(|t| {
                    kresp::OffsetForLeaderTopicResult::default()
                        .with_topic(km::TopicName(StrBytes::from_string(t.topic.clone())))
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    kresp::EpochEndOffset::default()
                                        .with_error_code(p.error_code)
                                        .with_partition(p.partition)
                                        .with_leader_epoch(p.leader_epoch.0)
                                        .with_end_offset(p.end_offset.0)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

fn from_oracle_response(r: &km::OffsetForLeaderEpochResponse) -> OffsetForLeaderEpochResponse {
    OffsetForLeaderEpochResponse {
        throttle_time_ms: r.throttle_time_ms,
        topics: r
            .topics
            .iter()
            .map(|t| OffsetForLeaderTopicResult {
                topic: t.topic.0.to_string(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| EpochEndOffset {
                        error_code: p.error_code,
                        partition: p.partition,
                        leader_epoch: LeaderEpoch(p.leader_epoch),
                        end_offset: Offset(p.end_offset),
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn oracle_encode<T: Encodable>(v: &T, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    v.encode(&mut buf, version).unwrap();
    buf.freeze()
}

fn oracle_decode<T: Decodable>(bytes: &[u8], version: i16) -> T {
    let mut b = Bytes::copy_from_slice(bytes);
    let v = T::decode(&mut b, version).unwrap_or_else(|e| panic!("v{version}: {e}"));
    assert_eq!(b.len(), 0, "v{version}: {} bytes left over", b.len());
    v
}

/// What a value looks like after a trip through `version`: v2 has no
/// replica_id, which decodes as the schema's default.
fn as_at_version(mut r: OffsetForLeaderEpochRequest, version: i16) -> OffsetForLeaderEpochRequest {
    if version < 3 {
        r.replica_id = ofle::DEBUG_REPLICA_ID;
    }
    r
}

fn check_request(req: &OffsetForLeaderEpochRequest) {
    for v in ofle::VERSION_MIN..=ofle::VERSION_MAX {
        let expected = as_at_version(req.clone(), v);
        // Theirs → ours.
        let bytes = oracle_encode(&to_oracle_request(req), v);
        let mut r = Reader::new(bytes.clone());
        let ours = OffsetForLeaderEpochRequest::decode(&mut r, v).unwrap_or_else(|e| panic!("v{v}: {e}"));
        assert_eq!(ours, expected, "v{v}");
        assert_eq!(r.remaining(), 0, "v{v}");
        // Ours → theirs, byte for byte the same.
        let mut w = Writer::new();
        req.encode(&mut w, v);
        assert_eq!(w.as_slice(), &bytes[..], "v{v}");
        let theirs: km::OffsetForLeaderEpochRequest = oracle_decode(w.as_slice(), v);
        assert_eq!(from_oracle_request(&theirs), expected, "v{v}");
    }
}

fn check_response(resp: &OffsetForLeaderEpochResponse) {
    for v in ofle::VERSION_MIN..=ofle::VERSION_MAX {
        let bytes = oracle_encode(&to_oracle_response(resp), v);
        let mut r = Reader::new(bytes.clone());
        let ours = OffsetForLeaderEpochResponse::decode(&mut r, v).unwrap_or_else(|e| panic!("v{v}: {e}"));
        assert_eq!(&ours, resp, "v{v}");
        assert_eq!(r.remaining(), 0, "v{v}");
        let mut w = Writer::new();
        resp.encode(&mut w, v);
        assert_eq!(w.as_slice(), &bytes[..], "v{v}");
        let theirs: km::OffsetForLeaderEpochResponse = oracle_decode(w.as_slice(), v);
        assert_eq!(&from_oracle_response(&theirs), resp, "v{v}");
    }
}

fn sample_request() -> OffsetForLeaderEpochRequest {
    OffsetForLeaderEpochRequest {
        replica_id: BrokerId(2),
        topics: vec![
            OffsetForLeaderTopic {
                topic: "orders".into(),
                partitions: vec![
                    OffsetForLeaderPartition {
                        partition: 0,
                        current_leader_epoch: LeaderEpoch(4),
                        leader_epoch: LeaderEpoch(3),
                    },
                    OffsetForLeaderPartition {
                        partition: 7,
                        current_leader_epoch: LeaderEpoch::NONE,
                        leader_epoch: LeaderEpoch(0),
                    },
                ],
            },
            OffsetForLeaderTopic {
                topic: "été".into(),
                partitions: vec![],
            },
        ],
    }
}

#[test]
fn offset_for_leader_epoch_request_matches_the_oracle() {
    check_request(&sample_request());
    check_request(&OffsetForLeaderEpochRequest {
        replica_id: ofle::CONSUMER_REPLICA_ID,
        topics: vec![],
    });
}

#[test]
fn offset_for_leader_epoch_response_matches_the_oracle() {
    check_response(&OffsetForLeaderEpochResponse {
        throttle_time_ms: 5,
        topics: vec![OffsetForLeaderTopicResult {
            topic: "orders".into(),
            partitions: vec![
                EpochEndOffset {
                    error_code: 0,
                    partition: 0,
                    leader_epoch: LeaderEpoch(3),
                    end_offset: Offset(1234),
                },
                EpochEndOffset {
                    error_code: 74, // FENCED_LEADER_EPOCH
                    partition: 7,
                    leader_epoch: LeaderEpoch::NONE,
                    end_offset: Offset(-1),
                },
            ],
        }],
    });
}

#[test]
fn unknown_tagged_fields_from_the_oracle_are_skipped() {
    let mut req = to_oracle_request(&sample_request())
        .with_unknown_tagged_field(9, Bytes::from_static(b"xyz"))
        .with_unknown_tagged_field(200, Bytes::from_static(b""));
    req.topics[0]
        .unknown_tagged_fields
        .insert(3, Bytes::from_static(b"\x01\x02"));
    req.topics[0].partitions[1]
        .unknown_tagged_fields
        .insert(1, Bytes::from_static(b"q"));
    let bytes = oracle_encode(&req, 4);
    let mut r = Reader::new(bytes);
    assert_eq!(
        OffsetForLeaderEpochRequest::decode(&mut r, 4).unwrap(),
        sample_request()
    );
    assert_eq!(r.remaining(), 0);
}

fn request_strategy() -> impl Strategy<Value = OffsetForLeaderEpochRequest> {
    let partition = (any::<i32>(), any::<i32>(), any::<i32>()).prop_map(|(partition, c, l)| OffsetForLeaderPartition {
        partition,
        current_leader_epoch: LeaderEpoch(c),
        leader_epoch: LeaderEpoch(l),
    });
    let topic = ("\\PC{0,8}", prop::collection::vec(partition, 0..4))
        .prop_map(|(topic, partitions)| OffsetForLeaderTopic { topic, partitions });
    (any::<i32>(), prop::collection::vec(topic, 0..4)).prop_map(|(id, topics)| OffsetForLeaderEpochRequest {
        replica_id: BrokerId(id),
        topics,
    })
}

fn response_strategy() -> impl Strategy<Value = OffsetForLeaderEpochResponse> {
    let partition =
        (any::<i16>(), any::<i32>(), any::<i32>(), any::<i64>()).prop_map(|(e, partition, l, o)| EpochEndOffset {
            error_code: e,
            partition,
            leader_epoch: LeaderEpoch(l),
            end_offset: Offset(o),
        });
    let topic = ("\\PC{0,8}", prop::collection::vec(partition, 0..4))
        .prop_map(|(topic, partitions)| OffsetForLeaderTopicResult { topic, partitions });
    (any::<i32>(), prop::collection::vec(topic, 0..4)).prop_map(|(throttle_time_ms, topics)| {
        OffsetForLeaderEpochResponse {
            throttle_time_ms,
            topics,
        }
    })
}

proptest! {
    #[test]
    fn arbitrary_requests_match_the_oracle(req in request_strategy()) {
        check_request(&req);
    }

    #[test]
    fn arbitrary_responses_match_the_oracle(resp in response_strategy()) {
        check_response(&resp);
    }
}
