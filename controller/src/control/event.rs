//! What goes into the controller state machine ([`Event`]) and what comes
//! out of it ([`Action`]). The driver — the ZooKeeper watcher and the
//! inter-broker RPC sender — turns ZooKeeper notifications, RPC responses and
//! timers into events, and carries out the actions in the order given.

use std::collections::BTreeMap;

use ferrite_ids::{LeaderEpoch, TopicPartition};

use crate::election::UncleanElection;
use crate::metadata::{BrokerId, BrokerMeta};
use crate::partition_state::{ControllerEpoch, PartitionState, Versioned, ZkVersion};

pub use ferrite_ids::BrokerEpoch;

/// A registered broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveBroker {
    pub meta: BrokerMeta,
    pub epoch: BrokerEpoch,
}

/// A topic as `/brokers/topics/<topic>` and `/config/topics/<topic>` hold it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicAssignment {
    pub name: String,
    pub id: [u8; 16],
    /// `replicas[p]`: partition `p`'s replicas, preferred leader first.
    pub replicas: Vec<Vec<BrokerId>>,
    /// Topic config overrides (Kafka names).
    pub configs: BTreeMap<String, String>,
}

/// Everything a new controller reads from ZooKeeper before it acts.
#[derive(Clone, Debug, Default)]
pub struct ClusterSnapshot {
    pub cluster_id: String,
    pub brokers: Vec<LiveBroker>,
    pub topics: Vec<TopicAssignment>,
    /// The partition state znodes that exist.
    pub states: Vec<(TopicPartition, Versioned<PartitionState>)>,
    /// Children of `/admin/delete_topics`.
    pub deletions: Vec<String>,
    /// `/admin/reassign_partitions`: partition → target replicas.
    pub reassignments: Vec<(TopicPartition, Vec<BrokerId>)>,
    /// `/admin/preferred_replica_election`, when present.
    pub preferred_election: Option<Vec<TopicPartition>>,
    /// The controller broker's dynamic `unclean.leader.election.enable`
    /// (see [`Event::BrokerUncleanChanged`]): in force before the new
    /// controller elects anything.
    pub broker_unclean: Option<UncleanElection>,
}

/// Who asked for a preferred replica election.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ElectionOrigin {
    /// The `/admin/preferred_replica_election` znode; removed when done.
    AdminZnode,
    /// An ElectLeaders request, answered by [`Action::ElectionReply`].
    Request(u64),
}

#[derive(Clone, Debug)]
pub enum Event {
    /// This broker won the controller election with `epoch`.
    Elected {
        epoch: ControllerEpoch,
        snapshot: ClusterSnapshot,
    },
    /// The children of `/brokers/ids` changed; `live` is the new full set.
    BrokersChanged { live: Vec<LiveBroker> },
    /// New topics, or topics with more partitions than before.
    TopicsChanged { topics: Vec<TopicAssignment> },
    /// `/config/topics/<topic>` changed.
    TopicConfigChanged {
        topic: String,
        configs: BTreeMap<String, String>,
    },
    /// The controller broker's dynamic `unclean.leader.election.enable`
    /// (its own `/config/brokers/<id>`, else `<default>`) changed; `None`:
    /// neither sets it, the start-up value holds.
    BrokerUncleanChanged { unclean: Option<UncleanElection> },
    /// Children of `/admin/delete_topics`.
    DeletionsRequested { topics: Vec<String> },
    /// A broker answered a deleting StopReplica for these partitions.
    StopReplicaDone {
        broker: BrokerId,
        partitions: Vec<TopicPartition>,
    },
    /// Leaders changed these ISRs (announced under `/isr_change_notification`).
    IsrChanged {
        states: Vec<(TopicPartition, Versioned<PartitionState>)>,
    },
    /// Brokers found these replicas' logs damaged (announced under
    /// `/replica_damage_notification`): leaders among them hand over.
    ReplicasDamaged { replicas: Vec<(BrokerId, TopicPartition)> },
    /// The outcome of an [`Action::WriteStates`].
    StatesWritten {
        results: Vec<(TopicPartition, WriteOutcome)>,
    },
    /// Elect preferred replicas (`None`: every partition).
    PreferredElection {
        partitions: Option<Vec<TopicPartition>>,
        origin: ElectionOrigin,
    },
    /// A broker asks to have its leaderships moved before it stops.
    ControlledShutdown { broker: BrokerId },
    /// `/admin/reassign_partitions`: partition → target replicas.
    ReassignmentRequested {
        moves: Vec<(TopicPartition, Vec<BrokerId>)>,
    },
    /// `leader.imbalance.check.interval.seconds` elapsed.
    RebalanceTick,
}

/// How one conditional partition state write went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    Written(ZkVersion),
    /// The znode was not at the expected version (or already existed); the
    /// state found there instead (`None`: there is none).
    Conflict(Option<Versioned<PartitionState>>),
}

/// One conditional write of a partition state znode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateWrite {
    pub partition: TopicPartition,
    pub state: PartitionState,
    /// `None`: create the znode, which must not exist.
    pub expected: Option<ZkVersion>,
}

/// ZooKeeper changes whose outcome the state machine does not wait for. The
/// driver makes each one a multi-op that checks `/controller_epoch`'s
/// version, like every controller write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZkChange {
    /// Rewrite `/brokers/topics/<topic>`.
    SetAssignment {
        topic: String,
        id: [u8; 16],
        replicas: Vec<Vec<BrokerId>>,
    },
    /// Remove `/brokers/topics/<topic>` with its partitions,
    /// `/config/topics/<topic>` and `/admin/delete_topics/<topic>`.
    DeleteTopic { topic: String },
    /// Remove `/admin/delete_topics/<topic>` for a topic that does not exist.
    DropDeletionRequest { topic: String },
    /// Rewrite `/admin/reassign_partitions` with the moves left (remove it
    /// when there are none).
    ReassignmentsLeft {
        moves: Vec<(TopicPartition, Vec<BrokerId>)>,
    },
    /// Remove `/admin/preferred_replica_election`.
    PreferredElectionDone,
}

/// A partition's state as LeaderAndIsr and UpdateMetadata carry it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionInfo {
    pub partition: TopicPartition,
    pub topic_id: [u8; 16],
    pub leader: Option<BrokerId>,
    pub leader_epoch: LeaderEpoch,
    pub isr: Vec<BrokerId>,
    pub replicas: Vec<BrokerId>,
    /// The state znode's version, which a leader's ISR writes are conditional on.
    pub zk_version: ZkVersion,
}

/// Whether a StopReplica also deletes the partition's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DeleteData {
    Keep,
    Delete,
}

/// Controller → broker requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControllerRequest {
    /// Become leader or follower of these partitions.
    LeaderAndIsr {
        partitions: Vec<PartitionInfo>,
        /// Endpoints of the partitions' leaders.
        leaders: Vec<BrokerMeta>,
    },
    /// Update the metadata cache: the live brokers (always all of them),
    /// these partitions, and these topics gone.
    UpdateMetadata {
        brokers: Vec<BrokerMeta>,
        partitions: Vec<PartitionInfo>,
        deleted_topics: Vec<String>,
    },
    /// Stop replicating these partitions.
    StopReplica {
        partitions: Vec<TopicPartition>,
        delete: DeleteData,
    },
}

/// The outcome of a preferred election for one partition, as ElectLeaders
/// reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElectionResult {
    Elected,
    NotNeeded,
    NotAvailable,
    UnknownPartition,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Conditional partition state writes; answer with
    /// [`Event::StatesWritten`].
    WriteStates(Vec<StateWrite>),
    Zk(ZkChange),
    Send {
        to: BrokerId,
        controller_epoch: ControllerEpoch,
        request: ControllerRequest,
    },
    /// Answer a controlled shutdown: the partitions it still leads (empty:
    /// it may stop).
    ShutdownReply {
        broker: BrokerId,
        still_leading: Vec<TopicPartition>,
    },
    ElectionReply {
        request: u64,
        results: Vec<(TopicPartition, ElectionResult)>,
    },
}
