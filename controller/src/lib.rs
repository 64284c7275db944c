//! Cluster metadata and the controller: the metadata store trait (ZooKeeper,
//! and an embedded single-node store), controller election, partition and
//! replica state machines, assignment, leader balance and reassignment — the
//! decisions as state machines without I/O.
//!
//! Not built yet: this crate is the subject of the controller issue.
