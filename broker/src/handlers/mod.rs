//! Request handlers: one file per API family. Each builds its response body
//! into a [`ResponseBuilder`] after the response header.

pub mod access;
mod acls;
mod admin;
mod configs;
mod delete_records;
mod describe_producers;
mod fetch;
mod fetch_session;
pub use fetch_session::FetchSessions;
mod fetch_wait;
mod follower_view;
pub use follower_view::FollowerViews;
pub(crate) mod groups;
pub(crate) mod init_producer_id;
mod inter_broker;
mod list_offsets;
mod metadata;
mod produce;
pub mod sasl;
pub mod scram_users;
pub(crate) mod transactions;

use std::rc::Rc;

use crate::shard::BrokerShard;
use ferrite_protocol::api::ApiKey;
use ferrite_protocol::api_versions;
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::header::{write_response_header, RequestHeader};
use ferrite_protocol::request::{Request, RequestBody};
use ferrite_protocol::response::{Chunk, ResponseBuilder};
use ferrite_transport::sequence::{Effect, Turn};

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
    pub(crate) fn of(b: ResponseBuilder) -> Reply {
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
    let caller = Caller {
        peer: None,
        listener: ListenerIndex::PRIMARY,
        principal: Rc::new(ferrite_security::Principal::anonymous()),
    };
    handle_from(shard, req, caller, Turn::unordered()).await
}

/// Which of the broker's listeners a connection came in on: 0 is the
/// primary (`listen`), `i` the `i`-th of `extra_listeners`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenerIndex(pub usize);

impl ListenerIndex {
    pub const PRIMARY: ListenerIndex = ListenerIndex(0);
}

/// Who sent a request: the peer's address (what DescribeGroups shows for
/// group members), the listener it came in on (whose addresses Metadata
/// and FindCoordinator answer with), and who the client authenticated as
/// (`User:ANONYMOUS` on a listener without SASL).
#[derive(Clone, Debug)]
pub struct Caller {
    pub peer: Option<std::net::SocketAddr>,
    pub listener: ListenerIndex,
    pub principal: Rc<ferrite_security::Principal>,
}

/// Answers `req`, which came from `caller`, in its connection's `turn`.
/// The request's duration counts from its start, after the writes before
/// it took effect.
pub async fn handle_from(shard: &Rc<BrokerShard>, req: Request, caller: Caller, turn: Turn) -> Reply {
    let api = req.api;
    let effect = turn.start().await;
    if !matches!(
        req.body,
        RequestBody::ApiVersions(_) | RequestBody::Controller(_) | RequestBody::ControlledShutdown(_)
    ) {
        // The controller's requests are what bring the metadata.
        shard.first_metadata().await;
    }
    let start = std::time::Instant::now();
    let reply = dispatch(shard, req, &caller, effect).await;
    crate::metrics::request(api, start.elapsed().as_secs_f64());
    reply
}

/// Each handler's future is boxed: the request's task then holds only the
/// handler it runs, not room for the largest of them all (join_group's
/// future is ~4.5 KiB, and a spawn copies the whole task state).
/// A write's `effect` is marked when the handler returns, unless the
/// handler marks it sooner (produce, once its appends have their places).
async fn dispatch(shard: &Rc<BrokerShard>, req: Request, caller: &Caller, mut effect: Effect) -> Reply {
    let v = req.version();
    let flexible = req.flexible;
    let mut b = ResponseBuilder::new();
    write_response_header(&mut b.w, req.header.correlation_id, req.api, flexible);
    let access = access::Access::of(shard, caller.principal.clone(), caller.peer);
    match req.body {
        RequestBody::ApiVersions(_) => api_versions::encode_response(&mut b.w, v, ErrorCode::None),
        RequestBody::Metadata(m) => Box::pin(metadata::metadata(shard, &access, caller, &m, v, flexible, &mut b)).await,
        RequestBody::DescribeCluster {
            include_cluster_authorized_operations,
        } => metadata::describe_cluster(shard, caller.listener, v, include_cluster_authorized_operations, &mut b),
        RequestBody::Produce(p) => {
            if p.acks == 0 {
                // No answer, as asked; on an error the connection is closed
                // (as Kafka does) so the producer refreshes its metadata.
                let ok = Box::pin(produce::produce(shard, &access, p, v, flexible, &mut b, &mut effect)).await;
                return if ok { Reply::Nothing } else { Reply::Close };
            }
            Box::pin(produce::produce(shard, &access, p, v, flexible, &mut b, &mut effect)).await;
            #[cfg(feature = "fault-injection")]
            if shard.drop_this_produce_answer() {
                tracing::warn!("fault injection: produce appended, answer dropped");
                return Reply::Close;
            }
        }
        RequestBody::Fetch(f) => Box::pin(fetch::fetch(shard, &access, f, v, flexible, &mut b)).await,
        RequestBody::ListOffsets(l) => {
            Box::pin(list_offsets::list_offsets(shard, &access, l, v, flexible, &mut b)).await
        }
        RequestBody::InitProducerId(i) => {
            Box::pin(init_producer_id::init_producer_id(shard, &access, i, v, &mut b)).await
        }
        RequestBody::FindCoordinator(f) => {
            Box::pin(groups::find_coordinator(shard, &access, f, caller.listener, v, &mut b)).await
        }
        RequestBody::JoinGroup(j) => {
            let client_id = req.header.client_id.clone().unwrap_or_default();
            let host = caller
                .peer
                .map(|p| format!("/{}", p.ip()))
                .unwrap_or_else(|| "/unknown".into());
            Box::pin(groups::join_group(shard, &access, j, client_id, host, v, &mut b)).await
        }
        RequestBody::SyncGroup(s) => Box::pin(groups::sync_group(shard, &access, s, v, &mut b)).await,
        RequestBody::Heartbeat(h) => Box::pin(groups::heartbeat(shard, &access, h, v, &mut b)).await,
        RequestBody::LeaveGroup(l) => Box::pin(groups::leave_group(shard, &access, l, v, &mut b)).await,
        RequestBody::OffsetCommit(c) => Box::pin(groups::offset_commit(shard, &access, c, v, &mut b)).await,
        RequestBody::OffsetFetch(f) => Box::pin(groups::offset_fetch(shard, &access, f, v, &mut b)).await,
        RequestBody::OffsetDelete(d) => Box::pin(groups::offset_delete(shard, &access, d, v, &mut b)).await,
        RequestBody::ListGroups(l) => Box::pin(groups::list_groups(shard, &access, l, v, &mut b)).await,
        RequestBody::DescribeGroups(d) => Box::pin(groups::describe_groups(shard, &access, d, v, &mut b)).await,
        RequestBody::DeleteGroups(d) => Box::pin(groups::delete_groups(shard, &access, d, v, &mut b)).await,
        body => {
            if let Some(early) = Box::pin(admin_request(shard, &access, body, (&req.header, flexible), &mut b)).await {
                return early;
            }
        }
    }
    effect.mark();
    Reply::of(b)
}

/// The transaction requests.
async fn transaction_request(
    shard: &Rc<BrokerShard>,
    access: &access::Access,
    body: RequestBody,
    v: i16,
    b: &mut ResponseBuilder,
) {
    use transactions as t;
    match body {
        RequestBody::AddPartitionsToTxn(r) => Box::pin(t::add_partitions_to_txn(shard, access, r, v, b)).await,
        RequestBody::AddPartitionsToTxnBatch(r) => {
            Box::pin(t::add_partitions_to_txn_batch(shard, access, r, v, b)).await
        }
        RequestBody::AddOffsetsToTxn(r) => Box::pin(t::add_offsets_to_txn(shard, access, r, v, b)).await,
        RequestBody::EndTxn(r) => Box::pin(t::end_txn(shard, access, r, v, b)).await,
        RequestBody::WriteTxnMarkers(r) => Box::pin(t::write_txn_markers(shard, access, r, v, b)).await,
        RequestBody::TxnOffsetCommit(r) => Box::pin(t::txn_offset_commit(shard, access, r, v, b)).await,
        RequestBody::DescribeTransactions(r) => Box::pin(t::describe_transactions(shard, access, r, v, b)).await,
        RequestBody::ListTransactions(r) => Box::pin(t::list_transactions(shard, access, r, v, b)).await,
        RequestBody::DescribeProducers(r) => {
            Box::pin(describe_producers::describe_producers(shard, access, r, v, b)).await
        }
        _ => unreachable!("only transaction requests come here"),
    }
}

/// The administrative, inter-broker and security requests (dispatch's
/// other half); `Some` for a reply of its own instead of `b`.
async fn admin_request(
    shard: &Rc<BrokerShard>,
    access: &access::Access,
    body: RequestBody,
    (header, flexible): (&RequestHeader, bool),
    b: &mut ResponseBuilder,
) -> Option<Reply> {
    let v = header.api_version;
    match body {
        RequestBody::CreateTopics(c) => Box::pin(admin::create_topics(shard, access, c, v, flexible, b)).await,
        RequestBody::DeleteTopics(d) => Box::pin(admin::delete_topics(shard, access, d, v, flexible, b)).await,
        RequestBody::CreatePartitions(c) => Box::pin(admin::create_partitions(shard, access, c, flexible, b)).await,
        RequestBody::DescribeConfigs(d) => configs::describe_configs(shard, access, d, v, flexible, b),
        RequestBody::AlterConfigs(a) => Box::pin(configs::alter_configs(shard, access, a, flexible, b)).await,
        RequestBody::IncrementalAlterConfigs(a) => {
            Box::pin(configs::incremental_alter_configs(shard, access, a, flexible, b)).await
        }
        RequestBody::Controller(rpc) => Box::pin(inter_broker::controller_request(shard, access, rpc, b)).await,
        RequestBody::ControlledShutdown(c) => Box::pin(inter_broker::controlled_shutdown(shard, access, c, b)).await,
        RequestBody::OffsetForLeaderEpoch(o) => {
            Box::pin(inter_broker::offset_for_leader_epoch(shard, access, o, v, b)).await
        }
        RequestBody::SaslHandshake(_) | RequestBody::SaslAuthenticate(_) => {
            return Some(sasl::refused(header, flexible))
        }
        RequestBody::DescribeAcls(f) => acls::describe(shard, access, f, v, b),
        RequestBody::CreateAcls(c) => Box::pin(acls::create(shard, access, c, v, b)).await,
        RequestBody::DeleteAcls(f) => Box::pin(acls::delete(shard, access, f, v, b)).await,
        RequestBody::DescribeUserScramCredentials(d) => scram_users::describe(shard, access, d, b),
        RequestBody::AlterUserScramCredentials(a) => Box::pin(scram_users::alter(shard, access, a, b)).await,
        RequestBody::ElectLeaders(e) => Box::pin(inter_broker::elect_leaders(shard, access, e, v, b)).await,
        RequestBody::DeleteRecords(d) => Box::pin(delete_records::delete_records(shard, access, d, v, b)).await,
        txn @ (RequestBody::AddPartitionsToTxn(_)
        | RequestBody::AddPartitionsToTxnBatch(_)
        | RequestBody::AddOffsetsToTxn(_)
        | RequestBody::EndTxn(_)
        | RequestBody::WriteTxnMarkers(_)
        | RequestBody::TxnOffsetCommit(_)
        | RequestBody::DescribeTransactions(_)
        | RequestBody::ListTransactions(_)
        | RequestBody::DescribeProducers(_)) => Box::pin(transaction_request(shard, access, txn, v, b)).await,
        // Dispatch's own.
        RequestBody::ApiVersions(_)
        | RequestBody::Metadata(_)
        | RequestBody::DescribeCluster { .. }
        | RequestBody::Produce(_)
        | RequestBody::Fetch(_)
        | RequestBody::ListOffsets(_)
        | RequestBody::InitProducerId(_)
        | RequestBody::FindCoordinator(_)
        | RequestBody::JoinGroup(_)
        | RequestBody::SyncGroup(_)
        | RequestBody::Heartbeat(_)
        | RequestBody::LeaveGroup(_)
        | RequestBody::OffsetCommit(_)
        | RequestBody::OffsetFetch(_)
        | RequestBody::OffsetDelete(_)
        | RequestBody::ListGroups(_)
        | RequestBody::DescribeGroups(_)
        | RequestBody::DeleteGroups(_) => {}
    }
    None
}
