//! Transaction markers: a coordinator's COMMIT or ABORT written to each
//! partition of a transaction, by the partition's leader. Partitions this
//! broker leads (every partition, standalone) are written on their shards;
//! the others' leaders get a WriteTxnMarkers request. A marker on a
//! `__consumer_offsets` partition also ends the transaction's pending
//! offsets in the group coordinator.
//!
//! Markers are written with acks=all in a cluster; a partition that is
//! gone (its topic deleted) needs none; any other failure is retried by
//! the caller until the coordinator stops being one.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use ferrite_engine::txn_state::Marker;
use ferrite_engine::{LeaderEpoch, TopicPartition};
use ferrite_groups::OFFSETS_TOPIC;
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::topic_partitions::TopicPartitions;
use ferrite_protocol::write_txn_markers::{
    WritableTxnMarker, WriteTxnMarkersRequest, WriteTxnMarkersResponse, API_KEY, VERSION_MAX,
};
use ferrite_replication::{BrokerId, RoleKind};

use crate::coordinator_log::{Sink, TxnMarker};
use crate::shard::BrokerShard;

/// Largest WriteTxnMarkers answer read from a leader.
const RESPONSE_BYTES_MAX: usize = 16 << 20;
/// How long a leader may take to answer WriteTxnMarkers.
const REMOTE_TIMEOUT_MS: u64 = 30_000;

/// Writes `marker` to each of `partitions`; returns those to try again.
pub async fn write_all(
    shard: &Rc<BrokerShard>,
    marker: TxnMarker,
    partitions: Vec<TopicPartition>,
) -> Vec<TopicPartition> {
    let meta = shard.meta();
    let me = shard.broker_id();
    let mut by_leader: BTreeMap<Option<BrokerId>, Vec<TopicPartition>> = BTreeMap::new();
    for tp in partitions {
        let leader = match shard.replicas {
            None => Some(me),
            Some(_) => meta
                .topic(&tp.topic)
                .and_then(|t| t.partition(tp.partition))
                .and_then(|pm| pm.leader),
        };
        by_leader.entry(leader).or_default().push(tp);
    }
    let mut left = Vec::new();
    for (leader, tps) in by_leader {
        match leader {
            Some(l) if l == me => {
                for tp in tps {
                    let code = write_on_owner(shard, tp.clone(), marker).await;
                    if retriable(code) {
                        tracing::debug!(%tp, error = ?code, "transaction marker not written yet");
                        left.push(tp);
                    }
                }
            }
            Some(l) => left.extend(write_remote(shard, l, marker, tps).await),
            // No leader right now, or no longer in the metadata: a topic
            // deleted needs no marker; one without a leader waits.
            None => left.extend(tps.into_iter().filter(|tp| meta.topic(&tp.topic).is_some())),
        }
    }
    left
}

/// Whether a marker that failed with `code` is sent again. A partition
/// gone needs none; one that knows a newer epoch of the producer, or a
/// marker of a newer coordinator, has been fenced past this transaction
/// (as Kafka, the coordinator stops sending).
fn retriable(code: ErrorCode) -> bool {
    !DONE.contains(&code)
}

const DONE: [ErrorCode; 4] = [
    ErrorCode::None,
    ErrorCode::UnknownTopicOrPartition,
    ErrorCode::InvalidProducerEpoch,
    ErrorCode::TransactionCoordinatorFenced,
];

/// Writes `marker` to `tp` on the shard that owns it, here.
pub async fn write_on_owner(shard: &Rc<BrokerShard>, tp: TopicPartition, marker: TxnMarker) -> ErrorCode {
    let owner = shard.owner(&tp);
    shard
        .run_on(owner, move |s: Rc<BrokerShard>| async move {
            write_here(&s, &tp, marker).await
        })
        .await
        .unwrap_or(ErrorCode::NotLeaderOrFollower)
}

async fn write_here(s: &Rc<BrokerShard>, tp: &TopicPartition, marker: TxnMarker) -> ErrorCode {
    // Before any await: a verification of the producer's write running
    // here asks again (see `verify`).
    let _on_its_way = s.txn_verifications.marker_starting(tp, marker.producer_id);
    // A group partition is loaded first, so the marker ends the pending
    // offsets in memory (a load that read the log before the marker was
    // appended would never see it).
    if tp.topic == OFFSETS_TOPIC && s.groups.ensure_loaded(&**s, tp.partition).await.is_err() {
        return ErrorCode::NotLeaderOrFollower;
    }
    let sink = match &s.replicas {
        Some(replicas) => match replicas.get(tp) {
            Some(r) if r.role() == RoleKind::Leader => Sink::Replica(r),
            Some(_) => return ErrorCode::NotLeaderOrFollower,
            None => return ErrorCode::UnknownTopicOrPartition,
        },
        None => match s.served_log(tp) {
            Ok(log) => Sink::Log(log, LeaderEpoch(0)),
            Err(code) => return code,
        },
    };
    if let Err(code) = sink.append_marker(marker, s.transactions.now()).await {
        return code;
    }
    if tp.topic == OFFSETS_TOPIC {
        s.groups
            .end_txn(tp.partition, marker.producer_id, marker.result == Marker::Commit)
            .await;
    }
    ErrorCode::None
}

/// Sends WriteTxnMarkers for `tps` to `leader`; returns the partitions to
/// try again.
async fn write_remote(
    shard: &Rc<BrokerShard>,
    leader: BrokerId,
    marker: TxnMarker,
    tps: Vec<TopicPartition>,
) -> Vec<TopicPartition> {
    let request = WriteTxnMarkersRequest {
        markers: vec![WritableTxnMarker {
            producer_id: marker.producer_id,
            producer_epoch: marker.producer_epoch,
            transaction_result: marker.result == Marker::Commit,
            topics: TopicPartitions::from_runs(tps.iter().map(|tp| (tp.topic.clone(), tp.partition))),
            coordinator_epoch: marker.coordinator_epoch,
        }],
    };
    let answer = call_leader(shard, leader, &request).await;
    match answer {
        // What the answer does not say was done is sent again.
        Ok(response) => {
            let done: std::collections::BTreeSet<(&str, i32)> = response
                .markers
                .iter()
                .flat_map(|m| &m.topics)
                .flat_map(|t| t.partitions.iter().map(move |p| (t.topic.as_str(), p)))
                .filter(|(_, p)| DONE.iter().any(|c| c.code() == p.error_code))
                .map(|(topic, p)| (topic, p.partition_index))
                .collect();
            tps.iter()
                .filter(|tp| !done.contains(&(tp.topic.as_str(), tp.partition)))
                .cloned()
                .collect()
        }
        Err(e) => {
            tracing::debug!(%leader, error = %e, "WriteTxnMarkers failed");
            tps
        }
    }
}

async fn call_leader(
    shard: &Rc<BrokerShard>,
    leader: BrokerId,
    request: &WriteTxnMarkersRequest,
) -> std::io::Result<WriteTxnMarkersResponse> {
    let timeout = Duration::from_millis(REMOTE_TIMEOUT_MS);
    let mut r = super::inter_broker::call(
        shard,
        leader,
        request_frame(request),
        (RESPONSE_BYTES_MAX, true),
        timeout,
    )
    .await?;
    WriteTxnMarkersResponse::decode(&mut r, VERSION_MAX).map_err(ferrite_client::codec::invalid_data)
}

/// The frame of a WriteTxnMarkers request (size prefix included). v1 is
/// flexible: request header v2 (the answer comes with header v1).
fn request_frame(request: &WriteTxnMarkersRequest) -> bytes::Bytes {
    let mut body = ferrite_protocol::wire::Writer::new();
    request.encode(&mut body, VERSION_MAX);
    super::inter_broker::frame(API_KEY, VERSION_MAX, "ferrite-txn-coordinator", body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_engine::ProducerId;
    use ferrite_protocol::request::{decode_frame, Decoded, RequestBody};

    #[test]
    fn the_request_frame_decodes_as_a_broker_reads_it() {
        let request = WriteTxnMarkersRequest {
            markers: vec![WritableTxnMarker {
                producer_id: ProducerId(42),
                producer_epoch: 3,
                transaction_result: true,
                topics: TopicPartitions::from_runs([("out".to_string(), 0), ("out".to_string(), 2)]),
                coordinator_epoch: 7,
            }],
        };
        let frame = request_frame(&request);
        let Ok(Decoded::Request(r)) = decode_frame(frame.slice(4..)) else {
            panic!("the frame does not decode")
        };
        let RequestBody::WriteTxnMarkers(got) = r.body else {
            panic!("not WriteTxnMarkers: {:?}", r.body)
        };
        assert_eq!(got, request);
        assert_eq!(r.header.client_id.as_deref(), Some("ferrite-txn-coordinator"));
    }
}
