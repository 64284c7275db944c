//! `ferrite-bench consume --group G`: each connection is a member of the
//! consumer group G (Ferrite's blocking group member). A member reads its
//! assigned partitions from their committed offsets (from offset 0 where
//! nothing is committed), heartbeats between fetches, commits every
//! second, before giving up its partitions in a rebalance and at the end,
//! then leaves the group. It stops at the deadline, when the members
//! together have read `--count` records, or (with `--count 0`) once it has
//! caught up on every partition it is assigned.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ferrite_client::codec::{self, FETCH_V};
use ferrite_client::group::member::{AssignorKind, GroupMember, Heartbeat, MemberConfig, MemberError};
use ferrite_client::{ClientError, Connection};
use hdrhistogram::Histogram;

use crate::load::{count_batches, histogram, run_threads, LoadConfig, LoadResult, Shared};

const COMMIT_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Clone, Debug)]
pub struct GroupOptions {
    pub group: String,
    pub assignor: AssignorKind,
    pub session_timeout_ms: i32,
}

impl GroupOptions {
    pub fn new(group: &str, assignor: AssignorKind) -> GroupOptions {
        GroupOptions {
            group: group.to_string(),
            assignor,
            session_timeout_ms: 10_000,
        }
    }
}

fn client_error(e: MemberError) -> ClientError {
    match e {
        MemberError::Client(c) => c,
        other => ClientError::Kafka(other.to_string()),
    }
}

/// `cfg.connections` members of the group, one thread each.
pub fn consume(cfg: &LoadConfig, opts: &GroupOptions) -> Result<LoadResult, ClientError> {
    let (cfg2, opts) = (cfg.clone(), opts.clone());
    let deadline = Instant::now() + cfg.duration;
    run_threads(cfg, "consume", move |_, shared| {
        let mut member_cfg = MemberConfig::new(&cfg2.bootstrap, &opts.group, &[cfg2.topic.as_str()]);
        member_cfg.client_id = "ferrite-bench".to_string();
        member_cfg.session_timeout_ms = opts.session_timeout_ms;
        let member = GroupMember::join_with(member_cfg, opts.assignor).map_err(client_error)?;
        let mut m = GroupConsumer::new(&cfg2, member, shared)?;
        let run = m.run(deadline);
        let end = m.finish();
        run.and(end)?;
        Ok((m.latency, m.errors))
    })
}

/// One member and its reading state.
struct GroupConsumer<'a> {
    cfg: &'a LoadConfig,
    shared: &'a Shared,
    member: GroupMember,
    /// Next offset to read, per assigned partition.
    positions: BTreeMap<i32, i64>,
    caught_up: BTreeMap<i32, bool>,
    leaders: BTreeMap<i32, String>,
    conns: BTreeMap<String, Connection>,
    last_commit: Instant,
    next: usize,
    latency: Histogram<u64>,
    errors: u64,
}

impl<'a> GroupConsumer<'a> {
    fn new(cfg: &'a LoadConfig, member: GroupMember, shared: &'a Shared) -> Result<Self, ClientError> {
        let mut c = GroupConsumer {
            cfg,
            shared,
            member,
            positions: BTreeMap::new(),
            caught_up: BTreeMap::new(),
            leaders: BTreeMap::new(),
            conns: BTreeMap::new(),
            last_commit: Instant::now(),
            next: 0,
            latency: histogram(),
            errors: 0,
        };
        c.take_assignment()?;
        Ok(c)
    }

    fn done(&self, deadline: Instant) -> bool {
        let total = self.shared.records.load(Ordering::Relaxed);
        Instant::now() >= deadline
            || (self.cfg.count > 0 && total >= self.cfg.count)
            || (self.cfg.count == 0 && self.caught_up.values().all(|c| *c))
    }

    fn run(&mut self, deadline: Instant) -> Result<(), ClientError> {
        while !self.done(deadline) {
            if let Heartbeat::RejoinNeeded(_) = self.member.heartbeat().map_err(client_error)? {
                self.commit();
                self.member.rejoin().map_err(client_error)?;
                self.take_assignment()?;
                continue;
            }
            if self.last_commit.elapsed() >= COMMIT_INTERVAL {
                self.commit();
            }
            if self.positions.is_empty() {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            self.fetch_one()?;
        }
        Ok(())
    }

    /// The final commit, then leaving the group.
    fn finish(&mut self) -> Result<(), ClientError> {
        self.commit();
        self.member.leave().map_err(client_error)
    }

    /// Commits the positions; a refused commit is counted, not fatal (the
    /// records will be read again by the partition's next owner).
    fn commit(&mut self) {
        self.last_commit = Instant::now();
        let topic = &self.cfg.topic;
        let offsets: Vec<(String, i32, i64)> = self.positions.iter().map(|(p, o)| (topic.clone(), *p, *o)).collect();
        if self.member.commit(&offsets).is_err() {
            self.errors += 1;
        }
    }

    /// After a (re)join: positions from the committed offsets, and each
    /// assigned partition's leader.
    fn take_assignment(&mut self) -> Result<(), ClientError> {
        let mine: Vec<(String, i32)> = self
            .member
            .assignment()
            .iter()
            .filter(|(t, _)| *t == self.cfg.topic)
            .cloned()
            .collect();
        let committed = self.member.committed(&mine).map_err(client_error)?;
        self.positions = mine
            .iter()
            .map(|tp| (tp.1, committed.get(tp).copied().unwrap_or(0)))
            .collect();
        self.caught_up = mine.iter().map(|(_, p)| (*p, false)).collect();
        self.refresh_leaders()
    }

    fn refresh_leaders(&mut self) -> Result<(), ClientError> {
        let mut c = Connection::connect(&self.cfg.bootstrap, "ferrite-bench")?;
        let topics = [self.cfg.topic.clone()];
        let mut r = c.call(3, codec::METADATA_V, |w| codec::metadata(w, Some(&topics)))?;
        let meta = codec::decode_metadata(&mut r)?;
        self.leaders.clear();
        for t in meta.topics.iter().filter(|t| t.name == self.cfg.topic) {
            for p in &t.partitions {
                if let Some(b) = meta.brokers.iter().find(|b| b.id == p.leader) {
                    self.leaders.insert(p.partition, format!("{}:{}", b.host, b.port));
                }
            }
        }
        Ok(())
    }

    /// Fetches the next partition in turn from its leader.
    fn fetch_one(&mut self) -> Result<(), ClientError> {
        let parts: Vec<i32> = self.positions.keys().copied().collect();
        let p = parts[self.next % parts.len()];
        self.next = self.next.wrapping_add(1);
        let offset = self.positions[&p];
        let addr = self
            .leaders
            .get(&p)
            .cloned()
            .unwrap_or_else(|| self.cfg.bootstrap.clone());
        let conn = match self.conns.entry(addr.clone()) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(Connection::connect(&addr, "ferrite-bench")?),
        };
        let sent = Instant::now();
        let (cfg, topic) = (self.cfg, &self.cfg.topic);
        let mut r = conn.call(1, FETCH_V, |w| {
            codec::fetch(w, 100, cfg.fetch_max_bytes, topic, p, offset)
        })?;
        let f = codec::decode_fetch(&mut r)?;
        self.latency.record(sent.elapsed().as_micros().max(1) as u64).ok();
        if f.error != 0 {
            self.errors += 1;
            self.conns.remove(&addr);
            return self.refresh_leaders();
        }
        let (n, bytes, next) = count_batches(&f.records, offset);
        self.positions.insert(p, next);
        self.caught_up.insert(p, next >= f.high_watermark.0);
        self.shared.records.fetch_add(n, Ordering::Relaxed);
        self.shared.bytes.fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    }
}
