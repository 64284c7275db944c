//! The cluster thread: a tokio runtime of its own, on which run the
//! controller driver (`ferrite_controller::driver::run_member`), the
//! courier delivering the controller's requests, and the loop serving the
//! shards' [`ClusterRequest`]s against the current ZooKeeper session.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ferrite_controller::assignment::{growth, place, Placement};
use ferrite_controller::control::{AutoRebalance, ControllerConfig};
use ferrite_controller::driver::{run_member, DriverConfig, Incoming, Outgoing, SessionHandle, CHANNEL_CAPACITY_MAX};
use ferrite_controller::election::UncleanElection;
use ferrite_controller::zk::admin::IsrWrite as ZkIsrWrite;
use ferrite_controller::{BrokerId, ControllerError, PartitionMeta, TopicMeta};
use ferrite_replication::{FoundState, IsrWriteOutcome};
use tokio::sync::{mpsc, watch};

use super::courier::Courier;
use super::{ClusterRequest, ClusterShared, REQUESTS_QUEUED_MAX};
use ferrite_config::BrokerConfig;

/// The running cluster thread.
pub struct ClusterThread {
    pub shared: Arc<ClusterShared>,
    thread: Option<std::thread::JoinHandle<()>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl ClusterThread {
    pub fn start(config: &BrokerConfig) -> std::io::Result<ClusterThread> {
        let local = ferrite_controller::BrokerMeta {
            id: BrokerId(config.broker_id),
            host: config.advertised_host.clone(),
            port: config.advertised_port,
            rack: None,
        };
        let (req_tx, req_rx) = mpsc::channel(REQUESTS_QUEUED_MAX);
        let shared = Arc::new(ClusterShared::new(config, local.clone(), req_tx));
        let c = &config.cluster;
        let driver = DriverConfig {
            broker: local,
            zk_connect: config.zookeeper_connect.clone().unwrap_or_default(),
            session_timeout: Duration::from_millis(c.zk_session_timeout_ms),
            controller: ControllerConfig {
                unclean_election: if c.unclean_leader_election {
                    UncleanElection::Enabled
                } else {
                    UncleanElection::Disabled
                },
                auto_rebalance: if c.auto_leader_rebalance {
                    AutoRebalance::Enabled
                } else {
                    AutoRebalance::Disabled
                },
                imbalance_per_broker_pct: c.leader_imbalance_per_broker_pct,
            },
            rebalance_interval: Duration::from_secs(c.leader_imbalance_check_interval_s.max(1)),
            fresh_cluster_id: ferrite_controller::embedded::new_cluster_id().unwrap_or_else(|_| "ferrite".into()),
        };
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("ferrite-cluster".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
                match rt {
                    Ok(rt) => rt.block_on(run(thread_shared, driver, req_rx, stop_rx)),
                    Err(e) => tracing::error!(error = %e, "the cluster thread could not start its runtime"),
                }
            })?;
        Ok(ClusterThread {
            shared,
            thread: Some(thread),
            stop: Some(stop_tx),
        })
    }

    /// Resigns from ZooKeeper (the broker's registration and, if held, the
    /// controller role go) and ends the thread.
    pub fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn run(
    shared: Arc<ClusterShared>,
    driver: DriverConfig,
    mut requests: mpsc::Receiver<ClusterRequest>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let (in_tx, in_rx) = mpsc::channel(CHANNEL_CAPACITY_MAX);
    let (out_tx, mut out_rx) = mpsc::channel(CHANNEL_CAPACITY_MAX);
    let member = tokio::spawn(run_member(driver, in_rx, out_tx));
    let (session_tx, session_rx) = watch::channel::<Option<SessionHandle>>(None);
    let configs = tokio::spawn(super::config_changes::follow(shared.clone(), session_rx.clone()));
    let courier = Courier::new(shared.clone(), in_tx.clone());
    let outgoing = {
        let shared = shared.clone();
        tokio::spawn(async move {
            while let Some(out) = out_rx.recv().await {
                match out {
                    Outgoing::Send {
                        to,
                        controller_epoch,
                        request,
                    } => courier.deliver(to, controller_epoch, request),
                    Outgoing::BecameController(epoch) => {
                        tracing::info!(%epoch, "became controller");
                        shared.set_controller(true);
                    }
                    Outgoing::Resigned => {
                        tracing::info!("no longer controller");
                        shared.set_controller(false);
                    }
                    Outgoing::Registered(session) => {
                        shared.set_cluster_id(&session.cluster_id);
                        shared.set_broker_epoch(session.broker_epoch.0);
                        let _ = session_tx.send(Some(session));
                    }
                }
            }
        })
    };
    loop {
        tokio::select! {
            _ = &mut stop => break,
            req = requests.recv() => {
                let Some(req) = req else { break };
                let session = session_rx.borrow().clone();
                let in_tx = in_tx.clone();
                let shared = shared.clone();
                tokio::spawn(async move { serve(&shared, session, in_tx, req).await });
            }
        }
    }
    // Dropping the driver's channels (the courier holds clones) makes it
    // resign and return.
    drop(in_tx);
    configs.abort();
    outgoing.abort();
    let _ = outgoing.await;
    let _ = tokio::time::timeout(Duration::from_secs(5), member).await;
    // With the last handle on the session gone the client closes it, so the
    // broker's registration goes now rather than at session expiry (a broker
    // restarted at once would otherwise wait for it); give the close a
    // moment to be sent before the runtime stops.
    drop(session_rx);
    tokio::time::sleep(SESSION_CLOSE_GRACE).await;
}

/// How long the cluster thread waits for its ZooKeeper session to close.
const SESSION_CLOSE_GRACE: Duration = Duration::from_millis(300);

fn no_session() -> ControllerError {
    ControllerError::Unavailable {
        reason: "no ZooKeeper session yet".into(),
    }
}

async fn serve(
    shared: &ClusterShared,
    session: Option<SessionHandle>,
    incoming: mpsc::Sender<Incoming>,
    req: ClusterRequest,
) {
    match req {
        ClusterRequest::WriteIsr {
            tp,
            state,
            expected,
            reply,
        } => {
            let Some(s) = session else {
                let _ = reply.send(Err("no ZooKeeper session".into()));
                return;
            };
            let outcome = match s.store.update_isr(&tp, &state, expected).await {
                Ok(ZkIsrWrite::Written(version)) => {
                    if let Err(e) = s.store.notify_isr_change(std::slice::from_ref(&tp)).await {
                        tracing::warn!(%tp, error = %e, "ISR change written but not announced");
                    }
                    Ok(IsrWriteOutcome::Written { version })
                }
                Ok(ZkIsrWrite::Stale(found)) => Ok(IsrWriteOutcome::Conflict {
                    found: found.map(|f| FoundState {
                        leader: f.value.leader,
                        leader_epoch: f.value.leader_epoch,
                        isr: f.value.isr,
                        version: f.version,
                    }),
                }),
                Err(e) => Err(e.to_string()),
            };
            let _ = reply.send(outcome);
        }
        ClusterRequest::ReportDamage { tp, reply } => {
            let r = match session {
                Some(s) => s
                    .store
                    .notify_damage(shared.local.id, std::slice::from_ref(&tp))
                    .await
                    .map_err(|e| e.to_string()),
                None => Err("no ZooKeeper session".into()),
            };
            let _ = reply.send(r);
        }
        ClusterRequest::CreateTopic {
            name,
            placement,
            configs,
            validate_only,
            reply,
        } => {
            let r = match session {
                Some(s) => create_topic(&s, &name, &placement, configs, validate_only).await,
                None => Err(no_session()),
            };
            let _ = reply.send(r);
        }
        ClusterRequest::DeleteTopic { name, reply } => {
            let r = match session {
                Some(s) => match s.store.topic(&name).await {
                    Ok(Some(_)) => s.store.request_deletion(&name).await,
                    Ok(None) => Err(ControllerError::UnknownTopic { topic: name }),
                    Err(e) => Err(e),
                },
                None => Err(no_session()),
            };
            let _ = reply.send(r);
        }
        ClusterRequest::CreatePartitions {
            name,
            total,
            assignment,
            validate_only,
            reply,
        } => {
            let r = match session {
                Some(s) => create_partitions(&s, &name, total, assignment, validate_only).await,
                None => Err(no_session()),
            };
            let _ = reply.send(r);
        }
        ClusterRequest::SetTopicConfig { name, configs, reply } => {
            let r = match session {
                Some(s) => s.store.set_topic_config_and_announce(&name, &configs).await,
                None => Err(no_session()),
            };
            let _ = reply.send(r);
        }
        ClusterRequest::AlterBrokerConfigs {
            entity,
            ops,
            validate_only,
            reply,
        } => {
            let r = match session {
                Some(s) => s.store.alter_broker_config(entity, &ops, validate_only).await,
                None => Err(no_session()),
            };
            let _ = reply.send(r);
        }
        ClusterRequest::ReplicasCreated { topic, replicas, reply } => {
            // Its own task: the check polls the brokers, and this loop
            // carries everything else the cluster asks.
            let endpoints = shared.endpoints();
            let deadline = std::time::Instant::now() + super::created_check::CHECK_MAX;
            tokio::spawn(async move {
                let _ = reply.send(super::created_check::check(topic, replicas, endpoints, deadline).await);
            });
        }
        ClusterRequest::TopicConfig { name, reply } => {
            let r = match session {
                Some(s) => s.store.topic_config(&name).await,
                None => Err(no_session()),
            };
            let _ = reply.send(r);
        }
        ClusterRequest::ElectPreferred { partitions, reply } => {
            let r = match session {
                Some(s) => {
                    let all = match partitions {
                        Some(p) => Ok(p),
                        None => all_partitions(&s).await,
                    };
                    match all {
                        Ok(p) => s.store.request_preferred_election(&p).await.map(|_| ()),
                        Err(e) => Err(e),
                    }
                }
                None => Err(no_session()),
            };
            let _ = reply.send(r);
        }
        ClusterRequest::ShutdownOf { broker, reply } => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let asked = incoming
                .send(Incoming::ControlledShutdown { broker, reply: tx })
                .await
                .is_ok();
            let answer = match (asked, rx.await) {
                (true, Ok(Ok(left))) => Ok(left),
                _ => Err(()),
            };
            let _ = reply.send(answer);
        }
        ClusterRequest::ControlledShutdown { reply } => {
            let r = super::courier::controlled_shutdown(shared, &incoming).await;
            let _ = reply.send(r);
        }
        ClusterRequest::AllocateProducerIds { reply } => {
            let r = match session {
                Some(s) => s.store.allocate_producer_ids(shared.local.id).await,
                None => Err(no_session()),
            };
            let _ = reply.send(r);
        }
    }
}

async fn all_partitions(s: &SessionHandle) -> Result<Vec<ferrite_engine::TopicPartition>, ControllerError> {
    let mut out = Vec::new();
    for name in s.store.topic_names().await? {
        if let Some((t, _)) = s.store.topic(&name).await? {
            for p in 0..t.replicas.len() {
                out.push(ferrite_engine::TopicPartition::new(name.clone(), p as i32));
            }
        }
    }
    Ok(out)
}

fn random_start_shift(n: usize) -> (usize, usize) {
    let b = ferrite_controller::embedded::random_bytes().unwrap_or([0; 16]);
    let n = n.max(1);
    (b[0] as usize % n, b[1] as usize % n)
}

async fn live_ids(s: &SessionHandle) -> Result<Vec<BrokerId>, ControllerError> {
    Ok(s.store.live_brokers().await?.into_iter().map(|b| b.meta.id).collect())
}

async fn create_topic(
    s: &SessionHandle,
    name: &str,
    placement: &Placement,
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<TopicMeta, ControllerError> {
    ferrite_controller::topic::validate_name(name)?;
    for (k, v) in &configs {
        ferrite_controller::topic_config::validate(k, v)?;
    }
    let live = live_ids(s).await?;
    let (start, shift) = random_start_shift(live.len());
    let replicas = place(name, placement, &live, 0, None, (start, shift))?;
    let id = ferrite_controller::embedded::random_bytes()?;
    if !validate_only {
        s.store.create_topic(name, &id, &replicas, &configs).await?;
        // Every broker reads the new topic's configs (none: an empty set).
        s.store.announce_config_change(&format!("topics/{name}")).await?;
    }
    Ok(TopicMeta {
        name: name.to_string(),
        id,
        partitions: replicas
            .into_iter()
            .enumerate()
            .map(|(p, r)| PartitionMeta {
                partition: p as i32,
                leader: r.first().copied(),
                isr: r.clone(),
                replicas: r,
                leader_epoch: 0,
            })
            .collect(),
        configs,
    })
}

async fn create_partitions(
    s: &SessionHandle,
    name: &str,
    total: i32,
    manual: Option<Vec<Vec<BrokerId>>>,
    validate_only: bool,
) -> Result<(), ControllerError> {
    let Some((topic, version)) = s.store.topic(name).await? else {
        return Err(ControllerError::UnknownTopic { topic: name.into() });
    };
    let have = topic.replicas.len() as i32;
    let rf = topic.replicas.first().map_or(1, |r| r.len());
    let placement = growth(name, have, total, rf, manual)?;
    let live = live_ids(s).await?;
    let added = place(name, &placement, &live, have, Some(rf), random_start_shift(live.len()))?;
    if validate_only {
        return Ok(());
    }
    let mut replicas = topic.replicas;
    replicas.extend(added);
    s.store.add_partitions(name, &topic.id, &replicas, version).await
}
