//! What the coordinators (groups, transactions) share about the partitions
//! of their internal topics: where a write goes ([`Sink`]), a write as one
//! batch (plain, or a producer's transactional batch for TxnOffsetCommit,
//! or a transaction marker), and a partition read back whole when it is
//! loaded ([`read_all`]).

use std::rc::Rc;

use bytes::BytesMut;
use ferrite_engine::batch::{self, Compression, Validation, HEADER_BYTES};
use ferrite_engine::log_read::{ReadRegion, SizeLimit};
use ferrite_engine::record::{decode_records, Record};
use ferrite_engine::txn_state::{self, Marker};
use ferrite_engine::{AppendMode, EngineError, LeaderEpoch, Offset, PartitionLog, ProducerId, TimestampMs};
use ferrite_protocol::errors::ErrorCode;
use ferrite_replication::{Acks, LocalReplica, MonoMs};

/// Bytes read per step while loading a partition.
const LOAD_READ_BYTES: usize = 1 << 20;
/// Largest decompressed batch accepted while loading.
const LOAD_DECOMPRESSED_BYTES_MAX: usize = 64 << 20;
/// How long a coordinator write may wait for the ISR.
pub const WRITE_TIMEOUT_MS: u64 = 5_000;

/// Where a coordinator write goes: a standalone broker's log, or the
/// replica this broker leads.
pub enum Sink {
    Log(Rc<PartitionLog>, LeaderEpoch),
    Replica(Rc<LocalReplica>),
}

/// A record to write: key, and value or `None` for a tombstone.
pub type KeyValue = (Vec<u8>, Option<Vec<u8>>);
/// A record as read back: key and value, either possibly null.
pub type ReadRecord = (Option<Vec<u8>>, Option<Vec<u8>>);

/// Who a write's batch belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    /// The coordinator's own records.
    Coordinator,
    /// A producer's transactional records (TxnOffsetCommit): they count
    /// once the producer's transaction commits.
    Transaction {
        producer_id: ProducerId,
        producer_epoch: i16,
    },
}

impl Sink {
    pub fn log(&self) -> &Rc<PartitionLog> {
        match self {
            Sink::Log(log, _) => log,
            Sink::Replica(r) => r.log(),
        }
    }

    /// The leader epoch the state was loaded under (`None` standalone).
    pub fn epoch(&self) -> Option<LeaderEpoch> {
        match self {
            Sink::Log(..) => None,
            Sink::Replica(r) => Some(r.leader_epoch()),
        }
    }

    /// Appends `records` as one batch; returns once durable as the broker
    /// defines it (the ISR has them in a cluster), with the batch's offset.
    /// A failure is the Kafka error it would be for a producer (logged here
    /// with its cause).
    pub async fn append(&self, records: &[KeyValue], writer: Writer, now: MonoMs) -> Result<Offset, ErrorCode> {
        let bytes = batch_of(records, writer);
        let mode = |epoch| match writer {
            Writer::Coordinator => AppendMode::Leader { epoch },
            Writer::Transaction { .. } => AppendMode::Coordinator { epoch },
        };
        self.write(bytes, mode, now).await
    }

    /// Appends a transaction marker of a producer.
    pub async fn append_marker(&self, marker: TxnMarker, now: MonoMs) -> Result<(), ErrorCode> {
        let bytes = txn_state::marker_batch(
            marker.producer_id,
            marker.producer_epoch,
            marker.result,
            marker.coordinator_epoch,
            TimestampMs(crate::groups::coordinator::wall_ms()),
        );
        self.write(
            BytesMut::from(&bytes[..]),
            |epoch| AppendMode::Coordinator { epoch },
            now,
        )
        .await
        .map(|_| ())
    }

    async fn write(
        &self,
        bytes: BytesMut,
        mode: impl Fn(LeaderEpoch) -> AppendMode,
        now: MonoMs,
    ) -> Result<Offset, ErrorCode> {
        let tp = self.log().topic_partition().clone();
        match self {
            Sink::Log(log, epoch) => log
                .append(bytes, mode(*epoch))
                .await
                .map(|a| a.first_offset)
                .map_err(|e| {
                    tracing::warn!(%tp, error = %e, "coordinator write failed");
                    crate::error_map::engine(&e)
                }),
            Sink::Replica(r) => {
                let deadline = now.plus_ms(WRITE_TIMEOUT_MS);
                let appended = match mode(r.leader_epoch()) {
                    AppendMode::Coordinator { .. } => r.write_markers(bytes, deadline).await,
                    _ => r.produce(bytes, Acks::All, deadline).await,
                };
                appended.map(|a| a.first_offset).map_err(|e| {
                    tracing::warn!(%tp, error = %e, "coordinator write failed");
                    crate::error_map::replica_op(&e)
                })
            }
        }
    }
}

/// A marker to write: what the coordinator decided for a producer's
/// transaction, under its coordinator epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnMarker {
    pub producer_id: ProducerId,
    pub producer_epoch: i16,
    pub result: Marker,
    pub coordinator_epoch: i32,
}

fn batch_of(records: &[KeyValue], writer: Writer) -> BytesMut {
    let recs: Vec<Record<'_>> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            offset_delta: i as i32,
            timestamp_delta: 0,
            key: Some(k),
            value: v.as_deref(),
            headers: Vec::new(),
        })
        .collect();
    let now = TimestampMs(crate::groups::coordinator::wall_ms());
    let mut bytes = batch::build_batch_of_records(Offset(0), now, &recs);
    if let Writer::Transaction {
        producer_id,
        producer_epoch,
    } = writer
    {
        bytes[21..23].copy_from_slice(&batch::ATTR_TRANSACTIONAL.to_be_bytes());
        // The sequence is not checked for a coordinator's write (as in
        // Kafka); 0 marks the batch as a producer's.
        batch::set_producer(&mut bytes, producer_id, producer_epoch, 0);
    }
    BytesMut::from(&bytes[..])
}

/// A batch as loaded: its records, or the marker it is.
#[derive(Debug)]
pub enum Loaded {
    Records {
        /// The batch's offset.
        base_offset: Offset,
        /// The producer of a transactional batch.
        transaction: Option<ProducerId>,
        records: Vec<ReadRecord>,
    },
    Marker {
        producer_id: ProducerId,
        result: Marker,
    },
}

/// Every batch of `log` from its start to its end, in order.
pub async fn read_all(log: &Rc<PartitionLog>, topic: &str) -> Result<Vec<Loaded>, EngineError> {
    let end = log.log_end_offset();
    let mut at = log.log_start_offset();
    let mut out = Vec::new();
    while at < end {
        let read = log.read(at, LOAD_READ_BYTES, end, SizeLimit::AtLeastOneBatch).await?;
        if matches!(read.region, ReadRegion::Empty) || read.next_offset <= at {
            break;
        }
        let chunk = read.to_vec().await?;
        collect_batches(&chunk, topic, &mut out);
        at = read.next_offset;
    }
    Ok(out)
}

/// The batches in `chunk` (whole batches as the log returned them),
/// decompressing where needed; what cannot be read is skipped and said.
fn collect_batches(chunk: &[u8], topic: &str, out: &mut Vec<Loaded>) {
    let mut pos = 0;
    while pos + HEADER_BYTES <= chunk.len() {
        let Ok(info) = batch::validate(&chunk[pos..], chunk.len() - pos, Validation::Stored) else {
            tracing::warn!(
                topic,
                position = pos,
                "unreadable batch; the rest of the read is skipped"
            );
            return;
        };
        let whole = &chunk[pos..pos + info.size];
        pos += info.size;
        if info.is_control {
            if let Some(result) = txn_state::marker_if_control(whole, &info) {
                out.push(Loaded::Marker {
                    producer_id: info.producer_id,
                    result,
                });
            }
            continue;
        }
        let body = &whole[HEADER_BYTES..];
        let plain;
        let body = if info.compression == Compression::None {
            body
        } else {
            match ferrite_engine::compression::decompress(info.compression, body, LOAD_DECOMPRESSED_BYTES_MAX) {
                Ok(p) => {
                    plain = p;
                    &plain[..]
                }
                Err(e) => {
                    tracing::warn!(topic, error = %e, "undecompressable batch skipped");
                    continue;
                }
            }
        };
        match decode_records(body, info.record_count) {
            Ok(rs) => out.push(Loaded::Records {
                base_offset: info.base_offset,
                transaction: info.is_transactional.then_some(info.producer_id),
                records: rs
                    .into_iter()
                    .map(|r| (r.key.map(<[u8]>::to_vec), r.value.map(<[u8]>::to_vec)))
                    .collect(),
            }),
            Err(e) => tracing::warn!(topic, error = %e, "undecodable records skipped"),
        }
    }
}
