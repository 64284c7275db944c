//! What goes in and out of a group's state machine ([`super::group`]): the
//! broker's group settings, the JoinGroup and SyncGroup requests as the
//! machine sees them, its answers (now, or later as deliveries), and the
//! snapshot written to `__consumer_offsets`.

use bytes::Bytes;

use super::error::GroupError;
use super::member::Member;

/// The broker's group settings (Kafka's `group.*` names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupConfig {
    /// `group.min.session.timeout.ms`
    pub session_timeout_min_ms: u64,
    /// `group.max.session.timeout.ms`
    pub session_timeout_max_ms: u64,
    /// `group.initial.rebalance.delay.ms`
    pub initial_rebalance_delay_ms: u64,
    /// `group.max.size`
    pub members_max: usize,
}

impl Default for GroupConfig {
    fn default() -> GroupConfig {
        GroupConfig {
            session_timeout_min_ms: 6_000,
            session_timeout_max_ms: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            members_max: 1_000,
        }
    }
}

/// Whether a member without an id must first be given one (JoinGroup v4+,
/// KIP-394) or is added at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberIdPolicy {
    Required,
    AssignedOnJoin,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinRequest {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: u64,
    pub rebalance_timeout_ms: u64,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    pub policy: MemberIdPolicy,
}

/// A member as the leader sees it in its JoinGroup answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub metadata: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinAnswer {
    pub error: Option<GroupError>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Filled for the leader only.
    pub members: Vec<JoinedMember>,
}

impl JoinAnswer {
    pub fn refused(error: GroupError, member_id: &str) -> JoinAnswer {
        JoinAnswer {
            error: Some(error),
            generation: -1,
            protocol_type: None,
            protocol: None,
            leader: String::new(),
            member_id: member_id.to_string(),
            members: Vec::new(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncAnswer {
    pub error: Option<GroupError>,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub assignment: Bytes,
}

impl SyncAnswer {
    pub fn refused(error: GroupError) -> SyncAnswer {
        SyncAnswer {
            error: Some(error),
            protocol_type: None,
            protocol: None,
            assignment: Bytes::new(),
        }
    }
}

/// An answer now, or later through [`Group::take_deliveries`] to the member
/// named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome<T> {
    Now(T),
    Later { member_id: String },
}

/// An answer the group hands to a waiting JoinGroup or SyncGroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    Join { member_id: String, answer: JoinAnswer },
    Sync { member_id: String, answer: SyncAnswer },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncRequest {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

/// The group's persistent part, as written to `__consumer_offsets`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSnapshot {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: Vec<Member>,
}
