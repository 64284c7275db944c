//! `ferrite transactions producers` and `ferrite transactions abort`: a
//! partition's producers and their open transactions (DescribeProducers),
//! and ending a *hanging* transaction by hand — one open on a partition
//! that its coordinator no longer knows, which holds back every
//! `read_committed` consumer of it — like `kafka-transactions.sh
//! describe-producers` and `abort`.
//!
//! `abort` writes an ABORT marker to the partition's leader
//! (WriteTxnMarkers, which needs CLUSTER_ACTION) for the producer whose
//! open transaction starts at `--start-offset` (found with
//! DescribeProducers), or for an explicit `--producer-id` and
//! `--producer-epoch`. The transaction's records stay in the log, skipped
//! by `read_committed` readers, and the last stable offset moves on.

use clap::Args;
use ferrite_client::{ClientError, Connection};
use ferrite_ids::ProducerId;
use ferrite_protocol::describe_producers::{self as dp, DescribeProducersRequest, DescribeProducersResponse};
use ferrite_protocol::topic_partitions::TopicPartitions;
use ferrite_protocol::write_txn_markers::{self as wtm, WritableTxnMarker, WriteTxnMarkersRequest};

use crate::check;

const CLIENT_ID: &str = "ferrite-cli";
const WRITE_TXN_MARKERS_V: i16 = 1;

/// Which transaction `abort` ends.
#[derive(Args, Debug)]
pub struct AbortArgs {
    /// The topic of the partition the transaction hangs on.
    #[arg(long)]
    pub topic: String,
    /// The partition (its leader gets the marker).
    #[arg(long)]
    pub partition: i32,
    /// The first offset of the open transaction (as `producers` shows it).
    #[arg(long, conflicts_with_all = ["producer_id", "producer_epoch"])]
    pub start_offset: Option<i64>,
    /// The producer whose transaction to abort (with --producer-epoch).
    #[arg(long, requires = "producer_epoch")]
    pub producer_id: Option<i64>,
    /// The producer's epoch (with --producer-id).
    #[arg(long, requires = "producer_id")]
    pub producer_epoch: Option<i16>,
    /// The coordinator epoch the marker carries (default: the producer's
    /// last marker's on the partition, as `producers` shows it, or 0).
    #[arg(long)]
    pub coordinator_epoch: Option<i32>,
}

/// The address of `topic`-`partition`'s leader.
fn leader_of(bootstrap: &str, topic: &str, partition: i32) -> Result<String, ClientError> {
    crate::delete_records::partition_leaders(bootstrap, topic)?
        .remove(&partition)
        .ok_or_else(|| ClientError::Kafka(format!("{topic}: no partition {partition}")))?
}

/// The producers `topic`-`partition`'s leader knows.
pub fn producers(bootstrap: &str, topic: &str, partition: i32) -> Result<Vec<dp::ProducerDescription>, ClientError> {
    let mut c = Connection::connect(&leader_of(bootstrap, topic, partition)?, CLIENT_ID)?;
    let req = DescribeProducersRequest {
        topics: vec![TopicPartitions {
            topic: topic.to_string(),
            partitions: vec![partition],
        }],
    };
    let mut r = c.call_flexible(dp::API_KEY, dp::VERSION_MAX, |w| req.encode(w, dp::VERSION_MAX))?;
    let resp = DescribeProducersResponse::decode(&mut r, dp::VERSION_MAX)?;
    let p = resp
        .topics
        .into_iter()
        .flat_map(|t| t.partitions)
        .find(|p| p.partition_index == partition)
        .ok_or_else(|| ClientError::Kafka(format!("{topic}-{partition}: no answer")))?;
    check(&format!("{topic}-{partition}"), p.error_code, p.error_message)?;
    Ok(p.active_producers)
}

/// Writes the ABORT marker; returns the producer id and epoch it used.
pub fn abort(bootstrap: &str, a: &AbortArgs) -> Result<(ProducerId, i16), ClientError> {
    let (producer_id, producer_epoch, last_coordinator_epoch) = match (a.start_offset, a.producer_id, a.producer_epoch)
    {
        (Some(start), _, _) => {
            let all = producers(bootstrap, &a.topic, a.partition)?;
            let p = all
                .iter()
                .find(|p| p.current_txn_start_offset == start)
                .ok_or_else(|| {
                    ClientError::Kafka(format!(
                        "{}-{}: no open transaction starts at offset {start}",
                        a.topic, a.partition
                    ))
                })?;
            let epoch = i16::try_from(p.producer_epoch)
                .ok()
                .filter(|e| *e >= 0)
                .ok_or_else(|| {
                    ClientError::Kafka(format!(
                        "producer {}: epoch {} unknown; give --producer-id and --producer-epoch",
                        p.producer_id.0, p.producer_epoch
                    ))
                })?;
            (p.producer_id, epoch, p.coordinator_epoch)
        }
        (None, Some(id), Some(epoch)) => (ProducerId(id), epoch, 0),
        _ => {
            return Err(ClientError::Kafka(
                "give --start-offset, or --producer-id with --producer-epoch".into(),
            ))
        }
    };
    let req = WriteTxnMarkersRequest {
        markers: vec![WritableTxnMarker {
            producer_id,
            producer_epoch,
            transaction_result: false,
            topics: vec![TopicPartitions {
                topic: a.topic.clone(),
                partitions: vec![a.partition],
            }],
            coordinator_epoch: a.coordinator_epoch.unwrap_or(last_coordinator_epoch.max(0)),
        }],
    };
    let mut c = Connection::connect(&leader_of(bootstrap, &a.topic, a.partition)?, CLIENT_ID)?;
    let mut r = c.call_flexible(wtm::API_KEY, WRITE_TXN_MARKERS_V, |w| {
        req.encode(w, WRITE_TXN_MARKERS_V)
    })?;
    let resp = wtm::WriteTxnMarkersResponse::decode(&mut r, WRITE_TXN_MARKERS_V)?;
    let code = resp
        .markers
        .iter()
        .flat_map(|m| m.topics.iter())
        .flat_map(|t| t.partitions.iter())
        .map(|p| p.error_code)
        .next()
        .ok_or_else(|| ClientError::Kafka("an empty WriteTxnMarkers answer".into()))?;
    check(&format!("{}-{}", a.topic, a.partition), code, None)?;
    Ok((producer_id, producer_epoch))
}
