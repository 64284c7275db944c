//! The transaction codecs (txn_producer, txn_offset_commit,
//! write_txn_markers, txn_admin) against the `kafka-protocol` crate (a test
//! oracle only), at every version we speak that the oracle also speaks.
//!
//! Requests: the oracle encodes one in a frame, which `decode_frame` routes
//! and decodes to the value expected (the broker's side); we encode that
//! value and the oracle decodes it to its own (a client's or coordinator's
//! side). Responses: we encode one after its response header and the oracle
//! decodes both (the broker's side); the oracle encodes its value and we
//! decode it to ours (a client's or coordinator's side).

use std::fmt::Debug;

use bytes::{Bytes, BytesMut};
use ferrite_ids::{LeaderEpoch, Offset, ProducerId};
use ferrite_protocol::api::ApiKey;
use ferrite_protocol::describe_producers as dp;
use ferrite_protocol::group_offsets::{OffsetPartitionResult, OffsetTopicResult};
use ferrite_protocol::header::write_response_header;
use ferrite_protocol::request::{decode_frame, Decoded, FrameError, RequestBody};
use ferrite_protocol::topic_partitions::{PartitionError, TopicPartitions};
use ferrite_protocol::txn_admin::*;
use ferrite_protocol::txn_offset_commit::{
    TxnOffsetCommitPartition, TxnOffsetCommitRequest, TxnOffsetCommitResponse, TxnOffsetCommitTopic,
};
use ferrite_protocol::txn_producer::*;
use ferrite_protocol::wire::{Reader, WireResult, Writer};
use ferrite_protocol::{txn_offset_commit, txn_verify, write_txn_markers};
use kafka_protocol::messages as km;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, StrBytes};

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

fn tn(x: &str) -> km::TopicName {
    km::TopicName(s(x))
}

fn txn(x: &str) -> km::TransactionalId {
    km::TransactionalId(s(x))
}

fn pid(p: ProducerId) -> km::ProducerId {
    km::ProducerId(p.0)
}

fn since<T>(version: i16, from: i16, v: T, default: T) -> T {
    if version >= from {
        v
    } else {
        default
    }
}

/// `0..=max`, each of which the oracle speaks too.
fn versions<T: Message>(max: i16) -> std::ops::RangeInclusive<i16> {
    for v in 0..=max {
        assert!(T::VERSIONS.min <= v && v <= T::VERSIONS.max, "the oracle lacks v{v}");
    }
    0..=max
}

/// Our codecs behind one interface.
trait Codec: Sized + Clone + PartialEq + Debug {
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
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    write_txn_markers::WriteTxnMarkersRequest,
    write_txn_markers::WriteTxnMarkersResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    dp::DescribeProducersRequest,
    dp::DescribeProducersResponse,
    txn_verify::AddPartitionsToTxnBatch,
    txn_verify::AddPartitionsToTxnBatchResponse
);

/// The oracle's request, framed, decodes to `want`; ours decodes there to
/// `theirs`.
fn check_request<O, T>(api: ApiKey, v: i16, want: RequestBody, ours: &O, theirs: &T)
where
    O: Codec,
    T: Encodable + Decodable + HeaderVersion + PartialEq + Debug,
{
    let mut buf = BytesMut::new();
    km::RequestHeader::default()
        .with_request_api_key(api.support().code)
        .with_request_api_version(v)
        .with_correlation_id(77)
        .with_client_id(Some(s("oracle")))
        .encode(&mut buf, T::header_version(v))
        .unwrap();
    theirs.encode(&mut buf, v).unwrap();
    let decoded = decode_frame(buf.freeze()).unwrap_or_else(|e| panic!("{api:?} v{v}: {e}"));
    let Decoded::Request(r) = decoded else {
        panic!("{api:?} v{v}: {decoded:?}")
    };
    assert_eq!((r.api, r.header.correlation_id), (api, 77), "v{v}");
    assert_eq!(r.body, want, "{api:?} v{v}");

    let mut w = Writer::new();
    ours.enc(&mut w, v);
    let mut b = w.into_bytes().freeze();
    let back = T::decode(&mut b, v).unwrap_or_else(|e| panic!("{api:?} v{v}: {e}"));
    assert!(b.is_empty(), "{api:?} v{v}: {} bytes left", b.len());
    assert_eq!(&back, theirs, "{api:?} v{v}");
}

/// Ours, after its response header, decodes at the oracle to `theirs`; the
/// oracle's decodes here to `ours`.
fn check_response<O, T>(api: ApiKey, v: i16, ours: &O, theirs: &T)
where
    O: Codec,
    T: Encodable + Decodable + HeaderVersion + PartialEq + Debug,
{
    let mut w = Writer::new();
    write_response_header(&mut w, 78, api, api.support().is_flexible(v));
    ours.enc(&mut w, v);
    let mut b = w.into_bytes().freeze();
    let header = km::ResponseHeader::decode(&mut b, T::header_version(v)).unwrap();
    assert_eq!(header.correlation_id, 78, "{api:?} v{v}");
    let back = T::decode(&mut b, v).unwrap_or_else(|e| panic!("{api:?} v{v}: {e}"));
    assert!(b.is_empty(), "{api:?} v{v}: {} bytes left", b.len());
    assert_eq!(&back, theirs, "{api:?} v{v}");

    let mut buf = BytesMut::new();
    theirs.encode(&mut buf, v).unwrap();
    let mut r = Reader::new(buf.freeze());
    let back = O::dec(&mut r, v).unwrap_or_else(|e| panic!("{api:?} v{v}: {e}"));
    assert_eq!(r.remaining(), 0, "{api:?} v{v}");
    assert_eq!(&back, ours, "{api:?} v{v}");
}

fn indexes(topics: &[TopicPartitions<i32>]) -> Vec<(String, Vec<i32>)> {
    topics.iter().map(|t| (t.topic.clone(), t.partitions.clone())).collect()
}

fn errors(topic: &str, partitions: &[(i32, i16)]) -> TopicPartitions<PartitionError> {
    TopicPartitions {
        topic: topic.into(),
        partitions: partitions
            .iter()
            .map(|&(partition_index, error_code)| PartitionError {
                partition_index,
                error_code,
            })
            .collect(),
    }
}

#[test]
fn add_partitions_to_txn_matches_the_oracle() {
    use km::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
    use km::add_partitions_to_txn_response::{AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult};
    let ours = AddPartitionsToTxnRequest {
        transactional_id: "tx-1".into(),
        producer_id: ProducerId(4000),
        producer_epoch: 3,
        topics: vec![
            TopicPartitions {
                topic: "orders".into(),
                partitions: vec![0, 7],
            },
            TopicPartitions {
                topic: "été".into(),
                partitions: vec![2],
            },
        ],
    };
    let topics = indexes(&ours.topics).into_iter().map(|(name, partitions)| {
        AddPartitionsToTxnTopic::default()
            .with_name(tn(&name))
            .with_partitions(partitions)
    });
    let theirs = km::AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn("tx-1"))
        .with_v3_and_below_producer_id(pid(ours.producer_id))
        .with_v3_and_below_producer_epoch(3)
        .with_v3_and_below_topics(topics.collect());
    let resp = AddPartitionsToTxnResponse {
        throttle_time_ms: 12,
        results: vec![errors("orders", &[(0, 0), (7, 48)])],
    };
    let partition = |partition_index, partition_error_code| {
        AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(partition_index)
            .with_partition_error_code(partition_error_code)
    };
    let theirs_resp = km::AddPartitionsToTxnResponse::default()
        .with_throttle_time_ms(12)
        .with_results_by_topic_v3_and_below(vec![AddPartitionsToTxnTopicResult::default()
            .with_name(tn("orders"))
            .with_results_by_partition(vec![partition(0, 0), partition(7, 48)])]);
    for v in versions::<km::AddPartitionsToTxnRequest>(txn_verify::BATCHED_FROM - 1) {
        let want = RequestBody::AddPartitionsToTxn(ours.clone());
        check_request(ApiKey::AddPartitionsToTxn, v, want, &ours, &theirs);
        check_response(ApiKey::AddPartitionsToTxn, v, &resp, &theirs_resp);
    }
}

#[test]
fn add_offsets_to_txn_matches_the_oracle() {
    let ours = AddOffsetsToTxnRequest {
        transactional_id: "tx-1".into(),
        producer_id: ProducerId(4000),
        producer_epoch: 3,
        group_id: "payments".into(),
    };
    let theirs = km::AddOffsetsToTxnRequest::default()
        .with_transactional_id(txn("tx-1"))
        .with_producer_id(pid(ours.producer_id))
        .with_producer_epoch(3)
        .with_group_id(km::GroupId(s("payments")));
    let resp = AddOffsetsToTxnResponse {
        throttle_time_ms: 9,
        error_code: 53,
    };
    let theirs_resp = km::AddOffsetsToTxnResponse::default()
        .with_throttle_time_ms(9)
        .with_error_code(53);
    for v in versions::<km::AddOffsetsToTxnRequest>(ADD_OFFSETS_TO_TXN_VERSION_MAX) {
        let want = RequestBody::AddOffsetsToTxn(ours.clone());
        check_request(ApiKey::AddOffsetsToTxn, v, want, &ours, &theirs);
        check_response(ApiKey::AddOffsetsToTxn, v, &resp, &theirs_resp);
    }
}

#[test]
fn end_txn_matches_the_oracle() {
    for v in versions::<km::EndTxnRequest>(END_TXN_VERSION_MAX) {
        for committed in [true, false] {
            let ours = EndTxnRequest {
                transactional_id: "tx-1".into(),
                producer_id: ProducerId(4000),
                producer_epoch: 3,
                committed,
            };
            let theirs = km::EndTxnRequest::default()
                .with_transactional_id(txn("tx-1"))
                .with_producer_id(pid(ours.producer_id))
                .with_producer_epoch(3)
                .with_committed(committed);
            let want = RequestBody::EndTxn(ours.clone());
            check_request(ApiKey::EndTxn, v, want, &ours, &theirs);
        }
        let resp = EndTxnResponse {
            throttle_time_ms: 0,
            error_code: 47,
        };
        let theirs_resp = km::EndTxnResponse::default().with_error_code(47);
        check_response(ApiKey::EndTxn, v, &resp, &theirs_resp);
    }
}

fn markers_request() -> (write_txn_markers::WriteTxnMarkersRequest, km::WriteTxnMarkersRequest) {
    use km::write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic};
    use write_txn_markers::{WritableTxnMarker as Ours, WriteTxnMarkersRequest};
    let ours = WriteTxnMarkersRequest {
        markers: vec![
            Ours {
                producer_id: ProducerId(4000),
                producer_epoch: 3,
                transaction_result: true,
                topics: vec![
                    TopicPartitions {
                        topic: "orders".into(),
                        partitions: vec![0, 2],
                    },
                    TopicPartitions {
                        topic: "__consumer_offsets".into(),
                        partitions: vec![17],
                    },
                ],
                coordinator_epoch: 11,
            },
            Ours {
                producer_id: ProducerId(4001),
                producer_epoch: 0,
                transaction_result: false,
                topics: vec![TopicPartitions {
                    topic: "orders".into(),
                    partitions: vec![1],
                }],
                coordinator_epoch: 11,
            },
        ],
    };
    let markers = ours.markers.iter().map(|m| {
        let topics = indexes(&m.topics).into_iter().map(|(name, partitions)| {
            WritableTxnMarkerTopic::default()
                .with_name(tn(&name))
                .with_partition_indexes(partitions)
        });
        WritableTxnMarker::default()
            .with_producer_id(pid(m.producer_id))
            .with_producer_epoch(m.producer_epoch)
            .with_transaction_result(m.transaction_result)
            .with_topics(topics.collect())
            .with_coordinator_epoch(m.coordinator_epoch)
    });
    let theirs = km::WriteTxnMarkersRequest::default().with_markers(markers.collect());
    (ours, theirs)
}

fn markers_response() -> (write_txn_markers::WriteTxnMarkersResponse, km::WriteTxnMarkersResponse) {
    use km::write_txn_markers_response::{
        WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    };
    use write_txn_markers::{TxnMarkerResult, WriteTxnMarkersResponse};
    let ours = WriteTxnMarkersResponse {
        markers: vec![
            TxnMarkerResult {
                producer_id: ProducerId(4000),
                topics: vec![
                    errors("orders", &[(0, 0), (2, 6)]),
                    errors("__consumer_offsets", &[(17, 0)]),
                ],
            },
            TxnMarkerResult {
                producer_id: ProducerId(4001),
                topics: vec![errors("orders", &[(1, 3)])],
            },
        ],
    };
    let markers = ours.markers.iter().map(|m| {
        let topics = m.topics.iter().map(|t| {
            let partitions = t.partitions.iter().map(|p| {
                WritableTxnMarkerPartitionResult::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(p.error_code)
            });
            WritableTxnMarkerTopicResult::default()
                .with_name(tn(&t.topic))
                .with_partitions(partitions.collect())
        });
        WritableTxnMarkerResult::default()
            .with_producer_id(pid(m.producer_id))
            .with_topics(topics.collect())
    });
    let theirs = km::WriteTxnMarkersResponse::default().with_markers(markers.collect());
    (ours, theirs)
}

/// Both sides of both ends: a coordinator encodes the request and decodes
/// the answer, a partition leader the reverse. The oracle no longer speaks
/// v0 (removed in Kafka 4.0); its bytes are checked by the unit tests.
#[test]
fn write_txn_markers_matches_the_oracle() {
    let oracle_min = km::WriteTxnMarkersRequest::VERSIONS.min;
    assert_eq!(oracle_min, 1);
    let (ours, theirs) = markers_request();
    let (resp, theirs_resp) = markers_response();
    for v in oracle_min..=write_txn_markers::VERSION_MAX {
        let want = RequestBody::WriteTxnMarkers(ours.clone());
        check_request(ApiKey::WriteTxnMarkers, v, want, &ours, &theirs);
        check_response(ApiKey::WriteTxnMarkers, v, &resp, &theirs_resp);
    }
}

fn offset_commit_request(v: i16) -> (TxnOffsetCommitRequest, km::TxnOffsetCommitRequest) {
    use km::txn_offset_commit_request::{TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic};
    let partition = |partition_index, committed_metadata: Option<&str>| TxnOffsetCommitPartition {
        partition_index,
        committed_offset: Offset(42 + i64::from(partition_index)),
        committed_leader_epoch: LeaderEpoch(since(v, 2, 5, -1)),
        committed_metadata: committed_metadata.map(String::from),
    };
    let ours = TxnOffsetCommitRequest {
        transactional_id: "tx-1".into(),
        group_id: "payments".into(),
        producer_id: ProducerId(4000),
        producer_epoch: 3,
        generation_id: since(v, 3, 9, -1),
        member_id: since(v, 3, "m-1", "").into(),
        group_instance_id: since(v, 3, Some("i-1".into()), None),
        topics: vec![TxnOffsetCommitTopic {
            topic: "orders".into(),
            partitions: vec![partition(0, Some("meta")), partition(3, None)],
        }],
    };
    let partitions = ours.topics[0].partitions.iter().map(|p| {
        TxnOffsetCommitRequestPartition::default()
            .with_partition_index(p.partition_index)
            .with_committed_offset(p.committed_offset.0)
            .with_committed_leader_epoch(p.committed_leader_epoch.0)
            .with_committed_metadata(p.committed_metadata.as_deref().map(s))
    });
    let theirs = km::TxnOffsetCommitRequest::default()
        .with_transactional_id(txn("tx-1"))
        .with_group_id(km::GroupId(s("payments")))
        .with_producer_id(pid(ours.producer_id))
        .with_producer_epoch(3)
        .with_generation_id(ours.generation_id)
        .with_member_id(s(&ours.member_id))
        .with_group_instance_id(ours.group_instance_id.as_deref().map(s))
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(tn("orders"))
            .with_partitions(partitions.collect())]);
    (ours, theirs)
}

#[test]
fn txn_offset_commit_matches_the_oracle() {
    use km::txn_offset_commit_response::{TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic};
    let resp = TxnOffsetCommitResponse {
        throttle_time_ms: 3,
        topics: vec![OffsetTopicResult {
            topic: "orders".into(),
            partitions: vec![
                OffsetPartitionResult {
                    partition_index: 0,
                    error_code: 0,
                },
                OffsetPartitionResult {
                    partition_index: 3,
                    error_code: 90,
                },
            ],
        }],
    };
    let partition = |partition_index, error_code| {
        TxnOffsetCommitResponsePartition::default()
            .with_partition_index(partition_index)
            .with_error_code(error_code)
    };
    let theirs_resp = km::TxnOffsetCommitResponse::default()
        .with_throttle_time_ms(3)
        .with_topics(vec![TxnOffsetCommitResponseTopic::default()
            .with_name(tn("orders"))
            .with_partitions(vec![partition(0, 0), partition(3, 90)])]);
    for v in versions::<km::TxnOffsetCommitRequest>(txn_offset_commit::VERSION_MAX) {
        let (ours, theirs) = offset_commit_request(v);
        let want = RequestBody::TxnOffsetCommit(ours.clone());
        check_request(ApiKey::TxnOffsetCommit, v, want, &ours, &theirs);
        check_response(ApiKey::TxnOffsetCommit, v, &resp, &theirs_resp);
    }
}

fn description() -> (
    TransactionDescription,
    km::describe_transactions_response::TransactionState,
) {
    use km::describe_transactions_response::{TopicData, TransactionState};
    let ours = TransactionDescription {
        error_code: 0,
        transactional_id: "tx-1".into(),
        transaction_state: "Ongoing".into(),
        transaction_timeout_ms: 60_000,
        transaction_start_time_ms: 1_700_000_000_123,
        producer_id: ProducerId(4000),
        producer_epoch: 3,
        topics: vec![
            TopicPartitions {
                topic: "orders".into(),
                partitions: vec![0, 5],
            },
            TopicPartitions {
                topic: "été".into(),
                partitions: vec![1],
            },
        ],
    };
    let topics = indexes(&ours.topics)
        .into_iter()
        .map(|(name, partitions)| TopicData::default().with_topic(tn(&name)).with_partitions(partitions));
    let theirs = TransactionState::default()
        .with_error_code(0)
        .with_transactional_id(txn("tx-1"))
        .with_transaction_state(s("Ongoing"))
        .with_transaction_timeout_ms(60_000)
        .with_transaction_start_time_ms(1_700_000_000_123)
        .with_producer_id(pid(ours.producer_id))
        .with_producer_epoch(3)
        .with_topics(topics.collect());
    (ours, theirs)
}

#[test]
fn describe_transactions_matches_the_oracle() {
    use km::describe_transactions_response::TransactionState;
    let ours = DescribeTransactionsRequest {
        transactional_ids: vec!["tx-1".into(), "tx-missing".into()],
    };
    let theirs =
        km::DescribeTransactionsRequest::default().with_transactional_ids(vec![txn("tx-1"), txn("tx-missing")]);
    let (found, theirs_found) = description();
    let missing = TransactionDescription {
        error_code: 105,
        transactional_id: "tx-missing".into(),
        transaction_state: "".into(),
        transaction_timeout_ms: 0,
        transaction_start_time_ms: -1,
        producer_id: ProducerId::NONE,
        producer_epoch: -1,
        topics: vec![],
    };
    let theirs_missing = TransactionState::default()
        .with_error_code(105)
        .with_transactional_id(txn("tx-missing"))
        .with_transaction_state(s(""))
        .with_transaction_start_time_ms(-1)
        .with_producer_id(km::ProducerId(-1))
        .with_producer_epoch(-1);
    let resp = DescribeTransactionsResponse {
        throttle_time_ms: 4,
        transaction_states: vec![found, missing],
    };
    let theirs_resp = km::DescribeTransactionsResponse::default()
        .with_throttle_time_ms(4)
        .with_transaction_states(vec![theirs_found, theirs_missing]);
    for v in versions::<km::DescribeTransactionsRequest>(DESCRIBE_TRANSACTIONS_VERSION_MAX) {
        let want = RequestBody::DescribeTransactions(ours.clone());
        check_request(ApiKey::DescribeTransactions, v, want, &ours, &theirs);
        check_response(ApiKey::DescribeTransactions, v, &resp, &theirs_resp);
    }
}

#[test]
fn list_transactions_matches_the_oracle() {
    use km::list_transactions_response::TransactionState;
    let resp = ListTransactionsResponse {
        throttle_time_ms: 4,
        error_code: 0,
        unknown_state_filters: vec!["Weird".into()],
        transaction_states: vec![
            ListedTransaction {
                transactional_id: "tx-1".into(),
                producer_id: ProducerId(4000),
                transaction_state: "Ongoing".into(),
            },
            ListedTransaction {
                transactional_id: "tx-2".into(),
                producer_id: ProducerId(4001),
                transaction_state: "PrepareCommit".into(),
            },
        ],
    };
    let states = resp.transaction_states.iter().map(|t| {
        TransactionState::default()
            .with_transactional_id(txn(&t.transactional_id))
            .with_producer_id(pid(t.producer_id))
            .with_transaction_state(s(&t.transaction_state))
    });
    let theirs_resp = km::ListTransactionsResponse::default()
        .with_throttle_time_ms(4)
        .with_unknown_state_filters(vec![s("Weird")])
        .with_transaction_states(states.collect());
    for v in versions::<km::ListTransactionsRequest>(LIST_TRANSACTIONS_VERSION_MAX) {
        let ours = ListTransactionsRequest {
            state_filters: vec!["Ongoing".into(), "Weird".into()],
            producer_id_filters: vec![ProducerId(4000), ProducerId(7)],
            duration_filter: since(v, 1, 30_000, NO_DURATION_FILTER),
        };
        let theirs = km::ListTransactionsRequest::default()
            .with_state_filters(vec![s("Ongoing"), s("Weird")])
            .with_producer_id_filters(vec![km::ProducerId(4000), km::ProducerId(7)])
            .with_duration_filter(ours.duration_filter);
        let want = RequestBody::ListTransactions(ours.clone());
        check_request(ApiKey::ListTransactions, v, want, &ours, &theirs);
        check_response(ApiKey::ListTransactions, v, &resp, &theirs_resp);
    }
}

/// The versions past ours (KIP-890's batched AddPartitionsToTxn among them)
/// are refused at the header, before any body is read.
#[test]
fn versions_past_ours_are_unsupported() {
    let past = [(24, 5), (25, 4), (26, 4), (27, 2), (28, 4), (61, 1), (65, 1), (66, 2)];
    for (key, version) in past {
        let mut w = Writer::new();
        w.i16(key);
        w.i16(version);
        w.i32(1);
        w.nullable_string(false, Some("c"));
        let got = decode_frame(Bytes::from(w.into_bytes()));
        assert!(
            matches!(got, Err(FrameError::Unsupported { api_key, api_version })
                if (api_key, api_version) == (key, version)),
            "key {key} v{version}: {got:?}"
        );
    }
}

#[test]
fn describe_producers_matches_the_oracle() {
    use km::describe_producers_request::TopicRequest;
    use km::describe_producers_response::{PartitionResponse, ProducerState, TopicResponse};
    let ours = dp::DescribeProducersRequest {
        topics: vec![TopicPartitions {
            topic: "t".into(),
            partitions: vec![0, 3],
        }],
    };
    let theirs = km::DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(tn("t"))
        .with_partition_indexes(vec![0, 3])]);
    let producer = dp::ProducerDescription {
        producer_id: ProducerId(9),
        producer_epoch: 2,
        last_sequence: 40,
        last_timestamp: 1_700_000_000_000,
        coordinator_epoch: -1,
        current_txn_start_offset: 17,
    };
    let resp = dp::DescribeProducersResponse {
        throttle_time_ms: 1,
        topics: vec![TopicPartitions {
            topic: "t".into(),
            partitions: vec![
                dp::PartitionProducers {
                    partition_index: 0,
                    error_code: 0,
                    error_message: None,
                    active_producers: vec![producer],
                },
                dp::PartitionProducers {
                    partition_index: 3,
                    error_code: 6,
                    error_message: Some("not the leader".into()),
                    active_producers: vec![],
                },
            ],
        }],
    };
    let theirs_resp = km::DescribeProducersResponse::default()
        .with_throttle_time_ms(1)
        .with_topics(vec![TopicResponse::default().with_name(tn("t")).with_partitions(vec![
            PartitionResponse::default()
                .with_partition_index(0)
                .with_active_producers(vec![ProducerState::default()
                    .with_producer_id(km::ProducerId(9))
                    .with_producer_epoch(2)
                    .with_last_sequence(40)
                    .with_last_timestamp(1_700_000_000_000)
                    .with_coordinator_epoch(-1)
                    .with_current_txn_start_offset(17)]),
            PartitionResponse::default()
                .with_partition_index(3)
                .with_error_code(6)
                .with_error_message(Some(s("not the leader"))),
        ])]);
    for v in versions::<km::DescribeProducersRequest>(dp::VERSION_MAX) {
        let want = RequestBody::DescribeProducers(ours.clone());
        check_request(ApiKey::DescribeProducers, v, want, &ours, &theirs);
        check_response(ApiKey::DescribeProducers, v, &resp, &theirs_resp);
    }
}

#[test]
fn the_batched_add_partitions_to_txn_matches_the_oracle() {
    use km::add_partitions_to_txn_request::{AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction};
    use km::add_partitions_to_txn_response::{
        AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
    };
    let ours = txn_verify::AddPartitionsToTxnBatch {
        transactions: vec![txn_verify::TxnToVerify {
            transactional_id: "tx-1".into(),
            producer_id: ProducerId(4000),
            producer_epoch: 3,
            verify_only: true,
            topics: vec![TopicPartitions {
                topic: "orders".into(),
                partitions: vec![0, 7],
            }],
        }],
    };
    let theirs =
        km::AddPartitionsToTxnRequest::default().with_transactions(vec![AddPartitionsToTxnTransaction::default()
            .with_transactional_id(txn("tx-1"))
            .with_producer_id(pid(ProducerId(4000)))
            .with_producer_epoch(3)
            .with_verify_only(true)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(tn("orders"))
                .with_partitions(vec![0, 7])])]);
    let resp = txn_verify::AddPartitionsToTxnBatchResponse {
        throttle_time_ms: 0,
        error_code: 0,
        results: vec![txn_verify::TxnVerified {
            transactional_id: "tx-1".into(),
            topics: vec![errors("orders", &[(0, 0), (7, 48)])],
        }],
    };
    let partition = |partition_index, partition_error_code| {
        AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(partition_index)
            .with_partition_error_code(partition_error_code)
    };
    let theirs_resp =
        km::AddPartitionsToTxnResponse::default().with_results_by_transaction(vec![AddPartitionsToTxnResult::default(
        )
        .with_transactional_id(txn("tx-1"))
        .with_topic_results(vec![AddPartitionsToTxnTopicResult::default()
            .with_name(tn("orders"))
            .with_results_by_partition(vec![partition(0, 0), partition(7, 48)])])]);
    let v = txn_verify::BATCHED_FROM;
    let want = RequestBody::AddPartitionsToTxnBatch(ours.clone());
    check_request(ApiKey::AddPartitionsToTxn, v, want, &ours, &theirs);
    check_response(ApiKey::AddPartitionsToTxn, v, &resp, &theirs_resp);
}
