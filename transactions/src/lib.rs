//! Kafka's transaction coordinator (KIP-98) as state, free of I/O: a
//! transactional id's metadata and the transitions requests make of it
//! ([`metadata`]), the records of `__transaction_state` ([`log_format`]),
//! and why a request is refused ([`error`]). The broker's coordinator
//! drives them: it writes each new state to the topic before it answers,
//! and sends the transaction markers.
//!
//! Depends on: `ferrite-ids` and `ferrite-protocol` (the records use the
//! wire's primitives). It must not depend on the engine, replication, the
//! controller or the broker, nor do any I/O.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod error;
pub mod log_format;
pub mod metadata;

pub use error::TxnError;
pub use metadata::{TxnMeta, TxnStatus};

/// The internal topic holding each transactional id's state.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// The coordinator's settings (Kafka's `transaction.*` names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnConfig {
    /// `transaction.state.log.num.partitions`
    pub partitions: i32,
    /// `transaction.state.log.replication.factor`
    pub replication_factor: i16,
    /// `transaction.state.log.min.isr`
    pub min_insync_replicas: i32,
    /// `transaction.state.log.segment.bytes`
    pub segment_bytes: u64,
    /// `transaction.max.timeout.ms`: the longest timeout a producer may ask.
    pub timeout_ms_max: i32,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`
    pub abort_check_interval_ms: u64,
    /// `transaction.partition.verification.enable` (KIP-890).
    pub verification: Verification,
    /// `transactional.id.expiration.ms`: an id idle longer is removed.
    pub id_expiration_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`
    pub id_expiration_check_interval_ms: u64,
}

/// Whether a partition's leader asks the coordinator before a transaction's
/// first write there (KIP-890).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verification {
    Enabled,
    Disabled,
}

impl Default for TxnConfig {
    fn default() -> TxnConfig {
        TxnConfig {
            partitions: 50,
            replication_factor: 3,
            min_insync_replicas: 2,
            segment_bytes: 100 << 20,
            timeout_ms_max: 900_000,
            abort_check_interval_ms: 10_000,
            verification: Verification::Enabled,
            id_expiration_ms: 604_800_000,
            id_expiration_check_interval_ms: 3_600_000,
        }
    }
}
