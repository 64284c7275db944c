//! The replication settings a partition acts on, with Kafka's names.

/// Per-partition replication settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaConfig {
    /// `min.insync.replicas` (topic or broker level): with acks=all, the
    /// smallest ISR that may accept a write. The high watermark also advances
    /// only while the ISR is at least this large (KIP-966), capped at the
    /// replication factor so that a topic with fewer replicas can commit.
    pub min_insync_replicas: usize,
    /// `replica.lag.time.max.ms`: a follower that has not caught up to the
    /// leader's log end for this long leaves the ISR.
    pub replica_lag_time_max_ms: u64,
    /// Produce requests that may wait for acks on one partition at once.
    pub waiters_max: usize,
}

impl Default for ReplicaConfig {
    fn default() -> Self {
        ReplicaConfig {
            min_insync_replicas: 1,
            replica_lag_time_max_ms: 30_000,
            waiters_max: 4096,
        }
    }
}
