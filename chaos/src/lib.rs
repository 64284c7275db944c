//! Ferrite's fault suite (Jepsen's way): a real cluster — three ZooKeeper
//! servers and `ferrite broker` processes — in a network namespace of its
//! own, clients that record every operation, faults started and healed,
//! and a checker that reads the history against the log read back.
//!
//! - [`net`]: the private namespace and the nftables cuts between nodes;
//! - [`cluster`]: the processes, each on its own loopback address and user;
//! - [`disk`]: small disks of their own for the brokers, to fill up;
//! - [`clock`]: the brokers' wall clocks, stepped (libfaketime);
//! - [`fault`]: faults as plans of actions, without I/O;
//! - [`workload`]: producers and a reader, on plain threads; [`members`]:
//!   consumers in a group with members;
//! - [`history`], [`checker`]: the record of operations and what it must
//!   satisfy; [`replicas`]: the replicas compared on disk;
//! - [`runner`]: one run, start to report.
//!
//! Depends on the client, the protocol, the engine's batch format and the
//! test kit's ZooKeeper; it runs the `ferrite` binary and never links the
//! broker. Needs root (namespaces, users, nftables).

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod checker;
pub mod clock;
pub mod cluster;
pub mod disk;
pub mod error;
pub mod fault;
pub mod history;
pub mod members;
pub mod net;
pub mod producer;
pub mod replicas;
pub mod runner;
pub mod suite;
pub mod workload;
