//! DeleteRecords against the `kafka-protocol` crate (a test oracle only),
//! at every version we speak: the oracle encodes a request and we decode
//! it; we encode a response and the oracle decodes it.

use bytes::BytesMut;
use ferrite_protocol::delete_records::{DeleteRecordsRequest, DeleteRecordsResponse, PartitionResult, VERSION_MAX};
use ferrite_protocol::topic_partitions::TopicPartitions;
use ferrite_protocol::wire::{Reader, Writer};
use kafka_protocol::messages as km;
use kafka_protocol::messages::delete_records_request as kreq;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

#[test]
fn requests_the_oracle_encodes_decode_and_responses_we_encode_decode_there() {
    let oracle_req = km::DeleteRecordsRequest::default()
        .with_timeout_ms(1234)
        .with_topics(vec![kreq::DeleteRecordsTopic::default()
            .with_name(km::TopicName(StrBytes::from_static_str("orders")))
            .with_partitions(vec![
                kreq::DeleteRecordsPartition::default()
                    .with_partition_index(3)
                    .with_offset(77),
                kreq::DeleteRecordsPartition::default()
                    .with_partition_index(5)
                    .with_offset(-1),
            ])]);
    let ours = DeleteRecordsResponse {
        topics: vec![TopicPartitions {
            topic: "orders".into(),
            partitions: vec![
                PartitionResult {
                    partition: 3,
                    low_watermark: 77,
                    error_code: 0,
                },
                PartitionResult {
                    partition: 5,
                    low_watermark: -1,
                    error_code: 1,
                },
            ],
        }],
    };
    for v in 0..=VERSION_MAX {
        let mut buf = BytesMut::new();
        oracle_req.encode(&mut buf, v).expect("oracle encodes");
        let mut r = Reader::new(buf.freeze());
        let req = DeleteRecordsRequest::decode(&mut r, v).expect("we decode");
        assert_eq!(r.remaining(), 0, "v{v}: bytes left");
        assert_eq!(req.timeout_ms, 1234);
        assert_eq!(req.topics[0].topic, "orders");
        let parts: Vec<(i32, i64)> = req.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition, p.offset))
            .collect();
        assert_eq!(parts, vec![(3, 77), (5, -1)], "v{v}");

        let mut w = Writer::new();
        ours.encode(&mut w, v);
        let mut bytes = w.into_bytes().freeze();
        let theirs = km::DeleteRecordsResponse::decode(&mut bytes, v).expect("the oracle decodes");
        assert!(bytes.is_empty(), "v{v}: bytes left");
        let got: Vec<(i32, i64, i16)> = theirs.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.low_watermark, p.error_code))
            .collect();
        assert_eq!(got, vec![(3, 77, 0), (5, -1, 1)], "v{v}");
    }
}
