//! Incremental fetch sessions (KIP-227). A client that fetches many
//! partitions opens a session with a full fetch (epoch 0); the broker keeps
//! the session's partitions with what each last asked (offset, limits,
//! leader epoch) and what each was last answered (high watermark, log
//! start). Each later fetch (epoch 1, 2, …) names only the partitions whose
//! request changed, and those the session forgets; the answer names only
//! the partitions with records, an error, or a high watermark or log start
//! that moved since they were last answered.
//!
//! The request's epochs, as Kafka's:
//!
//! | session id | epoch | meaning |
//! |---|---|---|
//! | 0 | -1 | no session (before v7, librdkafka, Ferrite's followers) |
//! | any | 0 | a full fetch that opens a session (closing the one named) |
//! | id | -1 | closes the session, answered as a fetch without one |
//! | id | n > 0 | the next fetch of session `id`, which expects epoch `n` |
//!
//! A session that is not there answers FETCH_SESSION_ID_NOT_FOUND, a wrong
//! epoch INVALID_FETCH_SESSION_EPOCH; the client then opens a new one.
//!
//! Sessions live on the shard whose connection opened them, at most
//! `max.incremental.fetch.session.cache.slots` over all shards. When a shard
//! has no free slot, the session idle longest is evicted if it has been idle
//! for [`EVICTABLE_IDLE`]; otherwise the full fetch is answered without a
//! session (id 0) and the client goes on with full fetches. A session holds
//! at most [`SESSION_PARTITIONS_MAX`] partitions.
//!
//! The broker still reads every partition of a session in each fetch (as
//! Kafka's does): a session saves the request's and the response's bytes,
//! not the reads.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::{Duration, Instant};

use ferrite_engine::{Offset, ShardId};

use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::fetch::{
    FetchPartition, FetchPartitionResponse, FetchRequest, FetchTopic, FetchTopicResponse, FINAL_EPOCH, INITIAL_EPOCH,
};

/// How long a session must have been idle before a new one may evict it
/// (Kafka's `min.incremental.fetch.session.eviction.ms` default).
pub const EVICTABLE_IDLE: Duration = Duration::from_secs(120);

/// The most partitions one session holds; a larger full fetch is answered
/// without a session, an incremental one that grows past it ends its
/// session (FETCH_SESSION_ID_NOT_FOUND, then full fetches).
pub const SESSION_PARTITIONS_MAX: usize = 100_000;

/// One partition of a session: what the client last asked, and what it
/// was last answered.
struct Held {
    topic: String,
    asked: FetchPartition,
    high_watermark: Offset,
    last_stable: Offset,
    log_start: Offset,
}

struct Session {
    /// The epoch the next fetch must carry.
    epoch: i32,
    /// The requester: a session opened by a follower is not a consumer's.
    replica_id: i32,
    partitions: Vec<Held>,
    /// Where each (topic, partition) is in `partitions`.
    places: Places,
    last_used: Instant,
}

/// Where each partition of a session is, by topic then number: looked up
/// with the response's `&str` for every partition of every fetch, without
/// allocating a key.
#[derive(Default)]
struct Places(HashMap<String, HashMap<i32, usize>>);

impl Places {
    fn get(&self, topic: &str, partition: i32) -> Option<usize> {
        self.0.get(topic)?.get(&partition).copied()
    }

    fn insert(&mut self, topic: &str, partition: i32, at: usize) {
        match self.0.get_mut(topic) {
            Some(parts) => {
                parts.insert(partition, at);
            }
            None => {
                self.0.insert(topic.to_string(), HashMap::from([(partition, at)]));
            }
        }
    }

    fn remove(&mut self, topic: &str, partition: i32) {
        if let Some(parts) = self.0.get_mut(topic) {
            parts.remove(&partition);
        }
    }

    /// Indexes `partitions` afresh.
    fn index(partitions: &[Held]) -> Places {
        let mut places = Places::default();
        for (at, h) in partitions.iter().enumerate() {
            places.insert(&h.topic, h.asked.partition, at);
        }
        places
    }
}

/// What a fetch does about sessions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Every partition answered; session id 0.
    Sessionless,
    /// Every partition answered, and a session opened for them if there is
    /// room (its id in the answer, else 0).
    Open,
    /// The session's partitions that changed answered (`f.topics` was
    /// replaced with all of the session's).
    Incremental { id: i32 },
}

/// One shard's sessions.
pub struct FetchSessions {
    sessions: RefCell<HashMap<i32, Session>>,
    slots_max: usize,
    shard: ShardId,
    next: Cell<u32>,
}

impl FetchSessions {
    pub fn new(shard: ShardId, slots_max: usize) -> FetchSessions {
        // Ids carry the shard in their low byte, so two shards never hand
        // out the same one; the rest starts from the clock, so a restarted
        // broker does not hand out the ids its clients still hold.
        let start = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(1);
        FetchSessions {
            sessions: RefCell::new(HashMap::new()),
            slots_max,
            shard,
            next: Cell::new(start),
        }
    }

    /// Sessions open on this shard.
    pub fn count(&self) -> usize {
        self.sessions.borrow().len()
    }

    fn new_id(&self) -> i32 {
        loop {
            let n = self.next.get().wrapping_add(1);
            self.next.set(n);
            let id = (((n & 0x007f_ffff) << 8) | u32::from(self.shard.0 as u8)) as i32;
            if id > 0 && !self.sessions.borrow().contains_key(&id) {
                return id;
            }
        }
    }

    /// Reads the session fields of `f`. For an incremental fetch, applies
    /// the partitions it names and forgets to its session and replaces
    /// `f.topics` with every partition of the session.
    pub fn prepare(&self, f: &mut FetchRequest) -> Result<Plan, ErrorCode> {
        let mut sessions = self.sessions.borrow_mut();
        match (f.session_id, f.session_epoch) {
            (0, FINAL_EPOCH) => Ok(Plan::Sessionless),
            (id, FINAL_EPOCH) => {
                sessions.remove(&id);
                Ok(Plan::Sessionless)
            }
            (id, INITIAL_EPOCH) => {
                sessions.remove(&id);
                Ok(Plan::Open)
            }
            (_, epoch) if epoch < 0 => Err(ErrorCode::InvalidFetchSessionEpoch),
            (id, epoch) => {
                let Some(s) = sessions.get_mut(&id) else {
                    return Err(ErrorCode::FetchSessionIdNotFound);
                };
                if s.replica_id != f.replica_id {
                    return Err(ErrorCode::FetchSessionIdNotFound);
                }
                if s.epoch != epoch {
                    return Err(ErrorCode::InvalidFetchSessionEpoch);
                }
                s.update(f);
                if s.partitions.len() > SESSION_PARTITIONS_MAX {
                    sessions.remove(&id);
                    return Err(ErrorCode::FetchSessionIdNotFound);
                }
                s.epoch = if epoch == i32::MAX { 1 } else { epoch + 1 };
                s.last_used = Instant::now();
                f.topics = s.all_topics();
                Ok(Plan::Incremental { id })
            }
        }
    }

    /// Takes the answer to a fetch prepared with `plan`: the session id to
    /// send, and the partitions to send.
    pub fn finish(
        &self,
        plan: Plan,
        f: &FetchRequest,
        topics: Vec<FetchTopicResponse>,
    ) -> (i32, Vec<FetchTopicResponse>) {
        match plan {
            Plan::Sessionless => (0, topics),
            Plan::Open => (self.open(f, &topics), topics),
            Plan::Incremental { id } => {
                let mut sessions = self.sessions.borrow_mut();
                match sessions.get_mut(&id) {
                    Some(s) => (id, s.changed(topics)),
                    // Evicted while the fetch ran: every partition, and a
                    // session id the next fetch will not find.
                    None => (id, topics),
                }
            }
        }
    }

    /// Opens a session for a full fetch and its answer; its id, or 0 when
    /// there is no room.
    fn open(&self, f: &FetchRequest, answered: &[FetchTopicResponse]) -> i32 {
        let count: usize = f.topics.iter().map(|t| t.partitions.len()).sum();
        if count > SESSION_PARTITIONS_MAX || !self.make_room() {
            return 0;
        }
        let mut s = Session {
            epoch: 1,
            replica_id: f.replica_id,
            partitions: Vec::with_capacity(count),
            places: Places::default(),
            last_used: Instant::now(),
        };
        s.update(f);
        for t in answered {
            for p in &t.partitions {
                if let Some(at) = s.places.get(&t.topic, p.index) {
                    s.partitions[at].high_watermark = p.high_watermark;
                    s.partitions[at].last_stable = p.last_stable_offset;
                    s.partitions[at].log_start = p.log_start_offset;
                }
            }
        }
        let id = self.new_id();
        self.sessions.borrow_mut().insert(id, s);
        id
    }

    /// Whether a new session fits, evicting the one idle longest if it has
    /// been idle long enough.
    fn make_room(&self) -> bool {
        let mut sessions = self.sessions.borrow_mut();
        if sessions.len() < self.slots_max {
            return true;
        }
        let oldest = sessions
            .iter()
            .min_by_key(|(_, s)| s.last_used)
            .map(|(id, s)| (*id, s.last_used));
        match oldest {
            Some((id, used)) if used.elapsed() >= EVICTABLE_IDLE => {
                sessions.remove(&id);
                true
            }
            _ => false,
        }
    }
}

impl Session {
    /// Takes the partitions `f` names (new ones at the end, known ones
    /// updated) and drops those it forgets.
    fn update(&mut self, f: &FetchRequest) {
        for t in &f.topics {
            for p in &t.partitions {
                match self.places.get(&t.topic, p.partition) {
                    Some(at) => self.partitions[at].asked = p.clone(),
                    None => {
                        self.places.insert(&t.topic, p.partition, self.partitions.len());
                        self.partitions.push(Held {
                            topic: t.topic.clone(),
                            asked: p.clone(),
                            // Never answered: the first answer always names it.
                            high_watermark: Offset::NONE,
                            last_stable: Offset::NONE,
                            log_start: Offset::NONE,
                        });
                    }
                }
            }
        }
        if f.forgotten.iter().all(|(_, ps)| ps.is_empty()) {
            return;
        }
        for (topic, ps) in &f.forgotten {
            for p in ps {
                self.places.remove(topic, *p);
            }
        }
        let places = &self.places;
        self.partitions
            .retain(|h| places.get(&h.topic, h.asked.partition).is_some());
        self.places = Places::index(&self.partitions);
    }

    /// Every partition of the session, in the session's order: a topic's
    /// partitions go together only where they follow one another, so a
    /// topic may come more than once (as in Kafka's answers). Grouping
    /// further would put a partition that sent records back ahead of the
    /// ones the rotation moved before it.
    fn all_topics(&self) -> Vec<FetchTopic> {
        let mut topics: Vec<FetchTopic> = Vec::new();
        for h in &self.partitions {
            match topics.last_mut() {
                Some(last) if last.topic == h.topic => last.partitions.push(h.asked.clone()),
                _ => topics.push(FetchTopic {
                    topic: h.topic.clone(),
                    partitions: vec![h.asked.clone()],
                }),
            }
        }
        topics
    }

    /// The partitions of an answer to send: those with records or an
    /// error, or whose high watermark or log start moved since they were
    /// last sent (which is then remembered; after an error nothing is, so
    /// the partition is sent again once the error clears). Partitions that
    /// sent records go to the end of the session, as Kafka's do: the next
    /// fetch reads the others first, so a response's byte limit does not
    /// starve the partitions named last.
    fn changed(&mut self, topics: Vec<FetchTopicResponse>) -> Vec<FetchTopicResponse> {
        let mut out = Vec::new();
        let mut sent_records: Vec<usize> = Vec::new();
        for t in topics {
            let mut kept: Vec<FetchPartitionResponse> = Vec::new();
            for p in t.partitions {
                let Some(at) = self.places.get(&t.topic, p.index) else {
                    continue;
                };
                let held = &mut self.partitions[at];
                let moved = held.high_watermark != p.high_watermark
                    || held.last_stable != p.last_stable_offset
                    || held.log_start != p.log_start_offset;
                if moved || p.error != 0 || !p.records.is_empty() {
                    (held.high_watermark, held.last_stable, held.log_start) = if p.error == 0 {
                        (p.high_watermark, p.last_stable_offset, p.log_start_offset)
                    } else {
                        (Offset::NONE, Offset::NONE, Offset::NONE)
                    };
                    if !p.records.is_empty() {
                        sent_records.push(at);
                    }
                    kept.push(p);
                }
            }
            if !kept.is_empty() {
                out.push(FetchTopicResponse {
                    topic: t.topic,
                    partitions: kept,
                });
            }
        }
        self.move_to_end(&sent_records);
        out
    }

    /// Moves the partitions at `places` (of `partitions`) to the end, in
    /// the order given.
    fn move_to_end(&mut self, places: &[usize]) {
        if places.is_empty() {
            return;
        }
        let moved: std::collections::HashSet<usize> = places.iter().copied().collect();
        let mut held: Vec<Option<Held>> = std::mem::take(&mut self.partitions).into_iter().map(Some).collect();
        let mut order: Vec<Held> = Vec::with_capacity(held.len());
        for (at, h) in held.iter_mut().enumerate() {
            if !moved.contains(&at) {
                order.extend(h.take());
            }
        }
        for at in places {
            order.extend(held[*at].take());
        }
        self.partitions = order;
        self.places = Places::index(&self.partitions);
    }
}

#[cfg(test)]
#[path = "fetch_session_tests.rs"]
mod tests;
