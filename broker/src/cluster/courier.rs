//! Delivers the controller's requests (LeaderAndIsr, UpdateMetadata,
//! StopReplica) to the brokers, in order per broker, over the Kafka framing
//! — to this broker too, through its own listener, like to any other — and
//! reports what the controller waits for (a deleting StopReplica done).
//! Also sends this broker's ControlledShutdown to the controller.
//!
//! Runs on the cluster thread's tokio runtime. A broker that cannot be
//! reached is retried with a backoff for as long as requests wait for it;
//! the controller stops sending to a broker once it is gone.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrite_controller::control::{BrokerEpoch, ControllerRequest, DeleteData};
use ferrite_controller::driver::Incoming;
use ferrite_controller::partition_state::ControllerEpoch;
use ferrite_controller::{BrokerId, BrokerMeta};
use ferrite_engine::TopicPartition;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::ClusterShared;
use crate::cluster::controller_wire;
use ferrite_client::codec::invalid_data;
use ferrite_protocol::controlled_shutdown::{self, ControlledShutdownRequest, ControlledShutdownResponse};
use ferrite_protocol::controller_rpc::{ControlHeader, ControllerRpc};
use ferrite_protocol::leader_and_isr::LeaderAndIsrResponse;
use ferrite_protocol::stop_replica::StopReplicaResponse;
use ferrite_protocol::update_metadata::UpdateMetadataResponse;
use ferrite_protocol::wire::{Reader, Writer};

/// Names the controller's connections in the receivers' logs.
const CLIENT_ID: &str = "ferrite-controller";

/// Requests waiting for one broker.
const QUEUED_PER_BROKER_MAX: usize = 4096;
const RETRY_BACKOFF: Duration = Duration::from_millis(300);
/// Largest response frame accepted from a broker.
const RESPONSE_BYTES_MAX: usize = 16 << 20;

struct Item {
    controller_epoch: ControllerEpoch,
    request: ControllerRequest,
}

pub struct Courier {
    shared: Arc<ClusterShared>,
    incoming: mpsc::Sender<Incoming>,
    queues: Mutex<BTreeMap<BrokerId, mpsc::Sender<Item>>>,
}

impl Courier {
    pub fn new(shared: Arc<ClusterShared>, incoming: mpsc::Sender<Incoming>) -> Courier {
        Courier {
            shared,
            incoming,
            queues: Mutex::new(BTreeMap::new()),
        }
    }

    /// Queues `request` for `to` (called on the cluster thread's runtime).
    pub fn deliver(&self, to: BrokerMeta, controller_epoch: ControllerEpoch, request: ControllerRequest) {
        let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        let queue = queues.entry(to.id).or_insert_with(|| {
            let (tx, rx) = mpsc::channel(QUEUED_PER_BROKER_MAX);
            tokio::spawn(deliver_loop(self.shared.clone(), self.incoming.clone(), to.clone(), rx));
            tx
        });
        if let Err(e) = queue.try_send(Item {
            controller_epoch,
            request,
        }) {
            tracing::warn!(broker = %to.id, error = %e, "controller request dropped: queue full");
        }
    }
}

struct Conn {
    stream: TcpStream,
    correlation: i32,
}

async fn connect(to: &BrokerMeta) -> std::io::Result<Conn> {
    let stream = TcpStream::connect((to.host.as_str(), to.port)).await?;
    stream.set_nodelay(true)?;
    Ok(Conn { stream, correlation: 0 })
}

impl Conn {
    /// Sends one request and reads its response (header v1).
    async fn call(&mut self, api_key: i16, version: i16, body: &[u8]) -> std::io::Result<Reader> {
        self.correlation = self.correlation.wrapping_add(1);
        let frame = ferrite_client::codec::frame_v2(api_key, version, self.correlation, CLIENT_ID, body);
        self.stream.write_all(&frame).await?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).await?;
        let mut body = vec![0u8; ferrite_client::codec::response_len(size, RESPONSE_BYTES_MAX)?];
        self.stream.read_exact(&mut body).await?;
        ferrite_client::codec::response_body(body, self.correlation, true)
    }
}

async fn deliver_loop(
    shared: Arc<ClusterShared>,
    incoming: mpsc::Sender<Incoming>,
    to: BrokerMeta,
    mut rx: mpsc::Receiver<Item>,
) {
    let mut conn: Option<Conn> = None;
    while let Some(item) = rx.recv().await {
        loop {
            if conn.is_none() {
                match connect(&to).await {
                    Ok(c) => conn = Some(c),
                    Err(e) => {
                        tracing::debug!(broker = %to.id, error = %e, "controller cannot reach broker; retrying");
                        tokio::time::sleep(RETRY_BACKOFF).await;
                        continue;
                    }
                }
            }
            let Some(c) = conn.as_mut() else { continue };
            match send(&shared, c, &item).await {
                Ok(error) => {
                    if error != 0 {
                        tracing::warn!(broker = %to.id, error, request = ?kind(&item.request), "controller request refused");
                    }
                    if let ControllerRequest::StopReplica {
                        partitions,
                        delete: DeleteData::Delete,
                    } = &item.request
                    {
                        let done = Incoming::StopReplicaDone {
                            broker: to.id,
                            partitions: partitions.clone(),
                        };
                        let _ = incoming.send(done).await;
                    }
                    break;
                }
                Err(e) => {
                    tracing::debug!(broker = %to.id, error = %e, "controller request failed; retrying");
                    conn = None;
                    tokio::time::sleep(RETRY_BACKOFF).await;
                }
            }
        }
    }
}

fn kind(r: &ControllerRequest) -> &'static str {
    match r {
        ControllerRequest::LeaderAndIsr { .. } => "LeaderAndIsr",
        ControllerRequest::UpdateMetadata { .. } => "UpdateMetadata",
        ControllerRequest::StopReplica { .. } => "StopReplica",
    }
}

/// Sends one request; returns the response's top-level error code.
async fn send(shared: &ClusterShared, c: &mut Conn, item: &Item) -> std::io::Result<i16> {
    let header = ControlHeader {
        controller_id: shared.local.id,
        controller_epoch: item.controller_epoch,
        // The controller does not track the receivers' registrations.
        broker_epoch: BrokerEpoch(-1),
    };
    let rpc = controller_wire::to_wire(&item.request, header);
    let mut body = Writer::new();
    rpc.encode(&mut body);
    let mut r = c.call(rpc.api_key(), rpc.version(), body.as_slice()).await?;
    let error = match rpc {
        ControllerRpc::LeaderAndIsr(_) => {
            let resp = LeaderAndIsrResponse::decode(&mut r).map_err(invalid_data)?;
            let refused = resp
                .topics
                .iter()
                .flat_map(|t| &t.partition_errors)
                .filter(|p| p.error_code != 0)
                .count();
            if refused > 0 {
                tracing::info!(refused, "LeaderAndIsr partitions not applied");
            }
            resp.error_code
        }
        ControllerRpc::UpdateMetadata(_) => UpdateMetadataResponse::decode(&mut r).map_err(invalid_data)?.error_code,
        ControllerRpc::StopReplica(_) => StopReplicaResponse::decode(&mut r).map_err(invalid_data)?.error_code,
    };
    Ok(error)
}

/// Asks the controller to move this broker's leaderships away; returns the
/// partitions it still leads (empty: it may stop).
pub async fn controlled_shutdown(
    shared: &ClusterShared,
    incoming: &mpsc::Sender<Incoming>,
) -> Result<Vec<TopicPartition>, String> {
    if shared.is_controller() {
        let (reply, rx) = tokio::sync::oneshot::channel();
        let req = Incoming::ControlledShutdown {
            broker: shared.local.id,
            reply,
        };
        incoming
            .send(req)
            .await
            .map_err(|_| "the controller driver is gone".to_string())?;
        return match rx.await {
            Ok(Ok(left)) => Ok(left),
            Ok(Err(_)) => Err("this broker stopped being controller".into()),
            Err(_) => Err("the controller driver is gone".into()),
        };
    }
    let controller = shared.current_controller().ok_or("no controller known")?;
    let to = shared
        .endpoint(controller)
        .ok_or("the controller's address is unknown")?;
    let mut c = connect(&to).await.map_err(|e| e.to_string())?;
    let req = ControlledShutdownRequest {
        broker_id: shared.local.id,
        broker_epoch: BrokerEpoch(shared.broker_epoch()),
    };
    let mut body = Writer::new();
    req.encode(&mut body);
    let mut r = c
        .call(
            controlled_shutdown::API_KEY,
            controlled_shutdown::VERSION,
            body.as_slice(),
        )
        .await
        .map_err(|e| e.to_string())?;
    let resp = ControlledShutdownResponse::decode(&mut r).map_err(|e| e.to_string())?;
    if resp.error_code != 0 {
        return Err(format!("the controller answered error {}", resp.error_code));
    }
    Ok(controller_wire::still_leading(&resp))
}
