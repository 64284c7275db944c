//! `ferrite groups …`: consumer-group administration against running brokers
//! over the Kafka protocol, like `kafka-consumer-groups.sh`.
//!
//! - `list` sends ListGroups to every broker the metadata names (each broker
//!   knows only the groups it coordinates) and prints one line per group:
//!   `GROUP STATE PROTOCOL-TYPE`.
//! - `describe --group G` finds the group's coordinator (FindCoordinator),
//!   reads the group there (DescribeGroups: state and members, whose
//!   assignments are decoded from the consumer embedded protocol) and its
//!   committed offsets (OffsetFetch of every partition), asks each
//!   partition's leader for its log end (ListOffsets latest) and prints one
//!   line per partition: `GROUP TOPIC PARTITION CURRENT-OFFSET
//!   LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID`, with `-` where a value is
//!   unknown (a partition assigned but never committed has no current offset
//!   and no lag). `--state` prints the group's state line instead and
//!   `--members` its members with their assignments (both may be given).
//! - `delete --group G` (repeatable) sends DeleteGroups to each group's
//!   coordinator; only a group without members can be deleted
//!   (NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND for an unknown group).
//! - `reset-offsets --group G --topic T[:P1,P2] (--to-earliest | --to-latest
//!   | --to-offset N | --shift-by N) [--execute]` computes each partition's
//!   new offset, clamped to [log start, log end] (ListOffsets earliest and
//!   latest from the leaders; `--shift-by` moves the committed offset) and
//!   prints `TOPIC PARTITION NEW-OFFSET`. Without `--execute` that is all (a
//!   dry run); with it the offsets are committed as an administrator
//!   (OffsetCommit, generation -1, no member id), which a coordinator accepts
//!   only while the group has no members. `--topic T` alone means every
//!   partition of T; `--topic` is repeatable.
//!
//! Versions: FindCoordinator v3, ListGroups v4, DescribeGroups v5,
//! OffsetFetch v7, OffsetCommit v8 and DeleteGroups v2 (flexible: request
//! header v2, response header v1), Metadata v4 and ListOffsets v5. A
//! coordinator that is loading, unavailable or elsewhere is looked up again
//! and retried for about 5 s; any other failure is returned as an error
//! naming the Kafka error code, which `main` prints before exiting 1.
//! Responses are size-capped by [`Connection`].

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::time::Duration;

use clap::{Args, Subcommand};

use ferrite_client::codec::{self, MetadataInfo, LIST_OFFSETS_V, METADATA_V};
use ferrite_client::{ClientError, Connection};
use ferrite_protocol::consumer_protocol::Assignment;
use ferrite_protocol::errors::{self, ErrorCode};
use ferrite_protocol::group_membership as gm;
use ferrite_protocol::group_offsets as go;
use ferrite_protocol::groups_admin as ga;
use ferrite_protocol::list_offsets::{EARLIEST, LATEST};
use ferrite_protocol::wire::{Reader, WireResult, Writer};

const LIST_OFFSETS_KEY: i16 = 2;
const METADATA_KEY: i16 = 3;
const CLIENT_ID: &str = "ferrite-cli";
/// Tries of a request whose coordinator is not ready, and the pauses
/// between them (about 5 s in all).
const ATTEMPTS: u32 = 10;
const RETRY_PAUSE_MIN: Duration = Duration::from_millis(50);
const RETRY_PAUSE_MAX: Duration = Duration::from_secs(1);
/// What an unknown value prints as.
const UNKNOWN: &str = "-";

#[derive(Subcommand, Debug)]
pub enum GroupsCommand {
    /// List the groups every broker coordinates, with their states.
    List,
    /// Show a group's committed offsets and lag per partition.
    Describe {
        /// The group.
        #[arg(long)]
        group: String,
        /// Print the group's state line (coordinator, strategy, state, members).
        #[arg(long)]
        state: bool,
        /// Print the group's members and their assignments.
        #[arg(long)]
        members: bool,
    },
    /// Delete groups that have no members, with their committed offsets.
    Delete {
        /// A group to delete (repeatable).
        #[arg(long = "group", required = true)]
        groups: Vec<String>,
    },
    /// Compute (and with --execute commit) new offsets for a group.
    ResetOffsets(ResetArgs),
}

#[derive(Args, Debug)]
pub struct ResetArgs {
    /// The group (it must have no members for --execute).
    #[arg(long)]
    pub group: String,
    /// TOPIC or TOPIC:P1,P2 (repeatable); a bare topic means all its partitions.
    #[arg(long = "topic", value_name = "TOPIC[:PARTITIONS]", required = true)]
    pub topics: Vec<String>,
    #[command(flatten)]
    pub target: ResetTarget,
    /// Commit the new offsets (without it, only print them).
    #[arg(long)]
    pub execute: bool,
}

/// Where to move the offsets: exactly one.
#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
pub struct ResetTarget {
    /// The log start of each partition.
    #[arg(long)]
    pub to_earliest: bool,
    /// The log end of each partition.
    #[arg(long)]
    pub to_latest: bool,
    /// This offset (clamped to each partition's log).
    #[arg(long, value_name = "OFFSET")]
    pub to_offset: Option<i64>,
    /// The committed offset plus N (N may be negative).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub shift_by: Option<i64>,
}

type Tp = (String, i32);

fn fail(msg: impl Into<String>) -> ClientError {
    ClientError::Kafka(msg.into())
}

fn io(e: std::io::Error) -> ClientError {
    fail(format!("writing the output: {e}"))
}

/// "what: NAME (code)[: message]".
fn kafka_error(what: &str, code: i16, message: Option<&str>) -> ClientError {
    let detail = message.filter(|m| !m.is_empty()).map(|m| format!(": {m}"));
    fail(format!(
        "{what}: {} ({code}){}",
        errors::name(code),
        detail.unwrap_or_default()
    ))
}

/// Runs one groups command against `bootstrap`, writing its report to `out`.
pub fn run(bootstrap: &str, cmd: GroupsCommand, out: &mut dyn Write) -> Result<(), ClientError> {
    let mut boot = Connection::connect(bootstrap, CLIENT_ID)?;
    match cmd {
        GroupsCommand::List => list(&mut boot, out),
        GroupsCommand::Describe { group, state, members } => describe(&mut boot, &group, state, members, out),
        GroupsCommand::Delete { groups } => delete(&mut boot, &groups, out),
        GroupsCommand::ResetOffsets(args) => reset_offsets(&mut boot, &args, out),
    }
}

// ---- requests ----

/// A group request Ferrite's tools send at one flexible version (request
/// header v2, response header v1), and its response.
trait Flexible {
    const KEY: i16;
    const VERSION: i16;
    type Response;
    fn encode_at(&self, w: &mut Writer, version: i16);
    fn decode_at(r: &mut Reader, version: i16) -> WireResult<Self::Response>;
    /// The answer's group-level error (the first one for batches).
    fn error(resp: &Self::Response) -> i16;
}

macro_rules! flexible {
    ($($req:ty => $resp:ty, $key:expr, $version:expr, |$r:ident| $error:expr;)*) => {$(
        impl Flexible for $req {
            const KEY: i16 = $key;
            const VERSION: i16 = $version;
            type Response = $resp;
            fn encode_at(&self, w: &mut Writer, version: i16) {
                self.encode(w, version)
            }
            fn decode_at(r: &mut Reader, version: i16) -> WireResult<$resp> {
                <$resp>::decode(r, version)
            }
            fn error($r: &$resp) -> i16 {
                $error
            }
        }
    )*};
}

flexible! {
    gm::FindCoordinatorRequest => gm::FindCoordinatorResponse, gm::FIND_COORDINATOR_KEY, 3,
        |r| r.error_code;
    ga::ListGroupsRequest => ga::ListGroupsResponse, ga::LIST_GROUPS_KEY, 4, |r| r.error_code;
    ga::DescribeGroupsRequest => ga::DescribeGroupsResponse, ga::DESCRIBE_GROUPS_KEY, 5,
        |r| r.groups.first().map_or(0, |g| g.error_code);
    ga::DeleteGroupsRequest => ga::DeleteGroupsResponse, ga::DELETE_GROUPS_KEY, 2,
        |r| r.results.first().map_or(0, |g| g.error_code);
    go::OffsetFetchRequest => go::OffsetFetchResponse, go::OFFSET_FETCH_KEY, 7, |r| r.error_code;
    go::OffsetCommitRequest => go::OffsetCommitResponse, go::OFFSET_COMMIT_KEY, 8,
        |r| r.topics.iter().flat_map(|t| &t.partitions).next().map_or(0, |p| p.error_code);
}

/// Sends `req` and decodes its answer: an empty tagged-field section ends
/// the request header, and the response header's is skipped.
fn call<R: Flexible>(c: &mut Connection, req: &R) -> Result<R::Response, ClientError> {
    let mut r = c.call(R::KEY, R::VERSION, |w| {
        w.unsigned_varint(0);
        req.encode_at(w, R::VERSION);
    })?;
    r.skip_tagged_fields()?;
    Ok(R::decode_at(&mut r, R::VERSION)?)
}

/// Runs `attempt` again, with a growing pause, while its answer's error says
/// the coordinator is loading, not available or elsewhere (a coordinator
/// just created or moved); the last answer is returned as it is.
fn retrying<R: Flexible>(
    mut attempt: impl FnMut() -> Result<R::Response, ClientError>,
) -> Result<R::Response, ClientError> {
    let transient = [
        ErrorCode::CoordinatorLoadInProgress,
        ErrorCode::CoordinatorNotAvailable,
        ErrorCode::NotCoordinator,
    ];
    let mut pause = RETRY_PAUSE_MIN;
    for _ in 1..ATTEMPTS {
        let resp = attempt()?;
        if !transient.iter().any(|e| e.code() == R::error(&resp)) {
            return Ok(resp);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(RETRY_PAUSE_MAX);
    }
    attempt()
}

/// `req` answered by `group`'s coordinator, found again for each attempt.
fn at_coordinator<R: Flexible>(boot: &mut Connection, group: &str, req: &R) -> Result<R::Response, ClientError> {
    retrying::<R>(|| {
        let (_, addr) = coordinator(boot, group)?;
        call(&mut Connection::connect(&addr, CLIENT_ID)?, req)
    })
}

/// Metadata of `topics` (no topic at all for an empty slice).
fn metadata(c: &mut Connection, topics: &[String]) -> Result<MetadataInfo, ClientError> {
    let mut r = c.call(METADATA_KEY, METADATA_V, |w| codec::metadata(w, Some(topics)))?;
    Ok(codec::decode_metadata(&mut r)?)
}

/// The coordinator of `group`: (node id, address).
fn coordinator(boot: &mut Connection, group: &str) -> Result<(i32, String), ClientError> {
    let req = gm::FindCoordinatorRequest {
        key: group.to_string(),
        key_type: gm::KEY_TYPE_GROUP,
    };
    let resp = retrying::<gm::FindCoordinatorRequest>(|| call(boot, &req))?;
    if resp.error_code != 0 {
        let what = format!("finding the coordinator of group '{group}'");
        return Err(kafka_error(&what, resp.error_code, resp.error_message.as_deref()));
    }
    Ok((resp.node_id, format!("{}:{}", resp.host, resp.port)))
}

fn describe_group(boot: &mut Connection, group: &str) -> Result<ga::DescribedGroup, ClientError> {
    let req = ga::DescribeGroupsRequest {
        groups: vec![group.to_string()],
        include_authorized_operations: false,
    };
    let resp = at_coordinator(boot, group, &req)?;
    let g = resp
        .groups
        .into_iter()
        .find(|g| g.group_id == group)
        .ok_or_else(|| fail(format!("describing group '{group}': the answer does not mention it")))?;
    if g.error_code != 0 {
        return Err(kafka_error(&format!("describing group '{group}'"), g.error_code, None));
    }
    Ok(g)
}

/// Every committed offset of `group`.
fn fetch_offsets(boot: &mut Connection, group: &str) -> Result<BTreeMap<Tp, i64>, ClientError> {
    let req = go::OffsetFetchRequest {
        group_id: group.to_string(),
        topics: None,
        require_stable: false,
    };
    let resp = at_coordinator(boot, group, &req)?;
    let what = format!("fetching the offsets of group '{group}'");
    if resp.error_code != 0 {
        return Err(kafka_error(&what, resp.error_code, None));
    }
    let mut out = BTreeMap::new();
    for t in resp.topics {
        for p in t.partitions {
            if p.error_code != 0 {
                let what = format!("{what} ({}-{})", t.topic, p.partition_index);
                return Err(kafka_error(&what, p.error_code, None));
            }
            if p.committed_offset.0 >= 0 {
                out.insert((t.topic.clone(), p.partition_index), p.committed_offset.0);
            }
        }
    }
    Ok(out)
}

/// Groups partitions by topic, in order.
fn by_topic<'a>(tps: impl IntoIterator<Item = &'a Tp>) -> Vec<(String, Vec<i32>)> {
    let mut out: Vec<(String, Vec<i32>)> = Vec::new();
    for (t, p) in tps {
        match out.last_mut() {
            Some((name, ps)) if name == t => ps.push(*p),
            _ => out.push((t.clone(), vec![*p])),
        }
    }
    out
}

/// The offset at `timestamp` (EARLIEST or LATEST) of each partition, asked
/// of its leader; a partition whose leader is unknown, unreachable or
/// answers an error maps to that error's description.
fn log_offsets(meta: &MetadataInfo, tps: &BTreeSet<Tp>, timestamp: i64) -> BTreeMap<Tp, Result<i64, String>> {
    let leader_of = |tp: &Tp| {
        meta.topics
            .iter()
            .find(|t| t.name == tp.0)
            .and_then(|t| t.partitions.iter().find(|p| p.partition == tp.1))
            .map(|p| p.leader)
            .unwrap_or(-1)
    };
    let mut by_leader: BTreeMap<i32, BTreeSet<Tp>> = BTreeMap::new();
    for tp in tps {
        by_leader.entry(leader_of(tp)).or_default().insert(tp.clone());
    }
    let mut out = BTreeMap::new();
    for (leader, tps) in by_leader {
        match ask_leader(meta, leader, &tps, timestamp) {
            Ok(found) => out.extend(found),
            Err(e) => out.extend(tps.into_iter().map(|tp| (tp, Err(e.clone())))),
        }
    }
    out
}

/// One ListOffsets to broker `leader` for `tps`.
fn ask_leader(
    meta: &MetadataInfo,
    leader: i32,
    tps: &BTreeSet<Tp>,
    timestamp: i64,
) -> Result<BTreeMap<Tp, Result<i64, String>>, String> {
    let b = meta
        .brokers
        .iter()
        .find(|b| b.id == leader)
        .ok_or_else(|| format!("no leader available (leader {leader})"))?;
    let addr = format!("{}:{}", b.host, b.port);
    let topics = by_topic(tps);
    let mut c = Connection::connect(&addr, CLIENT_ID).map_err(|e| e.to_string())?;
    let mut r = c
        .call(LIST_OFFSETS_KEY, LIST_OFFSETS_V, |w| {
            codec::list_offsets(w, timestamp, &topics)
        })
        .map_err(|e| e.to_string())?;
    let listed = codec::decode_list_offsets(&mut r).map_err(|e| format!("malformed response: {e}"))?;
    let mut out = BTreeMap::new();
    for l in listed
        .into_iter()
        .filter(|l| tps.contains(&(l.topic.clone(), l.partition)))
    {
        let v = if l.error == 0 {
            Ok(l.offset)
        } else {
            Err(format!("{} ({}) from broker {leader}", errors::name(l.error), l.error))
        };
        out.insert((l.topic, l.partition), v);
    }
    Ok(out)
}

// ---- output ----

/// Writes `header` (column names separated by `|`) and `rows` as columns
/// padded to their widest cell.
fn table(out: &mut dyn Write, header: &str, rows: &[Vec<String>]) -> Result<(), ClientError> {
    let head: Vec<String> = header.split('|').map(String::from).collect();
    let mut widths: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    for row in std::iter::once(&head).chain(rows) {
        let mut line = String::new();
        for (cell, w) in row.iter().zip(&widths) {
            line.push_str(&format!("{cell:<w$}  "));
        }
        writeln!(out, "{}", line.trim_end()).map_err(io)?;
    }
    Ok(())
}

fn or_unknown(s: &str) -> String {
    (if s.is_empty() { UNKNOWN } else { s }).to_string()
}

// ---- list ----

fn list(boot: &mut Connection, out: &mut dyn Write) -> Result<(), ClientError> {
    let meta = metadata(boot, &[])?;
    let mut groups: BTreeMap<String, ga::ListedGroup> = BTreeMap::new();
    let mut failures = Vec::new();
    for b in &meta.brokers {
        let addr = format!("{}:{}", b.host, b.port);
        match list_on(&addr) {
            Ok(listed) => groups.extend(listed.into_iter().map(|g| (g.group_id.clone(), g))),
            Err(e) => failures.push(format!("broker {} ({addr}): {e}", b.id)),
        }
    }
    let rows: Vec<Vec<String>> = groups
        .values()
        .map(|g| {
            vec![
                g.group_id.clone(),
                or_unknown(&g.group_state),
                or_unknown(&g.protocol_type),
            ]
        })
        .collect();
    table(out, "GROUP|STATE|PROTOCOL-TYPE", &rows)?;
    if failures.is_empty() {
        Ok(())
    } else {
        Err(fail(format!("listing groups failed on {}", failures.join("; "))))
    }
}

/// ListGroups on one broker.
fn list_on(addr: &str) -> Result<Vec<ga::ListedGroup>, ClientError> {
    let mut c = Connection::connect(addr, CLIENT_ID)?;
    let req = ga::ListGroupsRequest {
        states_filter: Vec::new(),
        types_filter: Vec::new(),
    };
    let resp = retrying::<ga::ListGroupsRequest>(|| call(&mut c, &req))?;
    match resp.error_code {
        0 => Ok(resp.groups),
        code => Err(kafka_error("ListGroups", code, None)),
    }
}

// ---- describe ----

/// A member as `describe` shows it.
struct Member {
    id: String,
    host: String,
    client: String,
    assigned: Vec<Tp>,
}

/// The group's members, their assignments decoded when the group speaks
/// the consumer protocol (an undecodable assignment shows as none).
fn members_of(g: &ga::DescribedGroup) -> Vec<Member> {
    g.members
        .iter()
        .map(|m| {
            let assigned = match Assignment::decode(&m.member_assignment) {
                Ok(a) if g.protocol_type == "consumer" => a
                    .partitions
                    .into_iter()
                    .flat_map(|tp| {
                        let topic = tp.topic;
                        tp.partitions.into_iter().map(move |p| (topic.clone(), p))
                    })
                    .collect(),
                _ => Vec::new(),
            };
            Member {
                id: m.member_id.clone(),
                host: m.client_host.clone(),
                client: m.client_id.clone(),
                assigned,
            }
        })
        .collect()
}

fn describe(
    boot: &mut Connection,
    group: &str,
    state: bool,
    members: bool,
    out: &mut dyn Write,
) -> Result<(), ClientError> {
    let g = describe_group(boot, group)?;
    let committed = fetch_offsets(boot, group)?;
    if g.group_state == "Dead" && committed.is_empty() {
        writeln!(out, "Consumer group '{group}' does not exist.").map_err(io)?;
        return Ok(());
    }
    let ms = members_of(&g);
    if state {
        let (id, addr) = coordinator(boot, group)?;
        let coordinator = format!("{addr} ({id})");
        let row = vec![
            group.to_string(),
            coordinator,
            or_unknown(&g.protocol_data),
            or_unknown(&g.group_state),
            ms.len().to_string(),
        ];
        table(out, "GROUP|COORDINATOR (ID)|ASSIGNMENT-STRATEGY|STATE|#MEMBERS", &[row])?;
    }
    if members {
        describe_members(group, &ms, out)?;
    }
    if !state && !members {
        if ms.is_empty() {
            writeln!(out, "Consumer group '{group}' has no active members.").map_err(io)?;
        }
        describe_offsets(boot, group, &ms, &committed, out)?;
    }
    Ok(())
}

fn describe_members(group: &str, ms: &[Member], out: &mut dyn Write) -> Result<(), ClientError> {
    let rows: Vec<Vec<String>> = ms
        .iter()
        .map(|m| {
            let assignment = by_topic(&m.assigned)
                .into_iter()
                .map(|(t, ps)| {
                    let ps: Vec<String> = ps.iter().map(|p| p.to_string()).collect();
                    format!("{t}({})", ps.join(","))
                })
                .collect::<Vec<_>>()
                .join(",");
            vec![
                group.to_string(),
                or_unknown(&m.id),
                or_unknown(&m.host),
                or_unknown(&m.client),
                m.assigned.len().to_string(),
                or_unknown(&assignment),
            ]
        })
        .collect();
    table(out, "GROUP|CONSUMER-ID|HOST|CLIENT-ID|#PARTITIONS|ASSIGNMENT", &rows)
}

fn describe_offsets(
    boot: &mut Connection,
    group: &str,
    ms: &[Member],
    committed: &BTreeMap<Tp, i64>,
    out: &mut dyn Write,
) -> Result<(), ClientError> {
    let mut owner: BTreeMap<&Tp, &Member> = BTreeMap::new();
    for m in ms {
        owner.extend(m.assigned.iter().map(|tp| (tp, m)));
    }
    let tps: BTreeSet<Tp> = committed.keys().chain(owner.keys().copied()).cloned().collect();
    let mut topics: Vec<String> = tps.iter().map(|(t, _)| t.clone()).collect();
    topics.dedup();
    let ends = if tps.is_empty() {
        BTreeMap::new()
    } else {
        log_offsets(&metadata(boot, &topics)?, &tps, LATEST)
    };
    let rows: Vec<Vec<String>> = tps
        .iter()
        .map(|tp| {
            let current = committed.get(tp).copied();
            let end = ends.get(tp).and_then(|e| e.as_ref().ok()).copied();
            let lag = current.zip(end).map(|(c, e)| e - c);
            let show = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_else(|| UNKNOWN.to_string());
            let who = |f: fn(&Member) -> &str| owner.get(tp).map(|m| or_unknown(f(m)));
            let who = |f| who(f).unwrap_or_else(|| UNKNOWN.into());
            vec![
                group.to_string(),
                tp.0.clone(),
                tp.1.to_string(),
                show(current),
                show(end),
                show(lag),
                who(|m| &m.id),
                who(|m| &m.host),
                who(|m| &m.client),
            ]
        })
        .collect();
    let header = "GROUP|TOPIC|PARTITION|CURRENT-OFFSET|LOG-END-OFFSET|LAG|CONSUMER-ID|HOST|CLIENT-ID";
    table(out, header, &rows)
}

// ---- delete ----

fn delete(boot: &mut Connection, groups: &[String], out: &mut dyn Write) -> Result<(), ClientError> {
    let mut failures = Vec::new();
    for group in groups {
        match delete_one(boot, group) {
            Ok(()) => writeln!(out, "Deleted consumer group '{group}'.").map_err(io)?,
            Err(e) => failures.push(e.to_string()),
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(fail(failures.join("; ")))
    }
}

fn delete_one(boot: &mut Connection, group: &str) -> Result<(), ClientError> {
    let req = ga::DeleteGroupsRequest {
        groups_names: vec![group.to_string()],
    };
    let resp = at_coordinator(boot, group, &req)?;
    let what = format!("deleting group '{group}'");
    let result = resp
        .results
        .into_iter()
        .find(|g| g.group_id == group)
        .ok_or_else(|| fail(format!("{what}: the answer does not mention it")))?;
    match result.error_code {
        0 => Ok(()),
        code => Err(kafka_error(&what, code, None)),
    }
}

#[path = "groups_reset.rs"]
mod reset;
#[cfg(test)]
use reset::new_offset;
use reset::reset_offsets;

#[cfg(test)]
#[path = "groups_tests.rs"]
mod tests;
