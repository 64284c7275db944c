//! Bad input gets a clear answer — the Kafka error code, or a closed
//! connection for a malformed frame — the broker keeps serving other
//! clients, and no data changes.

mod common;

use bytes::Bytes;
use common::{s, Broker, Client};
use ferrite_engine::batch::build_batch;
use ferrite_engine::{Offset, TimestampMs};
use kafka_protocol::messages::{self as km, TopicName};

fn topic(name: &str) -> TopicName {
    TopicName(s(name))
}

fn batch(values: &[&[u8]]) -> Bytes {
    Bytes::from(build_batch(Offset(0), TimestampMs(1_700_000_000_000), values))
}

fn produce(name: &str, acks: i16, records: Bytes) -> km::ProduceRequest {
    km::ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![km::produce_request::TopicProduceData::default()
            .with_name(topic(name))
            .with_partition_data(vec![km::produce_request::PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])])
}

fn produce_error(c: &mut Client, name: &str, acks: i16, records: Bytes) -> i16 {
    let r = c.call(&produce(name, acks, records), 9);
    r.responses[0].partition_responses[0].error_code
}

fn create(c: &mut Client, name: &str, configs: &[(&str, &str)]) {
    let req = km::CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![km::create_topics_request::CreatableTopic::default()
            .with_name(topic(name))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        km::create_topics_request::CreatableTopicConfig::default()
                            .with_name(s(k))
                            .with_value(Some(s(v)))
                    })
                    .collect(),
            )]);
    let r = c.call(&req, 7);
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
}

fn latest(c: &mut Client, name: &str) -> i64 {
    let req = km::ListOffsetsRequest::default()
        .with_replica_id(km::BrokerId(-1))
        .with_topics(vec![km::list_offsets_request::ListOffsetsTopic::default()
            .with_name(topic(name))
            .with_partitions(vec![km::list_offsets_request::ListOffsetsPartition::default(
            )
            .with_partition_index(0)
            .with_timestamp(-1)])]);
    let r = c.call(&req, 7);
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

fn still_serves(b: &Broker) {
    let mut c = Client::connect(b.addr());
    let r = c.call(&km::ApiVersionsRequest::default(), 0);
    assert_eq!(r.error_code, 0);
}

/// A long-polling fetch naming a negative partition of a topic that does
/// not exist gets UNKNOWN_TOPIC_OR_PARTITION, and the broker goes on (a
/// fuzzed input like it panicked a shard once).
#[test]
fn a_fetch_for_a_negative_partition_gets_an_error() {
    let b = Broker::start(&[]);
    let mut c = Client::connect(b.addr());
    for partition in [-1, i32::MIN + 4] {
        let req = km::FetchRequest::default()
            .with_max_wait_ms(500)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_topics(vec![km::fetch_request::FetchTopic::default()
                .with_topic(topic("fuzz"))
                .with_partitions(vec![km::fetch_request::FetchPartition::default()
                    .with_partition(partition)
                    .with_partition_max_bytes(1 << 20)])]);
        let r = c.call(&req, 4);
        assert_eq!(r.responses[0].partitions[0].error_code, 3, "partition {partition}");
    }
    still_serves(&b);
}

#[test]
fn malformed_frames_close_the_connection_and_nothing_else() {
    let mut b = Broker::start(&["socket.request.max.bytes=1048576"]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        // Claims 2 MiB, over socket.request.max.bytes: refused before reading it.
        ("oversized", (2i32 << 20).to_be_bytes().to_vec()),
        ("negative size", (-5i32).to_be_bytes().to_vec()),
        (
            "shorter than a header",
            [4i32.to_be_bytes().to_vec(), vec![0, 18, 0, 0]].concat(),
        ),
        ("unknown api key", {
            let body = [999i16.to_be_bytes(), 0i16.to_be_bytes()].concat();
            let body = [body, 1i32.to_be_bytes().to_vec(), (-1i16).to_be_bytes().to_vec()].concat();
            [(body.len() as i32).to_be_bytes().to_vec(), body].concat()
        }),
        ("unknown metadata version", {
            let body = [3i16.to_be_bytes(), 99i16.to_be_bytes()].concat();
            let body = [body, 1i32.to_be_bytes().to_vec(), (-1i16).to_be_bytes().to_vec()].concat();
            [(body.len() as i32).to_be_bytes().to_vec(), body].concat()
        }),
        ("metadata claiming 2^31 topics", {
            let body = [3i16.to_be_bytes(), 1i16.to_be_bytes()].concat();
            let body = [
                body,
                1i32.to_be_bytes().to_vec(),
                (-1i16).to_be_bytes().to_vec(),
                i32::MAX.to_be_bytes().to_vec(),
            ]
            .concat();
            [(body.len() as i32).to_be_bytes().to_vec(), body].concat()
        }),
    ];
    for (name, bytes) in cases {
        let mut c = Client::connect(b.addr());
        c.send_raw(&bytes).unwrap();
        assert!(c.is_closed(), "{name}: connection left open");
        assert!(b.is_running(), "{name}: broker died");
        still_serves(&b);
    }
    // A truncated frame: the size promises more than ever arrives.
    let mut c = Client::connect(b.addr());
    let f = c.frame(&km::MetadataRequest::default().with_topics(None), 1);
    c.send_raw(&f[..f.len() - 3]).unwrap();
    c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(c.is_closed(), "truncated frame");
    still_serves(&b);
}

/// Pipelined frames are all answered, in order, however the bytes arrive:
/// split inside a size prefix, inside a header, or with a frame's end and
/// the next one's size in the same segment (the broker takes the next size
/// in with the read that ends a frame).
#[test]
fn pipelined_frames_split_anywhere_are_answered_in_order() {
    let b = Broker::start(&[]);
    let mut c = Client::connect(b.addr());
    c.stream.set_nodelay(true).unwrap();
    let frames = 8;
    let bytes: Vec<u8> = (0..frames)
        .flat_map(|_| c.frame(&km::MetadataRequest::default().with_topics(None), 1))
        .collect();
    let splits = [1, 2, 1, 5, 3, 13, 4, 7, 30];
    let mut at = 0;
    for (i, n) in splits.iter().cycle().enumerate() {
        if at == bytes.len() {
            break;
        }
        let end = (at + n).min(bytes.len());
        c.send_raw(&bytes[at..end]).unwrap();
        at = end;
        if i % 3 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    for expected in 1..=frames {
        let f = c.read_frame().expect("a response to every frame");
        let correlation = i32::from_be_bytes(f[..4].try_into().unwrap());
        assert_eq!(correlation, expected, "responses out of order");
    }
    // And all of them at once, in one write.
    let bytes: Vec<u8> = (0..frames)
        .flat_map(|_| c.frame(&km::MetadataRequest::default().with_topics(None), 1))
        .collect();
    c.send_raw(&bytes).unwrap();
    for expected in frames + 1..=2 * frames {
        let f = c.read_frame().expect("a response to every frame");
        assert_eq!(i32::from_be_bytes(f[..4].try_into().unwrap()), expected);
    }
    still_serves(&b);
}

#[test]
fn unsupported_api_versions_gets_our_ranges() {
    let b = Broker::start(&[]);
    let mut c = Client::connect(b.addr());
    let mut f = c.frame(&km::ApiVersionsRequest::default(), 0);
    f[6..8].copy_from_slice(&77i16.to_be_bytes()); // version 77
    c.send_raw(&f).unwrap();
    let r = c
        .response::<km::ApiVersionsRequest>(0)
        .expect("an answer, not a closed connection");
    assert_eq!(r.error_code, 35, "UNSUPPORTED_VERSION");
    let av = r.api_keys.iter().find(|k| k.api_key == 18).unwrap();
    assert_eq!((av.min_version, av.max_version), (0, 4));
}

#[test]
fn refused_produces_get_kafka_errors_and_append_nothing() {
    let b = Broker::start(&["auto.create.topics.enable=false"]);
    let mut c = Client::connect(b.addr());
    create(&mut c, "t", &[("max.message.bytes", "2000")]);
    assert_eq!(produce_error(&mut c, "t", 1, batch(&[b"ok"])), 0);
    let end = latest(&mut c, "t");
    assert_eq!(end, 1);

    let mut bad_crc = batch(&[b"hello"]).to_vec();
    let n = bad_crc.len();
    bad_crc[n - 1] ^= 1;
    assert_eq!(
        produce_error(&mut c, "t", 1, Bytes::from(bad_crc)),
        2,
        "CORRUPT_MESSAGE"
    );
    let big = vec![7u8; 5000];
    assert_eq!(produce_error(&mut c, "t", 1, batch(&[&big])), 10, "MESSAGE_TOO_LARGE");
    assert_eq!(
        produce_error(&mut c, "nope", 1, batch(&[b"x"])),
        3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    assert_eq!(
        produce_error(&mut c, "bad name!", 1, batch(&[b"x"])),
        17,
        "INVALID_TOPIC_EXCEPTION"
    );
    assert_eq!(
        produce_error(&mut c, "t", 2, batch(&[b"x"])),
        21,
        "INVALID_REQUIRED_ACKS"
    );
    let mut magic1 = batch(&[b"x"]).to_vec();
    magic1[16] = 1;
    assert_ne!(
        produce_error(&mut c, "t", 1, Bytes::from(magic1)),
        0,
        "old magic refused"
    );

    // Metadata for an invalid or unknown name.
    let r = c.call(
        &km::MetadataRequest::default().with_topics(Some(vec![
            km::metadata_request::MetadataRequestTopic::default().with_name(Some(topic("bad name!"))),
            km::metadata_request::MetadataRequestTopic::default().with_name(Some(topic("unknown"))),
        ])),
        12,
    );
    assert_eq!(r.topics[0].error_code, 17);
    assert_eq!(r.topics[1].error_code, 3);

    assert_eq!(latest(&mut c, "t"), end, "nothing was appended");
    still_serves(&b);
}

#[test]
fn a_failed_acks_0_produce_closes_the_connection() {
    let b = Broker::start(&["auto.create.topics.enable=false"]);
    let mut c = Client::connect(b.addr());
    // acks=0 gets no answer, so a refusal is signalled by closing.
    let f = c.frame(&produce("missing", 0, batch(&[b"x"])), 9);
    c.send_raw(&f).unwrap();
    assert!(c.is_closed(), "connection left open after a refused acks=0 produce");
    still_serves(&b);
}

#[test]
fn a_client_that_stops_reading_does_not_stall_other_fetches() {
    let mut b = Broker::start(&[]);
    let mut c = Client::connect(b.addr());
    create(&mut c, "big", &[]);
    let value = vec![9u8; 900];
    for _ in 0..400 {
        let values: Vec<&[u8]> = (0..32).map(|_| &value[..]).collect();
        assert_eq!(produce_error(&mut c, "big", 1, batch(&values)), 0);
    }
    // Restart so that fetches are served from the files (sendfile).
    b.stop();
    b.spawn();
    let fetch = |max: i32| {
        km::FetchRequest::default()
            .with_max_wait_ms(0)
            .with_max_bytes(max)
            .with_topics(vec![km::fetch_request::FetchTopic::default()
                .with_topic(topic("big"))
                .with_partitions(vec![
                    km::fetch_request::FetchPartition::default().with_partition_max_bytes(max)
                ])])
    };
    // Several stuck clients, so that every shard has one.
    let mut stuck = Vec::new();
    for _ in 0..6 {
        let mut s = Client::connect(b.addr());
        s.send(&fetch(50 << 20), 12);
        stuck.push(s);
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    for _ in 0..6 {
        let mut other = Client::connect(b.addr());
        let start = std::time::Instant::now();
        let r = other.call(&fetch(1 << 20), 12);
        assert_eq!(r.responses[0].partitions[0].error_code, 0);
        assert!(r.responses[0].partitions[0]
            .records
            .as_ref()
            .is_some_and(|x| !x.is_empty()));
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "a fetch waited {:?}",
            start.elapsed()
        );
    }
    drop(stuck);
}
