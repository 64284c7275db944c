//! `ferrite-bench partitions`: what a broker pays for its partition count.
//!
//! Starts its own broker (`ferrite standalone`), or a cluster of `ferrite
//! broker` processes on a ZooKeeper server it starts too, then:
//!
//! 1. `rss_idle_mib`: resident memory with no topics;
//! 2. `create_seconds`: creates `count` partitions over `topics` topics and
//!    waits until every one answers ListOffsets at its leader;
//! 3. `fill_seconds`, `rss_written_mib`: one batch to every partition;
//! 4. `baseline_records_per_sec`: a produce load on an 8-partition topic,
//!    then `records_per_sec`, `p99_ms` of the same load shape over all the
//!    partitions, and `throughput_ratio` of the two (same run, same shape);
//! 5. `rss_mib`, `open_fds`: after the load (the largest over the brokers);
//! 6. `idle_cpu_percent`: each broker's CPU share (percent of a core) over
//!    `--idle-seconds` without client traffic;
//! 7. standalone only: `restart_seconds` (SIGTERM, start, until every
//!    partition answers) and `restart_kill_seconds` (the same after
//!    SIGKILL);
//! 8. `accept_failures`: lines of the brokers' logs saying a connection
//!    could not be accepted (the target is none, at any point).
//!
//! Prints progress, then one JSON line with those figures.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ferrite_client::codec::{self, CREATE_TOPICS_V, LIST_OFFSETS_V, PRODUCE_V};
use ferrite_client::Connection;
use ferrite_testkit::zookeeper::ZooKeeper;

use crate::load::{self, LoadConfig, LoadResult};
use crate::procs::{cpu_percent, wait_for_brokers, BrokerProcess, Role};

#[derive(Clone, Debug)]
pub struct PartitionsConfig {
    /// The `ferrite` binary.
    pub ferrite: PathBuf,
    /// Where the brokers' data goes (a temporary directory under it).
    pub dir: PathBuf,
    pub count: i32,
    pub topics: i32,
    pub record_bytes: usize,
    pub batch_records: usize,
    pub request_partitions: usize,
    pub connections: usize,
    pub inflight: usize,
    /// Seconds of each produce load (the baseline and the full one).
    pub seconds: f64,
    /// Brokers: 1 runs `ferrite standalone`, more run a ZooKeeper cluster.
    pub brokers: usize,
    pub replication_factor: i16,
    pub idle_seconds: f64,
    /// Extra `server.properties` lines (`key=value`) for every broker.
    pub broker_config: Vec<String>,
}

/// How long a broker may take to create, or to reopen, every partition.
const SERVING_WAIT_MAX: Duration = Duration::from_secs(900);

/// Runs the benchmark; returns its JSON line.
pub fn run(cfg: &PartitionsConfig) -> Result<serde_json::Value, String> {
    if cfg.count < 1 || cfg.topics < 1 || cfg.topics > cfg.count {
        return Err(format!(
            "--count {} over --topics {}: need 1 ≤ topics ≤ count",
            cfg.count, cfg.topics
        ));
    }
    if cfg.replication_factor < 1 || cfg.replication_factor as usize > cfg.brokers {
        return Err(format!(
            "replication factor {} on {} brokers",
            cfg.replication_factor, cfg.brokers
        ));
    }
    std::fs::create_dir_all(&cfg.dir).map_err(|e| format!("{}: {e}", cfg.dir.display()))?;
    let work = tempfile::Builder::new()
        .prefix("partitions-")
        .tempdir_in(&cfg.dir)
        .map_err(|e| e.to_string())?;
    let kept = work.path().display().to_string();
    run_in(cfg, work.path()).map_err(|e| {
        let _ = work.keep();
        format!("{e} (broker data and logs kept in {kept})")
    })
}

fn run_in(cfg: &PartitionsConfig, work: &Path) -> Result<serde_json::Value, String> {
    let zk = (cfg.brokers > 1).then(ZooKeeper::standalone);
    let mut brokers = Vec::new();
    for i in 0..cfg.brokers {
        let role = match &zk {
            None => Role::Standalone,
            Some(zk) => Role::Clustered {
                id: i as i32 + 1,
                zookeeper: zk.connect_string(),
            },
        };
        let dir = work.join(format!("broker-{}", i + 1));
        let port = ferrite_testkit::free_port();
        brokers.push(
            BrokerProcess::start(&cfg.ferrite, &role, port, &dir, &cfg.broker_config).map_err(|e| e.to_string())?,
        );
    }
    let bootstrap = brokers[0].addr();
    wait_for_brokers(&bootstrap, cfg.brokers)?;
    std::thread::sleep(Duration::from_secs(2));
    let rss_idle = max_of(&brokers, BrokerProcess::rss_mib);
    println!("idle, no topics: {rss_idle:.1} MiB");

    let topics = topic_sizes(cfg);
    let start = Instant::now();
    create_topics(&bootstrap, &topics, cfg.replication_factor)?;
    wait_serving(&bootstrap, &topics)?;
    let create_seconds = start.elapsed().as_secs_f64();
    println!("{} partitions created and serving in {create_seconds:.1} s", cfg.count);

    let start = Instant::now();
    fill(&bootstrap, &topics, cfg)?;
    let fill_seconds = start.elapsed().as_secs_f64();
    let rss_written = max_of(&brokers, BrokerProcess::rss_mib);
    println!("one batch written to every partition in {fill_seconds:.1} s; {rss_written:.1} MiB");

    let baseline = produce(cfg, &bootstrap, &[("baseline-8".to_string(), 8)])?;
    println!("baseline, 8 partitions: {:.0} records/s", baseline.records_per_sec());
    let full = produce(cfg, &bootstrap, &topics)?;
    println!("{} partitions: {:.0} records/s", cfg.count, full.records_per_sec());
    let rss = max_of(&brokers, BrokerProcess::rss_mib);
    let open_fds = brokers.iter().map(BrokerProcess::open_fds).max().unwrap_or(0);

    std::thread::sleep(Duration::from_secs(3));
    let idle_cpu = cpu_percent(&brokers, Duration::from_secs_f64(cfg.idle_seconds));
    println!("idle CPU per broker over {} s: {idle_cpu:?} %", cfg.idle_seconds);

    let (restart, restart_kill) = if cfg.brokers == 1 {
        let clean = restart_timed(&mut brokers[0], true, &topics)?;
        println!("restart after SIGTERM: serving in {clean:.1} s");
        let killed = restart_timed(&mut brokers[0], false, &topics)?;
        println!("restart after SIGKILL: serving in {killed:.1} s");
        (Some(clean), Some(killed))
    } else {
        (None, None)
    };
    let accept_failures: usize = (1..=cfg.brokers)
        .map(|i| {
            let log = std::fs::read_to_string(work.join(format!("broker-{i}/broker.log"))).unwrap_or_default();
            log.lines().filter(|l| l.contains("accept failed")).count()
        })
        .sum();
    drop(brokers);
    let round = |v: f64, places: i32| (v * 10f64.powi(places)).round() / 10f64.powi(places);
    Ok(serde_json::json!({
        "bench": "partitions",
        "partitions": cfg.count,
        "topics": cfg.topics,
        "brokers": cfg.brokers,
        "replication_factor": cfg.replication_factor,
        "record_bytes": cfg.record_bytes,
        "batch_records": cfg.batch_records,
        "rss_idle_mib": round(rss_idle, 1),
        "create_seconds": round(create_seconds, 2),
        "fill_seconds": round(fill_seconds, 2),
        "rss_written_mib": round(rss_written, 1),
        "rss_mib": round(rss, 1),
        "open_fds": open_fds,
        "baseline_records_per_sec": baseline.records_per_sec().round(),
        "records_per_sec": full.records_per_sec().round(),
        "throughput_ratio": round(full.records_per_sec() / baseline.records_per_sec().max(1.0), 3),
        "p99_ms": round(full.ms(0.99), 2),
        "produce_errors": load::codes_json(&full.error_codes),
        "idle_cpu_percent": idle_cpu,
        "restart_seconds": restart.map(|s| round(s, 2)),
        "restart_kill_seconds": restart_kill.map(|s| round(s, 2)),
        "accept_failures": accept_failures,
    }))
}

fn max_of(brokers: &[BrokerProcess], f: impl Fn(&BrokerProcess) -> f64) -> f64 {
    brokers.iter().map(f).fold(0.0, f64::max)
}

/// The topics' names and partition counts: `count` dealt over `topics`.
fn topic_sizes(cfg: &PartitionsConfig) -> Vec<(String, i32)> {
    (0..cfg.topics)
        .map(|i| {
            let n = cfg.count / cfg.topics + i32::from(i < cfg.count % cfg.topics);
            (format!("partitions-{i}"), n)
        })
        .collect()
}

fn create_topics(bootstrap: &str, topics: &[(String, i32)], rf: i16) -> Result<(), String> {
    let mut c = Connection::connect(bootstrap, "ferrite-bench").map_err(|e| e.to_string())?;
    for (name, partitions) in topics {
        let mut r = c
            .call(19, CREATE_TOPICS_V, |w| {
                codec::create_topics(w, name, *partitions, rf, &[])
            })
            .map_err(|e| format!("create {name}: {e}"))?;
        for (name, code, msg) in codec::decode_create_topics(&mut r).map_err(|e| e.to_string())? {
            if code != 0 {
                return Err(format!("create {name}: error {code} {}", msg.unwrap_or_default()));
            }
        }
    }
    Ok(())
}

/// Partitions by topic, as ListOffsets and Produce name them.
type TopicPartitions = Vec<(String, Vec<i32>)>;

/// Every partition's leader address, by leader, from `bootstrap`'s
/// metadata; `None` while some partition has no leader (or the broker does
/// not answer).
fn by_leader(bootstrap: &str, topics: &[(String, i32)]) -> Option<BTreeMap<String, TopicPartitions>> {
    let mut c = Connection::connect(bootstrap, "ferrite-bench").ok()?;
    let names: Vec<String> = topics.iter().map(|(n, _)| n.clone()).collect();
    let mut r = c
        .call(3, codec::METADATA_V, |w| codec::metadata(w, Some(&names)))
        .ok()?;
    let m = codec::decode_metadata(&mut r).ok()?;
    let mut out: BTreeMap<String, TopicPartitions> = BTreeMap::new();
    for (name, count) in topics {
        let t = m.topics.iter().find(|t| &t.name == name)?;
        if t.partitions.len() != *count as usize {
            return None;
        }
        for p in &t.partitions {
            let b = m.brokers.iter().find(|b| b.id == p.leader)?;
            let list = out.entry(format!("{}:{}", b.host, b.port)).or_default();
            match list.iter_mut().find(|(n, _)| n == name) {
                Some((_, ps)) => ps.push(p.partition),
                None => list.push((name.clone(), vec![p.partition])),
            }
        }
    }
    Some(out)
}

/// Waits until every partition of `topics` answers ListOffsets without an
/// error at the leader the metadata names.
fn wait_serving(bootstrap: &str, topics: &[(String, i32)]) -> Result<(), String> {
    let deadline = Instant::now() + SERVING_WAIT_MAX;
    let total: i32 = topics.iter().map(|(_, n)| n).sum();
    let mut answered = 0;
    while Instant::now() < deadline {
        answered = by_leader(bootstrap, topics).map_or(0, |leaders| {
            leaders
                .iter()
                .map(|(addr, parts)| serving_at(addr, parts))
                .sum::<usize>()
        });
        if answered == total as usize {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!(
        "{answered} of {total} partitions serving after {SERVING_WAIT_MAX:?}"
    ))
}

/// How many of `parts` answer ListOffsets at `addr` without an error.
fn serving_at(addr: &str, parts: &TopicPartitions) -> usize {
    let Ok(mut c) = Connection::connect(addr, "ferrite-bench") else {
        return 0;
    };
    c.call(2, LIST_OFFSETS_V, |w| codec::list_offsets(w, -1, parts))
        .ok()
        .and_then(|mut r| codec::decode_list_offsets(&mut r).ok())
        .map_or(0, |listed| listed.iter().filter(|o| o.error == 0).count())
}

/// One batch to every partition, acks=1, many partitions per request.
fn fill(bootstrap: &str, topics: &[(String, i32)], cfg: &PartitionsConfig) -> Result<(), String> {
    let batch = crate::batch_template(cfg.batch_records, cfg.record_bytes);
    let per_request = ((4 << 20) / batch.len()).clamp(1, 1000);
    let leaders = by_leader(bootstrap, topics).ok_or("no leader for some partition")?;
    for (addr, parts) in leaders {
        let mut c = Connection::connect(&addr, "ferrite-bench").map_err(|e| format!("{addr}: {e}"))?;
        for (topic, partitions) in parts {
            for chunk in partitions.chunks(per_request) {
                let sets: Vec<(i32, &[u8])> = chunk.iter().map(|p| (*p, &batch[..])).collect();
                let mut r = c
                    .call(0, PRODUCE_V, |w| codec::produce_partitions(w, 1, 30_000, &topic, &sets))
                    .map_err(|e| format!("produce to {topic}: {e}"))?;
                let mut failed = None;
                codec::decode_produce_partitions(&mut r, |p, error, _| {
                    if error != 0 {
                        failed.get_or_insert((p, error));
                    }
                })
                .map_err(|e| e.to_string())?;
                if let Some((p, error)) = failed {
                    return Err(format!("produce to {topic}-{p}: error {error}"));
                }
            }
        }
    }
    Ok(())
}

/// The load on `topics` at once (each its own connections), summed.
fn produce(cfg: &PartitionsConfig, bootstrap: &str, topics: &[(String, i32)]) -> Result<LoadResult, String> {
    let connections = (cfg.connections / topics.len()).max(1);
    let loads: Vec<LoadConfig> = topics
        .iter()
        .map(|(topic, partitions)| LoadConfig {
            bootstrap: bootstrap.to_string(),
            topic: topic.clone(),
            partitions: *partitions,
            record_bytes: cfg.record_bytes,
            batch_records: cfg.batch_records,
            request_partitions: cfg.request_partitions,
            acks: 1,
            inflight: cfg.inflight,
            connections,
            duration: Duration::from_secs_f64(cfg.seconds),
            count: 0,
            rate: 0,
            linger: None,
            fetch_max_bytes: 1 << 20,
            replication_factor: cfg.replication_factor,
            topic_configs: Vec::new(),
        })
        .collect();
    let results: Vec<Result<LoadResult, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = loads
            .iter()
            .map(|l| s.spawn(move || load::produce(l).map_err(|e| format!("{}: {e}", l.topic))))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a load thread panicked".to_string())))
            .collect()
    });
    let mut sum: Option<LoadResult> = None;
    for r in results {
        let r = r?;
        sum = Some(match sum {
            None => r,
            Some(mut s) => {
                s.records += r.records;
                s.bytes += r.bytes;
                s.seconds = s.seconds.max(r.seconds);
                s.errors += r.errors;
                for (code, n) in r.error_codes {
                    *s.error_codes.entry(code).or_default() += n;
                }
                // Both come from load's histogram (same bounds): adding
                // cannot fail.
                s.latency.add(&r.latency).ok();
                s
            }
        });
    }
    sum.ok_or_else(|| "no topics".to_string())
}

/// Restarts `broker` (SIGTERM when `graceful`, else SIGKILL) and times it
/// until every partition answers again.
fn restart_timed(broker: &mut BrokerProcess, graceful: bool, topics: &[(String, i32)]) -> Result<f64, String> {
    let start = Instant::now();
    broker.restart(graceful).map_err(|e| e.to_string())?;
    let restarted = Instant::now();
    wait_serving(&broker.addr(), topics)?;
    let took = restarted.elapsed().as_secs_f64();
    if graceful {
        println!("  (stopped in {:.1} s)", (restarted - start).as_secs_f64());
    }
    Ok(took)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_dealt_over_topics_to_the_count() {
        let cfg = PartitionsConfig {
            ferrite: PathBuf::new(),
            dir: PathBuf::new(),
            count: 10_001,
            topics: 10,
            record_bytes: 100,
            batch_records: 1,
            request_partitions: 1,
            connections: 2,
            inflight: 1,
            seconds: 1.0,
            brokers: 1,
            replication_factor: 1,
            idle_seconds: 1.0,
            broker_config: Vec::new(),
        };
        let sizes = topic_sizes(&cfg);
        assert_eq!(sizes.len(), 10);
        assert_eq!(sizes.iter().map(|(_, n)| n).sum::<i32>(), 10_001);
        assert_eq!(sizes[0].1, 1001);
        assert_eq!(sizes[9].1, 1000);
    }
}
