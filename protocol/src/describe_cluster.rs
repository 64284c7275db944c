//! DescribeCluster (key 60), v0-1, always flexible.

use super::metadata::BrokerEntry;
use super::wire::{Reader, WireResult, Writer};

/// Returns `include_cluster_authorized_operations`.
pub fn decode_request(r: &mut Reader, version: i16) -> WireResult<bool> {
    let include_cluster_authorized_operations = r.bool("include_cluster_authorized_operations")?;
    if version >= 1 {
        r.i8("endpoint_type")?;
    }
    r.skip_tagged_fields()?;
    Ok(include_cluster_authorized_operations)
}

/// The cluster as DescribeCluster answers: its id, controller, brokers, and
/// the operations a client may perform on it (`authorized_operations`).
pub struct ClusterDescription<'a> {
    pub cluster_id: &'a str,
    pub controller_id: i32,
    pub brokers: &'a [BrokerEntry],
    pub authorized_operations: i32,
}

pub fn encode_response(w: &mut Writer, version: i16, c: &ClusterDescription<'_>) {
    let ClusterDescription {
        cluster_id,
        controller_id,
        brokers,
        authorized_operations,
    } = c;
    w.i32(0);
    w.i16(0);
    w.nullable_string(true, None);
    if version >= 1 {
        w.i8(1);
    }
    w.string(true, cluster_id);
    w.i32(*controller_id);
    w.array_len(true, Some(brokers.len()));
    for b in brokers.iter() {
        w.i32(b.node_id);
        w.string(true, &b.host);
        w.i32(b.port);
        w.nullable_string(true, b.rack.as_deref());
        w.empty_tagged_fields_if(true);
    }
    w.i32(*authorized_operations);
    w.empty_tagged_fields_if(true);
}
