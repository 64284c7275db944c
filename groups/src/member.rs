//! One member of a classic consumer group, as the coordinator sees it.

use bytes::Bytes;
use ferrite_ids::MonoMs;

/// A group member: who it is, what it can speak, what it was given, and
/// where it is in the current rebalance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub member_id: String,
    /// `group.instance.id` (static membership, KIP-345).
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: u64,
    pub rebalance_timeout_ms: u64,
    /// The protocols it offered, in its order of preference: (name, metadata).
    pub protocols: Vec<(String, Bytes)>,
    /// What the leader assigned it in the current generation.
    pub assignment: Bytes,
    /// Where it is in the rebalance.
    pub phase: MemberPhase,
    /// The last sign of life (join, sync, heartbeat, commit).
    pub last_seen: MonoMs,
}

/// What the coordinator waits for from a member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberPhase {
    /// It has sent JoinGroup for the rebalance under way; its answer waits.
    AwaitingJoin,
    /// It has its JoinGroup answer; its SyncGroup is expected.
    Joined,
    /// It has sent SyncGroup; its answer waits for the leader's assignment.
    AwaitingSync,
    /// It has its assignment (or has not yet rejoined a new rebalance).
    Settled,
}

impl Member {
    /// The metadata it offered for `protocol`.
    pub fn metadata_for(&self, protocol: &str) -> Option<&Bytes> {
        self.protocols.iter().find(|(n, _)| n == protocol).map(|(_, m)| m)
    }

    pub fn supports(&self, protocol: &str) -> bool {
        self.metadata_for(protocol).is_some()
    }

    /// Whether the session has run out at `now`. A member whose answer the
    /// coordinator holds is not expected to heartbeat meanwhile.
    pub fn session_expired(&self, now: MonoMs) -> bool {
        if matches!(self.phase, MemberPhase::AwaitingJoin | MemberPhase::AwaitingSync) {
            return false;
        }
        now.since(self.last_seen) > self.session_timeout_ms
    }

    /// Same protocols, same metadata, same order.
    pub fn same_protocols(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }
}
