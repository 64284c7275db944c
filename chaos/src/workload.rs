//! The clients of a run, on plain threads with blocking connections (the
//! runner's own, never cut by the firewall), stopped when told: what they
//! share (the clock, the history, where the leaders are), the reader that
//! follows each partition, records what it read and commits its positions,
//! and the final reads. The producers are in [`crate::producer`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferrite_client::codec::{self, MetadataInfo};
use ferrite_client::group::coordinator_client::CoordinatorClient;
use ferrite_client::group::member_error::RetryPolicy;
use ferrite_client::Connection;
use ferrite_engine::batch::{self, HEADER_BYTES, LOG_OVERHEAD_BYTES};
use ferrite_engine::record::decode_records;

use crate::history::{History, Op, OpKind, Outcome, RunMs};

pub const TOPIC: &str = "chaos";
/// The group the reader commits its positions as (simple commits:
/// generation -1, no member).
pub const GROUP: &str = "chaos-reader";
/// How often the reader commits.
pub(crate) const COMMIT_EVERY: Duration = Duration::from_millis(500);
const FETCH_KEY: i16 = 1;
const METADATA_KEY: i16 = 3;
/// How long a request may go unanswered before its outcome is unknown.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(8);
/// Pause after a failed operation, so that a client does not spin.
pub(crate) const BACKOFF: Duration = Duration::from_millis(100);

/// What every client shares: the run's clock, the history and the stop flag.
#[derive(Clone)]
pub struct Shared {
    pub started: Instant,
    pub history: Arc<Mutex<History>>,
    pub stop: Arc<AtomicBool>,
    pub bootstrap: Vec<String>,
    pub partitions: i32,
}

impl Shared {
    pub fn now_ms(&self) -> RunMs {
        self.started.elapsed().as_millis() as RunMs
    }

    pub(crate) fn record(&self, op: Op) {
        if let Ok(mut h) = self.history.lock() {
            h.push(op);
        }
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Connections by address, and where each partition's leader is.
pub(crate) struct Routes {
    shared: Shared,
    conns: HashMap<String, Connection>,
    pub(crate) leaders: HashMap<i32, String>,
    client_id: String,
}

impl Routes {
    pub(crate) fn new(shared: Shared, client_id: String) -> Routes {
        Routes {
            shared,
            conns: HashMap::new(),
            leaders: HashMap::new(),
            client_id,
        }
    }

    pub(crate) fn conn(&mut self, addr: &str) -> Option<&mut Connection> {
        if !self.conns.contains_key(addr) {
            let mut c = Connection::connect_timeout(addr, &self.client_id, REQUEST_TIMEOUT).ok()?;
            c.set_read_timeout(REQUEST_TIMEOUT).ok()?;
            self.conns.insert(addr.to_string(), c);
        }
        self.conns.get_mut(addr)
    }

    pub(crate) fn forget(&mut self, addr: &str) {
        self.conns.remove(addr);
        self.leaders.clear();
    }

    /// Asks any broker where the leaders are.
    pub(crate) fn refresh(&mut self) -> Option<MetadataInfo> {
        for addr in self.shared.bootstrap.clone() {
            let Some(c) = self.conn(&addr) else { continue };
            let topics = [TOPIC.to_string()];
            let got = c
                .call(METADATA_KEY, codec::METADATA_V, |w| codec::metadata(w, Some(&topics)))
                .and_then(|mut r| Ok(codec::decode_metadata(&mut r)?));
            match got {
                Ok(meta) => {
                    self.learn(&meta);
                    return Some(meta);
                }
                Err(_) => self.forget(&addr),
            }
        }
        None
    }

    fn learn(&mut self, meta: &MetadataInfo) {
        let addr_of: HashMap<i32, String> = meta
            .brokers
            .iter()
            .map(|b| (b.id, format!("{}:{}", b.host, b.port)))
            .collect();
        for t in meta.topics.iter().filter(|t| t.name == TOPIC) {
            for p in &t.partitions {
                if let Some(a) = addr_of.get(&p.leader) {
                    self.leaders.insert(p.partition, a.clone());
                }
            }
        }
    }

    pub(crate) fn leader(&mut self, partition: i32) -> Option<String> {
        if !self.leaders.contains_key(&partition) {
            self.refresh();
        }
        self.leaders.get(&partition).cloned()
    }
}

/// The (offset, value) of every record in `bytes` (uncompressed batches,
/// as the producers write them); stops at the first incomplete batch.
pub fn decode_values(mut bytes: &[u8]) -> Vec<(i64, u64)> {
    let mut out = Vec::new();
    while bytes.len() >= HEADER_BYTES {
        let Ok(h) = batch::read_header(bytes) else { break };
        let size = LOG_OVERHEAD_BYTES + h.batch_length.get().max(0) as usize;
        if size < HEADER_BYTES || size > bytes.len() {
            break;
        }
        let base = h.base_offset.get();
        if let Ok(records) = decode_records(&bytes[HEADER_BYTES..size], h.record_count.get()) {
            for r in records {
                let value = r.value.and_then(|v| <[u8; 8]>::try_from(v).ok());
                if let Some(v) = value {
                    out.push((base + i64::from(r.offset_delta), u64::from_be_bytes(v)));
                }
            }
        }
        bytes = &bytes[size..];
    }
    out
}

/// Reads `partition` from `from` up to its high watermark at the leader:
/// the records, or `None` if the leader could not be asked.
fn read_partition(routes: &mut Routes, partition: i32, from: i64) -> Option<(Vec<(i64, u64)>, i64)> {
    let addr = routes.leader(partition)?;
    let c = routes.conn(&addr)?;
    let answer = c
        .call(FETCH_KEY, codec::FETCH_V, |w| {
            codec::fetch(w, 100, 1 << 20, TOPIC, partition, from)
        })
        .and_then(|mut r| Ok(codec::decode_fetch(&mut r)?));
    match answer {
        Ok(p) if p.error == 0 => Some((decode_values(&p.records), p.high_watermark.0)),
        Ok(_) => {
            routes.leaders.remove(&partition);
            None
        }
        Err(_) => {
            routes.forget(&addr);
            None
        }
    }
}

/// Records one commit per partition of `offsets`, invoked at
/// `invoked_ms`, as it ended.
pub(crate) fn record_commits(
    shared: &Shared,
    client: u32,
    group: &str,
    offsets: &[(String, i32, i64)],
    invoked_ms: RunMs,
    outcome: Outcome,
) {
    let completed_ms = shared.now_ms();
    for (_, partition, offset) in offsets {
        shared.record(Op {
            client,
            kind: OpKind::Commit {
                group: group.to_string(),
                partition: *partition,
                offset: *offset,
            },
            invoked_ms,
            completed_ms,
            outcome: outcome.clone(),
        });
    }
}

/// Commits the reader's positions (one attempt), recording a commit per
/// partition; an error leaves each commit unknown.
fn commit_positions(shared: &Shared, client: u32, coord: &mut CoordinatorClient, next: &[i64]) {
    let offsets: Vec<(String, i32, i64)> = (0..shared.partitions)
        .zip(next)
        .filter(|(_, o)| **o > 0)
        .map(|(p, o)| (TOPIC.to_string(), p, *o))
        .collect();
    if offsets.is_empty() {
        return;
    }
    let invoked_ms = shared.now_ms();
    let outcome = match coord.commit_offsets(-1, "", &offsets) {
        Ok(()) => Outcome::Ok { offset: None },
        Err(e) => Outcome::Unknown { error: e.to_string() },
    };
    record_commits(shared, client, GROUP, &offsets, invoked_ms, outcome);
}

/// `group`'s committed offsets, asked after healing (with retries).
pub fn committed_offsets(shared: &Shared, group: &str) -> Option<std::collections::BTreeMap<i32, i64>> {
    let mut coord = CoordinatorClient::new(
        &shared.bootstrap.join(","),
        group,
        "chaos-final-offsets",
        RetryPolicy::default(),
        REQUEST_TIMEOUT,
    );
    let partitions: Vec<(String, i32)> = (0..shared.partitions).map(|p| (TOPIC.to_string(), p)).collect();
    let fetched = coord.fetch_offsets(&partitions).ok()?;
    Some(fetched.into_iter().map(|((_, p), o)| (p, o)).collect())
}

/// Reads `partition` from `*next` and records what came back (if
/// anything), moving `*next` past it. Returns whether records came.
pub(crate) fn read_and_record(
    shared: &Shared,
    client: u32,
    routes: &mut Routes,
    partition: i32,
    next: &mut i64,
) -> bool {
    let invoked_ms = shared.now_ms();
    let Some((records, _hw)) = read_partition(routes, partition, *next) else {
        return false;
    };
    let records: Vec<(i64, u64)> = records.into_iter().filter(|(o, _)| *o >= *next).collect();
    let Some(&(last, _)) = records.last() else { return false };
    *next = last + 1;
    shared.record(Op {
        client,
        kind: OpKind::Read { partition, records },
        invoked_ms,
        completed_ms: shared.now_ms(),
        outcome: Outcome::Ok { offset: None },
    });
    true
}

/// Follows every partition from offset 0, recording each non-empty read,
/// and commits its positions every [`COMMIT_EVERY`].
pub fn read_loop(shared: Shared, client: u32) {
    let mut routes = Routes::new(shared.clone(), format!("chaos-reader-{client}"));
    let once = RetryPolicy {
        retries: 0,
        ..RetryPolicy::default()
    };
    let reader = format!("chaos-reader-{client}");
    let mut coord = CoordinatorClient::new(&shared.bootstrap.join(","), GROUP, &reader, once, REQUEST_TIMEOUT);
    let mut next: Vec<i64> = vec![0; shared.partitions as usize];
    let mut committed_at = Instant::now();
    while !shared.stopped() {
        if committed_at.elapsed() >= COMMIT_EVERY {
            commit_positions(&shared, client, &mut coord, &next);
            committed_at = Instant::now();
        }
        let mut idle = true;
        for partition in 0..shared.partitions {
            if read_and_record(&shared, client, &mut routes, partition, &mut next[partition as usize]) {
                idle = false;
            }
        }
        if idle {
            std::thread::sleep(BACKOFF);
        }
    }
}

/// Every record of every partition, read from offset 0 to the high
/// watermark at each leader; `None` for a partition whose leader did not
/// answer within `patience`.
pub fn read_all(shared: &Shared, patience: Duration) -> HashMap<i32, Option<Vec<(i64, u64)>>> {
    let mut routes = Routes::new(shared.clone(), "chaos-final-reader".into());
    let mut out = HashMap::new();
    for partition in 0..shared.partitions {
        let deadline = Instant::now() + patience;
        let mut records: Vec<(i64, u64)> = Vec::new();
        let mut next = 0;
        let got = loop {
            match read_partition(&mut routes, partition, next) {
                Some((batch, hw)) => {
                    records.extend(batch.into_iter().filter(|(o, _)| *o >= next));
                    next = records.last().map_or(next, |(o, _)| o + 1);
                    if next >= hw {
                        break Some(records);
                    }
                }
                None if Instant::now() > deadline => break None,
                None => std::thread::sleep(BACKOFF),
            }
        };
        out.insert(partition, got);
    }
    out
}

/// Asks for the cluster's metadata (controller, leaders, ISRs).
pub fn metadata(shared: &Shared) -> Option<MetadataInfo> {
    Routes::new(shared.clone(), "chaos-metadata".into()).refresh()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_engine::types::{Offset, TimestampMs};

    #[test]
    fn values_decode_from_batches_back_to_back() {
        let a = batch::build_batch(Offset(5), TimestampMs(0), &[&7u64.to_be_bytes(), &8u64.to_be_bytes()]);
        let b = batch::build_batch(Offset(7), TimestampMs(0), &[&9u64.to_be_bytes()]);
        let mut bytes = a.clone();
        bytes.extend_from_slice(&b);
        bytes.extend_from_slice(&b[..20]);
        assert_eq!(decode_values(&bytes), vec![(5, 7), (6, 8), (7, 9)]);
    }
}
