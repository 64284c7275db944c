//! StopReplica (key 5), v3 only: controller → broker, "stop replicating
//! these partitions, and maybe delete them". Version 3 is flexible (since
//! v2) and carries a leader epoch and a delete flag per partition (KIP-570).
//!
//! Request: controller_id int32, controller_epoch int32, broker_epoch int64,
//! topic_states [topic_name compact_string, partition_states
//! [partition_index int32, leader_epoch int32, delete_partition bool]].
//!
//! Response: error_code int16, partition_errors [topic_name compact_string,
//! partition_index int32, error_code int16].
//!
//! A leader epoch of -1 ([`NO_EPOCH`]) asks the broker not to check it; -2
//! ([`EPOCH_DURING_DELETE`]) marks a topic deletion. No tagged fields are
//! defined in v3; none are written and unknown ones are skipped.

use ferrite_ids::BrokerEpoch;
use ferrite_ids::BrokerId;
use ferrite_ids::ControllerEpoch;
use ferrite_ids::LeaderEpoch;

use super::wire::{Reader, WireResult, Writer};

pub const API_KEY: i16 = 5;
pub const VERSION: i16 = 3;
const FLEXIBLE: bool = true;

/// The schema's default leader epoch: not checked by the broker.
pub const NO_EPOCH: LeaderEpoch = LeaderEpoch(-1);
/// Kafka's `LeaderAndIsr.EpochDuringDelete`.
pub const EPOCH_DURING_DELETE: LeaderEpoch = LeaderEpoch(-2);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopReplicaPartitionState {
    pub partition_index: i32,
    pub leader_epoch: LeaderEpoch,
    pub delete_partition: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopReplicaTopicState {
    pub topic_name: String,
    pub partition_states: Vec<StopReplicaPartitionState>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopReplicaRequest {
    pub controller_id: BrokerId,
    pub controller_epoch: ControllerEpoch,
    pub broker_epoch: BrokerEpoch,
    pub topic_states: Vec<StopReplicaTopicState>,
}

impl StopReplicaRequest {
    pub fn encode(&self, w: &mut Writer) {
        w.i32(self.controller_id.0);
        w.i32(self.controller_epoch.0);
        w.i64(self.broker_epoch.0);
        w.structs(FLEXIBLE, &self.topic_states, |w, t| {
            w.string(FLEXIBLE, &t.topic_name);
            w.structs(FLEXIBLE, &t.partition_states, |w, p| {
                w.i32(p.partition_index);
                w.i32(p.leader_epoch.0);
                w.bool(p.delete_partition);
            });
        });
        w.empty_tagged_fields_if(FLEXIBLE);
    }

    pub fn decode(r: &mut Reader) -> WireResult<StopReplicaRequest> {
        let controller_id = BrokerId(r.i32("controller_id")?);
        let controller_epoch = ControllerEpoch(r.i32("controller_epoch")?);
        let broker_epoch = BrokerEpoch(r.i64("broker_epoch")?);
        let topic_states = r.structs(FLEXIBLE, 3, "stop replica topic states", |r| {
            Ok(StopReplicaTopicState {
                topic_name: r.string(FLEXIBLE, "topic_name")?,
                partition_states: r.structs(FLEXIBLE, 10, "stop replica partition states", |r| {
                    Ok(StopReplicaPartitionState {
                        partition_index: r.i32("partition_index")?,
                        leader_epoch: LeaderEpoch(r.i32("leader_epoch")?),
                        delete_partition: r.bool("delete_partition")?,
                    })
                })?,
            })
        })?;
        r.skip_tagged_fields()?;
        Ok(StopReplicaRequest {
            controller_id,
            controller_epoch,
            broker_epoch,
            topic_states,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopReplicaPartitionError {
    pub topic_name: String,
    pub partition_index: i32,
    pub error_code: i16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopReplicaResponse {
    pub error_code: i16,
    pub partition_errors: Vec<StopReplicaPartitionError>,
}

impl StopReplicaResponse {
    pub fn encode(&self, w: &mut Writer) {
        w.i16(self.error_code);
        w.structs(FLEXIBLE, &self.partition_errors, |w, p| {
            w.string(FLEXIBLE, &p.topic_name);
            w.i32(p.partition_index);
            w.i16(p.error_code);
        });
        w.empty_tagged_fields_if(FLEXIBLE);
    }

    pub fn decode(r: &mut Reader) -> WireResult<StopReplicaResponse> {
        let error_code = r.i16("error_code")?;
        let partition_errors = r.structs(FLEXIBLE, 8, "stop replica partition errors", |r| {
            Ok(StopReplicaPartitionError {
                topic_name: r.string(FLEXIBLE, "topic_name")?,
                partition_index: r.i32("partition_index")?,
                error_code: r.i16("error_code")?,
            })
        })?;
        r.skip_tagged_fields()?;
        Ok(StopReplicaResponse {
            error_code,
            partition_errors,
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::codec_testing::{broker_id, every_prefix_fails, huge_compact_count, name, round_trip};
    use super::super::wire::WireError;
    use super::*;

    fn sample() -> StopReplicaRequest {
        StopReplicaRequest {
            controller_id: BrokerId(1),
            controller_epoch: ControllerEpoch(2),
            broker_epoch: BrokerEpoch(-1),
            topic_states: vec![StopReplicaTopicState {
                topic_name: "t".into(),
                partition_states: vec![
                    StopReplicaPartitionState {
                        partition_index: 4,
                        leader_epoch: LeaderEpoch(5),
                        delete_partition: false,
                    },
                    StopReplicaPartitionState {
                        partition_index: 0,
                        leader_epoch: EPOCH_DURING_DELETE,
                        delete_partition: true,
                    },
                ],
            }],
        }
    }

    fn sample_response() -> StopReplicaResponse {
        StopReplicaResponse {
            error_code: 0,
            partition_errors: vec![StopReplicaPartitionError {
                topic_name: "t".into(),
                partition_index: 4,
                error_code: 3,
            }],
        }
    }

    #[test]
    fn request_bytes_follow_the_schema() {
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 0, 0, 1,                 // controller_id
            0, 0, 0, 2,                 // controller_epoch
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // broker_epoch -1
            2,                          // topic_states: compact array of 1
            2, b't',                    // topic_name
            3,                          // partition_states: 2
            0, 0, 0, 4,                 // partition_index
            0, 0, 0, 5,                 // leader_epoch
            0,                          // delete_partition: false
            0,                          // tagged fields
            0, 0, 0, 0,                 // partition_index
            0xff, 0xff, 0xff, 0xfe,     // leader_epoch -2
            1,                          // delete_partition: true
            0,                          // tagged fields
            0,                          // topic state tagged fields
            0,                          // request tagged fields
        ];
        let bytes = round_trip(&sample(), StopReplicaRequest::encode, StopReplicaRequest::decode);
        assert_eq!(&bytes[..], expected);
    }

    #[test]
    fn response_bytes_follow_the_schema() {
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 0,                       // error_code
            2,                          // partition_errors: 1
            2, b't',                    // topic_name
            0, 0, 0, 4,                 // partition_index
            0, 3,                       // error_code
            0,                          // tagged fields
            0,                          // response tagged fields
        ];
        let bytes = round_trip(
            &sample_response(),
            StopReplicaResponse::encode,
            StopReplicaResponse::decode,
        );
        assert_eq!(&bytes[..], expected);
    }

    #[test]
    fn truncations_and_huge_counts_are_errors() {
        let mut w = Writer::new();
        sample().encode(&mut w);
        every_prefix_fails(w.as_slice(), StopReplicaRequest::decode);
        let mut w = Writer::new();
        sample_response().encode(&mut w);
        every_prefix_fails(w.as_slice(), StopReplicaResponse::decode);

        let header = [0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3];
        let b = huge_compact_count(&header, &[0; 8]);
        assert!(matches!(
            StopReplicaRequest::decode(&mut Reader::new(b)),
            Err(WireError::Truncated { .. })
        ));
        let mut prefix = header.to_vec();
        prefix.extend_from_slice(&[2, 2, b't']);
        let b = huge_compact_count(&prefix, &[0; 8]);
        assert!(matches!(
            StopReplicaRequest::decode(&mut Reader::new(b)),
            Err(WireError::Truncated { .. })
        ));
        let b = huge_compact_count(&[0, 0], &[0; 8]);
        assert!(matches!(
            StopReplicaResponse::decode(&mut Reader::new(b)),
            Err(WireError::Truncated { .. })
        ));
    }

    fn request() -> impl Strategy<Value = StopReplicaRequest> {
        let partition = (any::<i32>(), any::<i32>(), any::<bool>()).prop_map(|(i, le, d)| StopReplicaPartitionState {
            partition_index: i,
            leader_epoch: LeaderEpoch(le),
            delete_partition: d,
        });
        let topic = (name(), prop::collection::vec(partition, 0..4)).prop_map(|(topic_name, partition_states)| {
            StopReplicaTopicState {
                topic_name,
                partition_states,
            }
        });
        (
            broker_id(),
            any::<i32>(),
            any::<i64>(),
            prop::collection::vec(topic, 0..3),
        )
            .prop_map(|(id, ce, be, topic_states)| StopReplicaRequest {
                controller_id: id,
                controller_epoch: ControllerEpoch(ce),
                broker_epoch: BrokerEpoch(be),
                topic_states,
            })
    }

    fn response() -> impl Strategy<Value = StopReplicaResponse> {
        let partition = (name(), any::<i32>(), any::<i16>()).prop_map(|(topic_name, partition_index, error_code)| {
            StopReplicaPartitionError {
                topic_name,
                partition_index,
                error_code,
            }
        });
        (any::<i16>(), prop::collection::vec(partition, 0..4)).prop_map(|(error_code, partition_errors)| {
            StopReplicaResponse {
                error_code,
                partition_errors,
            }
        })
    }

    proptest! {
        #[test]
        fn requests_round_trip(req in request()) {
            round_trip(&req, StopReplicaRequest::encode, StopReplicaRequest::decode);
        }

        #[test]
        fn responses_round_trip(resp in response()) {
            round_trip(&resp, StopReplicaResponse::encode, StopReplicaResponse::decode);
        }
    }
}
