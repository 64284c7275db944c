//! ControlledShutdown (key 7), v3 only: broker → controller, "move my
//! leaderships away before I stop". Version 3 is the first flexible one.
//!
//! Request: broker_id int32, broker_epoch int64.
//!
//! Response: error_code int16, remaining_partitions [topic_name
//! compact_string, partition_index int32] — the partitions the broker still
//! leads; empty when it may stop.
//!
//! No tagged fields are defined in v3; none are written and unknown ones are
//! skipped.

use ferrite_ids::BrokerEpoch;
use ferrite_ids::BrokerId;

use super::wire::{Reader, WireResult, Writer};

pub const API_KEY: i16 = 7;
pub const VERSION: i16 = 3;
const FLEXIBLE: bool = true;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlledShutdownRequest {
    pub broker_id: BrokerId,
    pub broker_epoch: BrokerEpoch,
}

impl ControlledShutdownRequest {
    pub fn encode(&self, w: &mut Writer) {
        w.i32(self.broker_id.0);
        w.i64(self.broker_epoch.0);
        w.empty_tagged_fields_if(FLEXIBLE);
    }

    pub fn decode(r: &mut Reader) -> WireResult<ControlledShutdownRequest> {
        let broker_id = BrokerId(r.i32("broker_id")?);
        let broker_epoch = BrokerEpoch(r.i64("broker_epoch")?);
        r.skip_tagged_fields()?;
        Ok(ControlledShutdownRequest {
            broker_id,
            broker_epoch,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemainingPartition {
    pub topic_name: String,
    pub partition_index: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlledShutdownResponse {
    pub error_code: i16,
    pub remaining_partitions: Vec<RemainingPartition>,
}

impl ControlledShutdownResponse {
    pub fn encode(&self, w: &mut Writer) {
        w.i16(self.error_code);
        w.structs(FLEXIBLE, &self.remaining_partitions, |w, p| {
            w.string(FLEXIBLE, &p.topic_name);
            w.i32(p.partition_index);
        });
        w.empty_tagged_fields_if(FLEXIBLE);
    }

    pub fn decode(r: &mut Reader) -> WireResult<ControlledShutdownResponse> {
        let error_code = r.i16("error_code")?;
        // name (1) + index (4) + tagged fields (1).
        let remaining_partitions = r.structs(FLEXIBLE, 6, "remaining partitions", |r| {
            Ok(RemainingPartition {
                topic_name: r.string(FLEXIBLE, "topic_name")?,
                partition_index: r.i32("partition_index")?,
            })
        })?;
        r.skip_tagged_fields()?;
        Ok(ControlledShutdownResponse {
            error_code,
            remaining_partitions,
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::codec_testing::{broker_id, every_prefix_fails, huge_compact_count, name, round_trip};
    use super::super::wire::WireError;
    use super::*;

    #[test]
    fn request_bytes_follow_the_schema() {
        let req = ControlledShutdownRequest {
            broker_id: BrokerId(3),
            broker_epoch: BrokerEpoch(0x0102),
        };
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 0, 0, 3,                 // broker_id
            0, 0, 0, 0, 0, 0, 1, 2,     // broker_epoch
            0,                          // tagged fields
        ];
        let bytes = round_trip(
            &req,
            ControlledShutdownRequest::encode,
            ControlledShutdownRequest::decode,
        );
        assert_eq!(&bytes[..], expected);
        every_prefix_fails(expected, ControlledShutdownRequest::decode);
    }

    #[test]
    fn response_bytes_follow_the_schema() {
        let resp = ControlledShutdownResponse {
            error_code: 0,
            remaining_partitions: vec![RemainingPartition {
                topic_name: "t".into(),
                partition_index: 4,
            }],
        };
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 0,                       // error_code
            2,                          // remaining_partitions: 1
            2, b't',                    // topic_name
            0, 0, 0, 4,                 // partition_index
            0,                          // tagged fields
            0,                          // response tagged fields
        ];
        let bytes = round_trip(
            &resp,
            ControlledShutdownResponse::encode,
            ControlledShutdownResponse::decode,
        );
        assert_eq!(&bytes[..], expected);
        every_prefix_fails(expected, ControlledShutdownResponse::decode);
        let b = huge_compact_count(&[0, 0], &[0; 8]);
        assert!(matches!(
            ControlledShutdownResponse::decode(&mut Reader::new(b)),
            Err(WireError::Truncated { .. })
        ));
    }

    proptest! {
        #[test]
        fn requests_round_trip(id in broker_id(), epoch in any::<i64>()) {
            let req = ControlledShutdownRequest { broker_id: id, broker_epoch: BrokerEpoch(epoch) };
            round_trip(&req, ControlledShutdownRequest::encode, ControlledShutdownRequest::decode);
        }

        #[test]
        fn responses_round_trip(
            error_code in any::<i16>(),
            parts in prop::collection::vec((name(), any::<i32>()), 0..5),
        ) {
            let resp = ControlledShutdownResponse {
                error_code,
                remaining_partitions: parts
                    .into_iter()
                    .map(|(topic_name, partition_index)| RemainingPartition { topic_name, partition_index })
                    .collect(),
            };
            round_trip(&resp, ControlledShutdownResponse::encode, ControlledShutdownResponse::decode);
        }
    }
}
