//! Kafka's wire protocol as Ferrite speaks it: bounded decoding of
//! requests, encoding of responses, and both ends of the inter-broker RPCs.
//! Malformed frames are reported as [`wire::WireError`] and close the
//! connection; nothing is allocated from a length before it is checked
//! against the bytes present.
//!
//! The inter-broker RPCs (OffsetForLeaderEpoch, LeaderAndIsr,
//! UpdateMetadata, StopReplica, ControlledShutdown) have both ends here,
//! since one Ferrite broker sends them to another; [`controller_rpc`] puts
//! the controller's three under one enum. They are not in [`api::ApiKey`]:
//! every key there is advertised by ApiVersions and dispatched by
//! [`request`], so each of these files keeps its own key and versions.
//!
//! Depends on: `ferrite-ids` only, and no runtime (no glommio, no tokio, no
//! I/O): the broker, the client, the benchmarks and the fuzz targets all
//! link it. It must not depend on the engine, replication, the controller
//! or the broker.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod acls;
pub mod api;
pub mod api_versions;
pub mod authorized_operations;
#[cfg(test)]
mod codec_testing;
pub mod configs;
pub mod consumer_protocol;
pub mod controlled_shutdown;
pub mod controller_rpc;
pub mod delete_records;
pub mod describe_cluster;
pub mod describe_producers;
pub mod elect_leaders;
pub mod errors;
pub mod fetch;
pub mod group_membership;
pub mod group_offsets;
pub mod groups_admin;
pub mod header;
pub mod init_producer_id;
pub mod leader_and_isr;
pub mod list_offsets;
pub mod metadata;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod request;
pub mod response;
pub mod sasl;
pub mod scram_credentials;
pub mod stop_replica;
pub mod topic_partitions;
pub mod topics_admin;
pub mod txn_admin;
pub mod txn_offset_commit;
pub mod txn_producer;
pub mod txn_verify;
pub mod update_metadata;
pub mod wire;
pub mod write_txn_markers;
