//! The controller's requests as the wire carries them: LeaderAndIsr v5,
//! UpdateMetadata v7 and StopReplica v3 under one enum, with the header
//! fields they all start with. The broker maps them to and from the
//! controller's own requests (`ferrite-broker`'s `cluster::controller_wire`).

use ferrite_ids::{BrokerEpoch, BrokerId, ControllerEpoch};

use super::leader_and_isr::{self, LeaderAndIsrRequest};
use super::stop_replica::{self, StopReplicaRequest};
use super::update_metadata::{self, UpdateMetadataRequest};
use super::wire::{Reader, WireResult, Writer};

/// The listener name UpdateMetadata gives a broker's one endpoint.
pub const LISTENER_NAME: &str = "PLAINTEXT";

/// The fields every controller request starts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControlHeader {
    pub controller_id: BrokerId,
    pub controller_epoch: ControllerEpoch,
    /// The receiving broker's epoch as the controller knows it; the
    /// receiver refuses a request for an older registration of itself.
    pub broker_epoch: BrokerEpoch,
}

/// A controller request as it goes on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControllerRpc {
    LeaderAndIsr(LeaderAndIsrRequest),
    UpdateMetadata(UpdateMetadataRequest),
    StopReplica(StopReplicaRequest),
}

impl ControllerRpc {
    pub fn api_key(&self) -> i16 {
        match self {
            ControllerRpc::LeaderAndIsr(_) => leader_and_isr::API_KEY,
            ControllerRpc::UpdateMetadata(_) => update_metadata::API_KEY,
            ControllerRpc::StopReplica(_) => stop_replica::API_KEY,
        }
    }

    /// The one version Ferrite speaks for this API.
    pub fn version(&self) -> i16 {
        match self {
            ControllerRpc::LeaderAndIsr(_) => leader_and_isr::VERSION,
            ControllerRpc::UpdateMetadata(_) => update_metadata::VERSION,
            ControllerRpc::StopReplica(_) => stop_replica::VERSION,
        }
    }

    /// Encodes the request body.
    pub fn encode(&self, w: &mut Writer) {
        match self {
            ControllerRpc::LeaderAndIsr(r) => r.encode(w),
            ControllerRpc::UpdateMetadata(r) => r.encode(w),
            ControllerRpc::StopReplica(r) => r.encode(w),
        }
    }

    /// Decodes a request body of API `api_key` (4, 5 or 6; `None` for any
    /// other key).
    pub fn decode(r: &mut Reader, api_key: i16) -> Option<WireResult<ControllerRpc>> {
        Some(match api_key {
            leader_and_isr::API_KEY => LeaderAndIsrRequest::decode(r).map(ControllerRpc::LeaderAndIsr),
            update_metadata::API_KEY => UpdateMetadataRequest::decode(r).map(ControllerRpc::UpdateMetadata),
            stop_replica::API_KEY => StopReplicaRequest::decode(r).map(ControllerRpc::StopReplica),
            _ => return None,
        })
    }

    pub fn header(&self) -> ControlHeader {
        let (controller_id, controller_epoch, broker_epoch) = match self {
            ControllerRpc::LeaderAndIsr(r) => (r.controller_id, r.controller_epoch, r.broker_epoch),
            ControllerRpc::UpdateMetadata(r) => (r.controller_id, r.controller_epoch, r.broker_epoch),
            ControllerRpc::StopReplica(r) => (r.controller_id, r.controller_epoch, r.broker_epoch),
        };
        ControlHeader {
            controller_id,
            controller_epoch,
            broker_epoch,
        }
    }
}
