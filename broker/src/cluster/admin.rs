//! Topic administration in a cluster: the change is written to ZooKeeper
//! (by the cluster thread), the controller carries it out, and the answer
//! waits — at most `ADMIN_WAIT_MAX` — until this broker's metadata shows it,
//! so that a client producing right after CreateTopics finds its leaders.

use std::rc::Rc;
use std::time::{Duration, Instant};

use ferrite_controller::{topic_config, ControllerError, TopicMeta};

use ferrite_controller::broker_config::BrokerEntity;
use ferrite_controller::embedded::ConfigOp;

use super::{BrokerConfigsRead, ClusterRequest, ClusterShared, TopicConfigs};
use crate::shard::{AdminError, AdminOp, BrokerShard, Kept};

/// The longest an admin request waits for its change to reach the metadata.
const ADMIN_WAIT_MAX: Duration = Duration::from_secs(10);
const ADMIN_POLL: Duration = Duration::from_millis(20);

fn gone() -> AdminError {
    AdminError::Controller(ControllerError::Unavailable {
        reason: "the cluster thread has stopped".into(),
    })
}

impl BrokerShard {
    /// Waits until `done` holds for this shard's metadata (or time runs out).
    async fn wait_for_metadata(&self, done: impl Fn(&ferrite_controller::ClusterMeta) -> bool) {
        let deadline = Instant::now() + ADMIN_WAIT_MAX;
        while !done(&self.meta()) && Instant::now() < deadline {
            glommio::timer::sleep(ADMIN_POLL).await;
        }
    }

    /// Asks each replica broker of `topic`'s partitions numbered `from` and
    /// up whether it created its logs (`created_check.rs`): the first
    /// broker that could not, if any.
    async fn not_created(
        cluster: &std::sync::Arc<ClusterShared>,
        topic: &TopicMeta,
        from: usize,
    ) -> Option<super::created_check::NotCreated> {
        let replicas = topic
            .partitions
            .iter()
            .filter(|p| p.partition as usize >= from)
            .map(|p| (p.partition, p.replicas.clone()))
            .collect();
        let t = topic.name.clone();
        cluster
            .ask(|reply| ClusterRequest::ReplicasCreated {
                topic: t,
                replicas,
                reply,
            })
            .await
            .flatten()
    }

    /// When a replica broker of the new `topic` could not create its logs,
    /// deletes the topic again and says which: nothing is left
    /// half-created.
    async fn undo_if_not_created(
        &self,
        cluster: &std::sync::Arc<ClusterShared>,
        topic: &TopicMeta,
    ) -> Result<(), AdminError> {
        let Some(failed) = Self::not_created(cluster, topic, 0).await else {
            return Ok(());
        };
        tracing::warn!(topic = %topic.name, broker = %failed.broker, tp = %failed.tp, count = failed.count,
            "partitions of a new topic could not all be created; deleting the topic");
        let name = topic.name.clone();
        cluster
            .ask(|reply| ClusterRequest::DeleteTopic { name, reply })
            .await
            .ok_or_else(gone)??;
        self.wait_for_metadata(|m| m.topic(&topic.name).is_none()).await;
        Err(AdminError::PartitionsNotCreated {
            topic: topic.name.clone(),
            count: failed.count,
            tp: failed.tp,
            reason: format!(
                "broker {} could not create its replica's log (KAFKA_STORAGE_ERROR)",
                failed.broker
            ),
        })
    }

    /// Grows topic `name` to `total` partitions and, unless only
    /// validating, waits until they have leaders and asks their replica
    /// brokers whether they created them. Partitions one could not create
    /// stay listed (a ZooKeeper cluster never shrinks a topic, as Kafka's
    /// does not); the answer says so.
    async fn grow_topic(
        &self,
        cluster: &std::sync::Arc<ClusterShared>,
        name: String,
        total: i32,
        assignment: Option<Vec<Vec<ferrite_controller::BrokerId>>>,
        validate_only: bool,
    ) -> Result<TopicMeta, AdminError> {
        let from = self.meta().topic(&name).map_or(0, |t| t.partitions.len());
        let n = name.clone();
        cluster
            .ask(|reply| ClusterRequest::CreatePartitions {
                name: n,
                total,
                assignment,
                validate_only,
                reply,
            })
            .await
            .ok_or_else(gone)??;
        if !validate_only {
            self.wait_for_metadata(|m| {
                m.topic(&name).is_some_and(|t| {
                    t.partitions.len() as i32 >= total
                        && t.partitions
                            .iter()
                            .filter(|p| p.partition as usize >= from)
                            .all(|p| p.leader.is_some())
                })
            })
            .await;
        }
        let meta = self.meta();
        let topic = meta
            .topic(&name)
            .cloned()
            .ok_or_else(|| AdminError::Controller(ControllerError::UnknownTopic { topic: name }))?;
        if validate_only {
            return Ok(topic);
        }
        let Some(failed) = Self::not_created(cluster, &topic, from).await else {
            return Ok(topic);
        };
        tracing::warn!(topic = %topic.name, broker = %failed.broker, tp = %failed.tp, count = failed.count,
            "partitions added to a topic could not all be created");
        Err(AdminError::PartitionsNotAdded {
            topic: topic.name,
            count: failed.count,
            kept: Kept::Listed,
            tp: failed.tp,
            reason: format!(
                "broker {} could not create its replica's log (KAFKA_STORAGE_ERROR)",
                failed.broker
            ),
        })
    }

    pub(crate) async fn cluster_admin(self: &Rc<Self>, op: AdminOp) -> Result<TopicMeta, AdminError> {
        let Some(cluster) = self.cluster().cloned() else {
            return Err(gone());
        };
        match op {
            AdminOp::CreateTopic {
                name,
                placement,
                configs,
                validate_only,
            } => {
                let n = name.clone();
                let topic = cluster
                    .ask(|reply| ClusterRequest::CreateTopic {
                        name: n,
                        placement,
                        configs,
                        validate_only,
                        reply,
                    })
                    .await
                    .ok_or_else(gone)??;
                if !validate_only {
                    let count = topic.partitions.len();
                    self.wait_for_metadata(|m| {
                        m.topic(&name).is_some_and(|t| {
                            t.partitions.len() == count && t.partitions.iter().all(|p| p.leader.is_some())
                        })
                    })
                    .await;
                    self.undo_if_not_created(&cluster, &topic).await?;
                }
                Ok(topic)
            }
            AdminOp::DeleteTopic { name } => {
                let before = self.meta().topic(&name).cloned();
                let n = name.clone();
                cluster
                    .ask(|reply| ClusterRequest::DeleteTopic { name: n, reply })
                    .await
                    .ok_or_else(gone)??;
                self.wait_for_metadata(|m| m.topic(&name).is_none()).await;
                Ok(before.unwrap_or(TopicMeta {
                    name,
                    id: [0; 16],
                    partitions: Vec::new(),
                    configs: Default::default(),
                }))
            }
            AdminOp::CreatePartitions {
                name,
                total,
                assignment,
                validate_only,
            } => self.grow_topic(&cluster, name, total, assignment, validate_only).await,
            AdminOp::AlterConfigs {
                name,
                ops,
                validate_only,
            } => {
                let n = name.clone();
                let mut configs = cluster
                    .ask(|reply| ClusterRequest::TopicConfig { name: n, reply })
                    .await
                    .ok_or_else(gone)??;
                topic_config::apply_ops(&mut configs, &ops)?;
                let mut topic = self
                    .meta()
                    .topic(&name)
                    .cloned()
                    .ok_or_else(|| AdminError::Controller(ControllerError::UnknownTopic { topic: name.clone() }))?;
                if !validate_only {
                    let c = configs.clone();
                    cluster
                        .ask(|reply| ClusterRequest::SetTopicConfig {
                            name: name.clone(),
                            configs: c,
                            reply,
                        })
                        .await
                        .ok_or_else(gone)??;
                    // In force here before the answer; the other brokers
                    // follow the change notification.
                    cluster.set_topic_configs(TopicConfigs::One(name, configs.clone()));
                    crate::shard::apply_topic_configs_everywhere(&self.handle).await?;
                }
                topic.configs = configs;
                Ok(topic)
            }
        }
    }

    /// Changes one entity's dynamic broker configs in ZooKeeper; in force
    /// on this broker before the answer, on the others once they read the
    /// change notification.
    pub(crate) async fn cluster_alter_broker_configs(
        self: &Rc<Self>,
        cluster: &ClusterShared,
        entity: BrokerEntity,
        ops: Vec<ConfigOp>,
        validate_only: bool,
    ) -> Result<(), AdminError> {
        let configs = cluster
            .ask(|reply| ClusterRequest::AlterBrokerConfigs {
                entity,
                ops,
                validate_only,
                reply,
            })
            .await
            .ok_or_else(gone)??;
        if !validate_only {
            cluster.set_broker_configs(BrokerConfigsRead::One(entity, configs));
            crate::shard::apply_topic_configs_everywhere(&self.handle).await?;
        }
        Ok(())
    }
}
