//! Prometheus text metrics on `GET /metrics`.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{s, Broker, Client};
use ferrite_engine::batch::build_batch;
use ferrite_engine::{Offset, TimestampMs};
use ferrite_testkit::free_port;
use kafka_protocol::messages::{self as km, TopicName};

fn scrape(port: u16) -> String {
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("metrics port");
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
    out
}

fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// `ferrite_connections_active` of shards 0 and 1 (the test brokers'
/// two), 0 for a shard that has not served a connection yet.
fn connections(text: &str) -> [f64; 2] {
    [0, 1].map(|shard| value(text, &format!("ferrite_connections_active{{shard=\"{shard}\"}}")).unwrap_or(0.0))
}

#[test]
fn metrics_count_traffic_requests_partitions_and_connections() {
    let metrics_port = free_port();
    let b = Broker::start(&[&format!("ferrite.metrics.listen=127.0.0.1:{metrics_port}")]);
    let mut c = Client::connect(b.addr());
    let batch = Bytes::from(build_batch(Offset(0), TimestampMs(0), &[b"one", b"two", b"three"]));
    let req = km::ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![km::produce_request::TopicProduceData::default()
            .with_name(TopicName(s("m")))
            .with_partition_data(vec![km::produce_request::PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch.clone()))])]);
    for _ in 0..4 {
        assert_eq!(c.call(&req, 9).responses[0].partition_responses[0].error_code, 0);
    }
    let fetch =
        km::FetchRequest::default()
            .with_max_bytes(1 << 20)
            .with_topics(vec![km::fetch_request::FetchTopic::default()
                .with_topic(TopicName(s("m")))
                .with_partitions(vec![
                    km::fetch_request::FetchPartition::default().with_partition_max_bytes(1 << 20)
                ])]);
    c.call(&fetch, 12);
    let text = scrape(metrics_port);
    assert_eq!(
        value(&text, "ferrite_messages_in_total{topic=\"m\"}"),
        Some(12.0),
        "{text}"
    );
    assert_eq!(
        value(&text, "ferrite_bytes_in_total{topic=\"m\"}"),
        Some(4.0 * batch.len() as f64)
    );
    assert_eq!(
        value(&text, "ferrite_bytes_out_total{topic=\"m\"}"),
        Some(4.0 * batch.len() as f64)
    );
    // The fetch read the tail from the partition's cache.
    assert_eq!(
        value(&text, "ferrite_fetch_bytes_total{source=\"memory\"}"),
        Some(4.0 * batch.len() as f64),
        "{text}"
    );
    assert_eq!(
        value(&text, "ferrite_fetch_bytes_total{source=\"file\"}"),
        None,
        "{text}"
    );
    assert_eq!(value(&text, "ferrite_requests_total{api=\"Produce\"}"), Some(4.0));
    assert!(
        text.contains("ferrite_request_duration_seconds_bucket{api=\"Produce\",le=\"0.001\"}"),
        "{text}"
    );
    assert!(connections(&text).iter().sum::<f64>() >= 1.0, "{text}");
    // Partition gauges are read when scraped: the first scrape has them.
    let text = scrape(metrics_port);
    assert_eq!(
        value(&text, "ferrite_log_end_offset{topic=\"m\",partition=\"0\"}"),
        Some(12.0),
        "{text}"
    );
    assert!(value(&text, "ferrite_log_size_bytes{topic=\"m\",partition=\"0\"}").is_some_and(|v| v > 0.0));
    let mut other = TcpStream::connect(("127.0.0.1", metrics_port)).unwrap();
    other.write_all(b"GET /nope HTTP/1.1\r\n\r\n").unwrap();
    let mut out = String::new();
    other.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 404"), "{out}");
    drop(c);
    // Restarted, the cache is empty: the same fetch reads the segment file.
    let mut b = b;
    b.stop();
    b.spawn();
    let mut c = Client::connect(b.addr());
    c.call(&fetch, 12);
    let text = scrape(metrics_port);
    assert_eq!(
        value(&text, "ferrite_fetch_bytes_total{source=\"file\"}"),
        Some(4.0 * batch.len() as f64),
        "{text}"
    );
}

#[test]
fn a_produce_to_partitions_on_both_shards_counts_its_cross_shard_hop() {
    // Two shards, two partitions: a topic's partitions go round-robin over
    // the shards, so whichever shard took the connection, one of the two
    // appends of each request is handed to the other shard.
    let metrics_port = free_port();
    let b = Broker::start(&[
        &format!("ferrite.metrics.listen=127.0.0.1:{metrics_port}"),
        "num.partitions=2",
    ]);
    let mut c = Client::connect(b.addr());
    let batch = Bytes::from(build_batch(Offset(0), TimestampMs(0), &[b"x"]));
    let part = |index| {
        km::produce_request::PartitionProduceData::default()
            .with_index(index)
            .with_records(Some(batch.clone()))
    };
    let req = km::ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![km::produce_request::TopicProduceData::default()
            .with_name(TopicName(s("hops")))
            .with_partition_data(vec![part(0), part(1)])]);
    let before = value(&scrape(metrics_port), "ferrite_cross_shard_calls_total").unwrap_or(0.0);
    for _ in 0..3 {
        let r = c.call(&req, 9);
        for p in &r.responses[0].partition_responses {
            assert_eq!(p.error_code, 0, "partition {}", p.index);
        }
    }
    let after = value(&scrape(metrics_port), "ferrite_cross_shard_calls_total").unwrap_or(0.0);
    assert!(after - before >= 3.0, "{before} -> {after}");
}

/// The kernel's SO_REUSEPORT hash alone would put eight connections 4-4 on
/// two shards only 27 % of the time; the accepting shard hands each to the
/// shard with the fewest.
#[test]
fn connections_are_spread_evenly_over_the_shards() {
    let metrics_port = free_port();
    let b = Broker::start(&[&format!("ferrite.metrics.listen=127.0.0.1:{metrics_port}")]);
    // The start-up probe's connection counts until its shard sees it close.
    let deadline = Instant::now() + Duration::from_secs(5);
    while connections(&scrape(metrics_port)).iter().sum::<f64>() > 0.0 {
        assert!(Instant::now() < deadline, "the start-up probe's connection stays open");
        std::thread::sleep(Duration::from_millis(20));
    }
    let req = km::ApiVersionsRequest::default();
    let mut clients = Vec::new();
    for _ in 0..8 {
        let mut c = Client::connect(b.addr());
        // An answer means the connection is being served, on its shard.
        assert_eq!(c.call(&req, 0).error_code, 0);
        clients.push(c);
    }
    let text = scrape(metrics_port);
    assert_eq!(connections(&text), [4.0, 4.0], "connections by shard\n{text}");
    drop(clients);
}

fn fetch_both(max_wait_ms: i32, offsets: [i64; 2]) -> km::FetchRequest {
    let part = |index: i32| {
        km::fetch_request::FetchPartition::default()
            .with_partition(index)
            .with_fetch_offset(offsets[index as usize])
            .with_partition_max_bytes(1 << 20)
    };
    km::FetchRequest::default()
        .with_replica_id(km::BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![km::fetch_request::FetchTopic::default()
            .with_topic(TopicName(s("waits")))
            .with_partitions(vec![part(0), part(1)])])
}

/// A long-polling fetch over partitions on both shards waits without
/// polling the other shard (a handful of cross-shard messages, not one
/// every few milliseconds), and an append on either shard wakes it at once.
#[test]
fn a_long_poll_across_shards_waits_on_signals_not_a_timer() {
    let metrics_port = free_port();
    let b = Broker::start(&[
        &format!("ferrite.metrics.listen=127.0.0.1:{metrics_port}"),
        "num.partitions=2",
    ]);
    let mut producer = Client::connect(b.addr());
    let batch = Bytes::from(build_batch(Offset(0), TimestampMs(0), &[b"x"]));
    let produce = |c: &mut Client, index: i32| {
        let req = km::ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![km::produce_request::TopicProduceData::default()
                .with_name(TopicName(s("waits")))
                .with_partition_data(vec![km::produce_request::PartitionProduceData::default()
                    .with_index(index)
                    .with_records(Some(batch.clone()))])]);
        let r = c.call(&req, 9);
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    };
    produce(&mut producer, 0);
    produce(&mut producer, 1);
    let mut consumer = Client::connect(b.addr());

    // Nothing new: the fetch waits its whole 1.5 s.
    let before = value(&scrape(metrics_port), "ferrite_cross_shard_calls_total").unwrap_or(0.0);
    let start = Instant::now();
    let r = consumer.call(&fetch_both(1500, [1, 1]), 11);
    let waited = start.elapsed();
    let after = value(&scrape(metrics_port), "ferrite_cross_shard_calls_total").unwrap_or(0.0);
    assert!(r.responses[0].partitions.iter().all(|p| p.error_code == 0));
    assert!(waited >= Duration::from_millis(1400), "answered after {waited:?}");
    assert!(
        after - before <= 10.0,
        "{} cross-shard calls during one idle long poll",
        after - before
    );

    // An append to either partition (one of them on the other shard)
    // ends a 10 s wait at once.
    for (index, offsets) in [(0, [1, 1]), (1, [2, 1])] {
        consumer.send(&fetch_both(10_000, offsets), 11);
        std::thread::sleep(Duration::from_millis(300));
        let start = Instant::now();
        produce(&mut producer, index);
        let r = consumer.response::<km::FetchRequest>(11).expect("fetch answered");
        let took = start.elapsed();
        assert!(
            took < Duration::from_secs(3),
            "woken after {took:?} by partition {index}"
        );
        let p = &r.responses[0].partitions[index as usize];
        assert!(
            p.records.as_ref().is_some_and(|b| !b.is_empty()),
            "partition {index}'s new record"
        );
    }
}

fn fetch_of(topic: &str, partitions: &[i32], max_wait_ms: i32) -> km::FetchRequest {
    let parts = partitions
        .iter()
        .map(|&index| {
            km::fetch_request::FetchPartition::default()
                .with_partition(index)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)
        })
        .collect();
    km::FetchRequest::default()
        .with_replica_id(km::BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(16 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![km::fetch_request::FetchTopic::default()
            .with_topic(TopicName(s(topic)))
            .with_partitions(parts)])
}

/// A fetch whose partitions all live on one other shard (what a follower's
/// fetcher sends) costs a constant number of cross-shard messages, not one
/// per partition: it runs on that shard whole.
#[test]
fn a_fetch_of_partitions_on_one_other_shard_crosses_once() {
    let metrics_port = free_port();
    let b = Broker::start(&[
        &format!("ferrite.metrics.listen=127.0.0.1:{metrics_port}"),
        "num.partitions=24",
    ]);
    let mut producer = Client::connect(b.addr());
    let batch = Bytes::from(build_batch(Offset(0), TimestampMs(0), &[b"x"]));
    for index in 0..24 {
        let req = km::ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![km::produce_request::TopicProduceData::default()
                .with_name(TopicName(s("spread")))
                .with_partition_data(vec![km::produce_request::PartitionProduceData::default()
                    .with_index(index)
                    .with_records(Some(batch.clone()))])]);
        let r = producer.call(&req, 9);
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0, "partition {index}");
    }
    // Every partition's gauges, from both shards, under one TYPE line each.
    let text = scrape(metrics_port);
    for index in 0..24 {
        let series = format!("ferrite_log_end_offset{{topic=\"spread\",partition=\"{index}\"}}");
        assert_eq!(value(&text, &series), Some(1.0), "{series}");
    }
    assert_eq!(text.matches("# TYPE ferrite_log_end_offset gauge").count(), 1);
    let calls = || value(&scrape(metrics_port), "ferrite_cross_shard_calls_total").unwrap_or(0.0);
    let mut consumer = Client::connect(b.addr());
    // Which partitions are on the other shard than this connection's: a
    // fetch of one of them alone crosses.
    let mut remote = Vec::new();
    for index in 0..24 {
        let before = calls();
        let r = consumer.call(&fetch_of("spread", &[index], 0), 11);
        assert_eq!(r.responses[0].partitions[0].error_code, 0);
        if calls() > before {
            remote.push(index);
        }
    }
    assert!(remote.len() >= 4, "only {remote:?} on the other shard");

    let before = calls();
    let r = consumer.call(&fetch_of("spread", &remote, 0), 11);
    let crossed = calls() - before;
    assert!(r.responses[0]
        .partitions
        .iter()
        .all(|p| p.error_code == 0 && p.records.as_ref().is_some_and(|b| !b.is_empty())));
    assert!(
        crossed <= 2.0,
        "{crossed} cross-shard calls for one fetch of {} partitions",
        remote.len()
    );

    // A long poll of them past their ends: still a handful.
    let mut waiting = fetch_of("spread", &remote, 800);
    for t in &mut waiting.topics {
        for p in &mut t.partitions {
            p.fetch_offset = 1;
        }
    }
    let before = calls();
    let r = consumer.call(&waiting, 11);
    let crossed = calls() - before;
    assert!(r.responses[0].partitions.iter().all(|p| p.error_code == 0));
    assert!(
        crossed <= 2.0,
        "{crossed} cross-shard calls for one long poll of {} partitions",
        remote.len()
    );
}

/// Drops the page-cache pages of every file in `dir` (they are clean).
fn evict_from_page_cache(dir: &std::path::Path) {
    use std::os::fd::AsRawFd;
    for entry in std::fs::read_dir(dir).expect("partition directory") {
        let file = std::fs::File::open(entry.expect("entry").path()).expect("open");
        // SAFETY: an advice call on an open descriptor.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(rc, 0, "posix_fadvise");
    }
}

/// Segments are written with O_DIRECT, so after a restart a backlog is not
/// in the page cache: its first read goes with O_DIRECT into memory
/// (`ferrite.fetch.cold.reads=direct`), a second through the page cache,
/// and both return the same bytes as the batch cache did before.
#[test]
fn a_cold_region_is_read_directly_once_then_through_the_page_cache() {
    let metrics_port = free_port();
    let mut b = Broker::start(&[&format!("ferrite.metrics.listen=127.0.0.1:{metrics_port}")]);
    let mut c = Client::connect(b.addr());
    // Batches of 100 KB: header reads cache a few pages of the region, not
    // all of it.
    produce_100kb_batches(&mut c, "cold", 6);
    let fetch_from = |offset: i64| {
        km::FetchRequest::default()
            .with_max_bytes(1 << 20)
            .with_topics(vec![km::fetch_request::FetchTopic::default()
                .with_topic(TopicName(s("cold")))
                .with_partitions(vec![km::fetch_request::FetchPartition::default()
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1 << 20)])])
    };
    let records = |c: &mut Client, offset: i64| {
        let r = c.call(&fetch_from(offset), 12);
        assert_eq!(r.responses[0].partitions[0].error_code, 0);
        r.responses[0].partitions[0].records.clone().unwrap_or_default()
    };
    let from_memory = records(&mut c, 0);
    assert!(from_memory.len() > 600_000, "{}", from_memory.len());
    drop(c);
    b.stop();
    b.spawn();
    // Opening the partition (at its first use) reads the segment's tail;
    // out of the page cache with it.
    let mut c = Client::connect(b.addr());
    assert!(records(&mut c, 6).is_empty());
    evict_from_page_cache(&b.data_dir().join("cold-0"));
    let sent = |path: &str| {
        let text = scrape(metrics_port);
        value(
            &text,
            &format!("ferrite_fetch_file_sent_bytes_total{{path=\"{path}\"}}"),
        )
        .unwrap_or(0.0)
    };
    let bytes = from_memory.len() as f64;
    let paths = || (sent("direct"), sent("sendfile"), sent("inline"));
    assert_eq!(records(&mut c, 0), from_memory, "read directly");
    assert_eq!(paths(), (bytes, 0.0, 0.0));
    assert_eq!(records(&mut c, 0), from_memory, "read again");
    assert_eq!(paths(), (bytes, bytes, 0.0), "through the page cache, on the pool");
    assert_eq!(records(&mut c, 0), from_memory, "and again");
    assert_eq!(paths(), (bytes, bytes, bytes), "from the page cache, on the shard");
}

#[test]
fn a_sequential_cold_reader_is_sent_what_was_read_ahead_for_it_unchanged() {
    let metrics_port = free_port();
    let mut b = Broker::start(&[&format!("ferrite.metrics.listen=127.0.0.1:{metrics_port}")]);
    let mut c = Client::connect(b.addr());
    let batches = 24u8;
    produce_100kb_batches(&mut c, "ahead", batches as u32);
    let records = |c: &mut Client, offset: i64, max: i32| {
        let r = c.call(
            &km::FetchRequest::default().with_max_bytes(8 << 20).with_topics(vec![
                km::fetch_request::FetchTopic::default()
                    .with_topic(TopicName(s("ahead")))
                    .with_partitions(vec![km::fetch_request::FetchPartition::default()
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(max)]),
            ]),
            12,
        );
        assert_eq!(r.responses[0].partitions[0].error_code, 0);
        r.responses[0].partitions[0].records.clone().unwrap_or_default()
    };
    let everything = records(&mut c, 0, 8 << 20);
    let batch_len = everything.len() / batches as usize;
    drop(c);
    b.stop();
    b.spawn();
    let mut c = Client::connect(b.addr());
    assert!(records(&mut c, batches as i64, 1 << 20).is_empty());
    evict_from_page_cache(&b.data_dir().join("ahead-0"));
    // A consumer reading three batches a fetch, each fetch from where the
    // last ended: the first is read when asked, the others were read ahead.
    let mut read = Vec::new();
    let mut offset = 0i64;
    while offset < batches as i64 {
        let got = records(&mut c, offset, (3 * batch_len + 100) as i32);
        assert_eq!(got.len(), 3 * batch_len, "at offset {offset}");
        read.extend_from_slice(&got);
        offset += 3;
    }
    assert!(read == everything[..], "the bytes read ahead are the log's");
    let text = scrape(metrics_port);
    let metric = |name: &str| value(&text, name).unwrap_or(0.0);
    let total = everything.len() as f64;
    assert_eq!(metric("ferrite_fetch_file_sent_bytes_total{path=\"direct\"}"), total);
    let used = metric("ferrite_fetch_read_ahead_bytes_total{outcome=\"used\"}");
    assert_eq!(
        used,
        total - (3 * batch_len) as f64,
        "all but the first fetch read ahead"
    );
}

#[test]
fn a_cached_region_sent_on_the_shard_reaches_a_slow_reader_whole() {
    let metrics_port = free_port();
    let mut b = Broker::start(&[&format!("ferrite.metrics.listen=127.0.0.1:{metrics_port}")]);
    let mut c = Client::connect(b.addr());
    // 24 MB: more than the socket buffers on both sides hold.
    let batches = 240u32;
    produce_100kb_batches(&mut c, "slow", batches);
    let fetch =
        km::FetchRequest::default()
            .with_max_bytes(32 << 20)
            .with_topics(vec![km::fetch_request::FetchTopic::default()
                .with_topic(TopicName(s("slow")))
                .with_partitions(vec![km::fetch_request::FetchPartition::default()
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(32 << 20)])]);
    let records = |r: km::FetchResponse| {
        assert_eq!(r.responses[0].partitions[0].error_code, 0);
        r.responses[0].partitions[0].records.clone().unwrap_or_default()
    };
    drop(c);
    b.stop();
    b.spawn();
    let mut c = Client::connect(b.addr());
    evict_from_page_cache(&b.data_dir().join("slow-0"));
    // Directly, then through the page cache (filling it).
    let first = records(c.call(&fetch, 12));
    assert!(first.len() > 23_000_000, "{}", first.len());
    assert_eq!(records(c.call(&fetch, 12)), first);
    // Now every page is cached: sent on the shard, to a reader that lets
    // the socket fill before it reads.
    c.send(&fetch, 12);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let third = records(c.response::<km::FetchRequest>(12).expect("a response"));
    assert!(third == first, "the slow reader got other bytes");
    let text = scrape(metrics_port);
    let inline = value(&text, "ferrite_fetch_file_sent_bytes_total{path=\"inline\"}").unwrap_or(0.0);
    assert_eq!(inline, first.len() as f64);
}

/// `count` batches of one 100 KB record each (batch `i` filled with
/// `i % 251`) to partition 0 of `topic`, acks=1.
fn produce_100kb_batches(c: &mut Client, topic: &str, count: u32) {
    for i in 0..count {
        let value = vec![(i % 251) as u8; 100_000];
        let batch = Bytes::from(build_batch(Offset(0), TimestampMs(0), &[&value]));
        let req = km::ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![km::produce_request::TopicProduceData::default()
                .with_name(TopicName(s(topic)))
                .with_partition_data(vec![km::produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch))])]);
        assert_eq!(c.call(&req, 9).responses[0].partition_responses[0].error_code, 0);
    }
}
