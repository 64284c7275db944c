//! The broker: listeners on the shards, the Kafka wire protocol, request
//! routing and API handlers, configuration, metrics and the `ferrite` CLI.
//!
//! Not built yet: this crate is the subject of the Kafka protocol broker
//! issue.
