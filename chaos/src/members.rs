//! Consumers in a group with members (Kafka's classic group protocol):
//! [`MEMBERS`] members of [`MEMBERS_GROUP`] share the partitions. Each
//! resumes an assigned partition from the group's committed offset, reads
//! on (every read recorded, as the reader's are), and commits its
//! positions in its generation every [`COMMIT_EVERY`].
//!
//! What the faults must not break: a member fenced by a rebalance (its
//! session lost while its broker was cut off, its coordinator moved) has
//! its commits refused, so the group's acknowledged commits never go back
//! and none is lost (the checker reads commits per group); and what a
//! member reads is what the log holds.

use std::collections::BTreeMap;
use std::time::Instant;

use ferrite_client::group::member::{AssignorKind, GroupMember, MemberConfig};
use ferrite_client::group::member_error::{MemberError, RetryPolicy};
use ferrite_protocol::errors::ErrorCode;

use serde::{Deserialize, Serialize};

use crate::history::{History, OpKind, Outcome};
use crate::workload::{self, Routes, Shared, BACKOFF, COMMIT_EVERY, REQUEST_TIMEOUT, TOPIC};

pub const MEMBERS_GROUP: &str = "chaos-members";
/// How many members the group has.
pub const MEMBERS: u32 = 2;
/// The members' client numbers: `MEMBER_CLIENT_FIRST + i` (the producers
/// are `1..`, the reader 0).
pub const MEMBER_CLIENT_FIRST: u32 = 100;
/// Within the brokers' `group.max.session.timeout.ms`; longer than a
/// pause of a broker's shard, shorter than a fault.
const SESSION_TIMEOUT_MS: i32 = 6_000;
const REBALANCE_TIMEOUT_MS: i32 = 10_000;
/// JoinGroup/SyncGroup rounds one rejoin may take; then the member starts
/// over, so that it notices the run stopping.
const REBALANCE_ROUNDS_MAX: u32 = 3;

/// One member's life: join, read what is assigned, commit, rejoin when
/// fenced, leave when the run stops.
pub fn member_loop(shared: Shared, client: u32) {
    let mut routes = Routes::new(shared.clone(), format!("chaos-member-{client}"));
    let mut member: Option<GroupMember> = None;
    // The next offset to read of each assigned partition; empty until the
    // assignment's committed offsets are known.
    let mut positions: BTreeMap<i32, i64> = BTreeMap::new();
    let mut committed_at = Instant::now();
    while !shared.stopped() {
        let Some(m) = member.as_mut() else {
            member = join(&shared, client);
            positions.clear();
            if member.is_none() {
                std::thread::sleep(BACKOFF);
            }
            continue;
        };
        match m.poll() {
            Ok(false) => {}
            Ok(true) => positions.clear(),
            Err(_) => {
                member = None;
                continue;
            }
        }
        if positions.is_empty() && !m.assignment().is_empty() {
            match resume(m) {
                Some(p) => positions = p,
                None => {
                    std::thread::sleep(BACKOFF);
                    continue;
                }
            }
        }
        if committed_at.elapsed() >= COMMIT_EVERY {
            commit(&shared, client, m, &positions);
            committed_at = Instant::now();
        }
        let mut idle = true;
        for (partition, next) in positions.iter_mut() {
            if workload::read_and_record(&shared, client, &mut routes, *partition, next) {
                idle = false;
            }
        }
        if idle {
            std::thread::sleep(BACKOFF);
        }
    }
    if let Some(mut m) = member {
        let _ = m.leave();
    }
}

fn join(shared: &Shared, client: u32) -> Option<GroupMember> {
    let mut cfg = MemberConfig::new(&shared.bootstrap.join(","), MEMBERS_GROUP, &[TOPIC]);
    cfg.session_timeout_ms = SESSION_TIMEOUT_MS;
    cfg.rebalance_timeout_ms = REBALANCE_TIMEOUT_MS;
    cfg.client_id = format!("chaos-member-{client}");
    cfg.request_timeout = REQUEST_TIMEOUT;
    cfg.retry = member_retry();
    cfg.max_rebalance_rounds = REBALANCE_ROUNDS_MAX;
    GroupMember::join_with(cfg, AssignorKind::Range).ok()
}

/// The member's patience with its coordinator (joins, heartbeats, offset
/// fetches).
fn member_retry() -> RetryPolicy {
    RetryPolicy {
        retries: 2,
        ..RetryPolicy::default()
    }
}

/// Where to read each assigned partition from: the group's committed
/// offset, or 0 for a partition without one.
fn resume(m: &mut GroupMember) -> Option<BTreeMap<i32, i64>> {
    let assigned: Vec<(String, i32)> = m.assignment().to_vec();
    let committed = m.committed(&assigned).ok()?;
    let from = |tp: &(String, i32)| committed.get(tp).copied().filter(|o| *o >= 0).unwrap_or(0);
    Some(assigned.iter().map(|tp| (tp.1, from(tp))).collect())
}

/// Commits the member's positions in its generation (one attempt),
/// recording a commit per partition: refused by the group (the member
/// fenced), failed; any other error, unknown.
fn commit(shared: &Shared, client: u32, m: &mut GroupMember, positions: &BTreeMap<i32, i64>) {
    let offsets: Vec<(String, i32, i64)> = positions
        .iter()
        .filter(|(_, o)| **o > 0)
        .map(|(p, o)| (TOPIC.to_string(), *p, *o))
        .collect();
    if offsets.is_empty() {
        return;
    }
    let invoked_ms = shared.now_ms();
    // One attempt: a refusal on a retry would not say that an earlier
    // attempt, timed out, wrote nothing.
    let once = RetryPolicy {
        retries: 0,
        ..RetryPolicy::default()
    };
    m.coordinator_client().set_patience(once, REQUEST_TIMEOUT);
    let result = m.commit(&offsets);
    m.coordinator_client().set_patience(member_retry(), REQUEST_TIMEOUT);
    let outcome = match result {
        Ok(()) => Outcome::Ok { offset: None },
        Err(e) if fenced(&e) => Outcome::Fail { error: e.to_string() },
        Err(e) => Outcome::Unknown { error: e.to_string() },
    };
    workload::record_commits(shared, client, MEMBERS_GROUP, &offsets, invoked_ms, outcome);
}

/// The group refused the commit (its only attempt) because the member is
/// not, or no longer, in its current generation: Kafka checks that before
/// it writes anything.
fn fenced(e: &MemberError) -> bool {
    let refusals = [
        ErrorCode::IllegalGeneration,
        ErrorCode::UnknownMemberId,
        ErrorCode::RebalanceInProgress,
    ];
    e.code().is_some_and(|c| refusals.iter().any(|r| r.code() == c))
}

/// What one member did in a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberSummary {
    /// Reads that returned records.
    pub reads: usize,
    /// Partition commits, by how they ended: acknowledged, refused by the
    /// group (the member fenced), unknown.
    pub commits_ok: usize,
    pub commits_refused: usize,
    pub commits_unknown: usize,
}

/// Each member's summary, by client number.
pub fn summaries(history: &History) -> BTreeMap<u32, MemberSummary> {
    let mut out: BTreeMap<u32, MemberSummary> = (0..MEMBERS)
        .map(|i| (MEMBER_CLIENT_FIRST + i, MemberSummary::default()))
        .collect();
    for op in &history.ops {
        let Some(s) = out.get_mut(&op.client) else { continue };
        match (&op.kind, &op.outcome) {
            (OpKind::Read { .. }, _) => s.reads += 1,
            (OpKind::Commit { .. }, Outcome::Ok { .. }) => s.commits_ok += 1,
            (OpKind::Commit { .. }, Outcome::Fail { .. }) => s.commits_refused += 1,
            (OpKind::Commit { .. }, Outcome::Unknown { .. }) => s.commits_unknown += 1,
            (OpKind::Produce { .. }, _) => {}
        }
    }
    out
}
