//! Idempotent producers' state for one partition: per producer id, its
//! epoch and the sequence numbers and offsets of its last
//! [`BATCHES_KEPT`] batches (Kafka keeps five: a producer has at most five
//! requests in flight, so a retry is always one of them).
//!
//! A leader checks each idempotent batch before assigning it offsets:
//! - an epoch older than the producer's is refused (INVALID_PRODUCER_EPOCH);
//! - a batch equal to one of the kept ones (same epoch, first and last
//!   sequence) is a retry: it is acknowledged with the original offsets and
//!   not appended again;
//! - otherwise its first sequence must follow the last one (wrapping at
//!   `i32::MAX`), or be 0 under a new epoch (OUT_OF_ORDER_SEQUENCE_NUMBER).
//!   A producer the partition does not know may start anywhere, since its
//!   earlier batches may have been deleted by retention.
//!
//! Followers apply the batches they replicate without checks, so a new
//! leader deduplicates as the old one did. The state is rebuilt from the
//! batch headers after the last snapshot when a log opens or is truncated.
//!
//! # Snapshot file `producer-state`
//!
//! The state as of an offset (every batch below it applied, none at or
//! above), written at segment rolls and at a clean close, replaced
//! atomically. Big-endian:
//!
//! ```text
//! magic    4  "FPS4" ("FPS3": with an aborted-transaction list after the
//!             open ones; "FPS2": that and no coordinator_epoch; "FPS1": no
//!             coordinator_epoch and neither transaction list)
//! crc      4  CRC-32C (Castagnoli) of every byte after this field
//! offset   8  the state covers the batches below this offset
//! count    4  number of producers
//! producer    pid i64 | epoch i16 | last_timestamp i64 | coordinator_epoch i32
//!             (of its last marker, -1: none) | batches u8 (≤ 5)
//!             | batches × (first_seq i32 | last_seq i32 | first_offset i64 | last_offset i64)
//! open     4  number of open transactions, then each: pid i64 | first_offset i64
//! ```
//!
//! The open transactions ([`crate::txn_state`]) ride along: the state is
//! the snapshot plus the batches after it, for them as for the sequences.
//! Aborted transactions live in the segments' transaction indexes
//! ([`crate::txn_index`]), each made durable before a snapshot that
//! covers it is written; an FPS3 or FPS2 snapshot's aborted list (written
//! before those indexes existed) is handed back on load so that opening
//! the log puts it into them. A file that does not parse is ignored and
//! the state rebuilt from the whole log.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;

use crate::batch::BatchInfo;
use crate::checkpoint::{self, ReplaceOps};
use crate::error::Result;
use crate::txn_state::{AbortedTxn, Marker, TxnState};
use crate::types::{Offset, ProducerId, TimestampMs};

/// Batches remembered per producer.
pub const BATCHES_KEPT: usize = 5;
/// Producers remembered per partition; past it the longest idle goes.
pub const PRODUCERS_MAX: usize = 100_000;
pub const FILE_NAME: &str = "producer-state";
const TMP_NAME: &str = "producer-state.tmp";
const MAGIC: &[u8; 4] = b"FPS4";
const MAGIC_V3: &[u8; 4] = b"FPS3";
const MAGIC_V2: &[u8; 4] = b"FPS2";
const MAGIC_V1: &[u8; 4] = b"FPS1";
const OPEN_TXN_BYTES: usize = 8 + 8;
const HEADER_BYTES: usize = 4 + 4 + 8 + 4;
/// A producer's fixed part before FPS3 (no coordinator epoch).
const PRODUCER_BYTES_V2: usize = 8 + 2 + 8 + 1;
const PRODUCER_BYTES: usize = PRODUCER_BYTES_V2 + 4;
const BATCH_BYTES: usize = 4 + 4 + 8 + 8;
const _: () = assert!(BATCHES_KEPT <= u8::MAX as usize);

/// One remembered batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchSeq {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: Offset,
    pub last_offset: Offset,
}

/// One producer a partition knows, as an operator sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActiveProducer {
    pub producer_id: ProducerId,
    /// -1: not known (only its open transaction is).
    pub epoch: i16,
    pub last_sequence: Option<i32>,
    pub last_timestamp: Option<TimestampMs>,
    /// First offset of its open transaction here.
    pub txn_start: Option<Offset>,
    /// The coordinator epoch of its last marker here.
    pub coordinator_epoch: Option<i32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    pub last_timestamp: TimestampMs,
    /// The coordinator epoch of the producer's last marker here (-1: none
    /// known): a marker of an older coordinator is refused.
    pub coordinator_epoch: i32,
    /// Oldest first.
    pub batches: VecDeque<BatchSeq>,
}

/// What to do with an idempotent batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqCheck {
    Append,
    /// A retry of a batch already in the log at these offsets.
    Duplicate {
        first_offset: Offset,
        last_offset: Offset,
    },
}

/// Why an idempotent batch is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SequenceError {
    #[error("producer {producer_id}: epoch {epoch} is older than its current epoch {current}")]
    StaleEpoch {
        producer_id: ProducerId,
        epoch: i16,
        current: i16,
    },
    #[error("producer {producer_id}: a marker of coordinator epoch {coordinator_epoch}, older than its last marker's {current}")]
    CoordinatorFenced {
        producer_id: ProducerId,
        coordinator_epoch: i32,
        current: i32,
    },
    #[error("producer {producer_id} epoch {epoch}: sequence {got} where {expected} was expected")]
    OutOfOrder {
        producer_id: ProducerId,
        epoch: i16,
        expected: i32,
        got: i32,
    },
}

/// The last sequence of a batch starting at `first` with `count` records.
fn last_seq(first: i32, count: i32) -> i32 {
    let span = i64::from(count.max(1)) - 1;
    ((i64::from(first) + span) % (i64::from(i32::MAX) + 1)) as i32
}

/// The sequences a batch spans: one per offset, whatever records the log
/// cleaner removed from it since (a compacted batch keeps its
/// `lastOffsetDelta`, as Kafka's does for this reason).
fn offsets_of(info: &BatchInfo) -> i32 {
    info.last_offset_delta.saturating_add(1)
}

fn next_seq(seq: i32) -> i32 {
    if seq == i32::MAX {
        0
    } else {
        seq + 1
    }
}

/// The producers of one partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerStates {
    producers: BTreeMap<ProducerId, ProducerEntry>,
    txns: TxnState,
}

impl ProducerStates {
    pub fn new() -> ProducerStates {
        ProducerStates::default()
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    pub fn get(&self, producer_id: ProducerId) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// Every producer known here, with its open transaction's first offset
    /// (DescribeProducers), by producer id.
    pub fn active(&self) -> Vec<ActiveProducer> {
        let mut out: Vec<ActiveProducer> = self
            .producers
            .iter()
            .map(|(id, e)| ActiveProducer {
                producer_id: *id,
                epoch: e.epoch,
                last_sequence: e.batches.back().map(|b| b.last_seq),
                last_timestamp: Some(e.last_timestamp),
                txn_start: self.txns.open_since(*id),
                coordinator_epoch: (e.coordinator_epoch >= 0).then_some(e.coordinator_epoch),
            })
            .collect();
        // A transaction whose producer's entry was evicted is still open.
        for (id, first) in self.txns.open() {
            if !self.producers.contains_key(&id) {
                out.push(ActiveProducer {
                    producer_id: id,
                    epoch: -1,
                    last_sequence: None,
                    last_timestamp: None,
                    txn_start: Some(first),
                    coordinator_epoch: None,
                });
            }
        }
        out.sort_by_key(|p| p.producer_id);
        out
    }

    /// The partition's transactions.
    pub fn txns(&self) -> &TxnState {
        &self.txns
    }

    /// Applies a transactional batch in the log (`marker`: what a control
    /// batch says); returns the transaction it aborted, if it did (an entry
    /// of the marker's segment's transaction index).
    pub fn apply_txn(&mut self, info: &BatchInfo, marker: Option<Marker>) -> Option<AbortedTxn> {
        self.txns.apply(info, marker)
    }

    /// A marker in the log carried `coordinator_epoch` (after
    /// [`ProducerStates::record`] applied it).
    pub fn note_coordinator_epoch(&mut self, info: &BatchInfo, coordinator_epoch: Option<i32>) {
        if let (Some(e), Some(ce)) = (self.producers.get_mut(&info.producer_id), coordinator_epoch) {
            e.coordinator_epoch = ce;
        }
    }

    /// Each producer's last batch's last offset (the batch the log cleaner
    /// keeps, at least as a header, so the producer's sequence survives).
    pub fn last_offsets(&self) -> std::collections::HashMap<ProducerId, Offset> {
        self.producers
            .iter()
            .filter_map(|(id, e)| Some((*id, e.batches.back()?.last_offset)))
            .collect()
    }

    /// Each producer's current epoch (what a marker may have raised: the log
    /// cleaner keeps the marker that says it).
    pub fn epochs(&self) -> std::collections::HashMap<ProducerId, i16> {
        self.producers.iter().map(|(id, e)| (*id, e.epoch)).collect()
    }

    /// Checks a leader's incoming batch (not yet given offsets).
    pub fn check(&self, info: &BatchInfo) -> std::result::Result<SeqCheck, SequenceError> {
        if !info.producer_id.is_producer() {
            return Ok(SeqCheck::Append);
        }
        let Some(entry) = self.producers.get(&info.producer_id) else {
            return Ok(SeqCheck::Append);
        };
        let (pid, epoch, first) = (info.producer_id, info.producer_epoch, info.base_sequence);
        if epoch < entry.epoch {
            return Err(SequenceError::StaleEpoch {
                producer_id: pid,
                epoch,
                current: entry.epoch,
            });
        }
        if epoch > entry.epoch {
            if first != 0 {
                return Err(SequenceError::OutOfOrder {
                    producer_id: pid,
                    epoch,
                    expected: 0,
                    got: first,
                });
            }
            return Ok(SeqCheck::Append);
        }
        let last = last_seq(first, offsets_of(info));
        if let Some(b) = entry
            .batches
            .iter()
            .find(|b| b.first_seq == first && b.last_seq == last)
        {
            return Ok(SeqCheck::Duplicate {
                first_offset: b.first_offset,
                last_offset: b.last_offset,
            });
        }
        let expected = entry.batches.back().map(|b| next_seq(b.last_seq)).unwrap_or(first);
        if first != expected {
            return Err(SequenceError::OutOfOrder {
                producer_id: pid,
                epoch,
                expected,
                got: first,
            });
        }
        Ok(SeqCheck::Append)
    }

    /// Applies a batch that is in the log (its offsets assigned).
    pub fn record(&mut self, info: &BatchInfo) {
        if !info.producer_id.is_producer() {
            return;
        }
        if info.is_control {
            self.record_marker(info);
            return;
        }
        if !self.producers.contains_key(&info.producer_id) && self.producers.len() >= PRODUCERS_MAX {
            self.evict_idlest();
        }
        let entry = self.producers.entry(info.producer_id).or_insert_with(|| ProducerEntry {
            epoch: info.producer_epoch,
            last_timestamp: info.max_timestamp,
            coordinator_epoch: -1,
            batches: VecDeque::new(),
        });
        if info.producer_epoch != entry.epoch {
            entry.epoch = info.producer_epoch;
            entry.batches.clear();
        }
        entry.last_timestamp = entry.last_timestamp.max(info.max_timestamp);
        if entry.batches.len() == BATCHES_KEPT {
            entry.batches.pop_front();
        }
        entry.batches.push_back(BatchSeq {
            first_seq: info.base_sequence,
            last_seq: last_seq(info.base_sequence, offsets_of(info)),
            first_offset: info.base_offset,
            last_offset: info.last_offset(),
        });
    }

    /// A transaction marker moves its producer to the marker's epoch (a
    /// coordinator fencing a producer writes its abort at the new epoch),
    /// forgetting the sequences of the older one, as Kafka does.
    fn record_marker(&mut self, info: &BatchInfo) {
        if !self.producers.contains_key(&info.producer_id) && self.producers.len() >= PRODUCERS_MAX {
            self.evict_idlest();
        }
        let entry = self.producers.entry(info.producer_id).or_insert_with(|| ProducerEntry {
            epoch: info.producer_epoch,
            last_timestamp: info.max_timestamp,
            coordinator_epoch: -1,
            batches: VecDeque::new(),
        });
        if info.producer_epoch > entry.epoch {
            entry.epoch = info.producer_epoch;
            entry.batches.clear();
        }
        entry.last_timestamp = entry.last_timestamp.max(info.max_timestamp);
    }

    fn evict_idlest(&mut self) {
        let idlest = self
            .producers
            .iter()
            .min_by_key(|(_, e)| e.last_timestamp)
            .map(|(pid, _)| *pid);
        if let Some(pid) = idlest {
            self.producers.remove(&pid);
        }
    }

    /// Forgets producers idle since before `cutoff`
    /// (`producer.id.expiration.ms`).
    pub fn expire_before(&mut self, cutoff: TimestampMs) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, e| e.last_timestamp >= cutoff);
        before - self.producers.len()
    }

    pub fn encode(&self, offset: Offset) -> Vec<u8> {
        let mut body = Vec::with_capacity(12 + self.producers.len() * (PRODUCER_BYTES + BATCH_BYTES));
        body.extend_from_slice(&offset.0.to_be_bytes());
        body.extend_from_slice(&(self.producers.len() as u32).to_be_bytes());
        for (pid, e) in &self.producers {
            body.extend_from_slice(&pid.0.to_be_bytes());
            body.extend_from_slice(&e.epoch.to_be_bytes());
            body.extend_from_slice(&e.last_timestamp.0.to_be_bytes());
            body.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
            body.push(e.batches.len() as u8);
            for b in &e.batches {
                body.extend_from_slice(&b.first_seq.to_be_bytes());
                body.extend_from_slice(&b.last_seq.to_be_bytes());
                body.extend_from_slice(&b.first_offset.0.to_be_bytes());
                body.extend_from_slice(&b.last_offset.0.to_be_bytes());
            }
        }
        let open: Vec<(ProducerId, Offset)> = self.txns.open().collect();
        body.extend_from_slice(&(open.len() as u32).to_be_bytes());
        for (pid, first) in open {
            body.extend_from_slice(&pid.0.to_be_bytes());
            body.extend_from_slice(&first.0.to_be_bytes());
        }
        let mut out = Vec::with_capacity(8 + body.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Parses a snapshot: the offset it covers, the state, and the aborted
    /// transactions of a snapshot from before transaction indexes.
    pub fn decode(bytes: &[u8]) -> std::result::Result<Decoded, String> {
        let (txns, with_coordinator_epochs) = match bytes.get(..4) {
            Some(m) if m == MAGIC => (TxnLists::Open, true),
            Some(m) if m == MAGIC_V3 => (TxnLists::OpenAndAborted, true),
            Some(m) if m == MAGIC_V2 => (TxnLists::OpenAndAborted, false),
            Some(m) if m == MAGIC_V1 => (TxnLists::None, false),
            _ => return Err("not a producer-state snapshot".into()),
        };
        let producer_bytes = if with_coordinator_epochs {
            PRODUCER_BYTES
        } else {
            PRODUCER_BYTES_V2
        };
        if bytes.len() < HEADER_BYTES {
            return Err("not a producer-state snapshot".into());
        }
        let crc = u32::from_be_bytes(take::<4>(bytes, 4)?);
        if crc32c::crc32c(&bytes[8..]) != crc {
            return Err("CRC mismatch".into());
        }
        let offset = Offset(i64::from_be_bytes(take::<8>(bytes, 8)?));
        let count = u32::from_be_bytes(take::<4>(bytes, 16)?) as usize;
        if count > (bytes.len() - HEADER_BYTES) / producer_bytes {
            return Err(format!("{count} producers do not fit in {} bytes", bytes.len()));
        }
        let mut at = HEADER_BYTES;
        let mut producers = BTreeMap::new();
        for _ in 0..count {
            let (pid, entry) = decode_producer(bytes, &mut at, with_coordinator_epochs)?;
            producers.insert(pid, entry);
        }
        let (open, legacy_aborted) = match txns {
            TxnLists::None => (TxnState::new(), Vec::new()),
            TxnLists::Open => (TxnState::restore(decode_open(bytes, &mut at)?), Vec::new()),
            TxnLists::OpenAndAborted => {
                let open = TxnState::restore(decode_open(bytes, &mut at)?);
                (open, decode_aborted(bytes, &mut at)?)
            }
        };
        if at != bytes.len() {
            return Err(format!("{} bytes after the last producer", bytes.len() - at));
        }
        Ok(Decoded {
            offset,
            states: ProducerStates { producers, txns: open },
            legacy_aborted,
            txn_indexes_kept: matches!(txns, TxnLists::Open),
        })
    }

    /// Reads `dir`'s snapshot; `None` when there is none or it does not
    /// parse (logged).
    pub async fn load(dir: &Path) -> Result<Option<Decoded>> {
        let path = dir.join(FILE_NAME);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(crate::error::EngineError::io("read producer-state snapshot", &path, e)),
        };
        match ProducerStates::decode(&bytes) {
            Ok(found) => Ok(Some(found)),
            Err(reason) => {
                tracing::warn!(path = %path.display(), %reason, "unreadable producer-state snapshot: rebuilding from the log");
                Ok(None)
            }
        }
    }

    pub async fn store(&self, dir: &Path, offset: Offset) -> Result<()> {
        checkpoint::replace_file(
            dir,
            FILE_NAME,
            TMP_NAME,
            &self.encode(offset),
            &ReplaceOps {
                create: "create producer-state snapshot",
                fdatasync: "fdatasync producer-state snapshot",
                close: "close producer-state snapshot",
            },
        )
        .await
    }
}

/// One producer of a snapshot, from `at` (moved past it).
fn decode_producer(
    bytes: &[u8],
    at: &mut usize,
    with_coordinator_epochs: bool,
) -> std::result::Result<(ProducerId, ProducerEntry), String> {
    let start = *at;
    let pid = ProducerId(i64::from_be_bytes(take::<8>(bytes, start)?));
    let epoch = i16::from_be_bytes(take::<2>(bytes, start + 8)?);
    let ts = i64::from_be_bytes(take::<8>(bytes, start + 10)?);
    let (coordinator_epoch, count_at, fixed) = match with_coordinator_epochs {
        true => (
            i32::from_be_bytes(take::<4>(bytes, start + 18)?),
            start + 22,
            PRODUCER_BYTES,
        ),
        false => (-1, start + 18, PRODUCER_BYTES_V2),
    };
    let n = *bytes.get(count_at).ok_or("truncated producer")? as usize;
    if n > BATCHES_KEPT {
        return Err(format!("producer {pid} claims {n} batches"));
    }
    *at += fixed;
    let mut batches = VecDeque::with_capacity(n);
    for _ in 0..n {
        batches.push_back(BatchSeq {
            first_seq: i32::from_be_bytes(take::<4>(bytes, *at)?),
            last_seq: i32::from_be_bytes(take::<4>(bytes, *at + 4)?),
            first_offset: Offset(i64::from_be_bytes(take::<8>(bytes, *at + 8)?)),
            last_offset: Offset(i64::from_be_bytes(take::<8>(bytes, *at + 16)?)),
        });
        *at += BATCH_BYTES;
    }
    let entry = ProducerEntry {
        epoch,
        last_timestamp: TimestampMs(ts),
        coordinator_epoch,
        batches,
    };
    Ok((pid, entry))
}

/// What a snapshot holds of transactions, by its version.
enum TxnLists {
    None,
    Open,
    OpenAndAborted,
}

/// A snapshot read back.
#[derive(Debug)]
pub struct Decoded {
    /// The state covers the batches below this offset.
    pub offset: Offset,
    pub states: ProducerStates,
    /// An FPS3/FPS2 snapshot's aborted transactions, in marker order, for
    /// the transaction indexes of the segments that hold their markers.
    pub legacy_aborted: Vec<AbortedTxn>,
    /// Written by a version that keeps `.txnindex` files (FPS4): those
    /// files' entries below `offset` are its, and durable.
    pub txn_indexes_kept: bool,
}

/// The open transactions of a snapshot, from `at`.
fn decode_open(bytes: &[u8], at: &mut usize) -> std::result::Result<Vec<(ProducerId, Offset)>, String> {
    let open_count = u32::from_be_bytes(take::<4>(bytes, *at)?) as usize;
    *at += 4;
    if open_count > bytes.len().saturating_sub(*at) / OPEN_TXN_BYTES {
        return Err(format!("{open_count} open transactions do not fit"));
    }
    let mut open = Vec::with_capacity(open_count);
    for _ in 0..open_count {
        let pid = ProducerId(i64::from_be_bytes(take::<8>(bytes, *at)?));
        let first = Offset(i64::from_be_bytes(take::<8>(bytes, *at + 8)?));
        open.push((pid, first));
        *at += OPEN_TXN_BYTES;
    }
    Ok(open)
}

/// The aborted transactions of an FPS3/FPS2 snapshot, from `at`; refused
/// unless in marker order.
fn decode_aborted(bytes: &[u8], at: &mut usize) -> std::result::Result<Vec<AbortedTxn>, String> {
    let aborted_count = u32::from_be_bytes(take::<4>(bytes, *at)?) as usize;
    *at += 4;
    if aborted_count > bytes.len().saturating_sub(*at) / AbortedTxn::BYTES {
        return Err(format!("{aborted_count} aborted transactions do not fit"));
    }
    let mut aborted = Vec::with_capacity(aborted_count);
    for _ in 0..aborted_count {
        let entry = bytes
            .get(*at..*at + AbortedTxn::BYTES)
            .ok_or("truncated aborted transaction")?;
        aborted.push(AbortedTxn::decode(entry)?);
        *at += AbortedTxn::BYTES;
    }
    if aborted.windows(2).any(|w| w[0].last_offset >= w[1].last_offset) {
        return Err("aborted transactions out of marker order".into());
    }
    Ok(aborted)
}

fn take<const N: usize>(bytes: &[u8], at: usize) -> std::result::Result<[u8; N], String> {
    bytes
        .get(at..at + N)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| format!("truncated at byte {at}"))
}

#[cfg(test)]
#[path = "producer_state_tests.rs"]
mod tests;
