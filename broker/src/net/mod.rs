//! Listeners and connections.

pub mod connection;
pub mod gather;
pub mod recv;
pub mod sendfile;

use std::rc::Rc;

use glommio::net::TcpListener;

use crate::shard::BrokerShard;

/// Accepts connections on this shard until the broker stops. Every shard
/// binds the same address with SO_REUSEPORT; the kernel spreads connections
/// over them.
pub async fn accept_loop(shard: Rc<BrokerShard>, listener: TcpListener) {
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
                let s = shard.clone();
                glommio::spawn_local(async move {
                    s.connection_opened();
                    connection::serve(s.clone(), stream).await;
                    s.connection_closed();
                })
                .detach();
            }
            Some(Err(e)) => {
                tracing::warn!(error = %e, "accept failed");
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}
