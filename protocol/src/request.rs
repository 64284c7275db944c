//! Decoding a whole request frame into a typed request.

use bytes::Bytes;

use super::acls::{Acl, AclFilter};
use super::api::{ApiKey, ApiSupport};
use super::api_versions::ApiVersionsRequest;
use super::configs::{AlterConfigsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest};
use super::controlled_shutdown::ControlledShutdownRequest;
use super::controller_rpc::ControllerRpc;
use super::delete_records::DeleteRecordsRequest;
use super::describe_producers::DescribeProducersRequest;
use super::elect_leaders::ElectLeadersRequest;
use super::fetch::FetchRequest;
use super::group_membership::{
    FindCoordinatorRequest, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest,
};
use super::group_offsets::{OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest};
use super::groups_admin::{DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest};
use super::header::{RequestHeader, Route};
use super::init_producer_id::InitProducerIdRequest;
use super::list_offsets::ListOffsetsRequest;
use super::metadata::MetadataRequest;
use super::offset_for_leader_epoch::OffsetForLeaderEpochRequest;
use super::produce::ProduceRequest;
use super::sasl::{SaslAuthenticateRequest, SaslHandshakeRequest};
use super::scram_credentials::{AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest};
use super::topics_admin::{CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest};
use super::txn_admin::{DescribeTransactionsRequest, ListTransactionsRequest};
use super::txn_offset_commit::TxnOffsetCommitRequest;
use super::txn_producer::{AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest};
use super::wire::{Reader, WireError};
use super::write_txn_markers::WriteTxnMarkersRequest;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestBody {
    ApiVersions(ApiVersionsRequest),
    Metadata(MetadataRequest),
    Produce(ProduceRequest),
    Fetch(FetchRequest),
    ListOffsets(ListOffsetsRequest),
    CreateTopics(CreateTopicsRequest),
    DeleteTopics(DeleteTopicsRequest),
    CreatePartitions(CreatePartitionsRequest),
    DescribeConfigs(DescribeConfigsRequest),
    AlterConfigs(AlterConfigsRequest),
    IncrementalAlterConfigs(IncrementalAlterConfigsRequest),
    DescribeCluster {
        include_cluster_authorized_operations: bool,
    },
    /// LeaderAndIsr, StopReplica or UpdateMetadata.
    Controller(ControllerRpc),
    ControlledShutdown(ControlledShutdownRequest),
    OffsetForLeaderEpoch(OffsetForLeaderEpochRequest),
    ElectLeaders(ElectLeadersRequest),
    DeleteRecords(DeleteRecordsRequest),
    InitProducerId(InitProducerIdRequest),
    AddPartitionsToTxn(AddPartitionsToTxnRequest),
    /// v4: the brokers' batched form (KIP-890's verification).
    AddPartitionsToTxnBatch(super::txn_verify::AddPartitionsToTxnBatch),
    AddOffsetsToTxn(AddOffsetsToTxnRequest),
    EndTxn(EndTxnRequest),
    WriteTxnMarkers(WriteTxnMarkersRequest),
    TxnOffsetCommit(TxnOffsetCommitRequest),
    DescribeTransactions(DescribeTransactionsRequest),
    DescribeProducers(DescribeProducersRequest),
    ListTransactions(ListTransactionsRequest),
    SaslHandshake(SaslHandshakeRequest),
    SaslAuthenticate(SaslAuthenticateRequest),
    DescribeUserScramCredentials(DescribeUserScramCredentialsRequest),
    AlterUserScramCredentials(AlterUserScramCredentialsRequest),
    DescribeAcls(AclFilter),
    CreateAcls(Vec<Acl>),
    DeleteAcls(Vec<AclFilter>),
    FindCoordinator(FindCoordinatorRequest),
    JoinGroup(JoinGroupRequest),
    Heartbeat(HeartbeatRequest),
    LeaveGroup(LeaveGroupRequest),
    SyncGroup(SyncGroupRequest),
    OffsetCommit(OffsetCommitRequest),
    OffsetFetch(OffsetFetchRequest),
    OffsetDelete(OffsetDeleteRequest),
    ListGroups(ListGroupsRequest),
    DescribeGroups(DescribeGroupsRequest),
    DeleteGroups(DeleteGroupsRequest),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub header: RequestHeader,
    pub api: ApiKey,
    pub flexible: bool,
    pub body: RequestBody,
}

impl Request {
    pub fn version(&self) -> i16 {
        self.header.api_version
    }
}

/// What a frame turned out to be.
#[derive(Debug)]
pub enum Decoded {
    Request(Box<Request>),
    /// ApiVersions at an unknown version: answer UNSUPPORTED_VERSION.
    ApiVersionsUnsupported(RequestHeader),
}

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("malformed request: {0}")]
    Malformed(#[from] WireError),
    #[error("unsupported API {api_key} v{api_version}")]
    Unsupported { api_key: i16, api_version: i16 },
}

/// Decodes one frame (the bytes after the 4-byte size).
pub fn decode_frame(frame: Bytes) -> Result<Decoded, FrameError> {
    let mut r = Reader::new(frame);
    let (header, route) = RequestHeader::decode(&mut r)?;
    let (api, flexible) = match route {
        Route::Known { api, flexible } => (api, flexible),
        Route::ApiVersionsUnsupported => return Ok(Decoded::ApiVersionsUnsupported(header)),
        Route::Unknown => {
            return Err(FrameError::Unsupported {
                api_key: header.api_key,
                api_version: header.api_version,
            })
        }
    };
    let body = decode_body(&mut r, api, header.api_version, flexible)?;
    Ok(Decoded::Request(Box::new(Request {
        header,
        api: api.key,
        flexible,
        body,
    })))
}

fn decode_body(r: &mut Reader, api: ApiSupport, v: i16, flexible: bool) -> Result<RequestBody, WireError> {
    Ok(match api.key {
        ApiKey::ApiVersions => RequestBody::ApiVersions(ApiVersionsRequest::decode(r, v)?),
        ApiKey::Metadata => RequestBody::Metadata(MetadataRequest::decode(r, v, flexible)?),
        ApiKey::Produce => RequestBody::Produce(ProduceRequest::decode(r, v, flexible)?),
        ApiKey::Fetch => RequestBody::Fetch(FetchRequest::decode(r, v, flexible)?),
        ApiKey::ListOffsets => RequestBody::ListOffsets(ListOffsetsRequest::decode(r, v, flexible)?),
        ApiKey::CreateTopics => RequestBody::CreateTopics(CreateTopicsRequest::decode(r, v, flexible)?),
        ApiKey::DeleteTopics => RequestBody::DeleteTopics(DeleteTopicsRequest::decode(r, v, flexible)?),
        ApiKey::CreatePartitions => RequestBody::CreatePartitions(CreatePartitionsRequest::decode(r, v, flexible)?),
        ApiKey::DescribeConfigs => RequestBody::DescribeConfigs(DescribeConfigsRequest::decode(r, v, flexible)?),
        ApiKey::AlterConfigs => RequestBody::AlterConfigs(AlterConfigsRequest::decode(r, v, flexible)?),
        ApiKey::IncrementalAlterConfigs => {
            RequestBody::IncrementalAlterConfigs(IncrementalAlterConfigsRequest::decode(r, v, flexible)?)
        }
        ApiKey::DescribeCluster => RequestBody::DescribeCluster {
            include_cluster_authorized_operations: super::describe_cluster::decode_request(r, v)?,
        },
        ApiKey::LeaderAndIsr | ApiKey::StopReplica | ApiKey::UpdateMetadata => {
            let decoded = ControllerRpc::decode(r, api.code);
            assert!(decoded.is_some(), "controller APIs decode as ControllerRpc");
            RequestBody::Controller(decoded.unwrap_or_else(|| unreachable!())?)
        }
        ApiKey::ControlledShutdown => RequestBody::ControlledShutdown(ControlledShutdownRequest::decode(r)?),
        ApiKey::OffsetForLeaderEpoch => RequestBody::OffsetForLeaderEpoch(OffsetForLeaderEpochRequest::decode(r, v)?),
        ApiKey::ElectLeaders => RequestBody::ElectLeaders(ElectLeadersRequest::decode(r, v)?),
        ApiKey::DeleteRecords => RequestBody::DeleteRecords(DeleteRecordsRequest::decode(r, v)?),
        ApiKey::InitProducerId => RequestBody::InitProducerId(InitProducerIdRequest::decode(r, v)?),
        ApiKey::AddPartitionsToTxn if v >= super::txn_verify::BATCHED_FROM => {
            RequestBody::AddPartitionsToTxnBatch(super::txn_verify::AddPartitionsToTxnBatch::decode(r, v)?)
        }
        ApiKey::AddPartitionsToTxn => RequestBody::AddPartitionsToTxn(AddPartitionsToTxnRequest::decode(r, v)?),
        ApiKey::AddOffsetsToTxn => RequestBody::AddOffsetsToTxn(AddOffsetsToTxnRequest::decode(r, v)?),
        ApiKey::EndTxn => RequestBody::EndTxn(EndTxnRequest::decode(r, v)?),
        ApiKey::WriteTxnMarkers => RequestBody::WriteTxnMarkers(WriteTxnMarkersRequest::decode(r, v)?),
        ApiKey::TxnOffsetCommit => RequestBody::TxnOffsetCommit(TxnOffsetCommitRequest::decode(r, v)?),
        ApiKey::DescribeTransactions => RequestBody::DescribeTransactions(DescribeTransactionsRequest::decode(r, v)?),
        ApiKey::DescribeProducers => RequestBody::DescribeProducers(DescribeProducersRequest::decode(r, v)?),
        ApiKey::ListTransactions => RequestBody::ListTransactions(ListTransactionsRequest::decode(r, v)?),
        ApiKey::FindCoordinator => RequestBody::FindCoordinator(FindCoordinatorRequest::decode(r, v)?),
        ApiKey::JoinGroup => RequestBody::JoinGroup(JoinGroupRequest::decode(r, v)?),
        ApiKey::Heartbeat => RequestBody::Heartbeat(HeartbeatRequest::decode(r, v)?),
        ApiKey::LeaveGroup => RequestBody::LeaveGroup(LeaveGroupRequest::decode(r, v)?),
        ApiKey::SyncGroup => RequestBody::SyncGroup(SyncGroupRequest::decode(r, v)?),
        ApiKey::OffsetCommit => RequestBody::OffsetCommit(OffsetCommitRequest::decode(r, v)?),
        ApiKey::OffsetFetch => RequestBody::OffsetFetch(OffsetFetchRequest::decode(r, v)?),
        ApiKey::OffsetDelete => RequestBody::OffsetDelete(OffsetDeleteRequest::decode(r, v)?),
        ApiKey::ListGroups => RequestBody::ListGroups(ListGroupsRequest::decode(r, v)?),
        ApiKey::DescribeGroups => RequestBody::DescribeGroups(DescribeGroupsRequest::decode(r, v)?),
        ApiKey::DeleteGroups => RequestBody::DeleteGroups(DeleteGroupsRequest::decode(r, v)?),
        ApiKey::SaslHandshake => RequestBody::SaslHandshake(SaslHandshakeRequest::decode(r)?),
        ApiKey::SaslAuthenticate => RequestBody::SaslAuthenticate(SaslAuthenticateRequest::decode(r, v)?),
        ApiKey::DescribeUserScramCredentials => {
            RequestBody::DescribeUserScramCredentials(DescribeUserScramCredentialsRequest::decode(r)?)
        }
        ApiKey::AlterUserScramCredentials => {
            RequestBody::AlterUserScramCredentials(AlterUserScramCredentialsRequest::decode(r)?)
        }
        ApiKey::DescribeAcls => RequestBody::DescribeAcls(super::acls::decode_describe(r, v)?),
        ApiKey::CreateAcls => RequestBody::CreateAcls(super::acls::decode_create(r, v)?),
        ApiKey::DeleteAcls => RequestBody::DeleteAcls(super::acls::decode_delete(r, v)?),
    })
}
