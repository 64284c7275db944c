//! Fetch: partitions are read on their owning shards, within the response's
//! `max_bytes` and each partition's limit, answering as a read in request
//! order would (several at once when their limits allow, `fetch_once`);
//! the first batch of the response is returned whole even when larger
//! (KIP-74). Record bytes
//! travel as file regions (a duplicated descriptor, sent later with
//! sendfile) or cached batches — never copied into the response.
//!
//! Long polling: while fewer than `min_bytes` are available the fetch waits
//! for a signal from one of its partitions (`fetch_wait.rs`), then reads
//! again, until `max_wait_ms` passes.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::rc::Rc;
use std::time::{Duration, Instant};

use ferrite_engine::{
    EngineError, LeaderEpoch, Offset, PartitionLog, ProducerId, ReadRegion, ShardId, SizeLimit, TopicPartition,
};
use ferrite_replication::{BrokerId, RoleKind};

use super::fetch_wait::{generation_on_owner, Fetcher, Watches};
use super::list_offsets::last_stable;
use crate::error_map;
use crate::shard::BrokerShard;
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::fetch::{encode_response, FetchPartitionResponse, FetchRequest, FetchTopicResponse, Isolation};
use ferrite_protocol::response::{Chunk, FileChunk, ResponseBuilder};

/// Largest fetch response, whatever the request asks (Kafka's broker
/// `fetch.max.bytes` default).
pub const FETCH_RESPONSE_BYTES_MAX: u64 = 55 << 20;

struct PartRead {
    error: ErrorCode,
    high_watermark: Offset,
    last_stable: Offset,
    /// A `read_committed` read's aborted transactions (`None` otherwise).
    aborted: Option<Vec<(ProducerId, Offset)>>,
    log_start: Offset,
    chunks: Vec<Chunk>,
    bytes: u64,
    /// What the read counts toward `min_bytes` ([`available_bytes`]).
    available: u64,
    /// Whether the metadata knows the partition.
    in_metadata: bool,
    /// Read on another shard: the generation of the partition's wait
    /// signal there, read before the read (`fetch_wait`).
    remote_seen: Option<(ShardId, u64)>,
}

fn dup(fd: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: dup of a descriptor the segment file owns for as long as this
    // call runs; the result is a new descriptor owned by the OwnedFd.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if new < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `new` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Who fetches, and where a read may go up to.
#[derive(Clone, Copy, Debug)]
struct Requester {
    /// The follower's broker id, or `None` for a consumer.
    replica: Option<BrokerId>,
    /// The requester's current leader epoch (`None`: not checked).
    current_leader_epoch: Option<LeaderEpoch>,
    fetch_offset: Offset,
    isolation: Isolation,
}

/// Where a read may go.
#[derive(Clone, Copy)]
enum ReadTo {
    /// Below this offset (exclusive).
    Below(Offset),
    /// A follower in a cluster: up to the leader's reserved end, past the
    /// log end from the cache ([`PartitionLog::read_for_replica`]).
    Reserved,
}

/// Where reading may go and the HW to report: the log end on a standalone
/// broker; in a cluster, the HW for consumers and the reserved end for
/// followers (whose fetch offset moves the HW).
async fn read_bounds(
    s: &BrokerShard,
    tp: &TopicPartition,
    who: Requester,
) -> Result<(Rc<PartitionLog>, ReadTo, Offset), ErrorCode> {
    let Some(replicas) = &s.replicas else {
        let log = s.served_log(tp)?;
        let end = log.log_end_offset();
        return Ok((log, ReadTo::Below(end), end));
    };
    let replica = replicas.get(tp).ok_or(ErrorCode::NotLeaderOrFollower)?;
    match who.replica {
        Some(follower) => {
            let now = replicas.cluster.now();
            let grant = replica
                .replica_fetch(follower, who.fetch_offset, who.current_leader_epoch, now)
                .await
                .map_err(|e| error_map::replica_op(&e))?;
            Ok((replica.log().clone(), ReadTo::Reserved, grant.hw))
        }
        None => {
            if replica.role() != RoleKind::Leader {
                return Err(ErrorCode::NotLeaderOrFollower);
            }
            replica
                .check_request_epoch(who.current_leader_epoch)
                .map_err(|e| error_map::replication(&e))?;
            let hw = replica.hw();
            Ok((replica.log().clone(), ReadTo::Below(hw), hw))
        }
    }
}

/// What a read on the owning shard found: its chunks, and whether it
/// stopped short of where it could go (its limit cut it).
struct Found {
    chunks: Vec<Chunk>,
    cut: bool,
}

/// A partition read on the shard that owns it: what it found (or the
/// error to answer), and the offsets to report.
type OwnerRead = (Result<Found, ErrorCode>, Reported);

/// The offsets a partition's answer reports, and a `read_committed`
/// read's aborted transactions.
struct Reported {
    hw: Offset,
    last_stable: Offset,
    log_start: Offset,
    aborted: Option<Vec<(ProducerId, Offset)>>,
}

impl Reported {
    const NONE: Reported = Reported {
        hw: Offset::NONE,
        last_stable: Offset::NONE,
        log_start: Offset::NONE,
        aborted: None,
    };
}

async fn read_here(
    s: &BrokerShard,
    tp: &TopicPartition,
    offset: Offset,
    max: usize,
    first: bool,
    who: Requester,
) -> Result<OwnerRead, EngineError> {
    let (log, read_to, hw) = match read_bounds(s, tp, who).await {
        Ok(b) => b,
        Err(code) => return Ok((Err(code), Reported::NONE)),
    };
    let mut reported = Reported {
        hw,
        last_stable: last_stable(&log, hw),
        log_start: log.log_start_offset(),
        aborted: None,
    };
    // A read_committed consumer reads below the LSO (a follower reads
    // everything: it replicates, it does not consume).
    let committed = who.isolation == Isolation::ReadCommitted && who.replica.is_none();
    let read_to = match read_to {
        ReadTo::Below(upper) if committed => ReadTo::Below(upper.min(reported.last_stable)),
        other => other,
    };
    let limit = if first {
        SizeLimit::AtLeastOneBatch
    } else {
        SizeLimit::Strict
    };
    let (read, end) = match read_to {
        ReadTo::Below(upper) => (log.read(offset, max, upper, limit).await, upper),
        ReadTo::Reserved => (log.read_for_replica(offset, max, limit).await, log.log_end_offset()),
    };
    let read = match read {
        Ok(r) => r,
        Err(e) => return Ok((Err(error_map::engine(&e)), reported)),
    };
    if committed {
        reported.aborted = Some(log.aborted_transactions(offset, read.next_offset));
    }
    let cut = read.next_offset < end;
    let chunks = chunks_of(s, read.region, read.bytes)?;
    Ok((Ok(Found { chunks, cut }), reported))
}

/// What a read found, as response chunks: cached batches, or a region of
/// a segment file (its descriptor duplicated) sent later.
fn chunks_of(s: &BrokerShard, region: ReadRegion, bytes: u64) -> Result<Vec<Chunk>, EngineError> {
    Ok(match region {
        ReadRegion::Empty => Vec::new(),
        ReadRegion::Cached(batches) => {
            crate::metrics::fetch_read(crate::metrics::FetchSource::Memory, bytes);
            batches.into_iter().map(Chunk::Bytes).collect()
        }
        ReadRegion::File(region) => {
            crate::metrics::fetch_read(crate::metrics::FetchSource::File, bytes);
            let fd = dup(region.file.fd()).map_err(|e| EngineError::Io {
                op: "dup segment descriptor",
                path: region.file.path().to_path_buf(),
                source: e,
            })?;
            let path = ferrite_transport::direct_read::path_for(
                s.config.fetch_cold_reads,
                fd.as_raw_fd(),
                region.position,
                region.len,
            );
            vec![Chunk::File(FileChunk {
                path,
                fd,
                position: region.position,
                len: region.len,
                readable_to: region.readable_to,
                truncations_quiet: region.truncations_quiet,
            })]
        }
    })
}

async fn read_on_owner(
    shard: &Rc<BrokerShard>,
    tp: TopicPartition,
    offset: Offset,
    max: usize,
    first: bool,
    who: Requester,
) -> PartRead {
    let owner = shard.owner(&tp);
    let remote = owner != shard.id;
    let fetcher = if who.replica.is_some() {
        Fetcher::Follower
    } else {
        Fetcher::Consumer
    };
    let result = shard
        .run_on(owner, move |s: Rc<BrokerShard>| async move {
            let seen = if remote {
                generation_on_owner(&s, &tp, fetcher)
            } else {
                None
            };
            read_here(&s, &tp, offset, max, first, who).await.map(|r| (r, seen))
        })
        .await;
    let failed = |error, reported: Reported, seen: Option<u64>| PartRead {
        error,
        high_watermark: reported.hw,
        last_stable: reported.last_stable,
        aborted: None,
        log_start: reported.log_start,
        chunks: Vec::new(),
        bytes: 0,
        available: 0,
        in_metadata: true,
        remote_seen: seen.map(|g| (owner, g)),
    };
    match result {
        Ok(Ok(((Ok(found), reported), seen))) => {
            let bytes = found.chunks.iter().map(Chunk::len).sum();
            PartRead {
                error: ErrorCode::None,
                high_watermark: reported.hw,
                last_stable: reported.last_stable,
                aborted: reported.aborted,
                log_start: reported.log_start,
                chunks: found.chunks,
                bytes,
                available: available_bytes(bytes, max, found.cut),
                in_metadata: true,
                remote_seen: seen.map(|g| (owner, g)),
            }
        }
        Ok(Ok(((Err(error), reported), seen))) => failed(error, reported, seen),
        Ok(Err(e)) | Err(e) => failed(error_map::engine(&e), Reported::NONE, None),
    }
}

/// What a read counts toward the fetch's `min_bytes`: the bytes available
/// up to the partition's limit, as Kafka counts them. A read its limit cut
/// had more than the limit there (the next whole batch did not fit), so it
/// counts its limit; one that found nothing counts nothing, so a partition
/// whose next batch fits nowhere does not end the wait empty-handed.
fn available_bytes(bytes: u64, max: usize, cut: bool) -> u64 {
    if cut && bytes > 0 {
        bytes.max(max as u64)
    } else {
        bytes
    }
}

/// Where partitions are in a fetch request: (topic index, partition index).
type Places = Vec<(usize, usize)>;

/// What one pass over a fetch's partitions found.
pub(crate) struct FetchPass {
    pub(crate) topics: Vec<FetchTopicResponse>,
    pub(crate) bytes: u64,
    /// What the partitions read count toward `min_bytes`.
    pub(crate) available: u64,
    /// Partitions read that the metadata knows (an unknown one has nothing
    /// to wait for, and its error does not end the wait: Kafka answers it
    /// beside the others' long poll).
    pub(crate) known: usize,
    pub(crate) any_error: bool,
    /// Partitions read on other shards, with their signal's generation there.
    remote: Vec<(ShardId, TopicPartition, u64)>,
    /// The metadata the pass checks partitions against (taken once).
    meta: std::sync::Arc<ferrite_controller::ClusterMeta>,
}

/// The bytes a fetch waits for: its `min_bytes`, within its budget (Kafka
/// caps it the same way: more could never come).
pub(crate) fn min_bytes(f: &FetchRequest) -> u64 {
    (f.min_bytes.max(0) as u64).min(response_budget(f))
}

/// The response's byte budget: what the request asks, within the broker's
/// maximum.
pub(crate) fn response_budget(f: &FetchRequest) -> u64 {
    let asked = if f.max_bytes > 0 {
        f.max_bytes as u64
    } else {
        FETCH_RESPONSE_BYTES_MAX
    };
    asked.min(FETCH_RESPONSE_BYTES_MAX)
}

impl FetchPass {
    pub(crate) fn new(shard: &BrokerShard, topics: Vec<FetchTopicResponse>) -> FetchPass {
        FetchPass {
            topics,
            bytes: 0,
            available: 0,
            known: 0,
            any_error: false,
            remote: Vec::new(),
            meta: shard.meta(),
        }
    }

    /// Reads partition `pi` of topic `ti` of `f` into the pass (its
    /// place in `topics` must exist), within what is left of `budget`.
    pub(crate) async fn read(
        &mut self,
        shard: &Rc<BrokerShard>,
        f: &FetchRequest,
        at: (usize, usize),
        budget: &mut u64,
    ) {
        let read = self.partition_read(f, at, *budget, self.bytes == 0).run(shard).await;
        self.put(f, at, read, budget);
    }

    /// What reading partition `pi` of topic `ti` takes: at most its own
    /// limit and `budget`; its whole first batch when `first`.
    fn partition_read(&self, f: &FetchRequest, (ti, pi): (usize, usize), budget: u64, first: bool) -> PartitionRead {
        let t = &f.topics[ti];
        let p = &t.partitions[pi];
        let known = self
            .meta
            .topic(&t.topic)
            .is_some_and(|x| x.partition(p.partition).is_some());
        if !known {
            return PartitionRead::Unknown;
        }
        PartitionRead::Read {
            tp: TopicPartition::new(t.topic.clone(), p.partition),
            offset: p.fetch_offset,
            max: partition_max(p.partition_max_bytes, budget),
            first,
            who: Requester {
                replica: (f.replica_id >= 0).then_some(BrokerId(f.replica_id)),
                current_leader_epoch: (p.current_leader_epoch.0 >= 0).then_some(p.current_leader_epoch),
                fetch_offset: p.fetch_offset,
                isolation: f.isolation,
            },
        }
    }

    /// Puts what partition `pi` of topic `ti` read into the pass.
    fn put(&mut self, f: &FetchRequest, (ti, pi): (usize, usize), read: PartRead, budget: &mut u64) {
        let t = &f.topics[ti];
        let p = &t.partitions[pi];
        self.any_error |= read.error != ErrorCode::None && read.in_metadata;
        self.known += usize::from(read.in_metadata);
        self.available += read.available;
        if let Some((owner, seen)) = read.remote_seen {
            self.remote
                .push((owner, TopicPartition::new(t.topic.clone(), p.partition), seen));
        }
        if read.bytes > 0 {
            crate::metrics::fetched(&t.topic, read.bytes);
        }
        self.bytes += read.bytes;
        *budget = budget.saturating_sub(read.bytes);
        self.topics[ti].partitions[pi] = FetchPartitionResponse {
            index: p.partition,
            error: read.error.code(),
            high_watermark: read.high_watermark,
            last_stable_offset: read.last_stable,
            log_start_offset: read.log_start,
            aborted_transactions: read.aborted,
            records: read.chunks,
        };
    }
}

/// A partition's byte limit for one read: its own, within the budget.
fn partition_max(partition_max_bytes: i32, budget: u64) -> usize {
    (partition_max_bytes.max(0) as u64).min(budget) as usize
}

/// One partition's read, decided before it runs.
enum PartitionRead {
    /// Not in the metadata.
    Unknown,
    Read {
        tp: TopicPartition,
        offset: Offset,
        max: usize,
        first: bool,
        who: Requester,
    },
}

impl PartitionRead {
    async fn run(self, shard: &Rc<BrokerShard>) -> PartRead {
        match self {
            PartitionRead::Unknown => PartRead {
                error: ErrorCode::UnknownTopicOrPartition,
                high_watermark: Offset::NONE,
                last_stable: Offset::NONE,
                aborted: None,
                log_start: Offset::NONE,
                chunks: Vec::new(),
                bytes: 0,
                available: 0,
                in_metadata: false,
                remote_seen: None,
            },
            PartitionRead::Read {
                tp,
                offset,
                max,
                first,
                who,
            } => read_on_owner(shard, tp, offset, max, first, who).await,
        }
    }
}

/// Each partition of `f`, not answered yet.
pub(crate) fn unanswered(f: &FetchRequest) -> Vec<FetchTopicResponse> {
    f.topics
        .iter()
        .map(|t| FetchTopicResponse {
            topic: t.topic.clone(),
            partitions: t
                .partitions
                .iter()
                .map(|p| FetchPartitionResponse {
                    index: p.partition,
                    error: 0,
                    high_watermark: Offset::NONE,
                    last_stable_offset: Offset::NONE,
                    log_start_offset: Offset::NONE,
                    aborted_transactions: None,
                    records: Vec::new(),
                })
                .collect(),
        })
        .collect()
}

/// Reads every partition of `f`, as if in request order.
///
/// When the partitions' own limits add up to no more than the response's
/// budget, no read's limit depends on what the reads before it found, so
/// they run together (`READS_CONCURRENT_MAX` at a time): a consumer
/// catching up on eight partitions waits for its eight cold reads at once,
/// not one after another. What they found is taken in request order, and
/// a read whose answer would differ from the one-at-a-time order's is done
/// again in that order: the first read that finds bytes may go past its
/// limit to return a whole batch (KIP-74), so a partition that found
/// nothing within its limit while none before it found anything is read
/// again allowed a whole batch, and one that went past its limit or past
/// what the budget has left is read again within them.
async fn fetch_once(shard: &Rc<BrokerShard>, f: &FetchRequest) -> FetchPass {
    use futures::stream::StreamExt;
    let mut pass = FetchPass::new(shard, unanswered(f));
    let mut budget = response_budget(f);
    let places: Places = f
        .topics
        .iter()
        .enumerate()
        .flat_map(|(ti, t)| (0..t.partitions.len()).map(move |pi| (ti, pi)))
        .collect();
    let limits: u64 = f
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.partition_max_bytes.max(0) as u64)
        .sum();
    // A follower's empty read tells nothing of what lies past the high
    // watermark, so it could not be told from one that did not fit:
    // followers read one partition at a time.
    if places.len() < 2 || limits > budget || f.replica_id >= 0 {
        for at in places {
            pass.read(shard, f, at, &mut budget).await;
        }
        return pass;
    }
    let reads: Vec<PartitionRead> = places
        .iter()
        .enumerate()
        .map(|(i, at)| pass.partition_read(f, *at, budget, i == 0))
        .collect();
    let mut found = futures::stream::iter(reads)
        .map(|r| r.run(shard))
        .buffered(READS_CONCURRENT_MAX);
    for (i, at) in places.into_iter().enumerate() {
        let Some(read) = found.next().await else { break };
        let (ti, pi) = at;
        let max = partition_max(f.topics[ti].partitions[pi].partition_max_bytes, budget) as u64;
        let first_now = pass.bytes == 0;
        // Something to read that did not fit (a consumer reads below the
        // high watermark it is told).
        let p = &f.topics[ti].partitions[pi];
        let visible = match f.isolation {
            Isolation::ReadCommitted => read.last_stable,
            Isolation::ReadUncommitted => read.high_watermark,
        };
        let more_there = visible > p.fetch_offset;
        let nothing_but_could = first_now && i > 0 && read.bytes == 0 && read.error == ErrorCode::None && more_there;
        let too_much = read.bytes > max && !(first_now && i == 0);
        if nothing_but_could || too_much {
            pass.read(shard, f, at, &mut budget).await;
        } else {
            pass.put(f, at, read, &mut budget);
        }
    }
    pass
}

/// Partition reads of one fetch that run at once, at most.
const READS_CONCURRENT_MAX: usize = 16;

/// Reads again only the partitions of `f` at `moved` (in request order),
/// over a previous pass that found no bytes: the others' answers stand (a
/// partition whose signal did not move has nothing new for this fetch), so
/// a wake costs the partitions that changed, not all the fetch names — a
/// follower's fetch names thousands.
async fn fetch_moved(
    shard: &Rc<BrokerShard>,
    f: &FetchRequest,
    previous: Vec<FetchTopicResponse>,
    moved: &[(usize, usize)],
) -> FetchPass {
    let mut pass = FetchPass::new(shard, previous);
    let mut budget = response_budget(f);
    for at in moved {
        pass.read(shard, f, *at, &mut budget).await;
    }
    pass
}

pub async fn fetch(
    shard: &Rc<BrokerShard>,
    access: &super::access::Access,
    mut f: FetchRequest,
    v: i16,
    flexible: bool,
    b: &mut ResponseBuilder,
) {
    // An incremental fetch becomes its session's whole fetch here, and its
    // answer is cut to what changed below (`fetch_session.rs`).
    let plan = match shard.fetch_sessions.prepare(&mut f) {
        Ok(plan) => plan,
        Err(code) => {
            encode_response(b, v, flexible, code.code(), 0, Vec::new());
            return;
        }
    };
    // Every partition of every fetch is checked, a session's too (a
    // session outlives an ACL, and its id is no credential): a follower's
    // fetch needs ClusterAction, a consumer's Read on each topic; the others
    // are answered TOPIC_AUTHORIZATION_FAILED.
    use ferrite_security::acl::Operation;
    let follower_allowed = f.replica_id < 0 || access.allows_cluster(Operation::ClusterAction);
    let (readable, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut f.topics)
        .into_iter()
        .partition(|t| follower_allowed && (f.replica_id >= 0 || access.allows_topic(Operation::Read, &t.topic)));
    f.topics = readable;
    let request = std::sync::Arc::new(f);
    let topics = fetch_all(shard, &request).await;
    let (session_id, mut topics) = shard.fetch_sessions.finish(plan, &request, topics);
    if matches!(plan, super::fetch_session::Plan::Incremental { .. }) {
        crate::metrics::incremental_fetch();
    }
    topics.extend(refused.into_iter().map(|t| FetchTopicResponse {
        partitions: t.partitions.iter().map(|p| refused_partition(p.partition)).collect(),
        topic: t.topic,
    }));
    encode_response(b, v, flexible, 0, session_id, topics);
}

fn refused_partition(index: i32) -> FetchPartitionResponse {
    FetchPartitionResponse {
        index,
        error: ErrorCode::TopicAuthorizationFailed.code(),
        high_watermark: Offset::NONE,
        last_stable_offset: Offset::NONE,
        log_start_offset: Offset::NONE,
        aborted_transactions: None,
        records: Vec::new(),
    }
}

/// Answers every partition `f` names.
async fn fetch_all(shard: &Rc<BrokerShard>, f: &std::sync::Arc<FetchRequest>) -> Vec<FetchTopicResponse> {
    let wait = Duration::from_millis((f.max_wait_ms.max(0) as u64).min(shard.config.fetch_wait_ms_max));
    let deadline = Instant::now() + wait;
    // A fetch whose partitions all live on one other shard (a follower's:
    // its fetchers go by shard, and partitions map to the same shard on
    // every broker) runs there whole: one message each way, instead of one
    // per partition read and per wait.
    let owner = sole_owner(shard, f);
    // A follower's fetch of one shard's partitions: that shard remembers
    // what it last answered (`follower_view.rs`).
    let follower = f.replica_id >= 0 && shard.replicas.is_some() && owner.is_some();
    if follower && owner == Some(shard.id) {
        return super::follower_view::fetch_until(shard, f, deadline, wait.is_zero()).await;
    }
    if let Some(owner) = owner.filter(|o| *o != shard.id) {
        let there = f.clone();
        let topics = shard
            .run_on(owner, move |s: Rc<BrokerShard>| async move {
                if follower {
                    super::follower_view::fetch_until(&s, &there, deadline, wait.is_zero()).await
                } else {
                    fetch_until(&s, &there, deadline, wait.is_zero()).await
                }
            })
            .await;
        return match topics {
            Ok(topics) => topics,
            // The other shard is gone (stopping): partition by partition
            // from here, which reports each partition's error.
            Err(_) => fetch_until(shard, f, deadline, wait.is_zero()).await,
        };
    }
    fetch_until(shard, f, deadline, wait.is_zero()).await
}

/// The one shard that owns every partition `f` names, if there is one.
fn sole_owner(shard: &BrokerShard, f: &FetchRequest) -> Option<ShardId> {
    use ferrite_engine::log_manager::{shard_for_hashed, topic_hash};
    let shards = shard.shard_count();
    let mut owners = f.topics.iter().flat_map(|t| {
        let h = topic_hash(&t.topic);
        t.partitions
            .iter()
            .map(move |p| shard_for_hashed(h, p.partition, shards))
    });
    let first = owners.next()?;
    owners.all(|o| o == first).then_some(first)
}

/// Reads `f`'s partitions until `min_bytes` are there, an error, or
/// `deadline` (at once when `no_wait`), waiting on their signals between
/// passes.
async fn fetch_until(
    shard: &Rc<BrokerShard>,
    f: &FetchRequest,
    deadline: Instant,
    no_wait: bool,
) -> Vec<FetchTopicResponse> {
    // After a wait: the previous pass (which found nothing) and where the
    // partitions that moved since are.
    let mut again: Option<(Vec<FetchTopicResponse>, Places)> = None;
    // Whether any partition named is in the metadata: a fetch of none (or
    // of no partition at all, as a consumer closing its session sends) is
    // answered at once.
    let mut waits_on_any = true;
    loop {
        // A fetch that will not wait (max_wait_ms 0) needs no signals.
        let watches = (!no_wait).then(|| Watches::take(shard, f));
        let moved_pass = again.is_some();
        let pass = match again.take() {
            Some((previous, moved)) => fetch_moved(shard, f, previous, &moved).await,
            None => fetch_once(shard, f).await,
        };
        if !moved_pass {
            waits_on_any = pass.known > 0;
        }
        let enough = pass.available >= min_bytes(f);
        let done = enough || pass.any_error || !waits_on_any || Instant::now() >= deadline || shard.stopping.get();
        match watches {
            Some(mut watches) if !done => {
                for (owner, tp, seen) in pass.remote {
                    watches.add_remote(owner, tp, seen);
                }
                watches.wait(shard, deadline).await;
                again = match watches.moved() {
                    Some(moved) if pass.bytes == 0 => Some((pass.topics, moved)),
                    _ => None,
                };
            }
            _ => return pass.topics,
        }
    }
}
