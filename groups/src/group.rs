//! The classic group membership state machine of one consumer group, free of
//! I/O: requests and clock ticks in, answers out.
//!
//! States (Kafka's): `Empty` (no members; may still hold offsets) →
//! `PreparingRebalance` (collecting JoinGroups) → `CompletingRebalance`
//! (the leader has the members; waiting for its SyncGroup) → `Stable`
//! (everyone has an assignment) — and `Dead` (deleted or expired).
//!
//! A JoinGroup or SyncGroup that has to wait is answered later: the method
//! returns [`Outcome::Later`] and the answer appears in
//! [`Group::take_deliveries`] once the rebalance gets there (or a timeout
//! does). The driver that owns the group keeps one waiting slot per member
//! and kind.
//!
//! Timers: a member is removed when its session runs out (`last_seen` +
//! session timeout) unless the coordinator holds its answer; a join phase
//! ends when every member has rejoined, or at the rebalance timeout (the
//! largest of the members'), removing those that did not; the first
//! rebalance of an empty group waits `group.initial.rebalance.delay.ms`
//! (extended by each new member up to the rebalance timeout) so that a
//! group starting together gets one rebalance, not one per member; a
//! completing rebalance whose leader never syncs is abandoned at the
//! rebalance timeout.

use std::collections::BTreeMap;

use bytes::Bytes;
use ferrite_ids::MonoMs;

use super::error::GroupError;
use super::member::{Member, MemberPhase};
pub use super::messages::{
    Delivery, GroupConfig, GroupSnapshot, JoinAnswer, JoinRequest, JoinedMember, MemberIdPolicy, Outcome, SyncAnswer,
    SyncRequest,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The name DescribeGroups and ListGroups report.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// Deadlines of the phase under way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Timers {
    /// The join phase ends here at the latest.
    join_deadline: Option<MonoMs>,
    /// The initial delay of an empty group's first rebalance runs to here.
    initial_delay_until: Option<MonoMs>,
    /// ... and is never extended past here.
    initial_delay_cap: Option<MonoMs>,
    /// A completing rebalance is abandoned here.
    sync_deadline: Option<MonoMs>,
}

#[derive(Debug)]
pub struct Group {
    pub id: String,
    state: GroupState,
    generation: i32,
    protocol_type: Option<String>,
    protocol: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// group.instance.id → member id.
    instances: BTreeMap<String, String>,
    /// Ids handed out with MEMBER_ID_REQUIRED, valid until the deadline.
    pending: BTreeMap<String, MonoMs>,
    timers: Timers,
    deliveries: Vec<Delivery>,
    persist_wanted: bool,
}

impl Group {
    pub fn new(id: &str) -> Group {
        Group {
            id: id.to_string(),
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            instances: BTreeMap::new(),
            pending: BTreeMap::new(),
            timers: Timers::default(),
            deliveries: Vec::new(),
            persist_wanted: false,
        }
    }

    /// A group loaded from its last snapshot: Stable with its members (each
    /// given a fresh session from `now`) or Empty.
    pub fn from_snapshot(id: &str, snap: GroupSnapshot, now: MonoMs) -> Group {
        let mut g = Group::new(id);
        g.generation = snap.generation;
        g.protocol_type = Some(snap.protocol_type);
        g.protocol = snap.protocol;
        g.leader = snap.leader;
        for mut m in snap.members {
            m.phase = MemberPhase::Settled;
            m.last_seen = now;
            if let Some(i) = &m.instance_id {
                g.instances.insert(i.clone(), m.member_id.clone());
            }
            g.members.insert(m.member_id.clone(), m);
        }
        g.state = if g.members.is_empty() {
            GroupState::Empty
        } else {
            GroupState::Stable
        };
        g
    }

    pub fn state(&self) -> GroupState {
        self.state
    }

    pub fn generation(&self) -> i32 {
        self.generation
    }

    pub fn protocol_type(&self) -> Option<&str> {
        self.protocol_type.as_deref()
    }

    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }

    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.members.values()
    }

    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    /// Answers that became ready, to hand to the waiting requests.
    pub fn take_deliveries(&mut self) -> Vec<Delivery> {
        std::mem::take(&mut self.deliveries)
    }

    /// Whether the group's metadata changed in a way that must be written
    /// (and clears the flag).
    pub fn take_persist(&mut self) -> bool {
        std::mem::replace(&mut self.persist_wanted, false)
    }

    pub fn snapshot(&self) -> GroupSnapshot {
        GroupSnapshot {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            members: self.members.values().cloned().collect(),
        }
    }

    /// Marks the group deleted (DeleteGroups, expiry).
    pub fn mark_dead(&mut self) {
        self.state = GroupState::Dead;
        for m in std::mem::take(&mut self.members).into_values() {
            self.answer_waiting(&m, GroupError::CoordinatorNotAvailable);
        }
        self.instances.clear();
    }

    // ---- JoinGroup ----

    pub fn join(&mut self, req: JoinRequest, fresh_id: String, now: MonoMs, cfg: &GroupConfig) -> Outcome<JoinAnswer> {
        match self.check_join(&req, cfg) {
            Ok(()) => {}
            Err(e) => return Outcome::Now(JoinAnswer::refused(e, &req.member_id)),
        }
        if req.member_id.is_empty() {
            return self.join_unknown(req, fresh_id, now, cfg);
        }
        self.join_known(req, now, cfg)
    }

    fn check_join(&self, req: &JoinRequest, cfg: &GroupConfig) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if !(cfg.session_timeout_min_ms..=cfg.session_timeout_max_ms).contains(&req.session_timeout_ms) {
            return Err(GroupError::InvalidSessionTimeout);
        }
        if req.protocol_type.is_empty() || req.protocols.is_empty() {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        if self.members.is_empty() {
            return Ok(());
        }
        if self.protocol_type.as_deref() != Some(req.protocol_type.as_str()) {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        // Some protocol every other member offers must be among this one's.
        let others = self.members.values().filter(|m| m.member_id != req.member_id);
        let mut common: Vec<&str> = req.protocols.iter().map(|(n, _)| n.as_str()).collect();
        for m in others {
            common.retain(|p| m.supports(p));
        }
        if common.is_empty() && self.members.keys().any(|k| *k != req.member_id) {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        Ok(())
    }

    fn join_unknown(
        &mut self,
        req: JoinRequest,
        fresh_id: String,
        now: MonoMs,
        cfg: &GroupConfig,
    ) -> Outcome<JoinAnswer> {
        if let Some(instance) = req.instance_id.clone() {
            if let Some(old_id) = self.instances.get(&instance).cloned() {
                return self.rejoin_static(req, old_id, fresh_id, now, cfg);
            }
        } else if req.policy == MemberIdPolicy::Required {
            if self.members.len() + self.pending.len() >= cfg.members_max {
                return Outcome::Now(JoinAnswer::refused(GroupError::GroupMaxSizeReached, ""));
            }
            self.pending
                .insert(fresh_id.clone(), now.plus_ms(req.session_timeout_ms));
            return Outcome::Now(JoinAnswer::refused(GroupError::MemberIdRequired, &fresh_id));
        }
        if self.members.len() >= cfg.members_max {
            return Outcome::Now(JoinAnswer::refused(GroupError::GroupMaxSizeReached, ""));
        }
        self.add_member(req, fresh_id, now, cfg)
    }

    fn join_known(&mut self, req: JoinRequest, now: MonoMs, cfg: &GroupConfig) -> Outcome<JoinAnswer> {
        if self.pending.remove(&req.member_id).is_some() {
            if self.members.len() >= cfg.members_max {
                return Outcome::Now(JoinAnswer::refused(GroupError::GroupMaxSizeReached, &req.member_id));
            }
            let id = req.member_id.clone();
            return self.add_member(req, id, now, cfg);
        }
        if let Err(e) = self.check_member(&req.member_id, req.instance_id.as_deref()) {
            return Outcome::Now(JoinAnswer::refused(e, &req.member_id));
        }
        let id = req.member_id.clone();
        let is_leader = self.leader.as_deref() == Some(id.as_str());
        let same = self.members.get(&id).is_some_and(|m| m.same_protocols(&req.protocols));
        match self.state {
            GroupState::PreparingRebalance => {
                self.update_member(&req, now);
                self.check_join_complete(now);
                Outcome::Later { member_id: id }
            }
            GroupState::CompletingRebalance | GroupState::Stable
                if same && !(is_leader && self.state == GroupState::Stable) =>
            {
                // Nothing changed: the member gets the current generation
                // again (the leader, in CompletingRebalance, with members).
                if let Some(m) = self.members.get_mut(&id) {
                    m.last_seen = now;
                }
                Outcome::Now(self.join_answer_for(&id))
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.update_member(&req, now);
                self.prepare_rebalance(now, cfg);
                Outcome::Later { member_id: id }
            }
            GroupState::Empty | GroupState::Dead => Outcome::Now(JoinAnswer::refused(GroupError::UnknownMemberId, &id)),
        }
    }

    /// A static member joining again under a new member id: the old id is
    /// fenced, the member keeps its place — and, while the group is stable
    /// and would still choose the same protocol, its assignment with no
    /// rebalance (KIP-345; the leader too).
    fn rejoin_static(
        &mut self,
        req: JoinRequest,
        old_id: String,
        new_id: String,
        now: MonoMs,
        cfg: &GroupConfig,
    ) -> Outcome<JoinAnswer> {
        let Some(mut m) = self.members.remove(&old_id) else {
            return self.add_member(req, new_id, now, cfg);
        };
        self.answer_waiting(&m, GroupError::FencedInstanceId);
        m.member_id = new_id.clone();
        // Its metadata may differ (owned partitions, say): only a change of
        // the group's protocol calls for a rebalance, as in Kafka.
        m.protocols = req.protocols.clone();
        let instance = req.instance_id.clone().unwrap_or_default();
        self.instances.insert(instance, new_id.clone());
        let was_leader = self.leader.as_deref() == Some(old_id.as_str());
        if was_leader {
            self.leader = Some(new_id.clone());
        }
        m.last_seen = now;
        self.members.insert(new_id.clone(), m);
        if self.state == GroupState::Stable && self.select_protocol() == self.protocol {
            // A rejoining leader gets the members; its SyncGroup is
            // answered from the stored assignment.
            self.persist_wanted = true;
            return Outcome::Now(self.join_answer_for(&new_id));
        }
        self.update_member(&req_with_id(req, &new_id), now);
        match self.state {
            GroupState::PreparingRebalance => self.check_join_complete(now),
            _ => self.prepare_rebalance(now, cfg),
        }
        Outcome::Later { member_id: new_id }
    }

    fn add_member(&mut self, req: JoinRequest, id: String, now: MonoMs, cfg: &GroupConfig) -> Outcome<JoinAnswer> {
        if self.members.is_empty() {
            self.protocol_type = Some(req.protocol_type.clone());
        }
        if let Some(i) = &req.instance_id {
            self.instances.insert(i.clone(), id.clone());
        }
        let member = Member {
            member_id: id.clone(),
            instance_id: req.instance_id,
            client_id: req.client_id,
            client_host: req.client_host,
            session_timeout_ms: req.session_timeout_ms,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            protocols: req.protocols,
            assignment: Bytes::new(),
            phase: MemberPhase::AwaitingJoin,
            last_seen: now,
        };
        self.members.insert(id.clone(), member);
        match self.state {
            GroupState::PreparingRebalance => {
                self.extend_initial_delay(now, cfg);
                self.check_join_complete(now);
            }
            _ => self.prepare_rebalance(now, cfg),
        }
        Outcome::Later { member_id: id }
    }

    /// The ids of the members `f` picks.
    fn ids_where(&self, f: impl Fn(&Member) -> bool) -> Vec<String> {
        self.members
            .values()
            .filter(|m| f(m))
            .map(|m| m.member_id.clone())
            .collect()
    }

    fn update_member(&mut self, req: &JoinRequest, now: MonoMs) {
        if let Some(m) = self.members.get_mut(&req.member_id) {
            m.protocols = req.protocols.clone();
            m.session_timeout_ms = req.session_timeout_ms;
            m.rebalance_timeout_ms = req.rebalance_timeout_ms;
            m.client_id = req.client_id.clone();
            m.client_host = req.client_host.clone();
            m.phase = MemberPhase::AwaitingJoin;
            m.last_seen = now;
        }
    }

    fn rebalance_timeout_ms(&self) -> u64 {
        self.members.values().map(|m| m.rebalance_timeout_ms).max().unwrap_or(0)
    }

    /// Starts a join phase; members waiting for their SyncGroup answer are
    /// told to rejoin.
    fn prepare_rebalance(&mut self, now: MonoMs, cfg: &GroupConfig) {
        if self.state == GroupState::CompletingRebalance {
            let waiting = self.ids_where(|m| m.phase == MemberPhase::AwaitingSync);
            for id in waiting {
                self.deliveries.push(Delivery::Sync {
                    member_id: id.clone(),
                    answer: SyncAnswer::refused(GroupError::RebalanceInProgress),
                });
                if let Some(m) = self.members.get_mut(&id) {
                    m.phase = MemberPhase::Settled;
                }
            }
        }
        let from_empty = self.state == GroupState::Empty;
        self.state = GroupState::PreparingRebalance;
        let timeout = self.rebalance_timeout_ms();
        self.timers = Timers {
            join_deadline: Some(now.plus_ms(timeout)),
            ..Timers::default()
        };
        if from_empty && cfg.initial_rebalance_delay_ms > 0 {
            let cap = now.plus_ms(timeout.max(cfg.initial_rebalance_delay_ms));
            self.timers.initial_delay_cap = Some(cap);
            self.timers.initial_delay_until = Some(now.plus_ms(cfg.initial_rebalance_delay_ms).min(cap));
            self.timers.join_deadline = Some(cap);
        }
        self.check_join_complete(now);
    }

    fn extend_initial_delay(&mut self, now: MonoMs, cfg: &GroupConfig) {
        if let (Some(_), Some(cap)) = (self.timers.initial_delay_until, self.timers.initial_delay_cap) {
            self.timers.initial_delay_until = Some(now.plus_ms(cfg.initial_rebalance_delay_ms).min(cap));
        }
    }

    /// Ends the join phase when everyone has rejoined (and any initial delay
    /// is over).
    fn check_join_complete(&mut self, now: MonoMs) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        if self.timers.initial_delay_until.is_some_and(|t| now < t) {
            return;
        }
        let all_in = self.members.values().all(|m| m.phase == MemberPhase::AwaitingJoin);
        let timed_out = self.timers.join_deadline.is_some_and(|t| now >= t);
        if all_in || timed_out {
            self.complete_join(now);
        }
    }

    fn complete_join(&mut self, now: MonoMs) {
        let late = self.ids_where(|m| m.phase != MemberPhase::AwaitingJoin);
        for id in late {
            self.remove_member(&id);
        }
        self.generation += 1;
        self.timers = Timers::default();
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.protocol = None;
            self.leader = None;
            self.persist_wanted = true;
            return;
        }
        self.protocol = self.select_protocol();
        if !self.leader.as_ref().is_some_and(|l| self.members.contains_key(l)) {
            self.leader = self.members.keys().next().cloned();
        }
        self.state = GroupState::CompletingRebalance;
        let timeout = self.rebalance_timeout_ms();
        self.timers.sync_deadline = Some(now.plus_ms(timeout));
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let answer = self.join_answer_for(&id);
            if let Some(m) = self.members.get_mut(&id) {
                m.phase = MemberPhase::Joined;
                m.last_seen = now;
            }
            self.deliveries.push(Delivery::Join { member_id: id, answer });
        }
    }

    /// The protocol every member offers that most members prefer; ties go
    /// to the earlier one in the first member's order.
    fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        let candidates: Vec<&str> = first
            .protocols
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|p| self.members.values().all(|m| m.supports(p)))
            .collect();
        let mut votes: Vec<usize> = vec![0; candidates.len()];
        for m in self.members.values() {
            let pick = m
                .protocols
                .iter()
                .find_map(|(n, _)| candidates.iter().position(|c| c == n));
            if let Some(i) = pick {
                votes[i] += 1;
            }
        }
        let best = (0..candidates.len()).max_by_key(|&i| (votes[i], std::cmp::Reverse(i)))?;
        Some(candidates[best].to_string())
    }

    fn join_answer_for(&self, member_id: &str) -> JoinAnswer {
        let protocol = self.protocol.clone().unwrap_or_default();
        let is_leader = self.leader.as_deref() == Some(member_id);
        let members = if is_leader {
            self.members
                .values()
                .map(|m| JoinedMember {
                    member_id: m.member_id.clone(),
                    instance_id: m.instance_id.clone(),
                    metadata: m.metadata_for(&protocol).cloned().unwrap_or_default(),
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinAnswer {
            error: None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            members,
        }
    }

    // ---- SyncGroup, Heartbeat, LeaveGroup, commits ----

    /// The member exists and, if static, is the instance's current holder.
    fn check_member(&self, member_id: &str, instance_id: Option<&str>) -> Result<(), GroupError> {
        if let Some(i) = instance_id {
            match self.instances.get(i) {
                Some(holder) if holder != member_id => return Err(GroupError::FencedInstanceId),
                _ => {}
            }
        }
        if !self.members.contains_key(member_id) {
            return Err(GroupError::UnknownMemberId);
        }
        Ok(())
    }

    fn check_generation(&self, member_id: &str, instance_id: Option<&str>, generation: i32) -> Result<(), GroupError> {
        match self.state {
            GroupState::Dead => return Err(GroupError::CoordinatorNotAvailable),
            GroupState::Empty => return Err(GroupError::UnknownMemberId),
            _ => {}
        }
        self.check_member(member_id, instance_id)?;
        if generation != self.generation {
            return Err(GroupError::IllegalGeneration);
        }
        Ok(())
    }

    pub fn sync(&mut self, req: SyncRequest, now: MonoMs) -> Outcome<SyncAnswer> {
        if let Err(e) = self.check_generation(&req.member_id, req.instance_id.as_deref(), req.generation) {
            return Outcome::Now(SyncAnswer::refused(e));
        }
        let type_ok = req.protocol_type.is_none() || req.protocol_type == self.protocol_type;
        let name_ok = req.protocol.is_none() || req.protocol == self.protocol;
        if !(type_ok && name_ok) {
            return Outcome::Now(SyncAnswer::refused(GroupError::InconsistentGroupProtocol));
        }
        if let Some(m) = self.members.get_mut(&req.member_id) {
            m.last_seen = now;
        }
        match self.state {
            GroupState::PreparingRebalance => Outcome::Now(SyncAnswer::refused(GroupError::RebalanceInProgress)),
            GroupState::Stable => Outcome::Now(self.sync_answer_for(&req.member_id)),
            GroupState::CompletingRebalance => {
                if let Some(m) = self.members.get_mut(&req.member_id) {
                    m.phase = MemberPhase::AwaitingSync;
                }
                if self.leader.as_deref() == Some(req.member_id.as_str()) {
                    self.install_assignments(req.assignments, now);
                }
                Outcome::Later {
                    member_id: req.member_id,
                }
            }
            GroupState::Empty | GroupState::Dead => Outcome::Now(SyncAnswer::refused(GroupError::UnknownMemberId)),
        }
    }

    /// The leader's assignment: every member gets its part (or nothing),
    /// the group is stable, and the waiting members are answered.
    fn install_assignments(&mut self, assignments: Vec<(String, Bytes)>, now: MonoMs) {
        let mut given: BTreeMap<String, Bytes> = assignments.into_iter().collect();
        for m in self.members.values_mut() {
            m.assignment = given.remove(&m.member_id).unwrap_or_default();
        }
        self.state = GroupState::Stable;
        self.timers = Timers::default();
        self.persist_wanted = true;
        let waiting = self.ids_where(|m| m.phase == MemberPhase::AwaitingSync);
        for id in waiting {
            let answer = self.sync_answer_for(&id);
            if let Some(m) = self.members.get_mut(&id) {
                m.phase = MemberPhase::Settled;
                m.last_seen = now;
            }
            self.deliveries.push(Delivery::Sync { member_id: id, answer });
        }
        for m in self.members.values_mut() {
            if m.phase == MemberPhase::Joined {
                // Its SyncGroup will be answered at once from the assignment.
                m.phase = MemberPhase::Settled;
            }
        }
    }

    fn sync_answer_for(&self, member_id: &str) -> SyncAnswer {
        SyncAnswer {
            error: None,
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            assignment: self
                .members
                .get(member_id)
                .map(|m| m.assignment.clone())
                .unwrap_or_default(),
        }
    }

    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: MonoMs,
    ) -> Result<(), GroupError> {
        self.check_generation(member_id, instance_id, generation)?;
        if let Some(m) = self.members.get_mut(member_id) {
            m.last_seen = now;
        }
        if self.state == GroupState::PreparingRebalance {
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    /// Removes the members named (by member id, or by instance id when the
    /// member id is empty); one result per member.
    pub fn leave(
        &mut self,
        leaving: &[(String, Option<String>)],
        now: MonoMs,
        cfg: &GroupConfig,
    ) -> Vec<Result<(), GroupError>> {
        let mut results = Vec::with_capacity(leaving.len());
        let mut removed = false;
        for (member_id, instance) in leaving {
            let id = match (member_id.is_empty(), instance) {
                (true, Some(i)) => self.instances.get(i).cloned().unwrap_or_default(),
                _ => member_id.clone(),
            };
            let checked = if self.state == GroupState::Dead {
                Err(GroupError::CoordinatorNotAvailable)
            } else {
                self.check_member(&id, instance.as_deref())
            };
            if checked.is_ok() {
                self.remove_member(&id);
                removed = true;
            }
            results.push(checked);
        }
        if removed {
            self.after_removal(now, cfg);
        }
        results
    }

    /// Checks an OffsetCommit's member and generation. A commit with no
    /// member and generation -1 (a consumer using `assign`) is allowed only
    /// while the group has no members.
    pub fn check_commit(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: MonoMs,
    ) -> Result<(), GroupError> {
        match self.state {
            GroupState::Dead => return Err(GroupError::CoordinatorNotAvailable),
            GroupState::Empty if generation < 0 => return Ok(()),
            GroupState::CompletingRebalance => return Err(GroupError::RebalanceInProgress),
            _ => {}
        }
        self.check_member(member_id, instance_id)?;
        if generation != self.generation {
            return Err(GroupError::IllegalGeneration);
        }
        if let Some(m) = self.members.get_mut(member_id) {
            m.last_seen = now;
        }
        Ok(())
    }

    fn remove_member(&mut self, id: &str) {
        if let Some(m) = self.members.remove(id) {
            self.answer_waiting(&m, GroupError::UnknownMemberId);
            if let Some(i) = &m.instance_id {
                if self.instances.get(i).is_some_and(|holder| holder == id) {
                    self.instances.remove(i);
                }
            }
        }
        if self.leader.as_deref() == Some(id) {
            self.leader = None;
        }
    }

    /// A member that the coordinator still owes an answer gets `error`.
    fn answer_waiting(&mut self, m: &Member, error: GroupError) {
        match m.phase {
            MemberPhase::AwaitingJoin => self.deliveries.push(Delivery::Join {
                member_id: m.member_id.clone(),
                answer: JoinAnswer::refused(error, &m.member_id),
            }),
            MemberPhase::AwaitingSync => self.deliveries.push(Delivery::Sync {
                member_id: m.member_id.clone(),
                answer: SyncAnswer::refused(error),
            }),
            MemberPhase::Joined | MemberPhase::Settled => {}
        }
    }

    fn after_removal(&mut self, now: MonoMs, cfg: &GroupConfig) {
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                if self.members.is_empty() {
                    self.generation += 1;
                    self.state = GroupState::Empty;
                    self.protocol = None;
                    self.leader = None;
                    self.timers = Timers::default();
                    self.persist_wanted = true;
                } else {
                    self.prepare_rebalance(now, cfg);
                }
            }
            GroupState::PreparingRebalance => self.check_join_complete(now),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    /// Runs the clocks: expired sessions, the join and sync deadlines, and
    /// handed-out member ids nobody used.
    pub fn tick(&mut self, now: MonoMs, cfg: &GroupConfig) {
        self.pending.retain(|_, deadline| now < *deadline);
        let expired = self.ids_where(|m| m.session_expired(now));
        if !expired.is_empty() {
            for id in &expired {
                tracing::info!(group = %self.id, member = %id, "member session expired");
                self.remove_member(id);
            }
            self.after_removal(now, cfg);
        }
        if self.state == GroupState::CompletingRebalance && self.timers.sync_deadline.is_some_and(|t| now >= t) {
            // The leader never sent its assignment: those that did not sync
            // are dropped, the rest rejoin.
            let silent = self.ids_where(|m| m.phase != MemberPhase::AwaitingSync);
            for id in &silent {
                self.remove_member(id);
            }
            self.after_removal(now, cfg);
        }
        self.check_join_complete(now);
    }
}

fn req_with_id(mut req: JoinRequest, id: &str) -> JoinRequest {
    req.member_id = id.to_string();
    req
}

#[cfg(test)]
#[path = "group_tests.rs"]
mod tests;
