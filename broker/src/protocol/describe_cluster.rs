//! DescribeCluster (key 60), v0-1, always flexible.

use super::metadata::BrokerEntry;
use super::wire::{Reader, WireResult, Writer};

pub fn decode_request(r: &mut Reader, version: i16) -> WireResult<()> {
    r.bool("include_cluster_authorized_operations")?;
    if version >= 1 {
        r.i8("endpoint_type")?;
    }
    r.skip_tagged_fields()
}

pub fn encode_response(w: &mut Writer, version: i16, cluster_id: &str, controller_id: i32, brokers: &[BrokerEntry]) {
    w.i32(0);
    w.i16(0);
    w.nullable_string(true, None);
    if version >= 1 {
        w.i8(1);
    }
    w.string(true, cluster_id);
    w.i32(controller_id);
    w.array_len(true, Some(brokers.len()));
    for b in brokers {
        w.i32(b.node_id);
        w.string(true, &b.host);
        w.i32(b.port);
        w.nullable_string(true, b.rack.as_deref());
        w.empty_tagged_fields_if(true);
    }
    w.i32(i32::MIN);
    w.empty_tagged_fields_if(true);
}
