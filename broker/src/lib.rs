//! The broker: listeners on the shards, the Kafka wire protocol, request
//! routing and API handlers, configuration, metrics and the `ferrite` CLI.
//!
//! Built so far: the protocol codec ([`protocol`]).

pub mod protocol;
