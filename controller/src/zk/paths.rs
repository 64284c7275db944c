//! The znode paths, Kafka's layout.

use ferrite_ids::TopicPartition;

use crate::metadata::BrokerId;

pub const BROKER_IDS: &str = "/brokers/ids";
pub const TOPICS: &str = "/brokers/topics";
pub const CONTROLLER: &str = "/controller";
pub const CONTROLLER_EPOCH: &str = "/controller_epoch";
pub const DELETE_TOPICS: &str = "/admin/delete_topics";
pub const REASSIGN: &str = "/admin/reassign_partitions";
pub const PREFERRED: &str = "/admin/preferred_replica_election";
pub const ISR_CHANGES: &str = "/isr_change_notification";
/// Prefix of the sequential notification znodes under [`ISR_CHANGES`].
pub const ISR_CHANGE_PREFIX: &str = "/isr_change_notification/isr_change_";
/// Ferrite: a leader whose log the scrubber found damaged asks the
/// controller to move leadership away (see `control::damage`).
pub const DAMAGE_NOTICES: &str = "/replica_damage_notification";
/// Prefix of the sequential notification znodes under [`DAMAGE_NOTICES`].
pub const DAMAGE_NOTICE_PREFIX: &str = "/replica_damage_notification/damage_";
pub const TOPIC_CONFIGS: &str = "/config/topics";
/// Dynamic broker configs: `<id>` for one broker, `<default>` for all.
pub const BROKER_CONFIGS: &str = "/config/brokers";
/// Config change notifications (see `config_changes`).
pub const CONFIG_CHANGES: &str = "/config/changes";
/// Prefix of the sequential notification znodes under [`CONFIG_CHANGES`].
pub const CONFIG_CHANGE_PREFIX: &str = "/config/changes/config_change_";
pub const CLUSTER_ID: &str = "/cluster/id";
/// The last block of producer ids handed out (see `producer_ids`).
pub const PRODUCER_ID_BLOCK: &str = "/latest_producer_id_block";

/// The persistent parents every broker makes sure exist.
pub const PERSISTENT: &[&str] = &[
    BROKER_IDS,
    TOPICS,
    DELETE_TOPICS,
    ISR_CHANGES,
    DAMAGE_NOTICES,
    TOPIC_CONFIGS,
    BROKER_CONFIGS,
    CONFIG_CHANGES,
    "/cluster",
];

pub fn broker(id: BrokerId) -> String {
    format!("{BROKER_IDS}/{}", id.0)
}

pub fn topic(name: &str) -> String {
    format!("{TOPICS}/{name}")
}

pub fn partitions(name: &str) -> String {
    format!("{TOPICS}/{name}/partitions")
}

pub fn partition(tp: &TopicPartition) -> String {
    format!("{TOPICS}/{}/partitions/{}", tp.topic, tp.partition)
}

pub fn state(tp: &TopicPartition) -> String {
    format!("{TOPICS}/{}/partitions/{}/state", tp.topic, tp.partition)
}

pub fn topic_config(name: &str) -> String {
    format!("{TOPIC_CONFIGS}/{name}")
}

pub fn broker_config(entity: &str) -> String {
    format!("{BROKER_CONFIGS}/{entity}")
}

pub fn deletion(name: &str) -> String {
    format!("{DELETE_TOPICS}/{name}")
}
