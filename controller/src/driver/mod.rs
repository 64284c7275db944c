//! Runs a broker's part in the ZooKeeper cluster on the cluster thread's
//! tokio runtime: the session ([`member`]: register, re-register after
//! expiry, stand for controller), and, while this broker is controller, the
//! [`Controller`](crate::control::Controller) state machine against
//! ZooKeeper ([`controlling`]): watches in ([`watches`]), actions out.
//!
//! The broker layer talks to it through two bounded channels: [`Incoming`]
//! (RPC outcomes and requests only the controller can answer) and
//! [`Outgoing`] (controller → broker requests to deliver, and answers).

mod controlling;
pub mod member;
mod watches;

use std::time::Duration;

use ferrite_ids::TopicPartition;
use tokio::sync::oneshot;

use crate::control::{ControllerConfig, ControllerRequest, ElectionResult};
use crate::metadata::{BrokerId, BrokerMeta};
use crate::partition_state::ControllerEpoch;

pub use member::{run_member, SessionHandle};

/// Capacity of the channels between the driver and the broker layer.
pub const CHANNEL_CAPACITY_MAX: usize = 1024;

#[derive(Clone, Debug)]
pub struct DriverConfig {
    pub broker: BrokerMeta,
    /// `zookeeper.connect`.
    pub zk_connect: String,
    /// `zookeeper.session.timeout.ms`.
    pub session_timeout: Duration,
    pub controller: ControllerConfig,
    /// `leader.imbalance.check.interval.seconds`.
    pub rebalance_interval: Duration,
    /// The cluster id to create if the cluster has none yet.
    pub fresh_cluster_id: String,
}

/// From the broker layer to the driver.
#[derive(Debug)]
pub enum Incoming {
    /// A broker answered a deleting StopReplica.
    StopReplicaDone {
        broker: BrokerId,
        partitions: Vec<TopicPartition>,
    },
    /// A broker asks to move its leaderships away (answered with the
    /// partitions it still leads; `Err` when this broker is not controller).
    ControlledShutdown {
        broker: BrokerId,
        reply: oneshot::Sender<Result<Vec<TopicPartition>, NotController>>,
    },
    /// ElectLeaders (preferred): `None` elects every partition.
    ElectPreferred {
        partitions: Option<Vec<TopicPartition>>,
        reply: oneshot::Sender<Result<Vec<(TopicPartition, ElectionResult)>, NotController>>,
    },
}

/// The request went to a broker that is not (or no longer) controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotController;

/// From the driver to the broker layer.
#[derive(Debug)]
pub enum Outgoing {
    /// Deliver a controller request (in order, per broker).
    Send {
        to: BrokerMeta,
        controller_epoch: ControllerEpoch,
        request: ControllerRequest,
    },
    /// This broker became controller with `epoch`.
    BecameController(ControllerEpoch),
    /// This broker stopped being controller.
    Resigned,
    /// A (new) ZooKeeper session is ready, this broker registered in it.
    Registered(SessionHandle),
}
