//! The follower's Fetch (v11, non-flexible): many partitions of one leader
//! in one request, `replica_id` set to the follower's broker id, and the
//! whole response decoded (bounded) into one entry per partition.

use bytes::Bytes;
use ferrite_ids::{LeaderEpoch, Offset};

use ferrite_protocol::wire::{capacity, Reader, WireResult, Writer};

pub const REPLICA_FETCH_V: i16 = 11;

/// One partition of a follower's fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaFetchPartition<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub current_leader_epoch: LeaderEpoch,
    pub fetch_offset: Offset,
    pub log_start_offset: Offset,
    pub max_bytes: i32,
}

/// The request's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaFetchLimits {
    pub replica_id: i32,
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
}

/// Encodes the body; `partitions` are grouped by topic in the order given.
pub fn encode(w: &mut Writer, limits: ReplicaFetchLimits, partitions: &[ReplicaFetchPartition]) {
    w.i32(limits.replica_id);
    w.i32(limits.max_wait_ms);
    w.i32(limits.min_bytes);
    w.i32(limits.max_bytes);
    w.i8(0);
    w.i32(0);
    w.i32(-1);
    let mut groups: Vec<(&str, Vec<&ReplicaFetchPartition>)> = Vec::new();
    for p in partitions {
        match groups.last_mut() {
            Some((t, ps)) if *t == p.topic => ps.push(p),
            _ => groups.push((p.topic, vec![p])),
        }
    }
    w.array_len(false, Some(groups.len()));
    for (topic, ps) in groups {
        w.string(false, topic);
        w.array_len(false, Some(ps.len()));
        for p in ps {
            w.i32(p.partition);
            w.i32(p.current_leader_epoch.0);
            w.i64(p.fetch_offset.0);
            w.i64(p.log_start_offset.0);
            w.i32(p.max_bytes);
        }
    }
    w.array_len(false, Some(0));
    w.string(false, "");
}

/// One partition of the leader's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaFetched {
    /// Shared by the partitions of one topic (one allocation per topic).
    pub topic: std::rc::Rc<str>,
    pub partition: i32,
    pub error: i16,
    pub high_watermark: Offset,
    pub log_start_offset: Offset,
    pub records: Bytes,
}

/// Decodes a Fetch v11 response body: the top-level error and every
/// partition.
pub fn decode(r: &mut Reader) -> WireResult<(i16, Vec<ReplicaFetched>)> {
    r.i32("throttle_time_ms")?;
    let error = r.i16("error")?;
    r.i32("session_id")?;
    let nt = r.array_len_required(false, 6, "topics")?;
    let mut out = Vec::with_capacity(capacity(nt));
    for _ in 0..nt {
        let topic: std::rc::Rc<str> = r.string(false, "topic")?.into();
        let np = r.array_len_required(false, 40, "partitions")?;
        for _ in 0..np {
            let partition = r.i32("partition")?;
            let error = r.i16("error")?;
            let high_watermark = Offset(r.i64("high_watermark")?);
            r.i64("last_stable_offset")?;
            let log_start_offset = Offset(r.i64("log_start_offset")?);
            if let Some(n) = r.array_len(false, 16, "aborted")? {
                for _ in 0..n {
                    r.i64("producer_id")?;
                    r.i64("first_offset")?;
                }
            }
            r.i32("preferred_read_replica")?;
            let records = r.nullable_bytes(false, "records")?.unwrap_or_default();
            out.push(ReplicaFetched {
                topic: topic.clone(),
                partition,
                error,
                high_watermark,
                log_start_offset,
                records,
            });
        }
    }
    Ok((error, out))
}

/// The longest prefix of `records` made of whole batches (a leader may cut
/// the last batch of a response short).
pub fn whole_batches(records: &[u8]) -> usize {
    const LENGTH_END: usize = 12;
    let mut at = 0usize;
    while records.len() - at >= LENGTH_END {
        let len = i32::from_be_bytes([records[at + 8], records[at + 9], records[at + 10], records[at + 11]]);
        let Ok(len) = usize::try_from(len) else { break };
        let Some(end) = at.checked_add(LENGTH_END).and_then(|x| x.checked_add(len)) else {
            break;
        };
        if end > records.len() {
            break;
        }
        at = end;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_protocol::fetch::FetchRequest;

    #[test]
    fn our_fetch_decoder_reads_the_follower_request() {
        let parts = vec![
            ReplicaFetchPartition {
                topic: "a",
                partition: 0,
                current_leader_epoch: LeaderEpoch(3),
                fetch_offset: Offset(10),
                log_start_offset: Offset(0),
                max_bytes: 1000,
            },
            ReplicaFetchPartition {
                topic: "a",
                partition: 2,
                current_leader_epoch: LeaderEpoch(4),
                fetch_offset: Offset(20),
                log_start_offset: Offset(5),
                max_bytes: 1000,
            },
            ReplicaFetchPartition {
                topic: "b",
                partition: 1,
                current_leader_epoch: LeaderEpoch(1),
                fetch_offset: Offset(0),
                log_start_offset: Offset(0),
                max_bytes: 1000,
            },
        ];
        let limits = ReplicaFetchLimits {
            replica_id: 2,
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 1 << 20,
        };
        let mut w = Writer::new();
        encode(&mut w, limits, &parts);
        let mut r = Reader::new(w.into_bytes().freeze());
        let f = FetchRequest::decode(&mut r, REPLICA_FETCH_V, false).unwrap();
        assert_eq!(f.replica_id, 2);
        assert_eq!(f.topics.len(), 2);
        assert_eq!(f.topics[0].partitions[1].fetch_offset, Offset(20));
        assert_eq!(f.topics[0].partitions[1].current_leader_epoch, LeaderEpoch(4));
        assert_eq!(f.topics[1].topic, "b");
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn whole_batches_stops_before_a_cut_batch() {
        let mut bytes = Vec::new();
        for len in [49usize, 60] {
            bytes.extend_from_slice(&0i64.to_be_bytes());
            bytes.extend_from_slice(&(len as i32).to_be_bytes());
            bytes.extend(std::iter::repeat_n(0u8, len));
        }
        let full = bytes.len();
        assert_eq!(whole_batches(&bytes), full);
        assert_eq!(whole_batches(&bytes[..full - 1]), 12 + 49);
        assert_eq!(whole_batches(&bytes[..5]), 0);
        let mut bad = bytes.clone();
        bad[8..12].copy_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(whole_batches(&bad), 0);
    }
}
