//! The client side of the protocol, for Ferrite's own tools (`ferrite
//! topics`, `ferrite-bench`): request encoders and bounded response
//! decoders, each at one fixed, non-flexible version every Kafka broker since
//! 2.x serves.

use bytes::Bytes;
use ferrite_ids::Offset;

use ferrite_protocol::wire::{capacity, Reader, WireResult, Writer};

pub const METADATA_V: i16 = 4;
pub const PRODUCE_V: i16 = 7;
pub const FETCH_V: i16 = 11;
pub const LIST_OFFSETS_V: i16 = 5;
pub const CREATE_TOPICS_V: i16 = 4;
pub const DELETE_TOPICS_V: i16 = 3;
pub const CREATE_PARTITIONS_V: i16 = 1;
pub const DESCRIBE_CONFIGS_V: i16 = 1;
pub const ALTER_CONFIGS_V: i16 = 0;

/// Writes a request frame (size, header v1, body) into a fresh buffer.
pub fn frame(
    api_key: i16,
    version: i16,
    correlation_id: i32,
    client_id: &str,
    body: impl FnOnce(&mut Writer),
) -> Bytes {
    let mut w = Writer::new();
    w.i32(0);
    w.i16(api_key);
    w.i16(version);
    w.i32(correlation_id);
    w.string(false, client_id);
    body(&mut w);
    let len = (w.len() - 4) as i32;
    w.patch_i32(0, len);
    w.into_bytes().freeze()
}

/// Writes a request frame with header v2 (flexible APIs: a tagged-field
/// section after the client id) around an encoded body.
pub fn frame_v2(api_key: i16, version: i16, correlation_id: i32, client_id: &str, body: &[u8]) -> Bytes {
    let mut w = Writer::new();
    w.i32(0);
    w.i16(api_key);
    w.i16(version);
    w.i32(correlation_id);
    w.nullable_string(false, Some(client_id));
    w.unsigned_varint(0);
    w.raw(body);
    let len = (w.len() - 4) as i32;
    w.patch_i32(0, len);
    w.into_bytes().freeze()
}

/// The body length a response frame's 4-byte size announces, checked
/// against `max` before anything is allocated for it.
pub fn response_len(size: [u8; 4], max: usize) -> std::io::Result<usize> {
    let len = usize::try_from(i32::from_be_bytes(size))
        .ok()
        .filter(|l| *l >= 4 && *l <= max);
    len.ok_or_else(|| invalid_data("bad response length"))
}

/// A response body as a reader past its header (v0, or v1 with tagged
/// fields when `flexible_header`), checked to answer `correlation`.
pub fn response_body(body: impl Into<Bytes>, correlation: i32, flexible_header: bool) -> std::io::Result<Reader> {
    let mut r = Reader::new(body.into());
    let got = r.i32("correlation_id").map_err(invalid_data)?;
    if got != correlation {
        return Err(invalid_data(format!("response {got} while {correlation} was expected")));
    }
    if flexible_header {
        r.skip_tagged_fields().map_err(invalid_data)?;
    }
    Ok(r)
}

/// An `InvalidData` I/O error: a peer's answer that cannot be used.
pub fn invalid_data(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
}

/// Reads the correlation id off a response frame (header v0).
pub fn response_correlation(r: &mut Reader) -> WireResult<i32> {
    r.i32("correlation_id")
}

// ---- Metadata v4 ----

/// Asks for `topics` (all when `None`); never auto-creates them.
pub fn metadata(w: &mut Writer, topics: Option<&[String]>) {
    match topics {
        None => w.array_len(false, None),
        Some(t) => {
            w.array_len(false, Some(t.len()));
            for name in t {
                w.string(false, name);
            }
        }
    }
    w.bool(false);
}

#[derive(Clone, Debug)]
pub struct BrokerInfo {
    pub id: i32,
    pub host: String,
    pub port: i32,
}

#[derive(Clone, Debug)]
pub struct PartitionInfo {
    pub error: i16,
    pub partition: i32,
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

#[derive(Clone, Debug)]
pub struct TopicInfo {
    pub error: i16,
    pub name: String,
    pub partitions: Vec<PartitionInfo>,
}

#[derive(Clone, Debug)]
pub struct MetadataInfo {
    pub brokers: Vec<BrokerInfo>,
    pub controller: i32,
    pub topics: Vec<TopicInfo>,
}

fn i32_array(r: &mut Reader) -> WireResult<Vec<i32>> {
    let n = r.array_len_required(false, 4, "int32 array")?;
    (0..n).map(|_| r.i32("int32")).collect()
}

pub fn decode_metadata(r: &mut Reader) -> WireResult<MetadataInfo> {
    r.i32("throttle_time_ms")?;
    let nb = r.array_len_required(false, 10, "brokers")?;
    let mut brokers = Vec::with_capacity(capacity(nb));
    for _ in 0..nb {
        let id = r.i32("node_id")?;
        let host = r.string(false, "host")?;
        let port = r.i32("port")?;
        r.nullable_string(false, "rack")?;
        brokers.push(BrokerInfo { id, host, port });
    }
    r.nullable_string(false, "cluster_id")?;
    let controller = r.i32("controller_id")?;
    let nt = r.array_len_required(false, 7, "topics")?;
    let mut topics = Vec::with_capacity(capacity(nt));
    for _ in 0..nt {
        let error = r.i16("error")?;
        let name = r.string(false, "name")?;
        r.bool("is_internal")?;
        let np = r.array_len_required(false, 18, "partitions")?;
        let mut partitions = Vec::with_capacity(capacity(np));
        for _ in 0..np {
            let error = r.i16("error")?;
            let partition = r.i32("partition")?;
            let leader = r.i32("leader")?;
            let replicas = i32_array(r)?;
            let isr = i32_array(r)?;
            partitions.push(PartitionInfo {
                error,
                partition,
                leader,
                replicas,
                isr,
            });
        }
        topics.push(TopicInfo {
            error,
            name,
            partitions,
        });
    }
    Ok(MetadataInfo {
        brokers,
        controller,
        topics,
    })
}

// ---- Produce v7 ----

/// One partition's record set.
pub fn produce(w: &mut Writer, acks: i16, timeout_ms: i32, topic: &str, partition: i32, records: &[u8]) {
    produce_partitions(w, acks, timeout_ms, topic, &[(partition, records)]);
}

/// A Produce v7 request with one record set for each of `partitions`, as a
/// client sends the batches of every partition it has ready for one broker.
pub fn produce_partitions(w: &mut Writer, acks: i16, timeout_ms: i32, topic: &str, partitions: &[(i32, &[u8])]) {
    w.nullable_string(false, None);
    w.i16(acks);
    w.i32(timeout_ms);
    w.array_len(false, Some(1));
    w.string(false, topic);
    w.array_len(false, Some(partitions.len()));
    for (partition, records) in partitions {
        w.i32(*partition);
        w.nullable_bytes(false, Some(records));
    }
}

/// (error, base offset) of the first partition in a Produce v7 response.
pub fn decode_produce(r: &mut Reader) -> WireResult<(i16, i64)> {
    let mut first = None;
    decode_produce_partitions(r, |_, error, base| {
        first.get_or_insert((error, base));
    })?;
    Ok(first.unwrap_or((0, -1)))
}

/// Calls `each(partition, error, base offset)` for every partition of a
/// Produce v7 response, in the order the response lists them.
pub fn decode_produce_partitions(r: &mut Reader, mut each: impl FnMut(i32, i16, i64)) -> WireResult<()> {
    let nt = r.array_len_required(false, 6, "topics")?;
    for _ in 0..nt {
        r.string(false, "name")?;
        let np = r.array_len_required(false, 30, "partitions")?;
        for _ in 0..np {
            let partition = r.i32("partition")?;
            let error = r.i16("error")?;
            let base = r.i64("base_offset")?;
            r.i64("log_append_time")?;
            r.i64("log_start_offset")?;
            each(partition, error, base);
        }
    }
    r.i32("throttle_time_ms")?;
    Ok(())
}

// ---- Fetch v11 ----

pub fn fetch(w: &mut Writer, max_wait_ms: i32, max_bytes: i32, topic: &str, partition: i32, offset: i64) {
    w.i32(-1);
    w.i32(max_wait_ms);
    w.i32(1);
    w.i32(max_bytes);
    w.i8(0);
    w.i32(0);
    w.i32(-1);
    w.array_len(false, Some(1));
    w.string(false, topic);
    w.array_len(false, Some(1));
    w.i32(partition);
    w.i32(-1);
    w.i64(offset);
    w.i64(-1);
    w.i32(max_bytes);
    w.array_len(false, Some(0));
    w.string(false, "");
}

#[derive(Debug)]
pub struct FetchedPartition {
    pub error: i16,
    pub high_watermark: Offset,
    pub records: Bytes,
}

/// The first partition of a Fetch v11 response (the top-level error when
/// there is none).
pub fn decode_fetch(r: &mut Reader) -> WireResult<FetchedPartition> {
    let (error, partitions) = super::replica_fetch::decode(r)?;
    Ok(match partitions.into_iter().next() {
        Some(p) => FetchedPartition {
            error: p.error,
            high_watermark: p.high_watermark,
            records: p.records,
        },
        None => FetchedPartition {
            error,
            high_watermark: Offset::NONE,
            records: Bytes::new(),
        },
    })
}

// ---- ListOffsets v5 ----

/// Asks for the offset at `timestamp` (-1 latest, -2 earliest) of each
/// topic's partitions (replica -1, read-uncommitted).
pub fn list_offsets(w: &mut Writer, timestamp: i64, topics: &[(String, Vec<i32>)]) {
    list_offsets_as(w, -1, timestamp, topics)
}

/// [`list_offsets`] from `replica_id` (-2, Kafka's debugging id, reads a
/// broker's own replica whether it leads or not).
pub fn list_offsets_as(w: &mut Writer, replica_id: i32, timestamp: i64, topics: &[(String, Vec<i32>)]) {
    w.i32(replica_id);
    w.i8(0);
    w.array_len(false, Some(topics.len()));
    for (name, partitions) in topics {
        w.string(false, name);
        w.array_len(false, Some(partitions.len()));
        for p in partitions {
            w.i32(*p);
            w.i32(-1);
            w.i64(timestamp);
        }
    }
}

/// One partition's answer to ListOffsets.
#[derive(Clone, Debug)]
pub struct ListedOffset {
    pub topic: String,
    pub partition: i32,
    pub error: i16,
    pub offset: i64,
}

pub fn decode_list_offsets(r: &mut Reader) -> WireResult<Vec<ListedOffset>> {
    r.i32("throttle_time_ms")?;
    let nt = r.array_len_required(false, 6, "topics")?;
    let mut out = Vec::new();
    for _ in 0..nt {
        let topic = r.string(false, "name")?;
        let np = r.array_len_required(false, 26, "partitions")?;
        out.reserve(capacity(np));
        for _ in 0..np {
            let partition = r.i32("partition")?;
            let error = r.i16("error")?;
            r.i64("timestamp")?;
            let offset = r.i64("offset")?;
            r.i32("leader_epoch")?;
            out.push(ListedOffset {
                topic: topic.clone(),
                partition,
                error,
                offset,
            });
        }
    }
    Ok(out)
}

// ---- CreateTopics v4, DeleteTopics v3, CreatePartitions v1 ----

pub fn create_topics(
    w: &mut Writer,
    name: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[(String, String)],
) {
    w.array_len(false, Some(1));
    w.string(false, name);
    w.i32(partitions);
    w.i16(replication_factor);
    w.array_len(false, Some(0));
    w.array_len(false, Some(configs.len()));
    for (k, v) in configs {
        w.string(false, k);
        w.nullable_string(false, Some(v));
    }
    w.i32(30_000);
    w.bool(false);
}

/// (name, error, message) per topic of a CreateTopics v4 response.
pub fn decode_create_topics(r: &mut Reader) -> WireResult<Vec<(String, i16, Option<String>)>> {
    r.i32("throttle_time_ms")?;
    let n = r.array_len_required(false, 6, "topics")?;
    (0..n)
        .map(|_| {
            Ok((
                r.string(false, "name")?,
                r.i16("error")?,
                r.nullable_string(false, "message")?,
            ))
        })
        .collect()
}

pub fn delete_topics(w: &mut Writer, names: &[String]) {
    w.array_len(false, Some(names.len()));
    for n in names {
        w.string(false, n);
    }
    w.i32(30_000);
}

pub fn decode_delete_topics(r: &mut Reader) -> WireResult<Vec<(String, i16)>> {
    r.i32("throttle_time_ms")?;
    let n = r.array_len_required(false, 4, "topics")?;
    (0..n)
        .map(|_| Ok((r.string(false, "name")?, r.i16("error")?)))
        .collect()
}

pub fn create_partitions(w: &mut Writer, name: &str, total: i32) {
    w.array_len(false, Some(1));
    w.string(false, name);
    w.i32(total);
    w.array_len(false, None);
    w.i32(30_000);
    w.bool(false);
}

pub fn decode_create_partitions(r: &mut Reader) -> WireResult<Vec<(String, i16, Option<String>)>> {
    r.i32("throttle_time_ms")?;
    let n = r.array_len_required(false, 6, "results")?;
    (0..n)
        .map(|_| {
            Ok((
                r.string(false, "name")?,
                r.i16("error")?,
                r.nullable_string(false, "message")?,
            ))
        })
        .collect()
}

// ---- DescribeConfigs v1, IncrementalAlterConfigs v0 ----

pub fn describe_topic_configs(w: &mut Writer, topic: &str) {
    describe_configs(w, 2, topic);
}

/// DescribeConfigs of one resource (2: topic, 4: broker), every config.
pub fn describe_configs(w: &mut Writer, resource_type: i8, name: &str) {
    w.array_len(false, Some(1));
    w.i8(resource_type);
    w.string(false, name);
    w.array_len(false, None);
    w.bool(false);
}

/// (error, message, [(name, value, source)]) of the first resource.
pub type DescribedConfigs = (i16, Option<String>, Vec<(String, Option<String>, i8)>);

pub fn decode_describe_configs(r: &mut Reader) -> WireResult<DescribedConfigs> {
    r.i32("throttle_time_ms")?;
    let n = r.array_len_required(false, 9, "results")?;
    let mut first = (0, None, Vec::new());
    for i in 0..n {
        let error = r.i16("error")?;
        let message = r.nullable_string(false, "message")?;
        r.i8("resource_type")?;
        r.string(false, "resource_name")?;
        let nc = r.array_len_required(false, 9, "configs")?;
        let mut configs = Vec::with_capacity(capacity(nc));
        for _ in 0..nc {
            let name = r.string(false, "name")?;
            let value = r.nullable_string(false, "value")?;
            r.bool("read_only")?;
            let source = r.i8("source")?;
            r.bool("is_sensitive")?;
            let ns = r.array_len_required(false, 5, "synonyms")?;
            for _ in 0..ns {
                r.string(false, "name")?;
                r.nullable_string(false, "value")?;
                r.i8("source")?;
            }
            configs.push((name, value, source));
        }
        if i == 0 {
            first = (error, message, configs);
        }
    }
    Ok(first)
}

/// Sets (`Some`) or deletes (`None`) topic configs.
pub fn alter_topic_configs(w: &mut Writer, topic: &str, changes: &[(String, Option<String>)]) {
    alter_configs(w, 2, topic, changes);
}

/// IncrementalAlterConfigs of one resource: SET where a value is given,
/// DELETE where not.
pub fn alter_configs(w: &mut Writer, resource_type: i8, name: &str, changes: &[(String, Option<String>)]) {
    w.array_len(false, Some(1));
    w.i8(resource_type);
    w.string(false, name);
    w.array_len(false, Some(changes.len()));
    for (k, v) in changes {
        w.string(false, k);
        w.i8(if v.is_some() { 0 } else { 1 });
        w.nullable_string(false, v.as_deref());
    }
    w.bool(false);
}

pub fn decode_alter_configs(r: &mut Reader) -> WireResult<(i16, Option<String>)> {
    r.i32("throttle_time_ms")?;
    let n = r.array_len_required(false, 6, "responses")?;
    let mut first = (0, None);
    for i in 0..n {
        let e = r.i16("error")?;
        let m = r.nullable_string(false, "message")?;
        r.i8("resource_type")?;
        r.string(false, "resource_name")?;
        if i == 0 {
            first = (e, m);
        }
    }
    Ok(first)
}
