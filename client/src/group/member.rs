//! A blocking member of a classic consumer group, for Ferrite's own tools.
//!
//! [`GroupMember::join`] finds the coordinator, joins (JoinGroup v5, first
//! asking for a member id as KIP-394 requires), and syncs: the leader reads
//! the partition counts of every subscribed topic, runs its assignor over
//! the members' subscriptions (with the partitions each owned, for sticky)
//! and hands out the assignments; a follower receives its own. Nothing runs
//! in the background: the owner calls [`GroupMember::poll`] often (well
//! within the session timeout), which heartbeats when due and joins again
//! when the coordinator asks for a rebalance. Eager protocol: a rejoin
//! gives up the whole assignment and gets a new one.
//!
//! Error handling: transport failures and coordinator moves are retried
//! with backoff by [`CoordinatorClient`]; REBALANCE_IN_PROGRESS,
//! ILLEGAL_GENERATION and UNKNOWN_MEMBER_ID (the last with a fresh member
//! id) lead to a rejoin; anything else is returned as a [`MemberError`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::group_membership as gm;

use super::assignor::{from_topic_partitions, to_topic_partitions, Assignor, MemberSubscription};
use super::coordinator_client::CoordinatorClient;
pub use super::member_error::{MemberError, RetryPolicy, TopicPartition};
use super::range::RangeAssignor;
use super::round_robin::RoundRobinAssignor;
use super::sticky::StickyAssignor;
use ferrite_protocol::consumer_protocol::{Assignment, Subscription};

/// The consumer protocol type.
pub const PROTOCOL_TYPE: &str = "consumer";
/// Subscription and assignment versions written (v1: owned partitions).
const SUBSCRIPTION_V: i16 = 1;
const ASSIGNMENT_V: i16 = 1;

/// The built-in assignors by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AssignorKind {
    Range,
    RoundRobin,
    Sticky,
}

impl AssignorKind {
    /// `"range"`, `"roundrobin"` or `"sticky"`.
    pub fn from_name(name: &str) -> Option<AssignorKind> {
        match name {
            "range" => Some(AssignorKind::Range),
            "roundrobin" => Some(AssignorKind::RoundRobin),
            "sticky" => Some(AssignorKind::Sticky),
            _ => None,
        }
    }

    pub fn boxed(self) -> Box<dyn Assignor + Send> {
        match self {
            AssignorKind::Range => Box::new(RangeAssignor),
            AssignorKind::RoundRobin => Box::new(RoundRobinAssignor),
            AssignorKind::Sticky => Box::new(StickyAssignor),
        }
    }
}

impl From<AssignorKind> for Box<dyn Assignor + Send> {
    fn from(kind: AssignorKind) -> Self {
        kind.boxed()
    }
}

/// Everything a member needs; [`MemberConfig::new`] fills in defaults.
#[derive(Clone, Debug)]
pub struct MemberConfig {
    /// One or more `host:port`, comma-separated.
    pub bootstrap: String,
    pub group: String,
    pub topics: Vec<String>,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    /// Between heartbeats; `None`: a third of the session timeout.
    pub heartbeat_interval_ms: Option<u64>,
    pub client_id: String,
    /// Timeout of the requests that do not wait for a rebalance.
    pub request_timeout: Duration,
    pub retry: RetryPolicy,
    /// JoinGroup/SyncGroup rounds one rejoin may take before giving up.
    pub max_rebalance_rounds: u32,
}

impl MemberConfig {
    pub fn new(bootstrap: &str, group: &str, topics: &[&str]) -> MemberConfig {
        MemberConfig {
            bootstrap: bootstrap.to_string(),
            group: group.to_string(),
            topics: topics.iter().map(|t| t.to_string()).collect(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            heartbeat_interval_ms: None,
            client_id: "ferrite-client".to_string(),
            request_timeout: Duration::from_secs(30),
            retry: RetryPolicy::default(),
            max_rebalance_rounds: 20,
        }
    }

    fn heartbeat_interval(&self) -> Duration {
        let default = (self.session_timeout_ms.max(0) as u64) / 3;
        Duration::from_millis(self.heartbeat_interval_ms.unwrap_or(default).max(1))
    }

    fn check(&self) -> Result<(), MemberError> {
        let bad = |m: String| Err(MemberError::Config(m));
        if self.group.is_empty() {
            return bad("the group id is empty".into());
        }
        if self.topics.is_empty() {
            return bad("no topics to subscribe to".into());
        }
        if self.session_timeout_ms <= 0 || self.rebalance_timeout_ms <= 0 {
            return bad("session and rebalance timeouts must be positive".into());
        }
        if self.heartbeat_interval() >= Duration::from_millis(self.session_timeout_ms as u64) {
            return bad("the heartbeat interval must be below the session timeout".into());
        }
        Ok(())
    }
}

/// What [`GroupMember::heartbeat`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heartbeat {
    /// Not due yet; nothing was sent.
    NotDue,
    /// Sent and acknowledged: the member is in the current generation.
    Alive,
    /// The member must join again ([`GroupMember::rejoin`]); the error code
    /// that said so (0 when an earlier answer already did).
    RejoinNeeded(i16),
}

/// A member of one consumer group.
pub struct GroupMember {
    cfg: MemberConfig,
    assignor: Box<dyn Assignor + Send>,
    client: CoordinatorClient,
    member_id: String,
    generation: i32,
    leader: bool,
    assignment: Vec<TopicPartition>,
    last_heartbeat: Instant,
    rejoin_needed: bool,
}

impl GroupMember {
    /// Joins `group` subscribed to `topics` with the other settings at
    /// their defaults; returns once the member has its first assignment.
    pub fn join(
        bootstrap: &str,
        group: &str,
        topics: &[&str],
        assignor: impl Into<Box<dyn Assignor + Send>>,
        session_timeout_ms: i32,
        rebalance_timeout_ms: i32,
    ) -> Result<GroupMember, MemberError> {
        let mut cfg = MemberConfig::new(bootstrap, group, topics);
        cfg.session_timeout_ms = session_timeout_ms;
        cfg.rebalance_timeout_ms = rebalance_timeout_ms;
        GroupMember::join_with(cfg, assignor)
    }

    /// Joins as `cfg` says; returns once the member has its first assignment.
    pub fn join_with(
        cfg: MemberConfig,
        assignor: impl Into<Box<dyn Assignor + Send>>,
    ) -> Result<GroupMember, MemberError> {
        cfg.check()?;
        let client = CoordinatorClient::new(
            &cfg.bootstrap,
            &cfg.group,
            &cfg.client_id,
            cfg.retry.clone(),
            cfg.request_timeout,
        );
        let mut member = GroupMember {
            cfg,
            assignor: assignor.into(),
            client,
            member_id: String::new(),
            generation: -1,
            leader: false,
            assignment: Vec::new(),
            last_heartbeat: Instant::now(),
            rejoin_needed: true,
        };
        member.rejoin()?;
        Ok(member)
    }

    /// The partitions assigned in the current generation, sorted.
    pub fn assignment(&self) -> &[TopicPartition] {
        &self.assignment
    }

    /// The generation of the current assignment (-1 before the first).
    pub fn generation(&self) -> i32 {
        self.generation
    }

    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// Whether this member led the last rebalance (and ran the assignor).
    pub fn is_leader(&self) -> bool {
        self.leader
    }

    /// A rebalance is pending: the next [`GroupMember::poll`] joins again.
    pub fn rejoin_needed(&self) -> bool {
        self.rejoin_needed
    }

    pub fn config(&self) -> &MemberConfig {
        &self.cfg
    }

    /// The coordinator client (for lower-level requests in this group).
    pub fn coordinator_client(&mut self) -> &mut CoordinatorClient {
        &mut self.client
    }

    /// Heartbeats when due and rejoins when the group rebalances. Returns
    /// whether it rejoined (the assignment may have changed).
    pub fn poll(&mut self) -> Result<bool, MemberError> {
        match self.heartbeat()? {
            Heartbeat::RejoinNeeded(_) => {
                self.rejoin()?;
                Ok(true)
            }
            Heartbeat::NotDue | Heartbeat::Alive => Ok(false),
        }
    }

    /// Sends a Heartbeat if one is due, without rejoining: a caller that
    /// wants to commit its progress before giving up its partitions does
    /// so on [`Heartbeat::RejoinNeeded`], then calls [`GroupMember::rejoin`].
    pub fn heartbeat(&mut self) -> Result<Heartbeat, MemberError> {
        if self.rejoin_needed {
            return Ok(Heartbeat::RejoinNeeded(0));
        }
        if self.last_heartbeat.elapsed() < self.cfg.heartbeat_interval() {
            return Ok(Heartbeat::NotDue);
        }
        let code = self.client.heartbeat(self.generation, &self.member_id)?;
        self.last_heartbeat = Instant::now();
        if code == 0 {
            return Ok(Heartbeat::Alive);
        }
        if self.must_rejoin_after(code) {
            return Ok(Heartbeat::RejoinNeeded(code));
        }
        Err(MemberError::Kafka {
            api: "Heartbeat",
            context: format!("group {}", self.cfg.group),
            code,
        })
    }

    /// Notes a rejoin for the codes that call for one; UNKNOWN_MEMBER_ID
    /// also drops the member id and the (lost) assignment.
    fn must_rejoin_after(&mut self, code: i16) -> bool {
        if code == ErrorCode::UnknownMemberId.code() {
            self.member_id.clear();
            self.generation = -1;
            self.assignment.clear();
        } else if code != ErrorCode::RebalanceInProgress.code() && code != ErrorCode::IllegalGeneration.code() {
            return false;
        }
        self.rejoin_needed = true;
        true
    }

    /// Joins the group again and syncs: returns with the new generation's
    /// assignment, after at most `max_rebalance_rounds` JoinGroup rounds.
    pub fn rejoin(&mut self) -> Result<(), MemberError> {
        self.rejoin_needed = true;
        let rounds = self.cfg.max_rebalance_rounds.max(1);
        for _ in 0..rounds {
            let Some(join) = self.join_once()? else {
                continue;
            };
            if let Some(assigned) = self.sync_once(&join)? {
                self.generation = join.generation_id;
                self.leader = join.leader == self.member_id;
                self.assignment = assigned;
                self.rejoin_needed = false;
                self.last_heartbeat = Instant::now();
                return Ok(());
            }
        }
        Err(MemberError::GaveUp {
            what: "rejoin",
            attempts: rounds,
            last: Box::new(MemberError::BadAnswer(format!(
                "group {} did not settle in {rounds} rounds",
                self.cfg.group
            ))),
        })
    }

    fn subscription(&self) -> Result<bytes::Bytes, MemberError> {
        let sub = Subscription {
            version: SUBSCRIPTION_V,
            topics: self.cfg.topics.clone(),
            owned_partitions: to_topic_partitions(&self.assignment),
            ..Subscription::default()
        };
        sub.try_encode().map_err(MemberError::Protocol)
    }

    /// One JoinGroup; `None` when it must be sent again (a member id was
    /// handed out or taken away, or the group is rebalancing again).
    fn join_once(&mut self) -> Result<Option<gm::JoinGroupResponse>, MemberError> {
        let req = gm::JoinGroupRequest {
            group_id: self.cfg.group.clone(),
            session_timeout_ms: self.cfg.session_timeout_ms,
            rebalance_timeout_ms: self.cfg.rebalance_timeout_ms,
            member_id: self.member_id.clone(),
            group_instance_id: None,
            protocol_type: PROTOCOL_TYPE.to_string(),
            protocols: vec![gm::JoinGroupProtocol {
                name: self.assignor.name().to_string(),
                metadata: self.subscription()?,
            }],
        };
        let resp = self.client.join_group(&req)?;
        match resp.error_code {
            0 => {}
            c if c == ErrorCode::MemberIdRequired.code() && !resp.member_id.is_empty() => {
                self.member_id = resp.member_id;
                return Ok(None);
            }
            c if c == ErrorCode::UnknownMemberId.code() => {
                self.member_id.clear();
                return Ok(None);
            }
            c if c == ErrorCode::RebalanceInProgress.code() => return Ok(None),
            code => {
                return Err(MemberError::Kafka {
                    api: "JoinGroup",
                    context: format!("group {}", self.cfg.group),
                    code,
                })
            }
        }
        if resp.member_id.is_empty() || resp.generation_id < 0 {
            return Err(MemberError::BadAnswer(format!(
                "JoinGroup accepted member {:?} in generation {}",
                resp.member_id, resp.generation_id
            )));
        }
        self.member_id = resp.member_id.clone();
        Ok(Some(resp))
    }

    /// SyncGroup for the generation `join` opened; `None` when the group
    /// must be joined again.
    fn sync_once(&mut self, join: &gm::JoinGroupResponse) -> Result<Option<Vec<TopicPartition>>, MemberError> {
        let assignments = if join.leader == self.member_id {
            self.leader_assignments(join)?
        } else {
            Vec::new()
        };
        let req = gm::SyncGroupRequest {
            group_id: self.cfg.group.clone(),
            generation_id: join.generation_id,
            member_id: self.member_id.clone(),
            group_instance_id: None,
            protocol_type: Some(PROTOCOL_TYPE.to_string()),
            protocol_name: join.protocol_name.clone(),
            assignments,
        };
        let wait = Duration::from_millis(self.cfg.rebalance_timeout_ms as u64);
        let resp = self.client.sync_group(&req, wait)?;
        match resp.error_code {
            0 => {}
            c if self.must_rejoin_after(c) => return Ok(None),
            code => {
                return Err(MemberError::Kafka {
                    api: "SyncGroup",
                    context: format!("group {}", self.cfg.group),
                    code,
                })
            }
        }
        if resp.assignment.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let mut assigned = from_topic_partitions(
            &Assignment::decode(&resp.assignment)
                .map_err(MemberError::Protocol)?
                .partitions,
        );
        assigned.sort();
        assigned.dedup();
        Ok(Some(assigned))
    }

    /// The leader's work: decode every member's subscription, read the
    /// partition counts of their topics, run the assignor, encode.
    fn leader_assignments(
        &mut self,
        join: &gm::JoinGroupResponse,
    ) -> Result<Vec<gm::SyncGroupAssignment>, MemberError> {
        let ours = self.assignor.name();
        if join.protocol_name.as_deref() != Some(ours) {
            return Err(MemberError::BadAnswer(format!(
                "JoinGroup chose protocol {:?}; this member runs {ours:?}",
                join.protocol_name
            )));
        }
        let members: Vec<MemberSubscription> = join
            .members
            .iter()
            .map(|m| {
                // A subscription that does not decode subscribes to nothing:
                // that member gets no partitions instead of stalling the group.
                let sub = Subscription::decode(&m.metadata).unwrap_or_default();
                MemberSubscription::from_subscription(m.member_id.clone(), m.group_instance_id.clone(), &sub)
            })
            .collect();
        let topics: BTreeSet<String> = members.iter().flat_map(|m| m.topics.iter().cloned()).collect();
        let topics: Vec<String> = topics.into_iter().collect();
        let counts = self.client.partition_counts(&topics)?;
        let result = self.assignor.assign(&counts, &members);
        let mut out = Vec::with_capacity(result.len());
        for (member_id, partitions) in result {
            let assignment = Assignment {
                version: ASSIGNMENT_V,
                partitions: to_topic_partitions(&partitions),
                user_data: None,
            };
            out.push(gm::SyncGroupAssignment {
                member_id,
                assignment: assignment.try_encode().map_err(MemberError::Protocol)?,
            });
        }
        Ok(out)
    }

    /// Commits `(topic, partition, next offset to read)` as this member in
    /// its generation. REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION and
    /// UNKNOWN_MEMBER_ID fail the commit and mark the member for a rejoin.
    pub fn commit(&mut self, offsets: &[(String, i32, i64)]) -> Result<(), MemberError> {
        if offsets.is_empty() {
            return Ok(());
        }
        let result = self.client.commit_offsets(self.generation, &self.member_id, offsets);
        if let Err(e) = &result {
            if let Some(code) = e.code() {
                self.must_rejoin_after(code);
            }
        }
        result
    }

    /// The group's committed offsets of `partitions` (those with a commit).
    pub fn committed(&mut self, partitions: &[TopicPartition]) -> Result<BTreeMap<TopicPartition, i64>, MemberError> {
        if partitions.is_empty() {
            return Ok(BTreeMap::new());
        }
        self.client.fetch_offsets(partitions)
    }

    /// Leaves the group (its partitions go to the others at once). A later
    /// [`GroupMember::poll`] joins again as a new member.
    pub fn leave(&mut self) -> Result<(), MemberError> {
        if self.member_id.is_empty() {
            return Ok(());
        }
        let code = self.client.leave_group(&self.member_id)?;
        let member_id = std::mem::take(&mut self.member_id);
        self.generation = -1;
        self.leader = false;
        self.assignment.clear();
        self.rejoin_needed = true;
        if code != 0 && code != ErrorCode::UnknownMemberId.code() {
            return Err(MemberError::Kafka {
                api: "LeaveGroup",
                context: format!("group {}, member {member_id}", self.cfg.group),
                code,
            });
        }
        Ok(())
    }
}

impl Drop for GroupMember {
    /// Leaves best-effort: one attempt, a short timeout, errors ignored.
    fn drop(&mut self) {
        if self.member_id.is_empty() {
            return;
        }
        let quick = RetryPolicy {
            retries: 0,
            ..RetryPolicy::default()
        };
        self.client.set_patience(quick, Duration::from_secs(2));
        let _ = self.client.leave_group(&self.member_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignor_kinds_by_name() {
        for (name, kind) in [
            ("range", AssignorKind::Range),
            ("roundrobin", AssignorKind::RoundRobin),
            ("sticky", AssignorKind::Sticky),
        ] {
            assert_eq!(AssignorKind::from_name(name), Some(kind));
            assert_eq!(kind.boxed().name(), name);
        }
        assert_eq!(AssignorKind::from_name("cooperative-sticky"), None);
    }

    #[test]
    fn config_checks() {
        let mut cfg = MemberConfig::new("127.0.0.1:1", "g", &["t"]);
        assert!(cfg.check().is_ok());
        assert_eq!(cfg.heartbeat_interval(), Duration::from_millis(3_333));
        cfg.heartbeat_interval_ms = Some(10_000);
        assert!(matches!(cfg.check(), Err(MemberError::Config(_))));
        cfg.heartbeat_interval_ms = None;
        cfg.topics.clear();
        assert!(matches!(cfg.check(), Err(MemberError::Config(_))));
    }

    #[test]
    fn join_fails_cleanly_without_a_broker() {
        // A port nothing listens on: connection refused, retried, reported.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or(1);
        let mut cfg = MemberConfig::new(&format!("127.0.0.1:{port}"), "g", &["t"]);
        cfg.retry = RetryPolicy {
            retries: 2,
            backoff_min: Duration::from_millis(1),
            backoff_max: Duration::from_millis(2),
        };
        let e = GroupMember::join_with(cfg, AssignorKind::Range)
            .err()
            .expect("no broker");
        assert!(matches!(e, MemberError::GaveUp { attempts: 3, .. }), "{e}");
    }
}
