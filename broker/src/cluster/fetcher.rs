//! Follower fetchers: on each shard, `num.replica.fetchers` per leader
//! broker (one by default), batching the partitions the shard follows from
//! that leader into one Fetch request each (`replica_id` = this broker),
//! and sending the OffsetForLeaderEpoch queries that come before fetching.
//! A partition goes to the fetcher its hash picks, as Kafka deals them over
//! its fetcher threads; a change of the count deals them again. Each
//! fetcher is a task with its own connection; it ends when it has nothing
//! left to do.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use ferrite_engine::notify::Notify;
use ferrite_engine::{LeaderEpoch, Offset, TopicPartition};
use ferrite_replication::{Backoff, BrokerId, LocalReplica, ReplicationError};
use futures_lite::{AsyncReadExt, AsyncWriteExt};

use super::replicas::ShardReplicas;
use super::ClusterShared;
use ferrite_client::codec::invalid_data;
use ferrite_client::codec::{frame, response_body, response_len};
use ferrite_client::replica_fetch::{self, ReplicaFetchLimits, ReplicaFetchPartition, ReplicaFetched};
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::offset_for_leader_epoch::{
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use ferrite_protocol::wire::Reader;

const OFFSET_FOR_LEADER_EPOCH_V: i16 = 3;
/// Pause after a failed connection or a retriable error.
const RETRY_BACKOFF_MS: u64 = 200;
/// Largest response frame a fetcher accepts.
const RESPONSE_BYTES_MAX: usize = 128 << 20;
/// Largest response buffer a fetcher keeps for its next response.
const SPARE_BYTES_MAX: usize = 16 << 20;

#[derive(Default)]
struct Work {
    fetching: BTreeSet<TopicPartition>,
    asks: BTreeMap<TopicPartition, (LeaderEpoch, Backoff)>,
    /// Stamped (from `Fetchers::stamps`) whenever `fetching` changes.
    version: u64,
}

/// One partition a fetcher fetches, as its rounds remember it.
struct Follow {
    tp: TopicPartition,
    replica: Rc<LocalReplica>,
    /// The leader's high watermark and log start last applied with no
    /// records and no error: an answer that repeats them changes nothing
    /// and is not applied again.
    last: Option<(Offset, Offset)>,
}

/// A fetcher's partitions in request order, with their replicas: built
/// again when its work or the shard's replicas change, not every round.
#[derive(Default)]
struct FollowView {
    version: u64,
    changes: u64,
    entries: Vec<Follow>,
}

/// A leader broker, and which of the fetchers to it.
type FetcherKey = (BrokerId, usize);

struct Fetcher {
    leader: BrokerId,
    work: RefCell<Work>,
    view: RefCell<FollowView>,
    wake: Notify,
    running: Cell<bool>,
}

pub struct Fetchers {
    cluster: Arc<ClusterShared>,
    replicas: Weak<ShardReplicas>,
    by_leader: RefCell<BTreeMap<FetcherKey, Rc<Fetcher>>>,
    /// Fetchers per leader (`num.replica.fetchers`).
    per_leader: Cell<usize>,
    /// The last version stamped on a fetcher's work.
    stamps: Cell<u64>,
    /// Answers not applied because they repeated the last one applied.
    repeats: Cell<u64>,
}

/// Which of `count` fetchers a partition goes to: a mixed hash of its
/// topic and number. Not Kafka's `abs(31 × topic.hashCode() + partition)
/// mod count`: with the usual round-robin assignment a leader's partitions
/// of a topic are numbered `count` apart when there are as many brokers as
/// fetchers, and that sends them all to one fetcher.
pub fn fetcher_index(tp: &TopicPartition, count: usize) -> usize {
    assert!(count >= 1, "no fetchers");
    let topic_hash = tp.topic.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    // splitmix64's finalizer over the topic's FNV-1a hash and the number.
    let mut z = topic_hash ^ (tp.partition as u32 as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z % count as u64) as usize
}

impl Fetchers {
    pub fn new(cluster: Arc<ClusterShared>, replicas: Weak<ShardReplicas>) -> Rc<Fetchers> {
        let per_leader = cluster.config.num_replica_fetchers.max(1);
        Rc::new(Fetchers {
            cluster,
            replicas,
            by_leader: RefCell::new(BTreeMap::new()),
            per_leader: Cell::new(per_leader),
            stamps: Cell::new(0),
            repeats: Cell::new(0),
        })
    }

    /// Fetchers per leader broker now.
    pub fn per_leader(&self) -> usize {
        self.per_leader.get()
    }

    /// Answers not applied because they repeated the last one applied.
    pub fn repeats(&self) -> u64 {
        self.repeats.get()
    }

    /// Running fetcher tasks (a gauge for operators and tests).
    pub fn running(&self) -> usize {
        self.by_leader.borrow().values().filter(|f| f.running.get()).count()
    }

    /// Changes the number of fetchers per leader (`num.replica.fetchers`
    /// changed while running): every partition is dealt again. A fetch in
    /// flight on a fetcher that loses a partition is not applied for it
    /// (the fetcher checks its work when the answer comes).
    pub fn set_per_leader(self: &Rc<Self>, count: usize) {
        let count = count.max(1);
        if count == self.per_leader.get() {
            return;
        }
        self.per_leader.set(count);
        let mut moved: Vec<(BrokerId, Work)> = Vec::new();
        for f in self.by_leader.borrow().values() {
            moved.push((f.leader, std::mem::take(&mut *f.work.borrow_mut())));
        }
        // Fetchers past the new count end once idle; they are not kept.
        self.by_leader.borrow_mut().retain(|(_, i), _| *i < count);
        let mut woken = BTreeSet::new();
        for (leader, work) in moved {
            for tp in work.fetching {
                let key = (leader, fetcher_index(&tp, count));
                let target = self.fetcher(key);
                let mut w = target.work.borrow_mut();
                w.fetching.insert(tp);
                w.version = self.stamp();
                drop(w);
                woken.insert(key);
            }
            for (tp, ask) in work.asks {
                let key = (leader, fetcher_index(&tp, count));
                self.fetcher(key).work.borrow_mut().asks.insert(tp, ask);
                woken.insert(key);
            }
        }
        for key in woken {
            if let Some(f) = self.by_leader.borrow().get(&key) {
                f.wake.notify_all();
            }
        }
        let dealt: Vec<(i32, usize, usize)> = self
            .by_leader
            .borrow()
            .iter()
            .map(|((leader, i), f)| (leader.0, *i, f.work.borrow().fetching.len()))
            .collect();
        tracing::info!(fetchers_per_leader = count, ?dealt, "replica fetchers dealt again");
    }

    /// A version no fetcher's work had before.
    fn stamp(&self) -> u64 {
        self.stamps.set(self.stamps.get() + 1);
        self.stamps.get()
    }

    fn key(&self, tp: &TopicPartition, leader: BrokerId) -> FetcherKey {
        (leader, fetcher_index(tp, self.per_leader.get()))
    }

    fn fetcher(self: &Rc<Self>, key: FetcherKey) -> Rc<Fetcher> {
        let leader = key.0;
        let f = self
            .by_leader
            .borrow_mut()
            .entry(key)
            .or_insert_with(|| {
                Rc::new(Fetcher {
                    leader,
                    work: RefCell::new(Work::default()),
                    view: RefCell::new(FollowView::default()),
                    wake: Notify::new(),
                    running: Cell::new(false),
                })
            })
            .clone();
        if !f.running.get() {
            f.running.set(true);
            glommio::spawn_local(run(self.clone(), f.clone())).detach();
        }
        f
    }

    /// Fetches `tp` from `leader` (and from no other).
    pub fn fetch(self: &Rc<Self>, tp: &TopicPartition, leader: BrokerId) {
        self.remove(tp);
        let f = self.fetcher(self.key(tp, leader));
        let mut w = f.work.borrow_mut();
        w.fetching.insert(tp.clone());
        w.version = self.stamp();
        drop(w);
        f.wake.notify_all();
    }

    pub fn ask_epoch_end(self: &Rc<Self>, tp: &TopicPartition, leader: BrokerId, epoch: LeaderEpoch, backoff: Backoff) {
        self.remove(tp);
        let f = self.fetcher(self.key(tp, leader));
        f.work.borrow_mut().asks.insert(tp.clone(), (epoch, backoff));
        f.wake.notify_all();
    }

    pub fn remove(&self, tp: &TopicPartition) {
        for f in self.by_leader.borrow().values() {
            let mut w = f.work.borrow_mut();
            if w.fetching.remove(tp) {
                w.version = self.stamp();
            }
            w.asks.remove(tp);
        }
    }

    fn stopped(&self) -> bool {
        self.replicas.upgrade().is_none_or(|r| r.stopped.get())
    }
}

struct Conn {
    stream: glommio::net::TcpStream,
    correlation: i32,
    /// The last response's buffer, back from the appends that wrote it: the
    /// next response is read into it, so a steady stream of fetches neither
    /// allocates nor zeroes (beyond growth), and lands in memory that is
    /// still in the CPU's cache.
    spare: BytesMut,
}

impl Conn {
    async fn call(
        &mut self,
        api_key: i16,
        version: i16,
        body: impl FnOnce(&mut ferrite_protocol::wire::Writer),
    ) -> std::io::Result<Reader> {
        self.correlation = self.correlation.wrapping_add(1);
        let bytes = frame(api_key, version, self.correlation, "ferrite-replica-fetcher", body);
        self.stream.write_all(&bytes).await?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).await?;
        let len = response_len(size, RESPONSE_BYTES_MAX)?;
        let mut body = std::mem::take(&mut self.spare);
        body.resize(len, 0);
        self.stream.read_exact(&mut body).await?;
        response_body(body.freeze(), self.correlation, false)
    }

    /// Takes a response's buffer back once nothing else holds it.
    fn reuse(&mut self, response: Bytes) {
        if let Ok(buf) = response.try_into_mut() {
            if buf.capacity() <= SPARE_BYTES_MAX {
                self.spare = buf;
            }
        }
    }
}

async fn run(fetchers: Rc<Fetchers>, f: Rc<Fetcher>) {
    let mut conn: Option<Conn> = None;
    loop {
        if fetchers.stopped() {
            break;
        }
        let idle = {
            let w = f.work.borrow();
            w.fetching.is_empty() && w.asks.is_empty()
        };
        if idle {
            // The view holds replicas: a fetcher left with nothing to fetch
            // (its partitions deleted, say) must not keep their files open.
            drop(f.view.take());
            let seen = f.wake.generation();
            let woke = futures_lite::future::or(
                async {
                    f.wake.changed_since(seen).await;
                    true
                },
                async {
                    glommio::timer::sleep(Duration::from_secs(5)).await;
                    false
                },
            )
            .await;
            if !woke {
                break;
            }
            continue;
        }
        if conn.is_none() {
            conn = connect(&fetchers.cluster, f.leader).await;
            if conn.is_none() {
                glommio::timer::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
                continue;
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        let round = match round(&fetchers, &f, c).await {
            Ok(()) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = round {
            tracing::debug!(leader = %f.leader, error = %e, "replica fetcher connection lost");
            conn = None;
            glommio::timer::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
        }
    }
    f.running.set(false);
    // Work that arrived while stopping starts a new task.
    let pending = {
        let w = f.work.borrow();
        !w.fetching.is_empty() || !w.asks.is_empty()
    };
    if pending && !fetchers.stopped() {
        f.running.set(true);
        glommio::spawn_local(run(fetchers.clone(), f.clone())).detach();
    }
}

async fn connect(cluster: &ClusterShared, leader: BrokerId) -> Option<Conn> {
    let b = cluster.endpoint(leader)?;
    match glommio::net::TcpStream::connect(format!("{}:{}", b.host, b.port)).await {
        Ok(stream) => {
            let _ = stream.set_nodelay(true);
            Some(Conn {
                stream,
                correlation: 0,
                spare: BytesMut::new(),
            })
        }
        Err(e) => {
            tracing::debug!(%leader, error = %e, "cannot reach leader");
            None
        }
    }
}

/// One round: the pending epoch queries, then one fetch.
async fn round(fetchers: &Rc<Fetchers>, f: &Rc<Fetcher>, c: &mut Conn) -> std::io::Result<()> {
    let Some(replicas) = fetchers.replicas.upgrade() else {
        return Ok(());
    };
    let asks: Vec<(TopicPartition, (LeaderEpoch, Backoff))> =
        std::mem::take(&mut f.work.borrow_mut().asks).into_iter().collect();
    if !asks.is_empty() {
        if asks.iter().any(|(_, (_, b))| *b == Backoff::Retry) {
            glommio::timer::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
        }
        epoch_queries(&replicas, c, asks).await?;
    }
    if f.work.borrow().fetching.is_empty() {
        drop(f.view.take());
        return Ok(());
    }
    let mut view = f.view.take();
    let version = f.work.borrow().version;
    if view.version != version || view.changes != replicas.changes() {
        view = FollowView {
            version,
            changes: replicas.changes(),
            entries: f
                .work
                .borrow()
                .fetching
                .iter()
                .filter_map(|tp| {
                    replicas.get(tp).map(|replica| Follow {
                        tp: tp.clone(),
                        replica,
                        last: None,
                    })
                })
                .collect(),
        };
    }
    let result = fetch(&replicas, f, c, &mut view).await;
    *f.view.borrow_mut() = view;
    result
}

async fn epoch_queries(
    replicas: &Rc<ShardReplicas>,
    c: &mut Conn,
    asks: Vec<(TopicPartition, (LeaderEpoch, Backoff))>,
) -> std::io::Result<()> {
    // (partition, epoch asked about, the replica's leader epoch asked in):
    // an answer that returns after a LeaderAndIsr moved the latter on is
    // dropped by the replica.
    let asks: Vec<(TopicPartition, LeaderEpoch, LeaderEpoch)> = asks
        .into_iter()
        .map(|(tp, (epoch, _))| {
            let current = replicas.get(&tp).map_or(LeaderEpoch::NONE, |r| r.leader_epoch());
            (tp, epoch, current)
        })
        .collect();
    let mut topics: Vec<OffsetForLeaderTopic> = Vec::new();
    for (tp, epoch, current) in &asks {
        let p = OffsetForLeaderPartition {
            partition: tp.partition,
            current_leader_epoch: *current,
            leader_epoch: *epoch,
        };
        match topics.last_mut() {
            Some(t) if t.topic == tp.topic => t.partitions.push(p),
            _ => topics.push(OffsetForLeaderTopic {
                topic: tp.topic.clone(),
                partitions: vec![p],
            }),
        }
    }
    let req = OffsetForLeaderEpochRequest {
        replica_id: replicas.cluster.local.id,
        topics,
    };
    let mut r = c
        .call(
            ferrite_protocol::offset_for_leader_epoch::API_KEY,
            OFFSET_FOR_LEADER_EPOCH_V,
            |w| req.encode(w, OFFSET_FOR_LEADER_EPOCH_V),
        )
        .await?;
    let resp = OffsetForLeaderEpochResponse::decode(&mut r, OFFSET_FOR_LEADER_EPOCH_V).map_err(invalid_data)?;
    let mut answered = BTreeSet::new();
    for t in resp.topics {
        for p in t.partitions {
            let tp = TopicPartition::new(t.topic.clone(), p.partition);
            let Some((_, asked, asked_in)) = asks.iter().find(|(x, _, _)| *x == tp) else {
                continue;
            };
            let Some(replica) = replicas.get(&tp) else { continue };
            answered.insert(tp.clone());
            let answer = if p.error_code == 0 {
                Ok((p.end_offset.0 >= 0 && p.leader_epoch.0 >= 0).then_some((p.leader_epoch, p.end_offset)))
            } else {
                Err(ReplicationError::NotLeader {
                    tp: tp.clone(),
                    op: "offset for leader epoch",
                })
            };
            if let Err(e) = replica.epoch_end_received(*asked, *asked_in, answer).await {
                tracing::error!(%tp, error = %e, "after an epoch query");
            }
        }
    }
    // Partitions the leader did not answer are asked again.
    for (tp, asked, asked_in) in asks {
        if !answered.contains(&tp) {
            if let Some(replica) = replicas.get(&tp) {
                let err = Err(ReplicationError::NotLeader {
                    tp: tp.clone(),
                    op: "offset for leader epoch",
                });
                let _ = replica.epoch_end_received(asked, asked_in, err).await;
            }
        }
    }
    Ok(())
}

async fn fetch(
    replicas: &Rc<ShardReplicas>,
    f: &Rc<Fetcher>,
    c: &mut Conn,
    view: &mut FollowView,
) -> std::io::Result<()> {
    let cfg = &replicas.cluster.config;
    let request: Vec<ReplicaFetchPartition> = view
        .entries
        .iter()
        .map(|e| ReplicaFetchPartition {
            topic: &e.tp.topic,
            partition: e.tp.partition,
            current_leader_epoch: e.replica.leader_epoch(),
            fetch_offset: e.replica.log().log_end_offset(),
            log_start_offset: e.replica.log().log_start_offset(),
            max_bytes: cfg.replica_fetch_max_bytes,
        })
        .collect();
    if request.is_empty() {
        // Work for partitions this shard has no replica of (yet): wait
        // before looking again, or the fetcher's loop would never yield.
        glommio::timer::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
        return Ok(());
    }
    let limits = ReplicaFetchLimits {
        replica_id: replicas.cluster.local.id.0,
        max_wait_ms: cfg.replica_fetch_wait_max_ms as i32,
        min_bytes: cfg.replica_fetch_min_bytes,
        max_bytes: cfg.replica_fetch_response_max_bytes,
    };
    let mut r = c
        .call(1, replica_fetch::REPLICA_FETCH_V, |w| {
            replica_fetch::encode(w, limits, &request)
        })
        .await?;
    let (_, fetched) = replica_fetch::decode(&mut r).map_err(invalid_data)?;
    // The leader answers in request order: each answer is matched to its
    // partition by walking the view, and by a map (built when first
    // needed) only if the order differs.
    let mut index: Option<std::collections::HashMap<(&str, i32), usize>> = None;
    let mut cursor = 0usize;
    // Whether the work changed while the fetch was out (then each answer
    // is checked against it).
    let changed = f.work.borrow().version != view.version;
    let mut applies = Vec::new();
    let mut repeats = 0u64;
    let mut unusable = Vec::new();
    for p in fetched {
        let at = match view.entries.get(cursor) {
            Some(e) if e.tp.partition == p.partition && *e.tp.topic == *p.topic => Some(cursor),
            _ => index
                .get_or_insert_with(|| {
                    request
                        .iter()
                        .enumerate()
                        .map(|(i, q)| ((q.topic, q.partition), i))
                        .collect()
                })
                .get(&(&*p.topic, p.partition))
                .copied(),
        };
        let Some(at) = at else { continue };
        cursor = at + 1;
        let e = &view.entries[at];
        if e.replica.log().is_poisoned() {
            unusable.push(e.tp.clone());
            continue;
        }
        let repeat = Some((p.high_watermark, p.log_start_offset));
        // A fenced damaged range is cut away when an answer is applied.
        if p.error == 0 && p.records.is_empty() && e.last == repeat && !e.replica.log().is_damaged() {
            repeats += 1;
            continue;
        }
        // A partition moved to another leader meanwhile: not ours to apply.
        if changed && !f.work.borrow().fetching.contains(&e.tp) {
            continue;
        }
        if request[at].fetch_offset != e.replica.log().log_end_offset() {
            continue;
        }
        let clean = p.error == 0 && p.records.is_empty();
        let applied = apply(e.tp.clone(), e.replica.clone(), p, request[at].current_leader_epoch);
        applies.push(async move { (at, applied.await, clean.then_some(repeat).flatten()) });
    }
    let counted = &replicas.fetchers.repeats;
    counted.set(counted.get() + repeats);
    // A log that refuses writes (a full disk, a failing device) takes
    // nothing more until the broker restarts: fetching for it would only
    // fetch the same records again, round after round.
    for tp in unusable {
        tracing::error!(%tp, "this replica's log refuses writes: it stops fetching until the broker restarts");
        replicas.fetchers.remove(&tp);
    }
    // Partitions are independent logs: their appends go to the device side
    // by side rather than one after another.
    let outcomes = futures::future::join_all(applies).await;
    c.reuse(r.into_bytes());
    let mut backoff = false;
    for (at, needs_backoff, repeat) in outcomes {
        backoff |= needs_backoff;
        // Remembered only after a clean apply with nothing appended: the
        // same answer next time is then known to change nothing.
        view.entries[at].last = if needs_backoff { None } else { repeat };
    }
    if backoff {
        glommio::timer::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
    }
    Ok(())
}

/// Applies one partition of a fetch response, sent in leader epoch
/// `fetched_in`; true when the fetcher should back off (an error the leader
/// sent, or one applying the records). The replica drops the answer if its
/// epoch moved on meanwhile.
///
/// The records are appended as a slice of the fetch response, without a
/// copy; a follower's log does not keep them once written, so the response
/// buffer is free again when every partition's append has returned.
async fn apply(tp: TopicPartition, replica: Rc<LocalReplica>, p: ReplicaFetched, fetched_in: LeaderEpoch) -> bool {
    let result = match p.error {
        0 => {
            let whole = replica_fetch::whole_batches(&p.records);
            let records = p.records.slice(..whole);
            replica
                .append_fetched(records, p.high_watermark, p.log_start_offset, fetched_in)
                .await
        }
        e if e == ErrorCode::OffsetOutOfRange.code() => {
            replica
                .fetch_out_of_range(p.log_start_offset, p.high_watermark, fetched_in)
                .await
        }
        _ => return true,
    };
    if let Err(e) = result {
        tracing::error!(%tp, error = %e, "applying fetched records");
        return true;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leaders_partitions_spread_over_its_fetchers() {
        assert_eq!(fetcher_index(&TopicPartition::new("orders", 5), 1), 0);
        for count in 2..=4 {
            // Round-robin assignment over `count` brokers: one leader has
            // partitions 0, count, 2 × count, … of a topic.
            let led: Vec<i32> = (0..8).map(|i| i * count as i32).collect();
            let used: BTreeSet<usize> = led
                .iter()
                .map(|p| fetcher_index(&TopicPartition::new("orders", *p), count))
                .collect();
            assert!(used.len() >= 2, "{count} fetchers, one used: {used:?}");
        }
        let every: BTreeSet<usize> = (0..64)
            .map(|p| fetcher_index(&TopicPartition::new("t", p), 16))
            .collect();
        assert!(every.len() >= 14, "{every:?}");
    }
}
