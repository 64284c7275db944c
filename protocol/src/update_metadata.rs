//! UpdateMetadata (key 6), v7 only: controller → every broker, the live
//! brokers and the partition states its metadata cache should hold.
//! Version 7 is flexible (since v6), groups partitions by topic (since v5)
//! and carries the topic id.
//!
//! Request: controller_id int32, controller_epoch int32, broker_epoch int64,
//! topic_states [topic_name compact_string, topic_id uuid, partition_states
//! [partition_index int32, controller_epoch int32, leader int32,
//! leader_epoch int32, isr []int32, zk_version int32, replicas []int32,
//! offline_replicas []int32]], live_brokers [id int32, endpoints [port int32,
//! host compact_string, listener compact_string, security_protocol int16],
//! rack compact_nullable_string].
//!
//! Response: error_code int16.
//!
//! A partition whose topic is being deleted has leader -2
//! ([`super::leader_and_isr::LEADER_DURING_DELETE`]). No tagged fields are
//! defined in v7; none are written and unknown ones are skipped.

use ferrite_ids::BrokerEpoch;
use ferrite_ids::BrokerId;
use ferrite_ids::ControllerEpoch;

use super::leader_and_isr::{read_broker_ids, write_broker_ids, PartitionStateHead, TopicState};
use super::wire::{Reader, WireResult, Writer};

pub const API_KEY: i16 = 6;
pub const VERSION: i16 = 7;
const FLEXIBLE: bool = true;

/// Kafka's `SecurityProtocol.PLAINTEXT` id.
pub const SECURITY_PROTOCOL_PLAINTEXT: i16 = 0;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdateMetadataPartitionState {
    /// Its leader is -1 with no leader, -2 while the topic is being deleted.
    pub head: PartitionStateHead,
    pub offline_replicas: Vec<BrokerId>,
}

pub type UpdateMetadataTopicState = TopicState<UpdateMetadataPartitionState>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdateMetadataEndpoint {
    pub port: i32,
    pub host: String,
    pub listener: String,
    pub security_protocol: i16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdateMetadataBroker {
    pub id: BrokerId,
    pub endpoints: Vec<UpdateMetadataEndpoint>,
    pub rack: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdateMetadataRequest {
    pub controller_id: BrokerId,
    pub controller_epoch: ControllerEpoch,
    pub broker_epoch: BrokerEpoch,
    pub topic_states: Vec<UpdateMetadataTopicState>,
    pub live_brokers: Vec<UpdateMetadataBroker>,
}

impl UpdateMetadataRequest {
    pub fn encode(&self, w: &mut Writer) {
        w.i32(self.controller_id.0);
        w.i32(self.controller_epoch.0);
        w.i64(self.broker_epoch.0);
        TopicState::write_all(w, &self.topic_states, |w, p| {
            p.head.write(w);
            write_broker_ids(w, &p.offline_replicas);
        });
        w.structs(FLEXIBLE, &self.live_brokers, |w, b| {
            w.i32(b.id.0);
            w.structs(FLEXIBLE, &b.endpoints, |w, e| {
                w.i32(e.port);
                w.string(FLEXIBLE, &e.host);
                w.string(FLEXIBLE, &e.listener);
                w.i16(e.security_protocol);
            });
            w.nullable_string(FLEXIBLE, b.rack.as_deref());
        });
        w.empty_tagged_fields_if(FLEXIBLE);
    }

    pub fn decode(r: &mut Reader) -> WireResult<UpdateMetadataRequest> {
        let controller_id = BrokerId(r.i32("controller_id")?);
        let controller_epoch = ControllerEpoch(r.i32("controller_epoch")?);
        let broker_epoch = BrokerEpoch(r.i64("broker_epoch")?);
        // 5 int32 + 3 arrays + tagged fields.
        let what = ["update metadata topic states", "update metadata partition states"];
        let topic_states = TopicState::read_all(r, 24, what, |r| {
            Ok(UpdateMetadataPartitionState {
                head: PartitionStateHead::read(r)?,
                offline_replicas: read_broker_ids(r, "offline_replicas")?,
            })
        })?;
        // id (4) + endpoints (1) + rack (1) + tagged fields (1).
        let live_brokers = r.structs(FLEXIBLE, 7, "live brokers", |r| {
            Ok(UpdateMetadataBroker {
                id: BrokerId(r.i32("broker id")?),
                // port (4) + host (1) + listener (1) + protocol (2) + tagged fields (1).
                endpoints: r.structs(FLEXIBLE, 9, "endpoints", |r| {
                    Ok(UpdateMetadataEndpoint {
                        port: r.i32("port")?,
                        host: r.string(FLEXIBLE, "host")?,
                        listener: r.string(FLEXIBLE, "listener")?,
                        security_protocol: r.i16("security_protocol")?,
                    })
                })?,
                rack: r.nullable_string(FLEXIBLE, "rack")?,
            })
        })?;
        r.skip_tagged_fields()?;
        Ok(UpdateMetadataRequest {
            controller_id,
            controller_epoch,
            broker_epoch,
            topic_states,
            live_brokers,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdateMetadataResponse {
    pub error_code: i16,
}

impl UpdateMetadataResponse {
    pub fn encode(&self, w: &mut Writer) {
        w.i16(self.error_code);
        w.empty_tagged_fields_if(FLEXIBLE);
    }

    pub fn decode(r: &mut Reader) -> WireResult<UpdateMetadataResponse> {
        let error_code = r.i16("error_code")?;
        r.skip_tagged_fields()?;
        Ok(UpdateMetadataResponse { error_code })
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use proptest::prelude::*;

    use super::super::codec_testing::{
        broker_id, broker_ids, every_prefix_fails, huge_compact_count, name, round_trip,
    };
    use super::super::leader_and_isr::tests::state_head;
    use super::super::wire::WireError;
    use super::*;
    use ferrite_ids::{LeaderEpoch, ZkVersion};

    fn sample() -> UpdateMetadataRequest {
        UpdateMetadataRequest {
            controller_id: BrokerId(1),
            controller_epoch: ControllerEpoch(2),
            broker_epoch: BrokerEpoch(3),
            topic_states: vec![UpdateMetadataTopicState {
                topic_name: "t".into(),
                topic_id: [9; 16],
                partition_states: vec![UpdateMetadataPartitionState {
                    head: PartitionStateHead {
                        partition_index: 4,
                        controller_epoch: ControllerEpoch(2),
                        leader: BrokerId(-1),
                        leader_epoch: LeaderEpoch(5),
                        isr: vec![BrokerId(2)],
                        zk_version: ZkVersion(6),
                        replicas: vec![BrokerId(1), BrokerId(2)],
                    },
                    offline_replicas: vec![BrokerId(1)],
                }],
            }],
            live_brokers: vec![UpdateMetadataBroker {
                id: BrokerId(2),
                endpoints: vec![UpdateMetadataEndpoint {
                    port: 9092,
                    host: "h".into(),
                    listener: "PL".into(),
                    security_protocol: SECURITY_PROTOCOL_PLAINTEXT,
                }],
                rack: None,
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
            2,                          // topic_states: compact array of 1
            2, b't',                    // topic_name
        ];
        expected.extend_from_slice(&[9; 16]); // topic_id
        #[rustfmt::skip]
        expected.extend_from_slice(&[
            2,                          // partition_states: 1
            0, 0, 0, 4,                 // partition_index
            0, 0, 0, 2,                 // controller_epoch
            0xff, 0xff, 0xff, 0xff,     // leader -1
            0, 0, 0, 5,                 // leader_epoch
            2, 0, 0, 0, 2,              // isr [2]
            0, 0, 0, 6,                 // zk_version
            3, 0, 0, 0, 1, 0, 0, 0, 2,  // replicas [1, 2]
            2, 0, 0, 0, 1,              // offline_replicas [1]
            0,                          // partition state tagged fields
            0,                          // topic state tagged fields
            2,                          // live_brokers: 1
            0, 0, 0, 2,                 // id
            2,                          // endpoints: 1
            0, 0, 0x23, 0x84,           // port 9092
            2, b'h',                    // host
            3, b'P', b'L',              // listener
            0, 0,                       // security_protocol
            0,                          // endpoint tagged fields
            0,                          // rack: null
            0,                          // broker tagged fields
            0,                          // request tagged fields
        ]);
        let bytes = round_trip(&sample(), UpdateMetadataRequest::encode, UpdateMetadataRequest::decode);
        assert_eq!(&bytes[..], &expected[..]);
        let mut with_rack = sample();
        with_rack.live_brokers[0].rack = Some("r".into());
        let bytes = round_trip(&with_rack, UpdateMetadataRequest::encode, UpdateMetadataRequest::decode);
        assert_eq!(&bytes[bytes.len() - 4..], &[2, b'r', 0, 0]);
    }

    #[test]
    fn response_bytes_follow_the_schema() {
        let resp = UpdateMetadataResponse { error_code: 11 };
        let bytes = round_trip(&resp, UpdateMetadataResponse::encode, UpdateMetadataResponse::decode);
        assert_eq!(&bytes[..], &[0, 11, 0]);
        let mut r = Reader::new(Bytes::from_static(&[0, 11, 2, 0, 1, 7, 4, 0]));
        assert_eq!(
            UpdateMetadataResponse::decode(&mut r).unwrap(),
            resp,
            "unknown tags 0 and 4 are skipped"
        );
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn truncations_and_huge_counts_are_errors() {
        let mut w = Writer::new();
        sample().encode(&mut w);
        every_prefix_fails(w.as_slice(), UpdateMetadataRequest::decode);
        every_prefix_fails(&[0, 11, 0], UpdateMetadataResponse::decode);

        let header = [0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3];
        let b = huge_compact_count(&header, &[0; 8]);
        assert!(matches!(
            UpdateMetadataRequest::decode(&mut Reader::new(b)),
            Err(WireError::Truncated { .. })
        ));
        // No topics, one broker claiming 2^31 - 1 endpoints.
        let mut prefix = header.to_vec();
        prefix.extend_from_slice(&[1, 2, 0, 0, 0, 2]);
        let b = huge_compact_count(&prefix, &[0; 8]);
        assert!(matches!(
            UpdateMetadataRequest::decode(&mut Reader::new(b)),
            Err(WireError::Truncated { .. })
        ));
    }

    fn request() -> impl Strategy<Value = UpdateMetadataRequest> {
        let partition = (state_head(), broker_ids()).prop_map(|(head, offline)| UpdateMetadataPartitionState {
            head,
            offline_replicas: offline,
        });
        let topic = (name(), any::<[u8; 16]>(), prop::collection::vec(partition, 0..3)).prop_map(
            |(topic_name, topic_id, partition_states)| UpdateMetadataTopicState {
                topic_name,
                topic_id,
                partition_states,
            },
        );
        let endpoint = (any::<i32>(), name(), name(), any::<i16>()).prop_map(|(port, host, listener, sp)| {
            UpdateMetadataEndpoint {
                port,
                host,
                listener,
                security_protocol: sp,
            }
        });
        let broker = (
            broker_id(),
            prop::collection::vec(endpoint, 0..3),
            prop::option::of(name()),
        )
            .prop_map(|(id, endpoints, rack)| UpdateMetadataBroker { id, endpoints, rack });
        (
            broker_id(),
            any::<i32>(),
            any::<i64>(),
            prop::collection::vec(topic, 0..3),
            prop::collection::vec(broker, 0..3),
        )
            .prop_map(|(id, ce, be, topic_states, live_brokers)| UpdateMetadataRequest {
                controller_id: id,
                controller_epoch: ControllerEpoch(ce),
                broker_epoch: BrokerEpoch(be),
                topic_states,
                live_brokers,
            })
    }

    proptest! {
        #[test]
        fn requests_round_trip(req in request()) {
            round_trip(&req, UpdateMetadataRequest::encode, UpdateMetadataRequest::decode);
        }

        #[test]
        fn responses_round_trip(error_code in any::<i16>()) {
            let resp = UpdateMetadataResponse { error_code };
            round_trip(&resp, UpdateMetadataResponse::encode, UpdateMetadataResponse::decode);
        }
    }
}
