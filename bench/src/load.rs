//! `ferrite-bench produce` and `consume`: a load generator with its own
//! pipelined Kafka client (Ferrite's client codec over blocking sockets, one
//! thread per connection).
//!
//! Latency is per record: from the moment the record was meant to be sent
//! to the moment its request was acknowledged. At `--rate 0` (as fast as
//! possible) a request's records are meant to be sent when it is sent. At
//! a fixed rate each record has its time in an open-loop schedule
//! ([`crate::schedule`]): a request leaves when its last record is due (or
//! `--linger-ms` after its first), responses are read by a thread of their
//! own, so the sender never waits for them, and a stall that delays later
//! sends is charged to them too (coordinated omission corrected).
//!
//! Before the clock starts, `produce` sends one unmeasured one-record batch
//! to each partition and retries it until the partition takes it
//! (`warm_up`), so a freshly created topic's start-up is not measured; those
//! records are in the topic beside the measured ones.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrite_client::codec::{self, CREATE_TOPICS_V, FETCH_V, PRODUCE_V};
use ferrite_client::{ClientError, Connection};
use ferrite_engine::batch::{self, Validation};
use hdrhistogram::Histogram;

use crate::schedule::{Planned, Schedule};

#[derive(Clone, Debug)]
pub struct LoadConfig {
    pub bootstrap: String,
    pub topic: String,
    pub partitions: i32,
    pub record_bytes: usize,
    pub batch_records: usize,
    /// Batches per produce request, each for another of the connection's
    /// partitions, taken in turn (at most as many as it serves; 0 = all of
    /// them, as the Java client puts every partition's ready batch for a
    /// broker into one request; librdkafka sends one partition per
    /// request, which is 1).
    pub request_partitions: usize,
    pub acks: i16,
    pub inflight: usize,
    pub connections: usize,
    /// Stop after this long, or after `count` records, whichever first.
    pub duration: Duration,
    pub count: u64,
    /// Records per second in all; 0 = as fast as possible.
    pub rate: u64,
    /// At a fixed rate, the longest a batch's first record waits for it to
    /// fill (`None`: batches are always whole).
    pub linger: Option<Duration>,
    pub fetch_max_bytes: i32,
    /// When the topic is created: its replication factor and configs.
    pub replication_factor: i16,
    pub topic_configs: Vec<(String, String)>,
}

#[derive(Debug)]
pub struct LoadResult {
    pub records: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub latency: Histogram<u64>,
    pub errors: u64,
    /// Kafka error code → answers that carried it.
    pub error_codes: std::collections::BTreeMap<i16, u64>,
    /// Records sent before the clock started (`warm_up`), not counted in
    /// `records`.
    pub warm_up_records: u64,
    /// Produce requests sent, and the batches they carried.
    pub requests: u64,
    pub batches: u64,
    /// Mean time a record waited for its batch to close (linger), in the
    /// latency (produce at a fixed rate).
    pub linger_ms_mean: f64,
    /// acks=0: the records the client sent; `records` (and the rate) are
    /// then what the broker appended, until it stopped appending.
    pub sent_records: Option<u64>,
}

impl LoadResult {
    pub fn records_per_sec(&self) -> f64 {
        self.records as f64 / self.seconds
    }

    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / self.seconds / 1e6
    }

    /// Microsecond histogram value at `q`, in milliseconds.
    pub fn ms(&self, q: f64) -> f64 {
        self.latency.value_at_quantile(q) as f64 / 1000.0
    }

    pub fn to_json(&self, mode: &str, cfg: &LoadConfig) -> serde_json::Value {
        let r2 = |x: f64| (x * 100.0).round() / 100.0;
        let mut json = serde_json::json!({
            "bench": mode,
            "topic": cfg.topic,
            "partitions": cfg.partitions,
            "record_bytes": cfg.record_bytes,
            "batch_records": cfg.batch_records,
            "acks": cfg.acks,
            "connections": cfg.connections,
            "inflight": cfg.inflight,
            "rate": cfg.rate,
            "records": self.records,
            "warm_up_records": self.warm_up_records,
            "errors": self.errors,
            "error_codes": codes_json(&self.error_codes),
            "seconds": r2(self.seconds),
            "records_per_sec": self.records_per_sec().round(),
            "mb_per_sec": r2(self.mb_per_sec()),
            "p50_ms": r2(self.ms(0.5)),
            "p99_ms": r2(self.ms(0.99)),
            "p999_ms": r2(self.ms(0.999)),
            "max_ms": r2(self.latency.max() as f64 / 1000.0),
        });
        if mode == "produce" {
            json["request_partitions"] = serde_json::json!(cfg.request_partitions);
            let per_request = self.batches as f64 / self.requests.max(1) as f64;
            json["batches_per_request"] = serde_json::json!(r2(per_request));
            json["linger_ms"] = serde_json::json!(cfg.linger.map(|l| r2(l.as_secs_f64() * 1e3)));
            json["linger_ms_mean"] = serde_json::json!((self.linger_ms_mean * 1000.0).round() / 1000.0);
            json["sent_records"] = serde_json::json!(self.sent_records);
        }
        json
    }
}

pub(crate) fn histogram() -> Histogram<u64> {
    // 1 µs to 10 min, 3 significant digits.
    Histogram::new_with_bounds(1, 600_000_000, 3).unwrap_or_else(|_| unreachable!())
}

/// Creates the topic if it does not exist.
pub fn ensure_topic(cfg: &LoadConfig) -> Result<(), ClientError> {
    let mut c = Connection::connect(&cfg.bootstrap, "ferrite-bench")?;
    let mut r = c.call(19, CREATE_TOPICS_V, |w| {
        codec::create_topics(
            w,
            &cfg.topic,
            cfg.partitions,
            cfg.replication_factor,
            &cfg.topic_configs,
        )
    })?;
    for (name, code, msg) in codec::decode_create_topics(&mut r)? {
        if code != 0 && code != 36 {
            return Err(ClientError::Kafka(format!(
                "create {name}: error {code} {}",
                msg.unwrap_or_default()
            )));
        }
    }
    Ok(())
}

pub(crate) struct Shared {
    pub(crate) records: AtomicU64,
    pub(crate) bytes: AtomicU64,
    /// Produce requests sent, and the batches in them.
    requests: AtomicU64,
    batches: AtomicU64,
    /// Records whose latency was recorded, and their waits for their
    /// batches to close (µs), summed.
    timed_records: AtomicU64,
    lingered_us: AtomicU64,
    stop: AtomicBool,
    /// How often each Kafka error code came back.
    error_codes: std::sync::Mutex<std::collections::BTreeMap<i16, u64>>,
}

impl Shared {
    fn note_error(&self, code: i16) {
        let mut codes = self.error_codes.lock().unwrap_or_else(|p| p.into_inner());
        *codes.entry(code).or_default() += 1;
    }
}

/// Prints one progress line per second until `stop`.
fn reporter(shared: Arc<Shared>, label: &'static str) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let (mut last_r, mut last_b) = (0, 0);
        while !shared.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_secs(1));
            let (r, b) = (
                shared.records.load(Ordering::Relaxed),
                shared.bytes.load(Ordering::Relaxed),
            );
            println!(
                "{label}: {} records/s, {:.1} MB/s",
                r - last_r,
                (b - last_b) as f64 / 1e6
            );
            (last_r, last_b) = (r, b);
        }
    })
}

pub(crate) fn run_threads<F>(cfg: &LoadConfig, label: &'static str, work: F) -> Result<LoadResult, ClientError>
where
    F: Fn(usize, &Shared) -> Result<(Histogram<u64>, u64), ClientError> + Send + Sync + 'static,
{
    let shared = Arc::new(Shared {
        records: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        requests: AtomicU64::new(0),
        batches: AtomicU64::new(0),
        timed_records: AtomicU64::new(0),
        lingered_us: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        error_codes: Default::default(),
    });
    let work = Arc::new(work);
    let report = reporter(shared.clone(), label);
    let start = Instant::now();
    let threads: Vec<_> = (0..cfg.connections.max(1))
        .map(|i| {
            let shared = shared.clone();
            let work = work.clone();
            std::thread::spawn(move || work(i, &shared))
        })
        .collect();
    let mut latency = histogram();
    let mut errors = 0;
    let mut first_error = None;
    for t in threads {
        match t.join() {
            Ok(Ok((h, e))) => {
                latency.add(h).ok();
                errors += e;
            }
            Ok(Err(e)) => first_error = first_error.or(Some(e)),
            Err(_) => first_error = first_error.or(Some(ClientError::Kafka("a load thread panicked".into()))),
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    shared.stop.store(true, Ordering::Relaxed);
    report.join().ok();
    if let Some(e) = first_error {
        return Err(e);
    }
    let error_codes = shared.error_codes.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(LoadResult {
        records: shared.records.load(Ordering::Relaxed),
        bytes: shared.bytes.load(Ordering::Relaxed),
        seconds,
        latency,
        errors,
        error_codes,
        warm_up_records: 0,
        requests: shared.requests.load(Ordering::Relaxed),
        batches: shared.batches.load(Ordering::Relaxed),
        linger_ms_mean: shared.lingered_us.load(Ordering::Relaxed) as f64
            / 1000.0
            / shared.timed_records.load(Ordering::Relaxed).max(1) as f64,
        sent_records: None,
    })
}

/// Error codes as a JSON object, code → count.
pub fn codes_json(codes: &std::collections::BTreeMap<i16, u64>) -> serde_json::Value {
    codes
        .iter()
        .map(|(c, n)| (c.to_string(), serde_json::json!(n)))
        .collect()
}

/// Partitions served by connection `i` of `n`.
fn partitions_of(i: usize, n: usize, partitions: i32) -> Vec<i32> {
    (0..partitions).filter(|p| *p as usize % n == i % n).collect()
}

/// Each partition's leader address, from the bootstrap broker's metadata
/// (waiting up to 10 s for every partition to have one). On a single
/// broker that is the bootstrap address itself.
pub fn leaders(cfg: &LoadConfig) -> Result<Vec<String>, ClientError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = Connection::connect(&cfg.bootstrap, "ferrite-bench")?;
        let topics = [cfg.topic.clone()];
        let mut r = c.call(3, codec::METADATA_V, |w| codec::metadata(w, Some(&topics)))?;
        let m = codec::decode_metadata(&mut r)?;
        let found = m.topics.iter().find(|t| t.name == cfg.topic).and_then(|t| {
            let mut out = vec![None; cfg.partitions.max(0) as usize];
            for p in &t.partitions {
                let b = m.brokers.iter().find(|b| b.id == p.leader)?;
                if let Some(slot) = out.get_mut(p.partition as usize) {
                    *slot = Some(format!("{}:{}", b.host, b.port));
                }
            }
            out.into_iter().collect::<Option<Vec<String>>>()
        });
        match found {
            Some(l) => return Ok(l),
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            None => {
                return Err(ClientError::Kafka(format!(
                    "{}: partitions without a leader",
                    cfg.topic
                )))
            }
        }
    }
}

/// What connection `i` of `n` serves: one leader's address and the
/// partitions it leads that fall to this connection. Connections are dealt
/// to leaders in turn, then a leader's partitions among its connections.
fn assignment(i: usize, n: usize, leaders: &[String]) -> Option<(String, Vec<i32>)> {
    let mut groups: Vec<(String, Vec<i32>)> = Vec::new();
    for (p, l) in leaders.iter().enumerate() {
        match groups.iter_mut().find(|(a, _)| a == l) {
            Some((_, ps)) => ps.push(p as i32),
            None => groups.push((l.clone(), vec![p as i32])),
        }
    }
    let g = groups.len().max(1);
    let (addr, parts) = groups.get(i % g)?.clone();
    let conns_here = (0..n).filter(|j| j % g == i % g).count().max(1);
    let k = i / g;
    let mine: Vec<i32> = parts
        .iter()
        .enumerate()
        .filter(|(j, _)| j % conns_here == k)
        .map(|(_, p)| *p)
        .collect();
    (!mine.is_empty()).then_some((addr, mine))
}

pub fn produce(cfg: &LoadConfig) -> Result<LoadResult, ClientError> {
    ensure_topic(cfg)?;
    let value = vec![b'x'; cfg.record_bytes];
    let per_conn_rate = cfg.rate as f64 / cfg.connections.max(1) as f64;
    let schedule = Schedule::new(per_conn_rate, cfg.linger);
    let cfg2 = cfg.clone();
    let (leaders, warm_up_records) = warm_up(cfg, &value)?;
    let appended_before = match cfg.acks {
        0 => Some(crate::appended::log_end_sum(&cfg.topic, &leaders)?),
        _ => None,
    };
    let watch = appended_before.map(|before| crate::appended::Watch::start(&cfg.topic, &leaders, before));
    let started = Instant::now();
    let deadline = started + cfg.duration;
    let per_conn_count = cfg.count.div_ceil(cfg.connections.max(1) as u64);
    let mut result = run_threads(cfg, "produce", move |i, shared| {
        let Some((addr, parts)) = assignment(i, cfg2.connections, &leaders) else {
            return Ok((histogram(), 0));
        };
        let k = batches_per_request(cfg2.request_partitions, parts.len());
        let batch_records = schedule.batch_records(cfg2.batch_records, k);
        let value = vec![b'x'; cfg2.record_bytes];
        let values: Vec<&[u8]> = (0..batch_records).map(|_| &value[..]).collect();
        let batch = Bytes::from(batch::build_batch(
            ferrite_engine::Offset(0),
            ferrite_engine::TimestampMs(0),
            &values,
        ));
        let conn = Connection::connect(&addr, "ferrite-bench")?;
        let run = ConnRun {
            cfg: &cfg2,
            parts: &parts,
            batch: &batch,
            batch_records,
            schedule,
            deadline,
            count: per_conn_count,
        };
        match (cfg2.acks, schedule.is_paced()) {
            (0, _) => run.unacknowledged(conn, shared),
            (_, true) => run.open_loop(conn, shared),
            (_, false) => run.closed_loop(conn, shared),
        }
    })?;
    result.warm_up_records = warm_up_records;
    if let (Some(before), Some(watch)) = (appended_before, watch) {
        // acks=0: what the broker appended, and by when, not what was sent.
        let (after, ended) = watch.finish(before, result.records)?;
        let appended = u64::try_from(after - before).unwrap_or(0);
        result.sent_records = Some(result.records);
        result.records = appended;
        result.bytes = appended * cfg.record_bytes as u64;
        result.seconds = ended.duration_since(started).as_secs_f64().max(1e-3);
    }
    Ok(result)
}

/// One connection's share of a produce run.
struct ConnRun<'a> {
    cfg: &'a LoadConfig,
    parts: &'a [i32],
    batch: &'a Bytes,
    batch_records: usize,
    schedule: Schedule,
    deadline: Instant,
    /// Records to send (0: no limit).
    count: u64,
}

impl ConnRun<'_> {
    /// Batches per request.
    fn k(&self) -> usize {
        batches_per_request(self.cfg.request_partitions, self.parts.len())
    }

    fn done(&self, records: u64) -> bool {
        Instant::now() >= self.deadline || (self.count > 0 && records >= self.count)
    }

    /// Waits until the request carrying records `records..` is due; its
    /// plan (`None`: it would be due past the run's end).
    fn wait_due(&self, start: Instant, records: u64) -> Option<Planned> {
        let n = (self.k() * self.batch_records) as u64;
        let plan = self.schedule.plan(records, n, start.elapsed());
        if start + plan.due > self.deadline {
            return None;
        }
        if let Some(wait) = (start + plan.due).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        Some(plan)
    }

    /// The partitions' batches of the request after `sent_batches`.
    fn sets(&self, sent_batches: u64) -> Vec<(i32, &[u8])> {
        (0..self.k())
            .map(|j| {
                (
                    self.parts[(sent_batches as usize + j) % self.parts.len()],
                    &self.batch[..],
                )
            })
            .collect()
    }

    fn send(&self, c: &mut ferrite_client::SendHalf, sent_batches: u64) -> Result<(), ClientError> {
        let sets = self.sets(sent_batches);
        c.send(0, PRODUCE_V, |w| {
            codec::produce_partitions(w, self.cfg.acks, 30_000, &self.cfg.topic, &sets)
        })?;
        Ok(())
    }

    /// Takes one produce answer to the request `plan` describes,
    /// acknowledged at `acked`: counts it, records its records' latencies.
    fn answered(
        &self,
        r: &mut ferrite_protocol::wire::Reader,
        (plan, acked): (Planned, Duration),
        (h, errors): (&mut Histogram<u64>, &mut u64),
        shared: &Shared,
    ) -> Result<(), ClientError> {
        let k = self.k();
        let (mut taken, mut answered) = (0u64, 0usize);
        codec::decode_produce_partitions(r, |_, error, _| {
            answered += 1;
            if error == 0 {
                taken += 1;
            } else {
                shared.note_error(error);
                *errors += 1;
            }
        })?;
        if answered != k {
            return Err(ClientError::Kafka(format!(
                "a produce response answered {answered} partitions of the {k} its request named"
            )));
        }
        let lingered = plan.record(acked, h);
        shared.timed_records.fetch_add(plan.records, Ordering::Relaxed);
        shared
            .lingered_us
            .fetch_add(lingered.as_micros() as u64, Ordering::Relaxed);
        let taken_records = taken * plan.records / k as u64;
        shared.records.fetch_add(taken_records, Ordering::Relaxed);
        shared
            .bytes
            .fetch_add(taken_records * self.cfg.record_bytes as u64, Ordering::Relaxed);
        Ok(())
    }

    /// As fast as possible: one thread sends while fewer than `inflight`
    /// requests are unanswered, and reads an answer otherwise (no schedule
    /// to keep, so no thread of its own for the answers: on two cores it
    /// would cost throughput).
    fn closed_loop(&self, mut c: Connection, shared: &Shared) -> Result<(Histogram<u64>, u64), ClientError> {
        let (mut h, mut errors) = (histogram(), 0u64);
        let start = Instant::now();
        let mut unanswered: std::collections::VecDeque<Planned> = Default::default();
        let (mut sent_batches, mut records) = (0u64, 0u64);
        let mut ended = false;
        loop {
            if !ended && !self.done(records) && unanswered.len() < self.cfg.inflight.max(1) {
                let Some(plan) = self.wait_due(start, records) else {
                    ended = true;
                    continue;
                };
                let sets = self.sets(sent_batches);
                c.send(0, PRODUCE_V, |w| {
                    codec::produce_partitions(w, self.cfg.acks, 30_000, &self.cfg.topic, &sets)
                })?;
                sent_batches += self.k() as u64;
                records += plan.records;
                shared.requests.fetch_add(1, Ordering::Relaxed);
                shared.batches.fetch_add(self.k() as u64, Ordering::Relaxed);
                unanswered.push_back(plan);
                continue;
            }
            let Some(plan) = unanswered.pop_front() else {
                break;
            };
            let mut r = c.recv()?;
            self.answered(&mut r, (plan, start.elapsed()), (&mut h, &mut errors), shared)?;
        }
        Ok((h, errors))
    }

    /// acks=0: records count once sent; no latency.
    fn unacknowledged(&self, conn: Connection, shared: &Shared) -> Result<(Histogram<u64>, u64), ClientError> {
        let (mut c, _answers) = conn.split()?;
        let start = Instant::now();
        let (mut sent_batches, mut records) = (0u64, 0u64);
        let per_request = (self.k() * self.batch_records) as u64;
        while !self.done(records) {
            if self.wait_due(start, records).is_none() {
                break;
            }
            self.send(&mut c, sent_batches)?;
            sent_batches += self.k() as u64;
            records += per_request;
            shared.requests.fetch_add(1, Ordering::Relaxed);
            shared.batches.fetch_add(self.k() as u64, Ordering::Relaxed);
            shared.records.fetch_add(per_request, Ordering::Relaxed);
            shared
                .bytes
                .fetch_add(per_request * self.cfg.record_bytes as u64, Ordering::Relaxed);
        }
        Ok((histogram(), 0))
    }

    /// At a fixed rate: the sender keeps to the schedule, at most
    /// `inflight` requests unanswered; a thread of its own reads the
    /// answers and records each record's latency, so an answer is never
    /// left waiting while the sender sleeps to its next request.
    fn open_loop(&self, conn: Connection, shared: &Shared) -> Result<(Histogram<u64>, u64), ClientError> {
        let (mut c, mut answers) = conn.split()?;
        let inflight = self.cfg.inflight.max(1);
        let (permits_tx, permits_rx) = std::sync::mpsc::sync_channel::<()>(inflight);
        for _ in 0..inflight {
            let _ = permits_tx.send(());
        }
        let (planned_tx, planned_rx) = std::sync::mpsc::channel::<Planned>();
        let start = Instant::now();
        let k = self.k();
        std::thread::scope(|scope| {
            let reader = scope.spawn(move || -> Result<(Histogram<u64>, u64), ClientError> {
                let (mut h, mut errors) = (histogram(), 0u64);
                while let Ok(plan) = planned_rx.recv() {
                    let mut r = answers.recv()?;
                    self.answered(&mut r, (plan, start.elapsed()), (&mut h, &mut errors), shared)?;
                    let _ = permits_tx.send(());
                }
                Ok((h, errors))
            });
            let sent = (|| -> Result<(), ClientError> {
                let (mut sent_batches, mut records) = (0u64, 0u64);
                while !self.done(records) {
                    let Some(plan) = self.wait_due(start, records) else {
                        break;
                    };
                    if permits_rx.recv().is_err() {
                        break; // the reader ended (its error is reported)
                    }
                    self.send(&mut c, sent_batches)?;
                    sent_batches += k as u64;
                    records += plan.records;
                    shared.requests.fetch_add(1, Ordering::Relaxed);
                    shared.batches.fetch_add(k as u64, Ordering::Relaxed);
                    if planned_tx.send(plan).is_err() {
                        break;
                    }
                }
                Ok(())
            })();
            drop(planned_tx);
            let read = reader
                .join()
                .unwrap_or_else(|_| Err(ClientError::Kafka("the response reader panicked".into())));
            sent.and(read)
        })
    }
}

/// Batches in each produce request of a connection serving `served`
/// partitions.
fn batches_per_request(request_partitions: usize, served: usize) -> usize {
    match request_partitions {
        0 => served,
        k => k.min(served),
    }
    .max(1)
}

/// Answers a fresh topic gives before its leader knows it, which mean
/// "ask the metadata again": UNKNOWN_TOPIC_OR_PARTITION,
/// LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER.
const WARM_UP_LEADER_UNKNOWN: [i16; 3] = [3, 5, 6];
/// NOT_ENOUGH_REPLICAS: refused before the append, so safe to retry. (Not
/// REQUEST_TIMED_OUT: Ferrite sends it after appending, and a retry would
/// append the record twice.)
const WARM_UP_ISR_SHORT: i16 = 19;
/// How long the warm-up waits for every partition to take a batch.
const WARM_UP_WAIT: Duration = Duration::from_secs(20);

/// Before the clock starts: one unmeasured one-record batch to each
/// partition's leader, with the run's acks (acks=1 for an acks=0 run),
/// retried until it is taken. A topic created a moment ago refuses
/// produces until its leader has heard of it, and at acks=all the first
/// answer also waits for the followers' first fetch; neither belongs in
/// the figures. A refusal that names the leader as unknown re-reads the
/// metadata. Returns the leaders that took the batches, and the records
/// sent (one per partition).
fn warm_up(cfg: &LoadConfig, value: &[u8]) -> Result<(Vec<String>, u64), ClientError> {
    let batch = batch::build_batch(ferrite_engine::Offset(0), ferrite_engine::TimestampMs(0), &[value]);
    let acks = if cfg.acks == 0 { 1 } else { cfg.acks };
    let deadline = Instant::now() + WARM_UP_WAIT;
    let mut leaders = leaders(cfg)?;
    let mut conns: Vec<(String, Connection)> = Vec::new();
    let mut p = 0;
    while p < leaders.len() {
        let addr = &leaders[p];
        let c = match conns.iter().position(|(a, _)| a == addr) {
            Some(i) => i,
            None => {
                conns.push((addr.clone(), Connection::connect(addr, "ferrite-bench")?));
                conns.len() - 1
            }
        };
        let mut r = conns[c].1.call(0, PRODUCE_V, |w| {
            codec::produce(w, acks, 30_000, &cfg.topic, p as i32, &batch)
        })?;
        let (error, _) = codec::decode_produce(&mut r)?;
        let leader_unknown = WARM_UP_LEADER_UNKNOWN.contains(&error);
        match error {
            0 => p += 1,
            _ if (leader_unknown || error == WARM_UP_ISR_SHORT) && Instant::now() <= deadline => {
                std::thread::sleep(Duration::from_millis(50));
                if leader_unknown {
                    leaders = self::leaders(cfg)?;
                }
            }
            _ => {
                return Err(ClientError::Kafka(format!(
                    "{} partition {p}: warm-up produce failed with error {error}",
                    cfg.topic
                )))
            }
        }
    }
    let records = leaders.len() as u64;
    Ok((leaders, records))
}

/// Counts the whole records in a fetched record set; returns (records,
/// bytes, next offset).
pub(crate) fn count_batches(records: &[u8], mut next: i64) -> (u64, u64, i64) {
    let mut at = 0;
    let (mut n, mut bytes) = (0u64, 0u64);
    while at < records.len() {
        let Ok(info) = batch::validate(&records[at..], usize::MAX, Validation::Stored) else {
            break;
        };
        n += info.record_count as u64;
        bytes += info.size as u64;
        next = info.next_offset().0;
        at += info.size;
    }
    (n, bytes, next)
}

pub fn consume(cfg: &LoadConfig) -> Result<LoadResult, ClientError> {
    let cfg2 = cfg.clone();
    let deadline = Instant::now() + cfg.duration;
    let per_conn_count = cfg.count.div_ceil(cfg.connections.max(1) as u64);
    run_threads(cfg, "consume", move |i, shared| {
        let cfg = &cfg2;
        let parts = partitions_of(i, cfg.connections, cfg.partitions);
        let mut c = Connection::connect(&cfg.bootstrap, "ferrite-bench")?;
        let mut h = histogram();
        let mut errors = 0;
        let mut offsets: Vec<i64> = vec![0; parts.len()];
        let mut caught_up = vec![false; parts.len()];
        let mut records = 0u64;
        let mut k = 0usize;
        while Instant::now() < deadline && (cfg.count == 0 || records < per_conn_count) && !parts.is_empty() {
            if cfg.count == 0 && caught_up.iter().all(|x| *x) {
                break;
            }
            let j = k % parts.len();
            k += 1;
            let sent = Instant::now();
            let mut r = c.call(1, FETCH_V, |w| {
                codec::fetch(w, 100, cfg.fetch_max_bytes, &cfg.topic, parts[j], offsets[j])
            })?;
            let f = codec::decode_fetch(&mut r)?;
            h.record(sent.elapsed().as_micros().max(1) as u64).ok();
            if f.error != 0 {
                shared.note_error(f.error);
                errors += 1;
                continue;
            }
            let (n, bytes, next) = count_batches(&f.records, offsets[j]);
            offsets[j] = next;
            caught_up[j] = next >= f.high_watermark.0;
            records += n;
            shared.records.fetch_add(n, Ordering::Relaxed);
            shared.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        Ok((h, errors))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_go_to_the_leaders_and_cover_every_partition_once() {
        let leaders: Vec<String> = ["a", "b", "c", "a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let mut seen = Vec::new();
        for i in 0..4 {
            if let Some((addr, parts)) = assignment(i, 4, &leaders) {
                for p in &parts {
                    assert_eq!(leaders[*p as usize], addr);
                }
                seen.extend(parts);
            }
        }
        seen.sort();
        assert_eq!(seen, vec![0, 1, 2, 3, 4, 5]);
        // One broker: every partition on the one connection's leader.
        let one = vec!["x".to_string(); 3];
        assert_eq!(assignment(0, 1, &one), Some(("x".to_string(), vec![0, 1, 2])));
    }

    #[test]
    fn a_request_carries_at_most_the_partitions_its_connection_serves() {
        assert_eq!(batches_per_request(0, 4), 4, "0: one batch for each");
        assert_eq!(batches_per_request(1, 4), 1);
        assert_eq!(batches_per_request(3, 4), 3);
        assert_eq!(batches_per_request(9, 4), 4, "never the same partition twice");
        assert_eq!(batches_per_request(0, 0), 1);
    }
}
