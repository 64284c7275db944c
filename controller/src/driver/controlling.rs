//! While this broker is controller: the state machine fed from watches,
//! the broker layer and the rebalance timer; its actions carried out against
//! ZooKeeper (epoch-guarded) and handed to the broker layer.

use std::collections::{BTreeMap, VecDeque};

use tokio::sync::{mpsc, oneshot};

use super::watches::{Fired, Watch, Watches};
use super::{DriverConfig, Incoming, NotController, Outgoing};
use crate::control::{Action, Controller, ElectionOrigin, ElectionResult, Event};
use crate::error::{ControllerError, Result};
use crate::metadata::BrokerId;
use crate::zk::{EpochGuard, ZkStore};
use ferrite_ids::TopicPartition;
use zookeeper_client::WatchedEvent;

/// Why controlling stopped.
pub(super) enum Ended {
    /// Another broker is controller now (or `/controller` went away).
    Deposed,
    SessionLost,
    /// The broker layer hung up.
    Shutdown,
}

type ShutdownReply = oneshot::Sender<Result<Vec<TopicPartition>, NotController>>;
type ElectionReply = oneshot::Sender<Result<Vec<(TopicPartition, ElectionResult)>, NotController>>;

struct Controlling<'a> {
    store: ZkStore,
    guard: EpochGuard,
    core: Controller,
    outgoing: &'a mpsc::Sender<Outgoing>,
    shutdown_replies: BTreeMap<BrokerId, Vec<ShutdownReply>>,
    election_replies: BTreeMap<u64, ElectionReply>,
    next_request: u64,
}

/// Runs the controller until it is deposed, the session ends or the broker
/// layer goes away. ZooKeeper errors end it too (the caller resigns and
/// stands again).
pub(super) async fn control(
    config: &DriverConfig,
    store: &ZkStore,
    guard: EpochGuard,
    cluster_id: &str,
    incoming: &mut mpsc::Receiver<Incoming>,
    outgoing: &mpsc::Sender<Outgoing>,
) -> Result<Ended> {
    let me = config.broker.id;
    let mut watches = Watches::new(store.clone(), me);
    let read_with_watches = match watches.set_all().await? {
        Fired::Events(events) => events,
        Fired::Deposed => return Ok(Ended::Deposed),
        Fired::SessionLost => return Ok(Ended::SessionLost),
    };
    let mut snapshot = store.snapshot(cluster_id).await?;
    // The dynamic broker configs are not in the snapshot's znodes: what
    // the watches read goes in, so that no election runs without it.
    for e in read_with_watches {
        if let Event::BrokerUncleanChanged { unclean } = e {
            snapshot.broker_unclean = unclean;
        }
    }
    let mut c = Controlling {
        store: store.clone(),
        guard,
        core: Controller::new(config.controller.clone()),
        outgoing,
        shutdown_replies: BTreeMap::new(),
        election_replies: BTreeMap::new(),
        next_request: 0,
    };
    if outgoing.send(Outgoing::BecameController(guard.epoch)).await.is_err() {
        return Ok(Ended::Shutdown);
    }
    c.run(Event::Elected {
        epoch: guard.epoch,
        snapshot,
    })
    .await?;
    let mut rebalance = tokio::time::interval(config.rebalance_interval);
    rebalance.tick().await;
    loop {
        // Only the waits race; what follows each runs to completion.
        let next = tokio::select! {
            (watch, event) = watches.fired() => Next::Watch(watch, event),
            msg = incoming.recv() => Next::Incoming(msg),
            _ = rebalance.tick() => Next::Rebalance,
        };
        match next {
            Next::Watch(watch, event) => match watches.handle(watch, event).await? {
                Fired::Events(events) => {
                    for e in events {
                        c.run(e).await?;
                    }
                }
                Fired::Deposed => return Ok(Ended::Deposed),
                Fired::SessionLost => return Ok(Ended::SessionLost),
            },
            Next::Incoming(Some(m)) => c.incoming(m).await?,
            Next::Incoming(None) => return Ok(Ended::Shutdown),
            Next::Rebalance => c.run(Event::RebalanceTick).await?,
        }
    }
}

enum Next {
    Watch(Watch, WatchedEvent),
    Incoming(Option<Incoming>),
    Rebalance,
}

impl Controlling<'_> {
    async fn incoming(&mut self, msg: Incoming) -> Result<()> {
        match msg {
            Incoming::StopReplicaDone { broker, partitions } => {
                self.run(Event::StopReplicaDone { broker, partitions }).await
            }
            Incoming::ControlledShutdown { broker, reply } => {
                self.shutdown_replies.entry(broker).or_default().push(reply);
                self.run(Event::ControlledShutdown { broker }).await
            }
            Incoming::ElectPreferred { partitions, reply } => {
                self.next_request += 1;
                let id = self.next_request;
                self.election_replies.insert(id, reply);
                let origin = ElectionOrigin::Request(id);
                self.run(Event::PreferredElection { partitions, origin }).await
            }
        }
    }

    /// Handles `event` and everything its actions cause, in order.
    async fn run(&mut self, event: Event) -> Result<()> {
        let mut queue = VecDeque::from([event]);
        while let Some(e) = queue.pop_front() {
            for action in self.core.handle(e) {
                if let Some(next) = self.carry_out(action).await? {
                    queue.push_back(next);
                }
            }
        }
        Ok(())
    }

    async fn carry_out(&mut self, action: Action) -> Result<Option<Event>> {
        match action {
            Action::WriteStates(writes) => {
                let results = self.store.write_states(self.guard, &writes).await?;
                return Ok(Some(Event::StatesWritten { results }));
            }
            Action::Zk(change) => self.store.apply(self.guard, &change).await?,
            Action::Send {
                to,
                controller_epoch,
                request,
            } => {
                let Some(meta) = self.core.live_brokers().find(|b| b.id == to).cloned() else {
                    return Ok(None);
                };
                let send = Outgoing::Send {
                    to: meta,
                    controller_epoch,
                    request,
                };
                if self.outgoing.send(send).await.is_err() {
                    return Err(ControllerError::NotController);
                }
            }
            Action::ShutdownReply { broker, still_leading } => {
                for reply in self.shutdown_replies.remove(&broker).unwrap_or_default() {
                    let _ = reply.send(Ok(still_leading.clone()));
                }
            }
            Action::ElectionReply { request, results } => {
                if let Some(reply) = self.election_replies.remove(&request) {
                    let _ = reply.send(Ok(results));
                }
            }
        }
        Ok(None)
    }
}
