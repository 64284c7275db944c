//! Prometheus metrics: recorded from every shard into the process-wide
//! recorder (`metrics` crate, atomics), rendered as Prometheus text on
//! `GET /metrics` at `--metrics-listen` (served by shard 0).
//!
//! | metric | kind | labels |
//! |---|---|---|
//! | `ferrite_bytes_in_total` | counter | topic — record-set bytes appended by produces |
//! | `ferrite_messages_in_total` | counter | topic — records appended |
//! | `ferrite_bytes_out_total` | counter | topic — record bytes returned by fetches |
//! | `ferrite_requests_total` | counter | api |
//! | `ferrite_request_duration_seconds` | histogram | api |
//! | `ferrite_connections_active` | gauge | shard — connections the shard serves |
//! | `ferrite_cross_shard_calls_total` | counter | — (work a connection's shard handed to the owning shard) |
//! | `ferrite_fetch_bytes_total` | counter | source — bytes fetches read from `memory` (the batch cache) or a `file` |
//! | `ferrite_partitions` | gauge | shard |
//! | `ferrite_log_size_bytes` | gauge | topic, partition |
//! | `ferrite_log_end_offset`, `ferrite_log_durable_offset`, `ferrite_log_start_offset` | gauge | topic, partition |
//! | `ferrite_partition_high_watermark`, `ferrite_partition_leader`, `ferrite_partition_isr_size` | gauge | topic, partition (cluster) |
//! | `ferrite_sasl_authentications_total` | counter | mechanism (`none` before a handshake), outcome — `ok`, `failed`, `closed` (by the client), `timed_out` |
//! | `ferrite_wall_clock_steps_total` | counter | — (the wall clock stepped a second or more against the monotonic one; `clock_watch.rs`) |
//! | `ferrite_fetch_file_sent_bytes_total`, `ferrite_fetch_read_ahead_bytes_total` | counter | path, outcome (`ferrite-transport`'s `metrics.rs`) |
//! | `ferrite_tls_handshakes_total` | counter | outcome — `ok`, `failed`, `timed_out` (`ferrite-transport`'s `metrics.rs`) |
//!
//! The per-partition gauges are read at scrape time (`partition_gauges`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::Duration;

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::shard::BrokerShard;
use ferrite_protocol::api::ApiKey;

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

const LATENCY_BUCKETS_S: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Installs the recorder (once per process).
pub fn install() {
    if HANDLE.get().is_some() {
        return;
    }
    let built = PrometheusBuilder::new()
        .set_buckets(LATENCY_BUCKETS_S)
        .and_then(|b| b.install_recorder());
    match built {
        Ok(h) => {
            let _ = HANDLE.set(h);
        }
        Err(e) => tracing::warn!(error = %e, "metrics recorder not installed"),
    }
}

pub fn render() -> String {
    HANDLE.get().map(|h| h.render()).unwrap_or_default()
}

/// Topics whose throughput counters a shard keeps at hand; past this many the
/// cache starts over (deleted topics would otherwise stay in it).
const TOPIC_HANDLES_MAX: usize = 4096;

thread_local! {
    /// Each shard looks a handle up in the shared registry once (a hash of
    /// the name and labels, a lock, label strings): then per request it
    /// only bumps the atomics.
    static API_HANDLES: RefCell<HashMap<ApiKey, (metrics::Counter, metrics::Histogram)>> =
        RefCell::new(HashMap::new());
    static TOPIC_HANDLES: RefCell<HashMap<String, TopicHandles>> =
        RefCell::new(HashMap::new());
    static CROSS_SHARD_CALLS: metrics::Counter = metrics::counter!("ferrite_cross_shard_calls_total");
    static FETCH_BYTES_MEMORY: metrics::Counter = metrics::counter!("ferrite_fetch_bytes_total", "source" => "memory");
    static FETCH_BYTES_FILE: metrics::Counter = metrics::counter!("ferrite_fetch_bytes_total", "source" => "file");
}

/// Where a fetch's bytes came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchSource {
    /// The partition's cache of recent batches.
    Memory,
    /// A segment file (page cache or disk).
    File,
}

/// Bytes a fetch (a consumer's or a follower's) read, by where from.
pub fn fetch_read(source: FetchSource, bytes: u64) {
    if bytes == 0 {
        return;
    }
    match source {
        FetchSource::Memory => FETCH_BYTES_MEMORY.with(|c| c.increment(bytes)),
        FetchSource::File => FETCH_BYTES_FILE.with(|c| c.increment(bytes)),
    }
}

pub fn request(api: ApiKey, seconds: f64) {
    API_HANDLES.with_borrow_mut(|handles| {
        let (count, duration) = handles.entry(api).or_insert_with(|| {
            (
                metrics::counter!("ferrite_requests_total", "api" => api.name()),
                metrics::histogram!("ferrite_request_duration_seconds", "api" => api.name()),
            )
        });
        count.increment(1);
        duration.record(seconds);
    });
}

/// A topic's throughput counters.
struct TopicHandles {
    bytes_in: metrics::Counter,
    messages_in: metrics::Counter,
    bytes_out: metrics::Counter,
}

fn with_topic(topic: &str, f: impl FnOnce(&TopicHandles)) {
    TOPIC_HANDLES.with_borrow_mut(|handles| {
        if let Some(known) = handles.get(topic) {
            return f(known);
        }
        if handles.len() >= TOPIC_HANDLES_MAX {
            handles.clear();
        }
        let label = topic.to_string();
        let made = TopicHandles {
            bytes_in: metrics::counter!("ferrite_bytes_in_total", "topic" => label.clone()),
            messages_in: metrics::counter!("ferrite_messages_in_total", "topic" => label.clone()),
            bytes_out: metrics::counter!("ferrite_bytes_out_total", "topic" => label),
        };
        f(&made);
        handles.insert(topic.to_string(), made);
    });
}

pub fn produced(topic: &str, bytes: usize, records: i64) {
    with_topic(topic, |h| {
        h.bytes_in.increment(bytes as u64);
        h.messages_in.increment(records.max(0) as u64);
    });
}

pub fn fetched(topic: &str, bytes: u64) {
    if bytes > 0 {
        with_topic(topic, |h| h.bytes_out.increment(bytes));
    }
}

/// A SASL authentication ended.
pub fn sasl_authentication(mechanism: &'static str, outcome: &'static str) {
    metrics::counter!("ferrite_sasl_authentications_total", "mechanism" => mechanism, "outcome" => outcome)
        .increment(1);
}

pub fn cross_shard_call() {
    CROSS_SHARD_CALLS.with(|c| c.increment(1));
}

/// A partition whose log could not be created (open files, disk space,
/// permissions): `ferrite_partitions_not_created_total`.
pub fn partition_not_created() {
    metrics::counter!("ferrite_partitions_not_created_total").increment(1);
}

pub fn connection_opened(shard: ferrite_engine::ShardId) {
    metrics::gauge!("ferrite_connections_active", "shard" => shard.0.to_string()).increment(1.0);
}

pub fn connection_closed(shard: ferrite_engine::ShardId) {
    metrics::gauge!("ferrite_connections_active", "shard" => shard.0.to_string()).decrement(1.0);
}

/// A fetch answered within a session (KIP-227), naming only what changed.
pub fn incremental_fetch() {
    metrics::counter!("ferrite_fetch_incremental_total").increment(1);
}

/// Every few seconds, the shard's gauges (partition gauges are read at
/// scrape time: `partition_gauges`).
pub async fn report_logs(shard: Rc<BrokerShard>) {
    while !shard.stopping.get() {
        let label = shard.id.0.to_string();
        metrics::gauge!("ferrite_partitions", "shard" => label.clone()).set(shard.logs.partition_count() as f64);
        let files = shard.logs.file_cache_stats();
        metrics::gauge!("ferrite_log_files_open", "shard" => label.clone()).set(files.open as f64);
        metrics::gauge!("ferrite_log_file_opens", "shard" => label.clone()).set(files.opens as f64);
        metrics::gauge!("ferrite_log_file_evictions", "shard" => label.clone()).set(files.evictions as f64);
        metrics::gauge!("ferrite_fetch_sessions", "shard" => label.clone()).set(shard.fetch_sessions.count() as f64);
        let scrub = shard.logs.scrub_stats();
        metrics::counter!("ferrite_scrub_verified_bytes_total", "shard" => label.clone())
            .absolute(scrub.bytes_verified);
        metrics::counter!("ferrite_scrub_damage_found_total", "shard" => label.clone()).absolute(scrub.damage_found);
        metrics::counter!("ferrite_scrub_passes_total", "shard" => label.clone()).absolute(scrub.passes);
        let clean = shard.logs.cleaner_stats();
        for (what, n) in [
            ("logs_cleaned", clean.logs_cleaned),
            ("bytes_read", clean.bytes_read),
            ("bytes_written", clean.bytes_written),
            ("records_removed", clean.records_removed),
            ("failures", clean.failures),
        ] {
            metrics::counter!(format!("ferrite_cleaner_{what}_total"), "shard" => label.clone()).absolute(n);
        }
        metrics::counter!("ferrite_follower_fetch_quiet_total", "shard" => label.clone())
            .absolute(shard.follower_views.quiet_answers());
        if let Some(replicas) = &shard.replicas {
            metrics::gauge!("ferrite_replica_fetchers", "shard" => label.clone())
                .set(replicas.fetchers.running() as f64);
            metrics::counter!("ferrite_follower_fetch_repeats_total", "shard" => label)
                .absolute(replicas.fetchers.repeats());
        }
        glommio::timer::sleep(Duration::from_secs(5)).await;
    }
}

/// Serves `GET /metrics` (anything else: 404) until the broker stops.
pub async fn serve(shard: Rc<BrokerShard>, listener: glommio::net::TcpListener) {
    loop {
        let seen = shard.stop_signal.generation();
        if shard.stopping.get() {
            return;
        }
        let accepted = futures_lite::future::or(async { Some(listener.accept().await) }, async {
            shard.stop_signal.changed_since(seen).await;
            None
        })
        .await;
        let Some(Ok(mut stream)) = accepted else {
            if accepted.is_none() {
                return;
            }
            continue;
        };
        let shard = shard.clone();
        glommio::spawn_local(async move {
            let mut buf = vec![0u8; 4096];
            let mut got = 0;
            // Read the request head (bounded), then answer and close.
            while got < buf.len() {
                match stream.read(&mut buf[got..]).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got += n,
                }
                if buf[..got].windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            let head = String::from_utf8_lossy(&buf[..got]);
            let ok = head.starts_with("GET /metrics ") || head.starts_with("GET /metrics?");
            let (status, body) = if ok {
                ("200 OK", render() + &crate::partition_gauges::render(&shard).await)
            } else {
                ("404 Not Found", "not found\n".to_string())
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.close().await;
        })
        .detach();
    }
}
