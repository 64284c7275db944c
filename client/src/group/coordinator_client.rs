//! A blocking client for one group's coordinator: finds it (FindCoordinator
//! through the bootstrap brokers), keeps one connection to it, and sends
//! the group APIs at fixed non-flexible versions (JoinGroup v5, SyncGroup
//! v3, Heartbeat v3, LeaveGroup v3, OffsetCommit v7, OffsetFetch v5,
//! Metadata v4). Transport failures and the coordinator errors
//! (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
//! REQUEST_TIMED_OUT) are retried a bounded number of times with an
//! exponential backoff, finding the coordinator again where that can help;
//! every other error code is handed back to the caller.
//!
//! This client has its own connection rather than [`crate::Connection`]
//! because a JoinGroup or SyncGroup answer may take up to the rebalance
//! timeout: each call sets the read timeout it needs.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::{codec, ClientError, RESPONSE_BYTES_MAX};
use ferrite_ids::{LeaderEpoch, Offset, TimestampMs};
use ferrite_protocol::group_membership as gm;
use ferrite_protocol::group_offsets as go;
use ferrite_protocol::topic_partitions::TopicPartitions;
use ferrite_protocol::wire::{Reader, WireResult, Writer};

pub use super::member_error::{is_coordinator_error, MemberError, RetryPolicy, TopicPartition};

pub const FIND_COORDINATOR_V: i16 = 2;
pub const JOIN_GROUP_V: i16 = 5;
pub const SYNC_GROUP_V: i16 = 3;
pub const HEARTBEAT_V: i16 = 3;
pub const LEAVE_GROUP_V: i16 = 3;
pub const OFFSET_COMMIT_V: i16 = 7;
pub const OFFSET_FETCH_V: i16 = 5;
const METADATA_KEY: i16 = 3;

/// One blocking connection, one request at a time.
struct Conn {
    stream: TcpStream,
    addr: String,
    client_id: String,
    correlation: i32,
}

impl Conn {
    fn connect(addr: &str, client_id: &str, timeout: Duration) -> Result<Conn, ClientError> {
        let io = |source| ClientError::Io {
            addr: addr.to_string(),
            source,
        };
        let target = std::net::ToSocketAddrs::to_socket_addrs(addr)
            .map_err(io)?
            .next()
            .ok_or_else(|| io(codec::invalid_data("address resolves to nothing")))?;
        let stream = TcpStream::connect_timeout(&target, timeout).map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        stream.set_write_timeout(Some(timeout)).map_err(io)?;
        Ok(Conn {
            stream,
            addr: addr.to_string(),
            client_id: client_id.to_string(),
            correlation: 0,
        })
    }

    /// Sends a request and waits up to `timeout` for its answer, which is
    /// returned positioned after the (v0) response header.
    fn call(
        &mut self,
        key: i16,
        version: i16,
        timeout: Duration,
        body: impl FnOnce(&mut Writer),
    ) -> Result<Reader, ClientError> {
        let io = |source| ClientError::Io {
            addr: self.addr.clone(),
            source,
        };
        self.correlation = self.correlation.wrapping_add(1);
        let frame = codec::frame(key, version, self.correlation, &self.client_id, body);
        self.stream
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))
            .map_err(io)?;
        self.stream.write_all(&frame).map_err(io)?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).map_err(io)?;
        let len = codec::response_len(size, RESPONSE_BYTES_MAX).map_err(io)?;
        let mut buf = vec![0u8; len];
        self.stream.read_exact(&mut buf).map_err(io)?;
        codec::response_body(buf, self.correlation, false).map_err(io)
    }
}

/// The coordinator of one group, found and reached on demand.
pub struct CoordinatorClient {
    bootstrap: Vec<String>,
    group: String,
    client_id: String,
    retry: RetryPolicy,
    request_timeout: Duration,
    conn: Option<Conn>,
}

impl CoordinatorClient {
    /// `bootstrap`: one or more `host:port`, comma-separated.
    pub fn new(
        bootstrap: &str,
        group: &str,
        client_id: &str,
        retry: RetryPolicy,
        request_timeout: Duration,
    ) -> CoordinatorClient {
        CoordinatorClient {
            bootstrap: bootstrap
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
            group: group.to_string(),
            client_id: client_id.to_string(),
            retry,
            request_timeout,
            conn: None,
        }
    }

    pub fn group(&self) -> &str {
        &self.group
    }

    /// The coordinator's address, once found.
    pub fn coordinator(&self) -> Option<&str> {
        self.conn.as_ref().map(|c| c.addr.as_str())
    }

    /// Drops the coordinator connection; the next request finds it again.
    pub fn forget_coordinator(&mut self) {
        self.conn = None;
    }

    /// Sets the retry policy and the timeout of requests that do not wait
    /// for a rebalance.
    pub fn set_patience(&mut self, retry: RetryPolicy, request_timeout: Duration) {
        self.retry = retry;
        self.request_timeout = request_timeout;
    }

    fn kafka(&self, api: &'static str, code: i16) -> MemberError {
        MemberError::Kafka {
            api,
            context: format!("group {}", self.group),
            code,
        }
    }

    /// Finds the coordinator (if not connected) and connects to it.
    pub fn find_coordinator(&mut self) -> Result<(), MemberError> {
        self.retrying("FindCoordinator", |c| c.connected().map(|_| ()))
    }

    fn connected(&mut self) -> Result<&mut Conn, MemberError> {
        if self.conn.is_none() {
            let conn = self.find_once()?;
            self.conn = Some(conn);
        }
        self.conn
            .as_mut()
            .ok_or_else(|| MemberError::BadAnswer("no coordinator connection".into()))
    }

    /// Asks each bootstrap broker in turn; connects to the first answer.
    fn find_once(&mut self) -> Result<Conn, MemberError> {
        let mut last = MemberError::Config("no bootstrap broker given".into());
        for addr in self.bootstrap.clone() {
            match self.ask_for_coordinator(&addr) {
                Ok(conn) => return Ok(conn),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn ask_for_coordinator(&mut self, bootstrap: &str) -> Result<Conn, MemberError> {
        let mut conn = Conn::connect(bootstrap, &self.client_id, self.request_timeout)?;
        let req = gm::FindCoordinatorRequest {
            key: self.group.clone(),
            key_type: gm::KEY_TYPE_GROUP,
        };
        let mut r = conn.call(
            gm::FIND_COORDINATOR_KEY,
            FIND_COORDINATOR_V,
            self.request_timeout,
            |w| req.encode(w, FIND_COORDINATOR_V),
        )?;
        let resp = gm::FindCoordinatorResponse::decode(&mut r, FIND_COORDINATOR_V)?;
        if resp.error_code != 0 {
            return Err(self.kafka("FindCoordinator", resp.error_code));
        }
        if resp.port <= 0 || resp.port > i32::from(u16::MAX) || resp.host.is_empty() {
            return Err(MemberError::BadAnswer(format!(
                "FindCoordinator named {}:{} (node {})",
                resp.host, resp.port, resp.node_id
            )));
        }
        let addr = format!("{}:{}", resp.host, resp.port);
        if addr == bootstrap {
            return Ok(conn);
        }
        Ok(Conn::connect(&addr, &self.client_id, self.request_timeout)?)
    }

    /// Runs `op` until it succeeds, fails with a non-retriable error, or the
    /// retries run out. Between attempts: the backoff, doubling up to its
    /// maximum, and a new coordinator lookup where the error calls for one.
    pub fn retrying<T>(
        &mut self,
        what: &'static str,
        mut op: impl FnMut(&mut Self) -> Result<T, MemberError>,
    ) -> Result<T, MemberError> {
        let mut backoff = self.retry.backoff_min;
        let mut attempt = 0;
        loop {
            attempt += 1;
            match op(self) {
                Err(e) if e.is_retriable() => {
                    if e.wants_new_coordinator() {
                        self.conn = None;
                    }
                    if attempt > self.retry.retries {
                        return Err(MemberError::GaveUp {
                            what,
                            attempts: attempt,
                            last: Box::new(e),
                        });
                    }
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(self.retry.backoff_max);
                }
                Err(e) => {
                    if e.wants_new_coordinator() {
                        self.conn = None;
                    }
                    return Err(e);
                }
                ok => return ok,
            }
        }
    }

    /// One request to the coordinator; a transport failure drops the
    /// connection.
    /// An offsets API call through [`Self::retrying`]: a coordinator error
    /// among the response's `codes` finds the coordinator again and retries.
    fn offsets_call<T>(
        &mut self,
        api: &'static str,
        key: i16,
        version: i16,
        body: impl Fn(&mut Writer),
        decode: impl Fn(&mut Reader) -> WireResult<T>,
        codes: impl Fn(&T) -> Vec<i16>,
    ) -> Result<T, MemberError> {
        let timeout = self.request_timeout;
        self.retrying(api, |c| {
            let resp = c.call(key, version, timeout, &body, &decode)?;
            if let Some(code) = codes(&resp).into_iter().find(|e| is_coordinator_error(*e)) {
                return Err(c.kafka(api, code));
            }
            Ok(resp)
        })
    }

    fn call<T>(
        &mut self,
        key: i16,
        version: i16,
        timeout: Duration,
        body: impl FnOnce(&mut Writer),
        decode: impl FnOnce(&mut Reader) -> WireResult<T>,
    ) -> Result<T, MemberError> {
        let conn = self.connected()?;
        let result = conn.call(key, version, timeout, body).map_err(MemberError::from);
        let result = result.and_then(|mut r| decode(&mut r).map_err(MemberError::from));
        if result.is_err() {
            self.conn = None;
        }
        result
    }

    /// Fails with a coordinator error code (retried by [`Self::retrying`]).
    fn coordinator_ok(&self, api: &'static str, code: i16) -> Result<(), MemberError> {
        if is_coordinator_error(code) {
            Err(self.kafka(api, code))
        } else {
            Ok(())
        }
    }

    /// JoinGroup; the answer may take up to the rebalance timeout. Error
    /// codes other than the coordinator's are left to the caller.
    pub fn join_group(&mut self, req: &gm::JoinGroupRequest) -> Result<gm::JoinGroupResponse, MemberError> {
        let wait = Duration::from_millis(req.rebalance_timeout_ms.max(0) as u64) + self.request_timeout;
        self.retrying("JoinGroup", |c| {
            let resp = c.call(
                gm::JOIN_GROUP_KEY,
                JOIN_GROUP_V,
                wait,
                |w| req.encode(w, JOIN_GROUP_V),
                |r| gm::JoinGroupResponse::decode(r, JOIN_GROUP_V),
            )?;
            c.coordinator_ok("JoinGroup", resp.error_code)?;
            Ok(resp)
        })
    }

    /// SyncGroup; a follower's answer waits for the leader's assignment.
    pub fn sync_group(
        &mut self,
        req: &gm::SyncGroupRequest,
        wait: Duration,
    ) -> Result<gm::SyncGroupResponse, MemberError> {
        let wait = wait + self.request_timeout;
        self.retrying("SyncGroup", |c| {
            let resp = c.call(
                gm::SYNC_GROUP_KEY,
                SYNC_GROUP_V,
                wait,
                |w| req.encode(w, SYNC_GROUP_V),
                |r| gm::SyncGroupResponse::decode(r, SYNC_GROUP_V),
            )?;
            c.coordinator_ok("SyncGroup", resp.error_code)?;
            Ok(resp)
        })
    }

    /// Heartbeat; returns the error code (0 when fine).
    pub fn heartbeat(&mut self, generation: i32, member_id: &str) -> Result<i16, MemberError> {
        let req = gm::HeartbeatRequest {
            group_id: self.group.clone(),
            generation_id: generation,
            member_id: member_id.to_string(),
            group_instance_id: None,
        };
        let timeout = self.request_timeout;
        self.retrying("Heartbeat", |c| {
            let resp = c.call(
                gm::HEARTBEAT_KEY,
                HEARTBEAT_V,
                timeout,
                |w| req.encode(w, HEARTBEAT_V),
                |r| gm::HeartbeatResponse::decode(r, HEARTBEAT_V),
            )?;
            c.coordinator_ok("Heartbeat", resp.error_code)?;
            Ok(resp.error_code)
        })
    }

    /// LeaveGroup for one dynamic member; returns the first error code of
    /// the answer (the top-level one, else the member's).
    pub fn leave_group(&mut self, member_id: &str) -> Result<i16, MemberError> {
        let req = gm::LeaveGroupRequest {
            group_id: self.group.clone(),
            members: vec![gm::LeaveMember {
                member_id: member_id.to_string(),
                group_instance_id: None,
            }],
        };
        let timeout = self.request_timeout;
        self.retrying("LeaveGroup", |c| {
            let resp = c.call(
                gm::LEAVE_GROUP_KEY,
                LEAVE_GROUP_V,
                timeout,
                |w| req.encode(w, LEAVE_GROUP_V),
                |r| gm::LeaveGroupResponse::decode(r, LEAVE_GROUP_V),
            )?;
            c.coordinator_ok("LeaveGroup", resp.error_code)?;
            let member = resp.members.iter().map(|m| m.error_code).find(|e| *e != 0);
            Ok(if resp.error_code != 0 {
                resp.error_code
            } else {
                member.unwrap_or(0)
            })
        })
    }

    /// OffsetCommit of `(topic, partition, offset)` as `member_id` in
    /// `generation` (-1 and "" for a commit outside group membership). The
    /// first partition error fails the call, naming the partition.
    pub fn commit_offsets(
        &mut self,
        generation: i32,
        member_id: &str,
        offsets: &[(String, i32, i64)],
    ) -> Result<(), MemberError> {
        let req = go::OffsetCommitRequest {
            group_id: self.group.clone(),
            generation_id: generation,
            member_id: member_id.to_string(),
            group_instance_id: None,
            retention_time_ms: -1,
            topics: commit_topics(offsets),
        };
        let resp = self.offsets_call(
            "OffsetCommit",
            go::OFFSET_COMMIT_KEY,
            OFFSET_COMMIT_V,
            |w| req.encode(w, OFFSET_COMMIT_V),
            |r| go::OffsetCommitResponse::decode(r, OFFSET_COMMIT_V),
            |resp| partition_codes(&resp.topics, |p| p.error_code),
        )?;
        for t in &resp.topics {
            if let Some(p) = t.partitions.iter().find(|p| p.error_code != 0) {
                return Err(MemberError::Kafka {
                    api: "OffsetCommit",
                    context: format!("group {}, {}-{}", self.group, t.topic, p.partition_index),
                    code: p.error_code,
                });
            }
        }
        Ok(())
    }

    /// OffsetFetch: the committed offset of each of `partitions` that has
    /// one (partitions without a commit are absent from the map).
    pub fn fetch_offsets(
        &mut self,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, i64>, MemberError> {
        let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (t, p) in partitions {
            topics.entry(t.as_str()).or_default().push(*p);
        }
        let req = go::OffsetFetchRequest {
            group_id: self.group.clone(),
            topics: Some(
                topics
                    .into_iter()
                    .map(|(topic, partitions)| go::OffsetFetchTopic {
                        topic: topic.to_string(),
                        partitions,
                    })
                    .collect(),
            ),
            require_stable: false,
        };
        let resp = self.offsets_call(
            "OffsetFetch",
            go::OFFSET_FETCH_KEY,
            OFFSET_FETCH_V,
            |w| req.encode(w, OFFSET_FETCH_V),
            |r| go::OffsetFetchResponse::decode(r, OFFSET_FETCH_V),
            |resp| {
                let mut codes = partition_codes(&resp.topics, |p| p.error_code);
                codes.push(resp.error_code);
                codes
            },
        )?;
        fetched_offsets(&self.group, resp)
    }

    /// The partition count of each of `topics` that exists, from the
    /// coordinator's metadata (topics in error are left out).
    pub fn partition_counts(&mut self, topics: &[String]) -> Result<BTreeMap<String, i32>, MemberError> {
        if topics.is_empty() {
            return Ok(BTreeMap::new());
        }
        let timeout = self.request_timeout;
        let meta = self.retrying("Metadata", |c| {
            c.call(
                METADATA_KEY,
                codec::METADATA_V,
                timeout,
                |w| codec::metadata(w, Some(topics)),
                codec::decode_metadata,
            )
        })?;
        Ok(meta
            .topics
            .into_iter()
            .filter(|t| t.error == 0 && topics.contains(&t.name))
            .map(|t| {
                let n = t.partitions.iter().map(|p| p.partition + 1).max().unwrap_or(0);
                (t.name, n.max(t.partitions.len() as i32))
            })
            .collect())
    }
}

/// Every partition's error code in `topics`.
fn partition_codes<P>(topics: &[TopicPartitions<P>], code: impl Fn(&P) -> i16) -> Vec<i16> {
    topics.iter().flat_map(|t| t.partitions.iter().map(&code)).collect()
}

fn commit_topics(offsets: &[(String, i32, i64)]) -> Vec<go::OffsetCommitTopic> {
    let mut topics: BTreeMap<&str, Vec<go::OffsetCommitPartition>> = BTreeMap::new();
    for (t, p, offset) in offsets {
        topics.entry(t.as_str()).or_default().push(go::OffsetCommitPartition {
            partition_index: *p,
            committed_offset: Offset(*offset),
            committed_leader_epoch: LeaderEpoch::NONE,
            commit_timestamp: TimestampMs::NONE,
            committed_metadata: None,
        });
    }
    topics
        .into_iter()
        .map(|(topic, partitions)| go::OffsetCommitTopic {
            topic: topic.to_string(),
            partitions,
        })
        .collect()
}

fn fetched_offsets(group: &str, resp: go::OffsetFetchResponse) -> Result<BTreeMap<TopicPartition, i64>, MemberError> {
    let context = |what: String| format!("group {group}{what}");
    if resp.error_code != 0 {
        return Err(MemberError::Kafka {
            api: "OffsetFetch",
            context: context(String::new()),
            code: resp.error_code,
        });
    }
    let mut out = BTreeMap::new();
    for t in resp.topics {
        for p in t.partitions {
            if p.error_code != 0 {
                return Err(MemberError::Kafka {
                    api: "OffsetFetch",
                    context: context(format!(", {}-{}", t.topic, p.partition_index)),
                    code: p.error_code,
                });
            }
            if p.committed_offset.0 >= 0 {
                out.insert((t.topic.clone(), p.partition_index), p.committed_offset.0);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_topics_group_by_topic() {
        let offsets = vec![
            ("b".to_string(), 1, 5),
            ("a".to_string(), 0, 3),
            ("b".to_string(), 0, 4),
        ];
        let topics = commit_topics(&offsets);
        let names: Vec<&str> = topics.iter().map(|t| t.topic.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        let b: Vec<(i32, i64)> = topics[1]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.committed_offset.0))
            .collect();
        assert_eq!(b, [(1, 5), (0, 4)]);
    }

    #[test]
    fn fetched_offsets_skip_uncommitted_and_report_errors() {
        let part = |partition_index, committed_offset, error_code| go::OffsetFetchPartitionResult {
            partition_index,
            committed_offset: Offset(committed_offset),
            committed_leader_epoch: LeaderEpoch::NONE,
            metadata: None,
            error_code,
        };
        let resp = |parts, error_code| go::OffsetFetchResponse {
            throttle_time_ms: 0,
            topics: vec![go::OffsetFetchTopicResult {
                topic: "t".into(),
                partitions: parts,
            }],
            error_code,
        };
        let got = fetched_offsets("g", resp(vec![part(0, 7, 0), part(1, -1, 0)], 0)).unwrap();
        assert_eq!(got.into_iter().collect::<Vec<_>>(), [(("t".to_string(), 0), 7)]);
        let e = fetched_offsets("g", resp(vec![part(0, -1, 3)], 0)).unwrap_err();
        assert_eq!(e.code(), Some(3));
        assert!(e.to_string().contains("t-0"), "{e}");
        assert_eq!(fetched_offsets("g", resp(vec![], 16)).unwrap_err().code(), Some(16));
    }
}
