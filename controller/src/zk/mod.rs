//! The ZooKeeper metadata store, in Kafka's znode layout ([`paths`],
//! [`json`]): the session and reads ([`store`]), controller election and the
//! controller's epoch-guarded writes ([`writes`]), and the writes any broker
//! makes — admin requests and leaders' ISR changes ([`admin`]), dynamic broker
//! configs ([`broker_configs`]) and their notifications ([`config_changes`]).

pub mod admin;
pub mod broker_configs;
pub mod config_changes;
pub mod json;
pub mod paths;
pub mod store;
pub mod writes;

pub use admin::IsrWrite;
pub use store::ZkStore;
pub use writes::EpochGuard;
