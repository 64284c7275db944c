//! Request handlers: one file per API family. Each builds its response body
//! into a [`ResponseBuilder`] after the response header.

mod admin;
mod fetch;
mod fetch_wait;
mod groups;
mod inter_broker;
mod list_offsets;
mod metadata;
mod produce;

use std::rc::Rc;

use crate::protocol::api::ApiKey;
use crate::protocol::api_versions;
use crate::protocol::errors::ErrorCode;
use crate::protocol::header::{write_response_header, RequestHeader};
use crate::protocol::request::{Request, RequestBody};
use crate::protocol::response::{Chunk, ResponseBuilder};
use crate::shard::BrokerShard;

/// What goes back on the connection.
pub enum Reply {
    /// Nothing (a produce with acks=0).
    Nothing,
    /// Close the connection (a failed produce with acks=0).
    Close,
    Response {
        chunks: Vec<Chunk>,
        len: u64,
    },
}

impl Reply {
    fn of(b: ResponseBuilder) -> Reply {
        let (chunks, len) = b.finish();
        Reply::Response { chunks, len }
    }
}

/// Answers an ApiVersions request at a version Ferrite does not know.
pub fn api_versions_unsupported(header: &RequestHeader) -> Reply {
    let mut b = ResponseBuilder::new();
    write_response_header(&mut b.w, header.correlation_id, ApiKey::ApiVersions, false);
    api_versions::encode_response(&mut b.w, 0, ErrorCode::UnsupportedVersion);
    Reply::of(b)
}

pub async fn handle(shard: &Rc<BrokerShard>, req: Request) -> Reply {
    handle_from(shard, req, None).await
}

/// Answers `req`, which came from `peer` (the address DescribeGroups shows
/// for group members).
pub async fn handle_from(shard: &Rc<BrokerShard>, req: Request, peer: Option<std::net::SocketAddr>) -> Reply {
    let api = req.api;
    let start = std::time::Instant::now();
    let reply = dispatch(shard, req, peer).await;
    crate::metrics::request(api, start.elapsed().as_secs_f64());
    reply
}

async fn dispatch(shard: &Rc<BrokerShard>, req: Request, peer: Option<std::net::SocketAddr>) -> Reply {
    let v = req.version();
    let flexible = req.flexible;
    let mut b = ResponseBuilder::new();
    write_response_header(&mut b.w, req.header.correlation_id, req.api, flexible);
    match req.body {
        RequestBody::ApiVersions(_) => api_versions::encode_response(&mut b.w, v, ErrorCode::None),
        RequestBody::Metadata(m) => metadata::metadata(shard, &m, v, flexible, &mut b).await,
        RequestBody::DescribeCluster => metadata::describe_cluster(shard, v, &mut b),
        RequestBody::Produce(p) => {
            if p.acks == 0 {
                // No answer, as asked; on an error the connection is closed
                // (as Kafka does) so the producer refreshes its metadata.
                let ok = produce::produce(shard, p, v, flexible, &mut b).await;
                return if ok { Reply::Nothing } else { Reply::Close };
            }
            produce::produce(shard, p, v, flexible, &mut b).await;
            if shard.drop_this_produce_answer() {
                tracing::warn!("fault injection: produce appended, answer dropped");
                return Reply::Close;
            }
        }
        RequestBody::Fetch(f) => fetch::fetch(shard, f, v, flexible, &mut b).await,
        RequestBody::ListOffsets(l) => list_offsets::list_offsets(shard, l, v, flexible, &mut b).await,
        RequestBody::CreateTopics(c) => admin::create_topics(shard, c, v, flexible, &mut b).await,
        RequestBody::DeleteTopics(d) => admin::delete_topics(shard, d, v, flexible, &mut b).await,
        RequestBody::CreatePartitions(c) => admin::create_partitions(shard, c, flexible, &mut b).await,
        RequestBody::DescribeConfigs(d) => admin::describe_configs(shard, d, v, flexible, &mut b),
        RequestBody::IncrementalAlterConfigs(a) => admin::alter_configs(shard, a, flexible, &mut b).await,
        RequestBody::Controller(rpc) => inter_broker::controller_request(shard, rpc, &mut b).await,
        RequestBody::ControlledShutdown(c) => inter_broker::controlled_shutdown(shard, c, &mut b).await,
        RequestBody::OffsetForLeaderEpoch(o) => inter_broker::offset_for_leader_epoch(shard, o, v, &mut b).await,
        RequestBody::ElectLeaders(e) => inter_broker::elect_leaders(shard, e, v, &mut b).await,
        RequestBody::InitProducerId(i) => groups::init_producer_id(shard, i, v, &mut b).await,
        RequestBody::FindCoordinator(f) => groups::find_coordinator(shard, f, v, &mut b).await,
        RequestBody::JoinGroup(j) => {
            let client_id = req.header.client_id.clone().unwrap_or_default();
            let host = peer
                .map(|p| format!("/{}", p.ip()))
                .unwrap_or_else(|| "/unknown".into());
            groups::join_group(shard, j, client_id, host, v, &mut b).await
        }
        RequestBody::SyncGroup(s) => groups::sync_group(shard, s, v, &mut b).await,
        RequestBody::Heartbeat(h) => groups::heartbeat(shard, h, v, &mut b).await,
        RequestBody::LeaveGroup(l) => groups::leave_group(shard, l, v, &mut b).await,
        RequestBody::OffsetCommit(c) => groups::offset_commit(shard, c, v, &mut b).await,
        RequestBody::OffsetFetch(f) => groups::offset_fetch(shard, f, v, &mut b).await,
        RequestBody::OffsetDelete(d) => groups::offset_delete(shard, d, v, &mut b).await,
        RequestBody::ListGroups(l) => groups::list_groups(shard, l, v, &mut b).await,
        RequestBody::DescribeGroups(d) => groups::describe_groups(shard, d, v, &mut b).await,
        RequestBody::DeleteGroups(d) => groups::delete_groups(shard, d, v, &mut b).await,
    }
    Reply::of(b)
}
