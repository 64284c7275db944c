//! Listeners and connections; the byte paths below them (frames,
//! response order, gathered sends, file regions, connection spread) are
//! `ferrite-transport`'s.

pub mod connection;
pub mod sasl_gate;
pub mod tls_setup;

use std::rc::Rc;
use std::sync::Arc;

use glommio::net::{TcpListener, TcpStream};

use crate::handlers::ListenerIndex;
use crate::shard::BrokerShard;
use ferrite_transport::spread::{ConnectionSpread, Placed};
use ferrite_transport::tls;

/// What a listener's connections are served with: which listener it is
/// (whose addresses Metadata answers with), and its TLS, if SSL.
#[derive(Clone)]
pub struct Ear {
    pub index: ListenerIndex,
    pub tls: Option<tls::Acceptor>,
    /// The SASL settings, on a SASL listener.
    pub sasl: Option<std::sync::Arc<ferrite_config::sasl::SaslSettings>>,
}

/// Accepts connections on this shard until the broker stops. Every shard
/// binds the same address with SO_REUSEPORT; each accepted connection is
/// served by the shard `spread` places it on (see [`ferrite_transport::spread`]).
pub async fn accept_loop(shard: Rc<BrokerShard>, listener: TcpListener, spread: Arc<ConnectionSpread>, ear: Ear) {
    loop {
        let seen = shard.stop_signal.generation();
        if shard.stopping.get() {
            return;
        }
        let accepted = futures_lite::future::or(async { Some(listener.accept().await) }, async {
            shard.stop_signal.changed_since(seen).await;
            None
        })
        .await;
        match accepted {
            None => return,
            Some(Ok(stream)) => {
                let placed = spread.place(shard.id);
                if placed.shard() == shard.id {
                    serve_here(shard.clone(), stream, placed, ear.clone());
                } else {
                    hand_over(&shard, stream, placed, ear.clone());
                }
            }
            Some(Err(e)) => {
                tracing::warn!(error = %e, "accept failed");
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}

/// Serves `stream` on this shard; `placed` counts it until it closes.
fn serve_here(shard: Rc<BrokerShard>, stream: TcpStream, placed: Placed, ear: Ear) {
    glommio::spawn_local(async move {
        shard.connection_opened();
        connection::serve(shard.clone(), stream, ear).await;
        shard.connection_closed();
        drop(placed);
    })
    .detach();
}

/// Sends `stream` to the shard `placed` names. The socket crosses as a
/// duplicate of its descriptor (a glommio stream is bound to its shard's
/// reactor); the original closes here. A hand-over that cannot be made is
/// served here instead; one dropped on its way (the target shard stopped)
/// closes the socket.
fn hand_over(shard: &Rc<BrokerShard>, stream: TcpStream, placed: Placed, ear: Ear) {
    let socket = match socket2::SockRef::from(&stream).try_clone() {
        Ok(socket) => socket,
        Err(e) => {
            tracing::warn!(error = %e, "duplicating an accepted socket; serving it where it was accepted");
            serve_here(shard.clone(), stream, placed.moved_to(shard.id), ear);
            return;
        }
    };
    drop(stream);
    let target = placed.shard();
    let handle = shard.handle.clone();
    glommio::spawn_local(async move {
        let sent = handle
            .submit(target, move |s: Rc<BrokerShard>| async move {
                serve_here(s, TcpStream::from(socket), placed, ear);
            })
            .await;
        if let Err(e) = sent {
            tracing::debug!(error = %e, shard = %target, "a connection's hand-over was dropped");
        }
    })
    .detach();
}
