//! LeaderAndIsr (key 4), v5 only: controller → broker, "become leader or
//! follower of these partitions". Version 5 is flexible (since v4), groups
//! partition states by topic and carries the topic id and the request type
//! (KIP-516); it is the newest version whose fields Ferrite's controller
//! has, so both ends speak only it.
//!
//! Request: controller_id int32, controller_epoch int32, broker_epoch int64,
//! type int8, topic_states [topic_name compact_string, topic_id uuid,
//! partition_states [partition_index int32, controller_epoch int32,
//! leader int32, leader_epoch int32, isr []int32, zk_version int32,
//! replicas []int32, adding_replicas []int32, removing_replicas []int32,
//! is_new bool]], live_leaders [broker_id int32, host_name compact_string,
//! port int32].
//!
//! Response: error_code int16, topics [topic_id uuid, partition_errors
//! [partition_index int32, error_code int16]].
//!
//! Every struct ends with a tagged-field section; v5 defines no tagged
//! fields, so none are written and unknown ones are skipped.

use ferrite_ids::BrokerEpoch;
use ferrite_ids::ControllerEpoch;
use ferrite_ids::LeaderEpoch;
use ferrite_ids::{BrokerId, ZkVersion};

use super::wire::{Reader, WireError, WireResult, Writer};

pub const API_KEY: i16 = 4;
pub const VERSION: i16 = 5;
const FLEXIBLE: bool = true;

/// `leader` when the partition has none.
pub const NO_LEADER: BrokerId = BrokerId(-1);
/// `leader` (and UpdateMetadata's) of a partition whose topic is being
/// deleted (Kafka's `LeaderAndIsr.LeaderDuringDelete`).
pub const LEADER_DURING_DELETE: BrokerId = BrokerId(-2);

/// Whether a LeaderAndIsr holds every partition the broker hosts (Kafka's
/// `AbstractControlRequest.Type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestType {
    Unknown,
    Incremental,
    Full,
}

impl RequestType {
    pub fn code(self) -> i8 {
        match self {
            RequestType::Unknown => 0,
            RequestType::Incremental => 1,
            RequestType::Full => 2,
        }
    }

    pub fn from_code(code: i8) -> Option<RequestType> {
        match code {
            0 => Some(RequestType::Unknown),
            1 => Some(RequestType::Incremental),
            2 => Some(RequestType::Full),
            _ => None,
        }
    }
}

/// The fields a partition state of LeaderAndIsr v5 and of UpdateMetadata v7
/// both begin with, in this order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionStateHead {
    pub partition_index: i32,
    /// The epoch of the controller that last wrote this state.
    pub controller_epoch: ControllerEpoch,
    /// [`NO_LEADER`] when there is none.
    pub leader: BrokerId,
    pub leader_epoch: LeaderEpoch,
    pub isr: Vec<BrokerId>,
    /// The partition state znode's version.
    pub zk_version: ZkVersion,
    pub replicas: Vec<BrokerId>,
}

impl PartitionStateHead {
    pub(super) fn read(r: &mut Reader) -> WireResult<PartitionStateHead> {
        Ok(PartitionStateHead {
            partition_index: r.i32("partition_index")?,
            controller_epoch: ControllerEpoch(r.i32("controller_epoch")?),
            leader: BrokerId(r.i32("leader")?),
            leader_epoch: LeaderEpoch(r.i32("leader_epoch")?),
            isr: read_broker_ids(r, "isr")?,
            zk_version: ZkVersion(r.i32("zk_version")?),
            replicas: read_broker_ids(r, "replicas")?,
        })
    }

    pub(super) fn write(&self, w: &mut Writer) {
        w.i32(self.partition_index);
        w.i32(self.controller_epoch.0);
        w.i32(self.leader.0);
        w.i32(self.leader_epoch.0);
        write_broker_ids(w, &self.isr);
        w.i32(self.zk_version.0);
        write_broker_ids(w, &self.replicas);
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderAndIsrPartitionState {
    pub head: PartitionStateHead,
    pub adding_replicas: Vec<BrokerId>,
    pub removing_replicas: Vec<BrokerId>,
    /// The replica is new to this broker (it should not have existed).
    pub is_new: bool,
}

/// One topic's partition states, as both LeaderAndIsr and UpdateMetadata
/// group them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicState<P> {
    pub topic_name: String,
    pub topic_id: [u8; 16],
    pub partition_states: Vec<P>,
}

pub type LeaderAndIsrTopicState = TopicState<LeaderAndIsrPartitionState>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderAndIsrLiveLeader {
    pub broker_id: BrokerId,
    pub host_name: String,
    pub port: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderAndIsrRequest {
    pub controller_id: BrokerId,
    pub controller_epoch: ControllerEpoch,
    pub broker_epoch: BrokerEpoch,
    pub request_type: RequestType,
    pub topic_states: Vec<LeaderAndIsrTopicState>,
    pub live_leaders: Vec<LeaderAndIsrLiveLeader>,
}

pub(super) fn write_broker_ids(w: &mut Writer, ids: &[BrokerId]) {
    w.array_len(FLEXIBLE, Some(ids.len()));
    for id in ids {
        w.i32(id.0);
    }
}

pub(super) fn read_broker_ids(r: &mut Reader, what: &'static str) -> WireResult<Vec<BrokerId>> {
    Ok(r.i32_array(FLEXIBLE, what)?.into_iter().map(BrokerId).collect())
}

impl<P> TopicState<P> {
    /// Topic states as both requests carry them: `[topic_name
    /// compact_string, topic_id uuid, partition_states [...]]`, each struct
    /// followed by its tagged fields; `read_partition` reads one partition
    /// state's own fields (at least `partition_bytes_min` bytes with its
    /// tagged fields). `what` names the topic and partition arrays in errors.
    pub(super) fn read_all(
        r: &mut Reader,
        partition_bytes_min: usize,
        what: [&'static str; 2],
        mut read_partition: impl FnMut(&mut Reader) -> WireResult<P>,
    ) -> WireResult<Vec<TopicState<P>>> {
        // name (1) + uuid (16) + partitions (1) + tagged fields (1).
        r.structs(FLEXIBLE, 19, what[0], |r| {
            Ok(TopicState {
                topic_name: r.string(FLEXIBLE, "topic_name")?,
                topic_id: r.uuid("topic_id")?,
                partition_states: r.structs(FLEXIBLE, partition_bytes_min, what[1], &mut read_partition)?,
            })
        })
    }

    /// Writes topic states in the layout [`TopicState::read_all`] reads.
    pub(super) fn write_all(
        w: &mut Writer,
        topics: &[TopicState<P>],
        mut write_partition: impl FnMut(&mut Writer, &P),
    ) {
        w.structs(FLEXIBLE, topics, |w, t| {
            w.string(FLEXIBLE, &t.topic_name);
            w.uuid(&t.topic_id);
            w.structs(FLEXIBLE, &t.partition_states, &mut write_partition);
        });
    }
}

impl LeaderAndIsrRequest {
    pub fn encode(&self, w: &mut Writer) {
        w.i32(self.controller_id.0);
        w.i32(self.controller_epoch.0);
        w.i64(self.broker_epoch.0);
        w.i8(self.request_type.code());
        TopicState::write_all(w, &self.topic_states, |w, p| {
            p.head.write(w);
            write_broker_ids(w, &p.adding_replicas);
            write_broker_ids(w, &p.removing_replicas);
            w.bool(p.is_new);
        });
        w.structs(FLEXIBLE, &self.live_leaders, |w, l| {
            w.i32(l.broker_id.0);
            w.string(FLEXIBLE, &l.host_name);
            w.i32(l.port);
        });
        w.empty_tagged_fields_if(FLEXIBLE);
    }

    pub fn decode(r: &mut Reader) -> WireResult<LeaderAndIsrRequest> {
        let controller_id = BrokerId(r.i32("controller_id")?);
        let controller_epoch = ControllerEpoch(r.i32("controller_epoch")?);
        let broker_epoch = BrokerEpoch(r.i64("broker_epoch")?);
        let code = r.i8("type")?;
        let request_type = RequestType::from_code(code).ok_or(WireError::Invalid {
            what: "LeaderAndIsr type",
            value: i64::from(code),
        })?;
        // 6 int32 + 4 arrays + bool + tagged fields.
        let what = ["leader and isr topic states", "leader and isr partition states"];
        let topic_states = TopicState::read_all(r, 26, what, |r| {
            Ok(LeaderAndIsrPartitionState {
                head: PartitionStateHead::read(r)?,
                adding_replicas: read_broker_ids(r, "adding_replicas")?,
                removing_replicas: read_broker_ids(r, "removing_replicas")?,
                is_new: r.bool("is_new")?,
            })
        })?;
        // broker_id (4) + host_name (1) + port (4) + tagged fields (1).
        let live_leaders = r.structs(FLEXIBLE, 10, "live leaders", |r| {
            Ok(LeaderAndIsrLiveLeader {
                broker_id: BrokerId(r.i32("broker_id")?),
                host_name: r.string(FLEXIBLE, "host_name")?,
                port: r.i32("port")?,
            })
        })?;
        r.skip_tagged_fields()?;
        Ok(LeaderAndIsrRequest {
            controller_id,
            controller_epoch,
            broker_epoch,
            request_type,
            topic_states,
            live_leaders,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderAndIsrPartitionError {
    pub partition_index: i32,
    pub error_code: i16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderAndIsrTopicError {
    pub topic_id: [u8; 16],
    pub partition_errors: Vec<LeaderAndIsrPartitionError>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderAndIsrResponse {
    pub error_code: i16,
    pub topics: Vec<LeaderAndIsrTopicError>,
}

impl LeaderAndIsrResponse {
    pub fn encode(&self, w: &mut Writer) {
        w.i16(self.error_code);
        w.structs(FLEXIBLE, &self.topics, |w, t| {
            w.uuid(&t.topic_id);
            w.structs(FLEXIBLE, &t.partition_errors, |w, p| {
                w.i32(p.partition_index);
                w.i16(p.error_code);
            });
        });
        w.empty_tagged_fields_if(FLEXIBLE);
    }

    pub fn decode(r: &mut Reader) -> WireResult<LeaderAndIsrResponse> {
        let error_code = r.i16("error_code")?;
        let topics = r.structs(FLEXIBLE, 18, "leader and isr topic errors", |r| {
            Ok(LeaderAndIsrTopicError {
                topic_id: r.uuid("topic_id")?,
                partition_errors: r.structs(FLEXIBLE, 7, "leader and isr partition errors", |r| {
                    Ok(LeaderAndIsrPartitionError {
                        partition_index: r.i32("partition_index")?,
                        error_code: r.i16("error_code")?,
                    })
                })?,
            })
        })?;
        r.skip_tagged_fields()?;
        Ok(LeaderAndIsrResponse { error_code, topics })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use bytes::Bytes;
    use proptest::prelude::*;

    use super::super::codec_testing::{
        broker_id, broker_ids, every_prefix_fails, huge_compact_count, name, round_trip,
    };
    use super::*;

    fn sample() -> LeaderAndIsrRequest {
        LeaderAndIsrRequest {
            controller_id: BrokerId(1),
            controller_epoch: ControllerEpoch(2),
            broker_epoch: BrokerEpoch(3),
            request_type: RequestType::Incremental,
            topic_states: vec![LeaderAndIsrTopicState {
                topic_name: "t".into(),
                topic_id: [9; 16],
                partition_states: vec![LeaderAndIsrPartitionState {
                    head: PartitionStateHead {
                        partition_index: 4,
                        controller_epoch: ControllerEpoch(2),
                        leader: BrokerId(1),
                        leader_epoch: LeaderEpoch(5),
                        isr: vec![BrokerId(1), BrokerId(2)],
                        zk_version: ZkVersion(6),
                        replicas: vec![BrokerId(1), BrokerId(2), BrokerId(3)],
                    },
                    adding_replicas: vec![BrokerId(3)],
                    removing_replicas: vec![],
                    is_new: true,
                }],
            }],
            live_leaders: vec![LeaderAndIsrLiveLeader {
                broker_id: BrokerId(1),
                host_name: "h".into(),
                port: 9092,
            }],
        }
    }

    fn sample_response() -> LeaderAndIsrResponse {
        LeaderAndIsrResponse {
            error_code: 0,
            topics: vec![LeaderAndIsrTopicError {
                topic_id: [9; 16],
                partition_errors: vec![LeaderAndIsrPartitionError {
                    partition_index: 4,
                    error_code: 6,
                }],
            }],
        }
    }

    #[test]
    fn request_bytes_follow_the_schema() {
        #[rustfmt::skip]
        let mut expected: Vec<u8> = vec![
            0, 0, 0, 1,                 // controller_id
            0, 0, 0, 2,                 // controller_epoch
            0, 0, 0, 0, 0, 0, 0, 3,     // broker_epoch
            1,                          // type: incremental
            2,                          // topic_states: compact array of 1
            2, b't',                    // topic_name
        ];
        expected.extend_from_slice(&[9; 16]); // topic_id
        #[rustfmt::skip]
        expected.extend_from_slice(&[
            2,                          // partition_states: 1
            0, 0, 0, 4,                 // partition_index
            0, 0, 0, 2,                 // controller_epoch
            0, 0, 0, 1,                 // leader
            0, 0, 0, 5,                 // leader_epoch
            3, 0, 0, 0, 1, 0, 0, 0, 2,  // isr [1, 2]
            0, 0, 0, 6,                 // zk_version
            4, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, // replicas [1, 2, 3]
            2, 0, 0, 0, 3,              // adding_replicas [3]
            1,                          // removing_replicas []
            1,                          // is_new
            0,                          // partition state tagged fields
            0,                          // topic state tagged fields
            2,                          // live_leaders: 1
            0, 0, 0, 1,                 // broker_id
            2, b'h',                    // host_name
            0, 0, 0x23, 0x84,           // port 9092
            0,                          // live leader tagged fields
            0,                          // request tagged fields
        ]);
        let bytes = round_trip(&sample(), LeaderAndIsrRequest::encode, LeaderAndIsrRequest::decode);
        assert_eq!(&bytes[..], &expected[..]);
    }

    #[test]
    fn response_bytes_follow_the_schema() {
        let mut expected: Vec<u8> = vec![0, 0, 2];
        expected.extend_from_slice(&[9; 16]);
        #[rustfmt::skip]
        expected.extend_from_slice(&[
            2,                  // partition_errors: 1
            0, 0, 0, 4,         // partition_index
            0, 6,               // error_code
            0, 0, 0,            // partition, topic, response tagged fields
        ]);
        let bytes = round_trip(
            &sample_response(),
            LeaderAndIsrResponse::encode,
            LeaderAndIsrResponse::decode,
        );
        assert_eq!(&bytes[..], &expected[..]);
    }

    #[test]
    fn unknown_tagged_fields_are_skipped() {
        let mut w = Writer::new();
        sample_response().encode(&mut w);
        let mut b = w.as_slice().to_vec();
        // Replace the final (empty) tagged-field section with one field:
        // tag 5, 2 bytes.
        b.pop();
        b.extend_from_slice(&[1, 5, 2, 0xab, 0xcd]);
        let mut r = Reader::new(Bytes::from(b));
        assert_eq!(LeaderAndIsrResponse::decode(&mut r).unwrap(), sample_response());
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn unknown_type_is_refused() {
        let mut w = Writer::new();
        sample().encode(&mut w);
        let mut b = w.as_slice().to_vec();
        b[16] = 7;
        assert!(matches!(
            LeaderAndIsrRequest::decode(&mut Reader::new(Bytes::from(b))),
            Err(WireError::Invalid { .. })
        ));
    }

    #[test]
    fn truncations_and_huge_counts_are_errors() {
        let mut w = Writer::new();
        sample().encode(&mut w);
        every_prefix_fails(w.as_slice(), LeaderAndIsrRequest::decode);
        let mut w = Writer::new();
        sample_response().encode(&mut w);
        every_prefix_fails(w.as_slice(), LeaderAndIsrResponse::decode);

        let header = [0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 1];
        let b = huge_compact_count(&header, &[0; 8]);
        assert!(matches!(
            LeaderAndIsrRequest::decode(&mut Reader::new(b)),
            Err(WireError::Truncated { .. })
        ));
        // A huge isr inside one partition state.
        let mut prefix = header.to_vec();
        prefix.extend_from_slice(&[2, 2, b't']);
        prefix.extend_from_slice(&[9; 16]);
        prefix.extend_from_slice(&[2, 0, 0, 0, 4, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 5]);
        let b = huge_compact_count(&prefix, &[0; 8]);
        assert!(matches!(
            LeaderAndIsrRequest::decode(&mut Reader::new(b)),
            Err(WireError::Truncated { .. })
        ));
        let b = huge_compact_count(&[0, 0], &[0; 4]);
        assert!(matches!(
            LeaderAndIsrResponse::decode(&mut Reader::new(b)),
            Err(WireError::Truncated { .. })
        ));
    }

    /// Any partition state head (shared with UpdateMetadata's tests).
    pub(crate) fn state_head() -> impl Strategy<Value = PartitionStateHead> {
        let ids = (any::<i32>(), any::<i32>(), broker_id(), any::<i32>(), any::<i32>());
        (ids, broker_ids(), broker_ids()).prop_map(|((i, ce, leader, le, zk), isr, replicas)| PartitionStateHead {
            partition_index: i,
            controller_epoch: ControllerEpoch(ce),
            leader,
            leader_epoch: LeaderEpoch(le),
            isr,
            zk_version: ZkVersion(zk),
            replicas,
        })
    }

    fn partition_state() -> impl Strategy<Value = LeaderAndIsrPartitionState> {
        (state_head(), broker_ids(), broker_ids(), any::<bool>()).prop_map(|(head, adding, removing, is_new)| {
            LeaderAndIsrPartitionState {
                head,
                adding_replicas: adding,
                removing_replicas: removing,
                is_new,
            }
        })
    }

    fn request() -> impl Strategy<Value = LeaderAndIsrRequest> {
        let topic = (
            name(),
            any::<[u8; 16]>(),
            prop::collection::vec(partition_state(), 0..3),
        )
            .prop_map(|(topic_name, topic_id, partition_states)| LeaderAndIsrTopicState {
                topic_name,
                topic_id,
                partition_states,
            });
        let leader =
            (broker_id(), name(), any::<i32>()).prop_map(|(broker_id, host_name, port)| LeaderAndIsrLiveLeader {
                broker_id,
                host_name,
                port,
            });
        (
            broker_id(),
            any::<i32>(),
            any::<i64>(),
            prop_oneof![
                Just(RequestType::Unknown),
                Just(RequestType::Incremental),
                Just(RequestType::Full)
            ],
            prop::collection::vec(topic, 0..3),
            prop::collection::vec(leader, 0..3),
        )
            .prop_map(
                |(id, ce, be, request_type, topic_states, live_leaders)| LeaderAndIsrRequest {
                    controller_id: id,
                    controller_epoch: ControllerEpoch(ce),
                    broker_epoch: BrokerEpoch(be),
                    request_type,
                    topic_states,
                    live_leaders,
                },
            )
    }

    fn response() -> impl Strategy<Value = LeaderAndIsrResponse> {
        let partition =
            (any::<i32>(), any::<i16>()).prop_map(|(partition_index, error_code)| LeaderAndIsrPartitionError {
                partition_index,
                error_code,
            });
        let topic =
            (any::<[u8; 16]>(), prop::collection::vec(partition, 0..4)).prop_map(|(topic_id, partition_errors)| {
                LeaderAndIsrTopicError {
                    topic_id,
                    partition_errors,
                }
            });
        (any::<i16>(), prop::collection::vec(topic, 0..3))
            .prop_map(|(error_code, topics)| LeaderAndIsrResponse { error_code, topics })
    }

    proptest! {
        #[test]
        fn requests_round_trip(req in request()) {
            round_trip(&req, LeaderAndIsrRequest::encode, LeaderAndIsrRequest::decode);
        }

        #[test]
        fn responses_round_trip(resp in response()) {
            round_trip(&resp, LeaderAndIsrResponse::encode, LeaderAndIsrResponse::decode);
        }
    }
}
