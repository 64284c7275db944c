//! The controller's requests ([`ControllerRequest`]) as the wire carries
//! them, and back: the controller's broker turns each `Action::Send` into a
//! LeaderAndIsr v5, UpdateMetadata v7 or StopReplica v3 request, and the
//! receiving broker turns the decoded request back into the controller's
//! own types. Also the ControlledShutdown answer (`Action::ShutdownReply`).
//!
//! What the wire has that [`ControllerRequest`] does not, and how it is
//! filled in or dropped:
//!
//! - A partition's controller epoch: the sending controller's epoch on the
//!   way out; dropped on the way in.
//! - `leader`: `None` is -1 on the wire. A leader of -2 (Kafka's
//!   "leader during delete") in an UpdateMetadata marks its topic deleted.
//! - LeaderAndIsr: type `Incremental`, no adding/removing replicas,
//!   `is_new` false; live leaders carry no rack (they decode with `None`).
//! - UpdateMetadata: a broker is one PLAINTEXT endpoint (the first endpoint
//!   on the way in); offline replicas are the replicas not among the live
//!   brokers (dropped on the way in). A deleted topic is a topic state with
//!   no partition states and a zero topic id — `ControllerRequest` does not
//!   say how many partitions a deleted topic had, so Kafka's way (every
//!   partition with leader -2) cannot be followed on the way out; both are
//!   understood on the way in.
//! - StopReplica: leader epoch -1 (not checked by the receiver) for every
//!   partition, and the one delete flag on every partition. A request with
//!   no partitions decodes as `Keep`; one whose partitions disagree is
//!   refused.
//!
//! Partitions are grouped into topic states by runs of the same topic (the
//! controller sends them sorted, so one state per topic), which keeps their
//! order through a round trip.

use ferrite_controller::control::{ControllerRequest, DeleteData, PartitionInfo};
use ferrite_controller::BrokerMeta;
use ferrite_ids::{BrokerId, TopicPartition};
use ferrite_protocol::controller_rpc::{ControlHeader, ControllerRpc, LISTENER_NAME};

use ferrite_protocol::controlled_shutdown::{ControlledShutdownResponse, RemainingPartition};
use ferrite_protocol::leader_and_isr::{
    LeaderAndIsrLiveLeader, LeaderAndIsrPartitionState, LeaderAndIsrRequest, PartitionStateHead, RequestType,
    TopicState, LEADER_DURING_DELETE, NO_LEADER,
};
use ferrite_protocol::stop_replica::{self, StopReplicaPartitionState, StopReplicaRequest, StopReplicaTopicState};
use ferrite_protocol::update_metadata::{
    UpdateMetadataBroker, UpdateMetadataEndpoint, UpdateMetadataPartitionState, UpdateMetadataRequest,
    UpdateMetadataTopicState, SECURITY_PROTOCOL_PLAINTEXT,
};

/// A decoded request that has no [`ControllerRequest`] meaning.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConversionError {
    #[error("{topic}-{partition}: leader {leader} is not a broker id")]
    InvalidLeader { topic: String, partition: i32, leader: i32 },
    #[error("broker {broker}: port {port} is out of range")]
    InvalidPort { broker: BrokerId, port: i32 },
    #[error("broker {broker} has no endpoint")]
    NoEndpoint { broker: BrokerId },
    #[error("StopReplica deletes some partitions and keeps others")]
    MixedDelete,
}

/// The controller's request that `rpc` carries, for the receiving broker.
pub fn to_controller_request(rpc: &ControllerRpc) -> Result<ControllerRequest, ConversionError> {
    match rpc {
        ControllerRpc::LeaderAndIsr(r) => leader_and_isr_to_controller(r),
        ControllerRpc::UpdateMetadata(r) => update_metadata_to_controller(r),
        ControllerRpc::StopReplica(r) => stop_replica_to_controller(r),
    }
}

/// The wire request for `request`, sent by controller `header`.
pub fn to_wire(request: &ControllerRequest, header: ControlHeader) -> ControllerRpc {
    match request {
        ControllerRequest::LeaderAndIsr { partitions, leaders } => {
            ControllerRpc::LeaderAndIsr(leader_and_isr_to_wire(partitions, leaders, header))
        }
        ControllerRequest::UpdateMetadata {
            brokers,
            partitions,
            deleted_topics,
        } => ControllerRpc::UpdateMetadata(update_metadata_to_wire(brokers, partitions, deleted_topics, header)),
        ControllerRequest::StopReplica { partitions, delete } => {
            ControllerRpc::StopReplica(stop_replica_to_wire(partitions, *delete, header))
        }
    }
}

/// Runs of consecutive items with the same key.
fn runs<T, K: PartialEq>(items: &[T], key: impl Fn(&T) -> K) -> Vec<&[T]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=items.len() {
        if i == items.len() || key(&items[i]) != key(&items[start]) {
            if i > start {
                out.push(&items[start..i]);
            }
            start = i;
        }
    }
    out
}

fn wire_leader(leader: Option<BrokerId>) -> BrokerId {
    leader.unwrap_or(NO_LEADER)
}

fn controller_leader(tp: &TopicPartition, leader: BrokerId) -> Result<Option<BrokerId>, ConversionError> {
    match leader {
        NO_LEADER => Ok(None),
        BrokerId(id) if id >= 0 => Ok(Some(leader)),
        BrokerId(id) => Err(ConversionError::InvalidLeader {
            topic: tp.topic.clone(),
            partition: tp.partition,
            leader: id,
        }),
    }
}

fn port(broker: BrokerId, port: i32) -> Result<u16, ConversionError> {
    u16::try_from(port).map_err(|_| ConversionError::InvalidPort { broker, port })
}

/// The partitions as topic states, by runs of the same topic; `state`
/// makes one partition's state.
fn topic_states<P>(partitions: &[PartitionInfo], state: impl Fn(&PartitionInfo) -> P) -> Vec<TopicState<P>> {
    runs(partitions, |p| (p.partition.topic.clone(), p.topic_id))
        .into_iter()
        .map(|run| TopicState {
            topic_name: run[0].partition.topic.clone(),
            topic_id: run[0].topic_id,
            partition_states: run.iter().map(&state).collect(),
        })
        .collect()
}

/// The fields both requests' partition states begin with.
fn state_head(p: &PartitionInfo, header: ControlHeader) -> PartitionStateHead {
    PartitionStateHead {
        partition_index: p.partition.partition,
        controller_epoch: header.controller_epoch,
        leader: wire_leader(p.leader),
        leader_epoch: p.leader_epoch,
        isr: p.isr.clone(),
        zk_version: p.zk_version,
        replicas: p.replicas.clone(),
    }
}

/// The partition a decoded state describes (its controller epoch dropped).
fn partition_info(topic: &TopicState<impl Sized>, head: &PartitionStateHead) -> Result<PartitionInfo, ConversionError> {
    let tp = TopicPartition::new(topic.topic_name.clone(), head.partition_index);
    Ok(PartitionInfo {
        leader: controller_leader(&tp, head.leader)?,
        partition: tp,
        topic_id: topic.topic_id,
        leader_epoch: head.leader_epoch,
        isr: head.isr.clone(),
        replicas: head.replicas.clone(),
        zk_version: head.zk_version,
    })
}

pub fn leader_and_isr_to_wire(
    partitions: &[PartitionInfo],
    leaders: &[BrokerMeta],
    header: ControlHeader,
) -> LeaderAndIsrRequest {
    LeaderAndIsrRequest {
        controller_id: header.controller_id,
        controller_epoch: header.controller_epoch,
        broker_epoch: header.broker_epoch,
        request_type: RequestType::Incremental,
        topic_states: topic_states(partitions, |p| LeaderAndIsrPartitionState {
            head: state_head(p, header),
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
            is_new: false,
        }),
        live_leaders: leaders
            .iter()
            .map(|b| LeaderAndIsrLiveLeader {
                broker_id: b.id,
                host_name: b.host.clone(),
                port: i32::from(b.port),
            })
            .collect(),
    }
}

pub fn leader_and_isr_to_controller(r: &LeaderAndIsrRequest) -> Result<ControllerRequest, ConversionError> {
    let mut partitions = Vec::new();
    for t in &r.topic_states {
        for p in &t.partition_states {
            partitions.push(partition_info(t, &p.head)?);
        }
    }
    let leaders = r
        .live_leaders
        .iter()
        .map(|l| {
            Ok(BrokerMeta {
                id: l.broker_id,
                host: l.host_name.clone(),
                port: port(l.broker_id, l.port)?,
                rack: None,
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(ControllerRequest::LeaderAndIsr { partitions, leaders })
}

pub fn update_metadata_to_wire(
    brokers: &[BrokerMeta],
    partitions: &[PartitionInfo],
    deleted_topics: &[String],
    header: ControlHeader,
) -> UpdateMetadataRequest {
    let live = |id: &BrokerId| brokers.iter().any(|b| b.id == *id);
    let mut topic_states = topic_states(partitions, |p| UpdateMetadataPartitionState {
        head: state_head(p, header),
        offline_replicas: p.replicas.iter().copied().filter(|r| !live(r)).collect(),
    });
    topic_states.extend(deleted_topics.iter().map(|t| UpdateMetadataTopicState {
        topic_name: t.clone(),
        topic_id: [0; 16],
        partition_states: Vec::new(),
    }));
    UpdateMetadataRequest {
        controller_id: header.controller_id,
        controller_epoch: header.controller_epoch,
        broker_epoch: header.broker_epoch,
        topic_states,
        live_brokers: brokers
            .iter()
            .map(|b| UpdateMetadataBroker {
                id: b.id,
                endpoints: vec![UpdateMetadataEndpoint {
                    port: i32::from(b.port),
                    host: b.host.clone(),
                    listener: LISTENER_NAME.to_string(),
                    security_protocol: SECURITY_PROTOCOL_PLAINTEXT,
                }],
                rack: b.rack.clone(),
            })
            .collect(),
    }
}

pub fn update_metadata_to_controller(r: &UpdateMetadataRequest) -> Result<ControllerRequest, ConversionError> {
    let mut partitions = Vec::new();
    let mut deleted_topics: Vec<String> = Vec::new();
    for t in &r.topic_states {
        if t.partition_states.is_empty() {
            deleted_topics.push(t.topic_name.clone());
            continue;
        }
        for p in &t.partition_states {
            if p.head.leader == LEADER_DURING_DELETE {
                if !deleted_topics.contains(&t.topic_name) {
                    deleted_topics.push(t.topic_name.clone());
                }
                continue;
            }
            partitions.push(partition_info(t, &p.head)?);
        }
    }
    let brokers = r
        .live_brokers
        .iter()
        .map(|b| {
            let e = b
                .endpoints
                .first()
                .ok_or(ConversionError::NoEndpoint { broker: b.id })?;
            Ok(BrokerMeta {
                id: b.id,
                host: e.host.clone(),
                port: port(b.id, e.port)?,
                rack: b.rack.clone(),
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(ControllerRequest::UpdateMetadata {
        brokers,
        partitions,
        deleted_topics,
    })
}

pub fn stop_replica_to_wire(
    partitions: &[TopicPartition],
    delete: DeleteData,
    header: ControlHeader,
) -> StopReplicaRequest {
    StopReplicaRequest {
        controller_id: header.controller_id,
        controller_epoch: header.controller_epoch,
        broker_epoch: header.broker_epoch,
        topic_states: runs(partitions, |tp| tp.topic.clone())
            .into_iter()
            .map(|run| StopReplicaTopicState {
                topic_name: run[0].topic.clone(),
                partition_states: run
                    .iter()
                    .map(|tp| StopReplicaPartitionState {
                        partition_index: tp.partition,
                        leader_epoch: stop_replica::NO_EPOCH,
                        delete_partition: delete == DeleteData::Delete,
                    })
                    .collect(),
            })
            .collect(),
    }
}

pub fn stop_replica_to_controller(r: &StopReplicaRequest) -> Result<ControllerRequest, ConversionError> {
    let mut partitions = Vec::new();
    let mut delete: Option<bool> = None;
    for t in &r.topic_states {
        for p in &t.partition_states {
            if *delete.get_or_insert(p.delete_partition) != p.delete_partition {
                return Err(ConversionError::MixedDelete);
            }
            partitions.push(TopicPartition::new(t.topic_name.clone(), p.partition_index));
        }
    }
    let delete = if delete == Some(true) {
        DeleteData::Delete
    } else {
        DeleteData::Keep
    };
    Ok(ControllerRequest::StopReplica { partitions, delete })
}

/// The ControlledShutdown answer for `Action::ShutdownReply`: the
/// partitions the broker still leads, with no error.
pub fn shutdown_reply_to_wire(still_leading: &[TopicPartition]) -> ControlledShutdownResponse {
    ControlledShutdownResponse {
        error_code: 0,
        remaining_partitions: still_leading
            .iter()
            .map(|tp| RemainingPartition {
                topic_name: tp.topic.clone(),
                partition_index: tp.partition,
            })
            .collect(),
    }
}

/// The partitions a ControlledShutdown answer says the broker still leads.
pub fn still_leading(r: &ControlledShutdownResponse) -> Vec<TopicPartition> {
    r.remaining_partitions
        .iter()
        .map(|p| TopicPartition::new(p.topic_name.clone(), p.partition_index))
        .collect()
}

#[cfg(test)]
mod tests {
    use ferrite_ids::{BrokerEpoch, ControllerEpoch, LeaderEpoch, ZkVersion};
    use proptest::prelude::*;

    use ferrite_protocol::wire::{Reader, Writer};

    use super::*;

    const HEADER: ControlHeader = ControlHeader {
        controller_id: BrokerId(1),
        controller_epoch: ControllerEpoch(7),
        broker_epoch: BrokerEpoch(4242),
    };

    fn info(topic: &str, partition: i32, leader: Option<i32>) -> PartitionInfo {
        PartitionInfo {
            partition: TopicPartition::new(topic, partition),
            topic_id: [topic.len() as u8; 16],
            leader: leader.map(BrokerId),
            leader_epoch: LeaderEpoch(3),
            isr: vec![BrokerId(1), BrokerId(2)],
            replicas: vec![BrokerId(1), BrokerId(2), BrokerId(3)],
            zk_version: ZkVersion(9),
        }
    }

    fn broker(id: i32, rack: Option<&str>) -> BrokerMeta {
        BrokerMeta {
            id: BrokerId(id),
            host: format!("b{id}"),
            port: 9092 + id as u16,
            rack: rack.map(str::to_string),
        }
    }

    /// Controller request → wire struct → bytes → wire struct → controller
    /// request.
    fn through_the_wire(request: &ControllerRequest) -> (ControllerRpc, ControllerRequest) {
        let rpc = to_wire(request, HEADER);
        let mut w = Writer::new();
        rpc.encode(&mut w);
        let mut r = Reader::new(w.into_bytes().freeze());
        let decoded = ControllerRpc::decode(&mut r, rpc.api_key()).unwrap().unwrap();
        assert_eq!(r.remaining(), 0);
        assert_eq!(decoded, rpc);
        assert_eq!(decoded.header(), HEADER);
        let back = to_controller_request(&decoded).unwrap();
        (rpc, back)
    }

    #[test]
    fn leader_and_isr_round_trips() {
        let request = ControllerRequest::LeaderAndIsr {
            partitions: vec![info("a", 0, Some(1)), info("a", 1, None), info("bb", 0, Some(2))],
            leaders: vec![broker(1, None), broker(2, None)],
        };
        let (rpc, back) = through_the_wire(&request);
        assert_eq!(back, request);
        let ControllerRpc::LeaderAndIsr(w) = rpc else { panic!() };
        assert_eq!(w.topic_states.len(), 2);
        let p = &w.topic_states[0].partition_states[1];
        assert_eq!(p.head.leader, BrokerId(-1), "no leader is -1 on the wire");
        assert_eq!(p.head.controller_epoch, HEADER.controller_epoch);
        assert_eq!(w.topic_states[1].topic_id, [2; 16]);
        assert_eq!(w.live_leaders[1].port, 9094);
    }

    #[test]
    fn update_metadata_round_trips() {
        let request = ControllerRequest::UpdateMetadata {
            brokers: vec![broker(1, Some("r1")), broker(2, None)],
            partitions: vec![info("a", 0, Some(1)), info("a", 1, None)],
            deleted_topics: vec!["gone".into()],
        };
        let (rpc, back) = through_the_wire(&request);
        assert_eq!(back, request);
        let ControllerRpc::UpdateMetadata(w) = rpc else {
            panic!()
        };
        // Broker 3 is a replica but not live.
        assert_eq!(
            w.topic_states[0].partition_states[0].offline_replicas,
            vec![BrokerId(3)]
        );
        assert_eq!(w.topic_states[1].topic_name, "gone");
        assert!(w.topic_states[1].partition_states.is_empty());
        assert_eq!(w.live_brokers[0].endpoints[0].listener, LISTENER_NAME);
    }

    #[test]
    fn kafka_style_deletion_is_understood() {
        let mut w = update_metadata_to_wire(&[broker(1, None)], &[info("a", 0, Some(1))], &[], HEADER);
        w.topic_states[0].partition_states[0].head.leader = LEADER_DURING_DELETE;
        let ControllerRequest::UpdateMetadata {
            partitions,
            deleted_topics,
            ..
        } = update_metadata_to_controller(&w).unwrap()
        else {
            panic!()
        };
        assert!(partitions.is_empty());
        assert_eq!(deleted_topics, vec!["a".to_string()]);
    }

    #[test]
    fn stop_replica_round_trips() {
        for delete in [DeleteData::Keep, DeleteData::Delete] {
            let request = ControllerRequest::StopReplica {
                partitions: vec![
                    TopicPartition::new("a", 0),
                    TopicPartition::new("a", 2),
                    TopicPartition::new("b", 1),
                ],
                delete,
            };
            let (rpc, back) = through_the_wire(&request);
            assert_eq!(back, request);
            let ControllerRpc::StopReplica(w) = rpc else { panic!() };
            assert_eq!(w.topic_states.len(), 2);
            assert!(w.topic_states[0]
                .partition_states
                .iter()
                .all(|p| p.delete_partition == (delete == DeleteData::Delete) && p.leader_epoch.0 == -1));
        }
    }

    #[test]
    fn meaningless_requests_are_refused() {
        let mut w = stop_replica_to_wire(
            &[TopicPartition::new("a", 0), TopicPartition::new("a", 1)],
            DeleteData::Keep,
            HEADER,
        );
        w.topic_states[0].partition_states[1].delete_partition = true;
        assert_eq!(stop_replica_to_controller(&w), Err(ConversionError::MixedDelete));

        let mut w = leader_and_isr_to_wire(&[info("a", 0, Some(1))], &[broker(1, None)], HEADER);
        w.topic_states[0].partition_states[0].head.leader = BrokerId(-5);
        assert!(matches!(
            leader_and_isr_to_controller(&w),
            Err(ConversionError::InvalidLeader { leader: -5, .. })
        ));
        w.topic_states[0].partition_states[0].head.leader = BrokerId(1);
        w.live_leaders[0].port = 70000;
        assert!(matches!(
            leader_and_isr_to_controller(&w),
            Err(ConversionError::InvalidPort { port: 70000, .. })
        ));

        let mut w = update_metadata_to_wire(&[broker(1, None)], &[], &[], HEADER);
        w.live_brokers[0].endpoints.clear();
        assert_eq!(
            update_metadata_to_controller(&w),
            Err(ConversionError::NoEndpoint { broker: BrokerId(1) })
        );
    }

    #[test]
    fn shutdown_reply_round_trips() {
        let tps = vec![TopicPartition::new("a", 0), TopicPartition::new("b", 3)];
        let resp = shutdown_reply_to_wire(&tps);
        let mut w = Writer::new();
        resp.encode(&mut w);
        let back = ControlledShutdownResponse::decode(&mut Reader::new(w.into_bytes().freeze())).unwrap();
        assert_eq!(back.error_code, 0);
        assert_eq!(still_leading(&back), tps);
    }

    fn partition_info() -> impl Strategy<Value = PartitionInfo> {
        let ids = || prop::collection::vec((0i32..6).prop_map(BrokerId), 0..4);
        (
            prop_oneof![Just("a"), Just("b"), Just("c")],
            0i32..4,
            prop::option::of((0i32..6).prop_map(BrokerId)),
            any::<i32>(),
            ids(),
            ids(),
            any::<i32>(),
        )
            .prop_map(|(topic, partition, leader, epoch, isr, replicas, zk)| PartitionInfo {
                partition: TopicPartition::new(topic, partition),
                topic_id: [topic.as_bytes()[0]; 16],
                leader,
                leader_epoch: LeaderEpoch(epoch),
                isr,
                replicas,
                zk_version: ZkVersion(zk),
            })
    }

    fn broker_meta(with_rack: bool) -> impl Strategy<Value = BrokerMeta> {
        (0i32..6, "[a-z.]{1,8}", any::<u16>(), prop::option::of("[a-z0-9]{1,4}")).prop_map(
            move |(id, host, port, rack)| BrokerMeta {
                id: BrokerId(id),
                host,
                port,
                rack: if with_rack { rack } else { None },
            },
        )
    }

    fn controller_request() -> impl Strategy<Value = ControllerRequest> {
        let parts = || prop::collection::vec(partition_info(), 0..6);
        let tps = prop::collection::vec(
            (prop_oneof![Just("a"), Just("b")], 0i32..4).prop_map(|(t, p)| TopicPartition::new(t, p)),
            1..6,
        );
        prop_oneof![
            (parts(), prop::collection::vec(broker_meta(false), 0..3))
                .prop_map(|(partitions, leaders)| ControllerRequest::LeaderAndIsr { partitions, leaders }),
            (
                prop::collection::vec(broker_meta(true), 0..3),
                parts(),
                prop::collection::vec("[d-f]{1,3}", 0..3)
            )
                .prop_map(
                    |(brokers, partitions, deleted_topics)| ControllerRequest::UpdateMetadata {
                        brokers,
                        partitions,
                        deleted_topics,
                    }
                ),
            (tps, prop_oneof![Just(DeleteData::Keep), Just(DeleteData::Delete)])
                .prop_map(|(partitions, delete)| ControllerRequest::StopReplica { partitions, delete }),
        ]
    }

    proptest! {
        #[test]
        fn arbitrary_controller_requests_round_trip(request in controller_request()) {
            let (_, back) = through_the_wire(&request);
            prop_assert_eq!(back, request);
        }
    }
}
