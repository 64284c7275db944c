//! The APIs Ferrite serves, the versions it accepts, and from which version
//! each uses the flexible (tagged-field) encoding.

/// Kafka API keys Ferrite knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ApiKey {
    Produce,
    Fetch,
    ListOffsets,
    Metadata,
    ApiVersions,
    CreateTopics,
    DeleteTopics,
    DescribeConfigs,
    CreatePartitions,
    AlterConfigs,
    IncrementalAlterConfigs,
    DescribeCluster,
    LeaderAndIsr,
    StopReplica,
    UpdateMetadata,
    ControlledShutdown,
    OffsetForLeaderEpoch,
    ElectLeaders,
    DeleteRecords,
    InitProducerId,
    AddPartitionsToTxn,
    AddOffsetsToTxn,
    EndTxn,
    WriteTxnMarkers,
    TxnOffsetCommit,
    DescribeTransactions,
    ListTransactions,
    DescribeProducers,
    FindCoordinator,
    JoinGroup,
    Heartbeat,
    LeaveGroup,
    SyncGroup,
    OffsetCommit,
    OffsetFetch,
    OffsetDelete,
    ListGroups,
    DescribeGroups,
    DeleteGroups,
    SaslHandshake,
    SaslAuthenticate,
    DescribeUserScramCredentials,
    AlterUserScramCredentials,
    DescribeAcls,
    CreateAcls,
    DeleteAcls,
}

/// One row of the ApiVersions answer.
#[derive(Clone, Copy, Debug)]
pub struct ApiSupport {
    pub key: ApiKey,
    pub code: i16,
    pub min: i16,
    pub max: i16,
    /// First flexible version.
    pub flexible_from: i16,
}

/// Everything Ferrite serves, with the version ranges current librdkafka,
/// the Java client and kafka-python negotiate.
pub const SUPPORTED: &[ApiSupport] = &[
    ApiSupport {
        key: ApiKey::Produce,
        code: 0,
        min: 3,
        max: 9,
        flexible_from: 9,
    },
    ApiSupport {
        key: ApiKey::Fetch,
        code: 1,
        min: 4,
        max: 12,
        flexible_from: 12,
    },
    ApiSupport {
        key: ApiKey::ListOffsets,
        code: 2,
        min: 1,
        max: 7,
        flexible_from: 6,
    },
    ApiSupport {
        key: ApiKey::Metadata,
        code: 3,
        min: 0,
        max: 12,
        flexible_from: 9,
    },
    ApiSupport {
        key: ApiKey::ApiVersions,
        code: 18,
        min: 0,
        // v4 is v3 again (Kafka 3.9 added it to let a response's feature
        // ranges start at 0).
        max: 4,
        flexible_from: 3,
    },
    ApiSupport {
        key: ApiKey::CreateTopics,
        code: 19,
        min: 2,
        max: 7,
        flexible_from: 5,
    },
    ApiSupport {
        key: ApiKey::DeleteTopics,
        code: 20,
        min: 1,
        max: 6,
        flexible_from: 4,
    },
    ApiSupport {
        key: ApiKey::DescribeConfigs,
        code: 32,
        min: 1,
        max: 4,
        flexible_from: 4,
    },
    ApiSupport {
        key: ApiKey::CreatePartitions,
        code: 37,
        min: 0,
        max: 3,
        flexible_from: 2,
    },
    ApiSupport {
        key: ApiKey::AlterConfigs,
        code: 33,
        min: 0,
        max: 2,
        flexible_from: 2,
    },
    ApiSupport {
        key: ApiKey::IncrementalAlterConfigs,
        code: 44,
        min: 0,
        max: 1,
        flexible_from: 1,
    },
    ApiSupport {
        key: ApiKey::DescribeCluster,
        code: 60,
        min: 0,
        max: 1,
        flexible_from: 0,
    },
    ApiSupport {
        key: ApiKey::ElectLeaders,
        code: super::elect_leaders::API_KEY,
        min: 0,
        max: super::elect_leaders::VERSION_MAX,
        flexible_from: super::elect_leaders::FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::DeleteRecords,
        code: super::delete_records::API_KEY,
        min: 0,
        max: super::delete_records::VERSION_MAX,
        flexible_from: super::delete_records::FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::InitProducerId,
        code: super::init_producer_id::API_KEY,
        min: 0,
        max: super::init_producer_id::VERSION_MAX,
        flexible_from: super::init_producer_id::FLEXIBLE_FROM,
    },
    // Transactions: the producer's calls to its coordinator, the
    // coordinator's markers to partition leaders, and the admin calls.
    ApiSupport {
        key: ApiKey::AddPartitionsToTxn,
        code: super::txn_producer::ADD_PARTITIONS_TO_TXN_KEY,
        min: 0,
        max: super::txn_producer::ADD_PARTITIONS_TO_TXN_VERSION_MAX,
        flexible_from: super::txn_producer::ADD_PARTITIONS_TO_TXN_FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::AddOffsetsToTxn,
        code: super::txn_producer::ADD_OFFSETS_TO_TXN_KEY,
        min: 0,
        max: super::txn_producer::ADD_OFFSETS_TO_TXN_VERSION_MAX,
        flexible_from: super::txn_producer::ADD_OFFSETS_TO_TXN_FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::EndTxn,
        code: super::txn_producer::END_TXN_KEY,
        min: 0,
        max: super::txn_producer::END_TXN_VERSION_MAX,
        flexible_from: super::txn_producer::END_TXN_FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::WriteTxnMarkers,
        code: super::write_txn_markers::API_KEY,
        min: 0,
        max: super::write_txn_markers::VERSION_MAX,
        flexible_from: super::write_txn_markers::FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::TxnOffsetCommit,
        code: super::txn_offset_commit::API_KEY,
        min: 0,
        max: super::txn_offset_commit::VERSION_MAX,
        flexible_from: super::txn_offset_commit::FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::DescribeTransactions,
        code: super::txn_admin::DESCRIBE_TRANSACTIONS_KEY,
        min: 0,
        max: super::txn_admin::DESCRIBE_TRANSACTIONS_VERSION_MAX,
        flexible_from: super::txn_admin::DESCRIBE_TRANSACTIONS_FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::ListTransactions,
        code: super::txn_admin::LIST_TRANSACTIONS_KEY,
        min: 0,
        max: super::txn_admin::LIST_TRANSACTIONS_VERSION_MAX,
        flexible_from: super::txn_admin::LIST_TRANSACTIONS_FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::DescribeProducers,
        code: super::describe_producers::API_KEY,
        min: 0,
        max: super::describe_producers::VERSION_MAX,
        flexible_from: super::describe_producers::FLEXIBLE_FROM,
    },
    // The consumer-group APIs (classic protocol).
    ApiSupport {
        key: ApiKey::FindCoordinator,
        code: super::group_membership::FIND_COORDINATOR_KEY,
        min: 0,
        max: super::group_membership::FIND_COORDINATOR_MAX_VERSION,
        flexible_from: super::group_membership::FIND_COORDINATOR_FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::JoinGroup,
        code: super::group_membership::JOIN_GROUP_KEY,
        min: 0,
        max: super::group_membership::JOIN_GROUP_MAX_VERSION,
        flexible_from: super::group_membership::JOIN_GROUP_FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::Heartbeat,
        code: super::group_membership::HEARTBEAT_KEY,
        min: 0,
        max: super::group_membership::HEARTBEAT_MAX_VERSION,
        flexible_from: super::group_membership::HEARTBEAT_FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::LeaveGroup,
        code: super::group_membership::LEAVE_GROUP_KEY,
        min: 0,
        max: super::group_membership::LEAVE_GROUP_MAX_VERSION,
        flexible_from: super::group_membership::LEAVE_GROUP_FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::SyncGroup,
        code: super::group_membership::SYNC_GROUP_KEY,
        min: 0,
        max: super::group_membership::SYNC_GROUP_MAX_VERSION,
        flexible_from: super::group_membership::SYNC_GROUP_FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::OffsetCommit,
        code: super::group_offsets::OFFSET_COMMIT_KEY,
        min: 0,
        max: super::group_offsets::OFFSET_COMMIT_MAX_VERSION,
        flexible_from: super::group_offsets::OFFSET_COMMIT_FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::OffsetFetch,
        code: super::group_offsets::OFFSET_FETCH_KEY,
        min: 0,
        max: super::group_offsets::OFFSET_FETCH_MAX_VERSION,
        flexible_from: super::group_offsets::OFFSET_FETCH_FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::OffsetDelete,
        code: super::group_offsets::OFFSET_DELETE_KEY,
        min: 0,
        max: super::group_offsets::OFFSET_DELETE_MAX_VERSION,
        flexible_from: i16::MAX,
    },
    ApiSupport {
        key: ApiKey::ListGroups,
        code: super::groups_admin::LIST_GROUPS_KEY,
        min: 0,
        max: super::groups_admin::LIST_GROUPS_MAX_VERSION,
        flexible_from: super::groups_admin::LIST_GROUPS_FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::DescribeGroups,
        code: super::groups_admin::DESCRIBE_GROUPS_KEY,
        min: 0,
        max: super::groups_admin::DESCRIBE_GROUPS_MAX_VERSION,
        flexible_from: super::groups_admin::DESCRIBE_GROUPS_FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::DeleteGroups,
        code: super::groups_admin::DELETE_GROUPS_KEY,
        min: 0,
        max: super::groups_admin::DELETE_GROUPS_MAX_VERSION,
        flexible_from: super::groups_admin::DELETE_GROUPS_FLEXIBLE_FROM,
    },
    // Between brokers: the controller's requests (one version each, see
    // `controller_rpc`), a broker's ControlledShutdown, and the followers'
    // OffsetForLeaderEpoch (which consumers may use too, KIP-320).
    ApiSupport {
        key: ApiKey::LeaderAndIsr,
        code: super::leader_and_isr::API_KEY,
        min: super::leader_and_isr::VERSION,
        max: super::leader_and_isr::VERSION,
        flexible_from: 4,
    },
    ApiSupport {
        key: ApiKey::StopReplica,
        code: super::stop_replica::API_KEY,
        min: super::stop_replica::VERSION,
        max: super::stop_replica::VERSION,
        flexible_from: 2,
    },
    ApiSupport {
        key: ApiKey::UpdateMetadata,
        code: super::update_metadata::API_KEY,
        min: super::update_metadata::VERSION,
        max: super::update_metadata::VERSION,
        flexible_from: 6,
    },
    ApiSupport {
        key: ApiKey::ControlledShutdown,
        code: super::controlled_shutdown::API_KEY,
        min: super::controlled_shutdown::VERSION,
        max: super::controlled_shutdown::VERSION,
        flexible_from: 3,
    },
    ApiSupport {
        key: ApiKey::OffsetForLeaderEpoch,
        code: super::offset_for_leader_epoch::API_KEY,
        min: super::offset_for_leader_epoch::VERSION_MIN,
        max: super::offset_for_leader_epoch::VERSION_MAX,
        flexible_from: super::offset_for_leader_epoch::FLEXIBLE_FROM,
    },
    // Authentication on SASL listeners, and the SCRAM credentials behind it.
    ApiSupport {
        key: ApiKey::SaslHandshake,
        code: super::sasl::HANDSHAKE_KEY,
        min: super::sasl::HANDSHAKE_VERSION_MIN,
        max: super::sasl::HANDSHAKE_VERSION_MAX,
        flexible_from: super::sasl::HANDSHAKE_FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::SaslAuthenticate,
        code: super::sasl::AUTHENTICATE_KEY,
        min: 0,
        max: super::sasl::AUTHENTICATE_VERSION_MAX,
        flexible_from: super::sasl::AUTHENTICATE_FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::DescribeUserScramCredentials,
        code: super::scram_credentials::DESCRIBE_KEY,
        min: 0,
        max: super::scram_credentials::VERSION_MAX,
        flexible_from: super::scram_credentials::FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::AlterUserScramCredentials,
        code: super::scram_credentials::ALTER_KEY,
        min: 0,
        max: super::scram_credentials::VERSION_MAX,
        flexible_from: super::scram_credentials::FLEXIBLE_FROM,
    },
    // ACLs (KIP-140, KIP-290).
    ApiSupport {
        key: ApiKey::DescribeAcls,
        code: super::acls::DESCRIBE_KEY,
        min: super::acls::VERSION_MIN,
        max: super::acls::VERSION_MAX,
        flexible_from: super::acls::FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::CreateAcls,
        code: super::acls::CREATE_KEY,
        min: super::acls::VERSION_MIN,
        max: super::acls::VERSION_MAX,
        flexible_from: super::acls::FLEXIBLE_FROM,
    },
    ApiSupport {
        key: ApiKey::DeleteAcls,
        code: super::acls::DELETE_KEY,
        min: super::acls::VERSION_MIN,
        max: super::acls::VERSION_MAX,
        flexible_from: super::acls::FLEXIBLE_FROM,
    },
];

impl ApiKey {
    #[inline]
    pub fn from_code(code: i16) -> Option<ApiSupport> {
        SUPPORTED.iter().copied().find(|s| s.code == code)
    }

    #[inline]
    pub fn support(self) -> ApiSupport {
        let s = SUPPORTED.iter().copied().find(|s| s.key == self);
        assert!(s.is_some(), "every ApiKey is in SUPPORTED");
        s.unwrap_or(SUPPORTED[0])
    }

    #[inline]
    pub fn name(self) -> &'static str {
        match self {
            ApiKey::Produce => "Produce",
            ApiKey::Fetch => "Fetch",
            ApiKey::ListOffsets => "ListOffsets",
            ApiKey::Metadata => "Metadata",
            ApiKey::ApiVersions => "ApiVersions",
            ApiKey::CreateTopics => "CreateTopics",
            ApiKey::DeleteTopics => "DeleteTopics",
            ApiKey::DescribeConfigs => "DescribeConfigs",
            ApiKey::CreatePartitions => "CreatePartitions",
            ApiKey::AlterConfigs => "AlterConfigs",
            ApiKey::IncrementalAlterConfigs => "IncrementalAlterConfigs",
            ApiKey::DescribeCluster => "DescribeCluster",
            ApiKey::LeaderAndIsr => "LeaderAndIsr",
            ApiKey::StopReplica => "StopReplica",
            ApiKey::UpdateMetadata => "UpdateMetadata",
            ApiKey::ControlledShutdown => "ControlledShutdown",
            ApiKey::OffsetForLeaderEpoch => "OffsetForLeaderEpoch",
            ApiKey::ElectLeaders => "ElectLeaders",
            ApiKey::DeleteRecords => "DeleteRecords",
            ApiKey::InitProducerId => "InitProducerId",
            ApiKey::AddPartitionsToTxn => "AddPartitionsToTxn",
            ApiKey::AddOffsetsToTxn => "AddOffsetsToTxn",
            ApiKey::EndTxn => "EndTxn",
            ApiKey::WriteTxnMarkers => "WriteTxnMarkers",
            ApiKey::TxnOffsetCommit => "TxnOffsetCommit",
            ApiKey::DescribeTransactions => "DescribeTransactions",
            ApiKey::DescribeProducers => "DescribeProducers",
            ApiKey::ListTransactions => "ListTransactions",
            ApiKey::FindCoordinator => "FindCoordinator",
            ApiKey::JoinGroup => "JoinGroup",
            ApiKey::Heartbeat => "Heartbeat",
            ApiKey::LeaveGroup => "LeaveGroup",
            ApiKey::SyncGroup => "SyncGroup",
            ApiKey::OffsetCommit => "OffsetCommit",
            ApiKey::OffsetFetch => "OffsetFetch",
            ApiKey::OffsetDelete => "OffsetDelete",
            ApiKey::ListGroups => "ListGroups",
            ApiKey::DescribeGroups => "DescribeGroups",
            ApiKey::DeleteGroups => "DeleteGroups",
            ApiKey::SaslHandshake => "SaslHandshake",
            ApiKey::SaslAuthenticate => "SaslAuthenticate",
            ApiKey::DescribeUserScramCredentials => "DescribeUserScramCredentials",
            ApiKey::AlterUserScramCredentials => "AlterUserScramCredentials",
            ApiKey::DescribeAcls => "DescribeAcls",
            ApiKey::CreateAcls => "CreateAcls",
            ApiKey::DeleteAcls => "DeleteAcls",
        }
    }
}

impl ApiSupport {
    #[inline]
    pub fn accepts(&self, version: i16) -> bool {
        (self.min..=self.max).contains(&version)
    }

    #[inline]
    pub fn is_flexible(&self, version: i16) -> bool {
        version >= self.flexible_from
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        for s in SUPPORTED {
            assert!(s.min <= s.max, "{:?}", s.key);
            assert_eq!(ApiKey::from_code(s.code).map(|x| x.key), Some(s.key));
            assert_eq!(s.key.support().code, s.code);
        }
        assert!(ApiKey::from_code(9999).is_none());
    }
}
