//! Request handlers: one file per API family. Each builds its response body
//! into a [`ResponseBuilder`] after the response header.

mod admin;
mod fetch;
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
    let api = req.api;
    let start = std::time::Instant::now();
    let reply = dispatch(shard, req).await;
    crate::metrics::request(api, start.elapsed().as_secs_f64());
    reply
}

async fn dispatch(shard: &Rc<BrokerShard>, req: Request) -> Reply {
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
    }
    Reply::of(b)
}
