//! A broker's membership: one ZooKeeper session after another (a new one
//! when the old expires), the broker registered in each, standing for
//! controller whenever `/controller` is free and controlling while it holds
//! it.

use std::time::Duration;

use tokio::sync::mpsc;
use zookeeper_client::EventType;

use super::controlling::{control, Ended};
use super::{DriverConfig, Incoming, NotController, Outgoing};
use crate::control::BrokerEpoch;
use crate::error::Result;
use crate::zk::{paths, ZkStore};

/// Pause before retrying after a ZooKeeper error.
const RETRY_BACKOFF: Duration = Duration::from_millis(500);

/// The current session, for the broker layer's own ZooKeeper work (admin
/// requests, ISR changes). Replaced by a new [`Outgoing::Registered`] after
/// a session expires.
#[derive(Clone)]
pub struct SessionHandle {
    pub store: ZkStore,
    pub cluster_id: String,
    pub broker_epoch: BrokerEpoch,
}

impl std::fmt::Debug for SessionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionHandle")
            .field("cluster_id", &self.cluster_id)
            .field("broker_epoch", &self.broker_epoch)
            .finish()
    }
}

enum SessionEnd {
    Lost,
    Shutdown,
}

/// Runs until the broker layer drops its end of `outgoing` or `incoming`.
pub async fn run_member(
    config: DriverConfig,
    mut incoming: mpsc::Receiver<Incoming>,
    outgoing: mpsc::Sender<Outgoing>,
) {
    loop {
        let session = match open_session(&config).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "ZooKeeper session could not be opened; retrying");
                tokio::time::sleep(RETRY_BACKOFF).await;
                continue;
            }
        };
        if outgoing.send(Outgoing::Registered(session.clone())).await.is_err() {
            return;
        }
        match stand(&config, &session, &mut incoming, &outgoing).await {
            SessionEnd::Shutdown => {
                let _ = session.store.resign(config.broker.id).await;
                return;
            }
            SessionEnd::Lost => {
                tracing::warn!(broker = config.broker.id.0, "ZooKeeper session lost; opening a new one")
            }
        }
    }
}

async fn open_session(config: &DriverConfig) -> Result<SessionHandle> {
    let store = ZkStore::connect(&config.zk_connect, config.session_timeout).await?;
    store.ensure_paths().await?;
    let cluster_id = store.cluster_id(config.fresh_cluster_id.clone()).await?;
    // A registration left by this broker's previous session lasts until that
    // session expires.
    let broker_epoch = store
        .register_broker(&config.broker, config.session_timeout * 2)
        .await?;
    tracing::info!(
        broker = config.broker.id.0,
        epoch = broker_epoch.0,
        "registered in ZooKeeper"
    );
    Ok(SessionHandle {
        store,
        cluster_id,
        broker_epoch,
    })
}

fn session_over(store: &ZkStore) -> bool {
    store.client().state().is_terminated()
}

/// Stands for controller for as long as the session lasts.
async fn stand(
    config: &DriverConfig,
    session: &SessionHandle,
    incoming: &mut mpsc::Receiver<Incoming>,
    outgoing: &mpsc::Sender<Outgoing>,
) -> SessionEnd {
    let store = &session.store;
    let me = config.broker.id;
    loop {
        if session_over(store) {
            return SessionEnd::Lost;
        }
        let elected = match store.try_elect(me).await {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, "controller election failed; retrying");
                tokio::time::sleep(RETRY_BACKOFF).await;
                continue;
            }
        };
        let Some(guard) = elected else {
            match follow(store, incoming).await {
                Ok(Some(end)) => return end,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "watching the controller failed; retrying");
                    tokio::time::sleep(RETRY_BACKOFF).await;
                    continue;
                }
            }
        };
        let ended = control(config, store, guard, &session.cluster_id, incoming, outgoing).await;
        let _ = outgoing.send(Outgoing::Resigned).await;
        match ended {
            Ok(Ended::Deposed) => tracing::info!(broker = me.0, epoch = %guard.epoch, "no longer controller"),
            Ok(Ended::SessionLost) => return SessionEnd::Lost,
            Ok(Ended::Shutdown) => return SessionEnd::Shutdown,
            Err(e) => {
                tracing::warn!(error = %e, broker = me.0, "controller stopped on an error; resigning");
                let _ = store.resign(me).await;
                tokio::time::sleep(RETRY_BACKOFF).await;
            }
        }
    }
}

/// Waits, as a non-controller, until `/controller` changes, answering
/// controller-only requests with [`NotController`]. `Some`: the session or
/// the broker layer ended.
async fn follow(store: &ZkStore, incoming: &mut mpsc::Receiver<Incoming>) -> Result<Option<SessionEnd>> {
    let (data, watcher) = store.watch_data(paths::CONTROLLER).await?;
    if data.is_none() {
        return Ok(None);
    }
    let fired = watcher.changed();
    tokio::pin!(fired);
    loop {
        tokio::select! {
            event = &mut fired => {
                if event.event_type == EventType::Session && event.session_state.is_terminated() {
                    return Ok(Some(SessionEnd::Lost));
                }
                return Ok(None);
            }
            msg = incoming.recv() => match msg {
                Some(m) => refuse(m),
                None => return Ok(Some(SessionEnd::Shutdown)),
            }
        }
    }
}

fn refuse(msg: Incoming) {
    match msg {
        Incoming::StopReplicaDone { .. } => {}
        Incoming::ControlledShutdown { reply, .. } => {
            let _ = reply.send(Err(NotController));
        }
        Incoming::ElectPreferred { reply, .. } => {
            let _ = reply.send(Err(NotController));
        }
    }
}
