//! KIP-890's verification, a partition leader's side: before the first
//! batch of a producer's transaction is appended to a partition, the
//! leader asks the transaction coordinator whether that transaction is
//! open and holds the partition. A write the coordinator was not told of
//! (a producer that skipped AddPartitionsToTxn, a retry that arrives after
//! the transaction ended) is refused instead of opening a transaction that
//! nothing would ever end — one that would hold the partition's last
//! stable offset, and every `read_committed` consumer, for good.
//!
//! Once a producer's transaction is open on the partition its later
//! batches pass without asking — unless a marker of the producer is on its
//! way into the partition (it may end that transaction before the batch
//! takes its place: then the coordinator is asked). One verification per partition and
//! producer runs at a time: a batch that finds one running waits for it and
//! looks again, so a producer's pipelined batches keep their order. A
//! marker of the producer that starts on the partition while its
//! verification runs (the transaction ending between the coordinator's
//! answer and the append: the guard of Kafka's verification) makes it ask
//! again, so a batch never lands after the marker that ended its
//! transaction.
//!
//! The coordinator is asked on its shard when this broker leads the
//! transactional id's `__transaction_state` partition (always,
//! standalone), else with AddPartitionsToTxn v4 (`verify_only`). As in
//! Kafka, a coordinator that cannot answer now (loading, moving, a
//! transaction ending, the network) fails the write with the retriable
//! NOT_ENOUGH_REPLICAS, PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH, a
//! partition not in the transaction is INVALID_TXN_STATE, and an id the
//! coordinator does not know (or another producer's) is
//! INVALID_PRODUCER_ID_MAPPING.
//!
//! Every broker of a cluster must speak AddPartitionsToTxn v4 before
//! verification is on (`transaction.partition.verification.enable`): a
//! coordinator that does not answer it fails every transaction's first
//! writes, retriably, until it does.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use ferrite_engine::{PartitionLog, ProducerId, TopicPartition};
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::topic_partitions::TopicPartitions;
use ferrite_protocol::txn_producer::ADD_PARTITIONS_TO_TXN_KEY;
use ferrite_protocol::txn_verify::{
    AddPartitionsToTxnBatch, AddPartitionsToTxnBatchResponse, TxnToVerify, BATCHED_FROM,
};
use ferrite_replication::BrokerId;
use ferrite_transactions::metadata::Caller;
use glommio::sync::Semaphore;

use crate::shard::BrokerShard;

/// How long a coordinator on another broker may take to answer.
const REMOTE_TIMEOUT_MS: u64 = 10_000;
/// Largest answer read from it.
const RESPONSE_BYTES_MAX: usize = 1 << 20;

/// Who writes a transactional batch: the produce's transactional id and
/// the batch's producer id and epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnWriter {
    pub transactional_id: String,
    pub caller: Caller,
}

impl TxnWriter {
    /// The writer of `records` (a producer's record set: one batch) when
    /// it is a transactional data batch of a produce with a transactional
    /// id; `None` otherwise (the log checks the rest).
    pub fn of(transactional_id: Option<&str>, records: &Bytes) -> Option<TxnWriter> {
        let id = transactional_id?;
        let info = ferrite_engine::batch::peek(records).ok()?;
        (info.is_transactional && !info.is_control && info.producer_id.is_producer()).then(|| TxnWriter {
            transactional_id: id.to_string(),
            caller: Caller {
                producer_id: info.producer_id,
                producer_epoch: info.producer_epoch,
            },
        })
    }
}

/// Most times a verification asks again because markers of its producer
/// kept starting on the partition meanwhile.
const ASKS_MAX: usize = 5;

/// The verifications running on a shard, and the markers on their way
/// into its partitions, by partition and producer.
#[derive(Default)]
pub struct Verifications {
    running: RefCell<HashMap<(TopicPartition, ProducerId), Rc<Pending>>>,
    markers: RefCell<HashMap<(TopicPartition, ProducerId), u32>>,
}

/// One running verification.
struct Pending {
    /// Closed when it ends.
    gate: Semaphore,
    /// A marker of the producer started on the partition meanwhile.
    marker_started: Cell<bool>,
}

impl Verifications {
    /// A marker of `producer_id` is about to be appended to `tp` (called
    /// before anything is awaited on its way); until the returned guard is
    /// dropped (the marker written, or failed), the producer's batches to
    /// `tp` are verified even with a transaction open there.
    pub fn marker_starting(&self, tp: &TopicPartition, producer_id: ProducerId) -> MarkerOnItsWay<'_> {
        let key = (tp.clone(), producer_id);
        if let Some(p) = self.running.borrow().get(&key) {
            p.marker_started.set(true);
        }
        *self.markers.borrow_mut().entry(key.clone()).or_default() += 1;
        MarkerOnItsWay { all: self, key }
    }

    fn marker_on_its_way(&self, key: &(TopicPartition, ProducerId)) -> bool {
        self.markers.borrow().contains_key(key)
    }
}

/// A marker on its way into a partition (see
/// [`Verifications::marker_starting`]).
pub struct MarkerOnItsWay<'a> {
    all: &'a Verifications,
    key: (TopicPartition, ProducerId),
}

impl Drop for MarkerOnItsWay<'_> {
    fn drop(&mut self) {
        let mut markers = self.all.markers.borrow_mut();
        if let Some(n) = markers.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                markers.remove(&self.key);
            }
        }
    }
}

/// Ends a verification: its waiters look again (also when the produce is
/// dropped half way).
struct Running<'a> {
    all: &'a Verifications,
    key: (TopicPartition, ProducerId),
    pending: Rc<Pending>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.all.running.borrow_mut().remove(&self.key);
        self.pending.gate.close();
    }
}

/// On the partition's shard, right before `writer`'s batch is appended to
/// `log` (nothing is awaited between this and the append): `Ok` once the
/// producer's transaction is known to hold the partition.
pub async fn before_append(
    s: &Rc<BrokerShard>,
    tp: &TopicPartition,
    log: &PartitionLog,
    writer: &TxnWriter,
) -> Result<(), ErrorCode> {
    // The common case, a later batch of an open transaction while no
    // marker is on its way on this shard: no key built.
    if log.txn_open(writer.caller.producer_id) && s.txn_verifications.markers.borrow().is_empty() {
        return Ok(());
    }
    let key = (tp.clone(), writer.caller.producer_id);
    loop {
        if log.txn_open(writer.caller.producer_id) && !s.txn_verifications.marker_on_its_way(&key) {
            return Ok(());
        }
        let running = s.txn_verifications.running.borrow().get(&key).cloned();
        match running {
            // Closed when it ends: then look again.
            Some(p) => drop(p.gate.acquire(1).await),
            None => break,
        }
    }
    let pending = Rc::new(Pending {
        gate: Semaphore::new(0),
        marker_started: Cell::new(false),
    });
    s.txn_verifications
        .running
        .borrow_mut()
        .insert(key.clone(), pending.clone());
    let _running = Running {
        all: &s.txn_verifications,
        key,
        pending: pending.clone(),
    };
    for _ in 0..ASKS_MAX {
        pending.marker_started.set(false);
        ask_coordinator(s, writer, tp).await.map_err(for_produce)?;
        if !pending.marker_started.get() {
            return Ok(());
        }
    }
    Err(ErrorCode::NotEnoughReplicas)
}

/// A coordinator's answer as the produce reports it (Kafka's mapping).
fn for_produce(code: ErrorCode) -> ErrorCode {
    match code {
        ErrorCode::ProducerFenced => ErrorCode::InvalidProducerEpoch,
        ErrorCode::NotCoordinator
        | ErrorCode::CoordinatorNotAvailable
        | ErrorCode::CoordinatorLoadInProgress
        | ErrorCode::ConcurrentTransactions
        | ErrorCode::RequestTimedOut => ErrorCode::NotEnoughReplicas,
        ErrorCode::ClusterAuthorizationFailed => ErrorCode::InvalidTxnState,
        other => other,
    }
}

/// Asks the coordinator of `writer`'s transactional id, here or remote.
async fn ask_coordinator(s: &Rc<BrokerShard>, writer: &TxnWriter, tp: &TopicPartition) -> Result<(), ErrorCode> {
    let state_tp = s.transactions.topic_partition(&writer.transactional_id);
    let remote = match &s.replicas {
        None => None,
        Some(_) => {
            let leader = s
                .meta()
                .topic(&state_tp.topic)
                .and_then(|t| t.partition(state_tp.partition))
                .and_then(|pm| pm.leader)
                .ok_or(ErrorCode::CoordinatorNotAvailable)?;
            (leader != s.broker_id()).then_some(leader)
        }
    };
    if let Some(leader) = remote {
        return ask_remote(s, leader, writer, tp).await;
    }
    let (id, caller, partition) = (writer.transactional_id.clone(), writer.caller, tp.clone());
    s.run_on(s.owner(&state_tp), move |c: Rc<BrokerShard>| async move {
        let verified = c.transactions.verify(&c, &id, caller, &partition).await;
        verified.map_err(|e| crate::error_map::txn(e, i16::MAX, 0))
    })
    .await
    .map_err(|_| ErrorCode::CoordinatorNotAvailable)?
}

async fn ask_remote(
    s: &Rc<BrokerShard>,
    coordinator: BrokerId,
    writer: &TxnWriter,
    tp: &TopicPartition,
) -> Result<(), ErrorCode> {
    let request = AddPartitionsToTxnBatch {
        transactions: vec![TxnToVerify {
            transactional_id: writer.transactional_id.clone(),
            producer_id: writer.caller.producer_id,
            producer_epoch: writer.caller.producer_epoch,
            verify_only: true,
            topics: vec![TopicPartitions {
                topic: tp.topic.clone(),
                partitions: vec![tp.partition],
            }],
        }],
    };
    let timeout = Duration::from_millis(REMOTE_TIMEOUT_MS);
    let answer = super::inter_broker::call(
        s,
        coordinator,
        request_frame(&request),
        (RESPONSE_BYTES_MAX, true),
        timeout,
    )
    .await
    .and_then(|mut r| {
        AddPartitionsToTxnBatchResponse::decode(&mut r, BATCHED_FROM).map_err(ferrite_client::codec::invalid_data)
    });
    // A coordinator that cannot be reached: as a timeout, retriable.
    let response = answer.map_err(|e| {
        tracing::debug!(%coordinator, error = %e, "transaction verification failed");
        ErrorCode::RequestTimedOut
    })?;
    if response.error_code != 0 {
        return Err(remote_code(response.error_code));
    }
    let code = response
        .results
        .iter()
        .flat_map(|t| t.topics.iter())
        .filter(|t| t.topic == tp.topic)
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == tp.partition)
        .map_or(ErrorCode::RequestTimedOut.code(), |p| p.error_code);
    match remote_code(code) {
        ErrorCode::None => Ok(()),
        other => Err(other),
    }
}

/// A remote coordinator's code as one of ours; one this broker does not
/// expect is UNKNOWN_SERVER_ERROR.
fn remote_code(code: i16) -> ErrorCode {
    const KNOWN: [ErrorCode; 11] = [
        ErrorCode::None,
        ErrorCode::CoordinatorLoadInProgress,
        ErrorCode::CoordinatorNotAvailable,
        ErrorCode::NotCoordinator,
        ErrorCode::ClusterAuthorizationFailed,
        ErrorCode::InvalidProducerEpoch,
        ErrorCode::InvalidTxnState,
        ErrorCode::InvalidProducerIdMapping,
        ErrorCode::ConcurrentTransactions,
        ErrorCode::TransactionalIdAuthorizationFailed,
        ErrorCode::ProducerFenced,
    ];
    KNOWN
        .into_iter()
        .find(|c| c.code() == code)
        .unwrap_or(ErrorCode::UnknownServerError)
}

/// The frame of an AddPartitionsToTxn v4 request (size prefix included;
/// flexible: request header v2).
fn request_frame(request: &AddPartitionsToTxnBatch) -> Bytes {
    let mut body = ferrite_protocol::wire::Writer::new();
    request.encode(&mut body, BATCHED_FROM);
    super::inter_broker::frame(ADD_PARTITIONS_TO_TXN_KEY, BATCHED_FROM, "ferrite-txn-verify", body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_protocol::request::{decode_frame, Decoded, RequestBody};

    #[test]
    fn the_request_frame_decodes_as_a_coordinator_reads_it() {
        let request = AddPartitionsToTxnBatch {
            transactions: vec![TxnToVerify {
                transactional_id: "tx".into(),
                producer_id: ProducerId(3),
                producer_epoch: 1,
                verify_only: true,
                topics: vec![TopicPartitions {
                    topic: "out".into(),
                    partitions: vec![2],
                }],
            }],
        };
        let frame = request_frame(&request);
        let Ok(Decoded::Request(r)) = decode_frame(frame.slice(4..)) else {
            panic!("the frame does not decode")
        };
        let RequestBody::AddPartitionsToTxnBatch(got) = r.body else {
            panic!("not the batched form: {:?}", r.body)
        };
        assert_eq!(got, request);
    }

    #[test]
    fn only_a_transactional_data_batch_with_a_transactional_id_is_verified() {
        let mut b =
            ferrite_engine::batch::build_batch(ferrite_engine::Offset(0), ferrite_engine::TimestampMs(1), &[b"v"]);
        ferrite_engine::batch::set_producer(&mut b, ProducerId(7), 2, 0);
        let plain = Bytes::from(b.clone());
        assert_eq!(TxnWriter::of(Some("tx"), &plain), None, "idempotent, not transactional");
        b[21..23].copy_from_slice(&ferrite_engine::batch::ATTR_TRANSACTIONAL.to_be_bytes());
        let txn = Bytes::from(b);
        assert_eq!(TxnWriter::of(None, &txn), None, "refused earlier without an id");
        let w = TxnWriter::of(Some("tx"), &txn).expect("a writer");
        assert_eq!((w.caller.producer_id, w.caller.producer_epoch), (ProducerId(7), 2));
    }
}
