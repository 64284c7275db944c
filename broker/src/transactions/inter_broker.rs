//! One request from a transaction coordinator or a partition leader to
//! another broker (WriteTxnMarkers, AddPartitionsToTxn v4): a new
//! connection, the request frame, the answer's body past its header.
//! (No pooled inter-broker connection: these are one per transaction and
//! partition, not per record.)

use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use ferrite_protocol::wire::Reader;
use ferrite_replication::BrokerId;
use futures_lite::{AsyncReadExt, AsyncWriteExt};

use crate::shard::BrokerShard;

/// The correlation id every such request carries (one per connection).
pub const CORRELATION_ID: i32 = 1;

/// The frame of a request whose `body` is encoded: size prefix, header v2
/// with [`CORRELATION_ID`] and `client_id`.
pub fn frame(api_key: i16, version: i16, client_id: &str, body: ferrite_protocol::wire::Writer) -> Bytes {
    ferrite_client::codec::frame_v2(api_key, version, CORRELATION_ID, client_id, &body.into_bytes())
}

/// Sends `frame` (size prefix included, correlation id
/// [`CORRELATION_ID`]) to `broker`; returns the answer's body, read within
/// `timeout` and at most `response_bytes_max` long, past its header (v1,
/// with tagged fields, when `flexible_header`).
pub async fn call(
    shard: &Rc<BrokerShard>,
    broker: BrokerId,
    frame: Bytes,
    (response_bytes_max, flexible_header): (usize, bool),
    timeout: Duration,
) -> std::io::Result<Reader> {
    let exchange = exchange(shard, broker, frame, response_bytes_max);
    let timer = glommio::timer::sleep(timeout);
    let body = futures_lite::future::or(exchange, async {
        timer.await;
        Err(std::io::Error::from(std::io::ErrorKind::TimedOut))
    })
    .await?;
    ferrite_client::codec::response_body(body, CORRELATION_ID, flexible_header)
}

async fn exchange(
    shard: &Rc<BrokerShard>,
    broker: BrokerId,
    frame: Bytes,
    response_bytes_max: usize,
) -> std::io::Result<Vec<u8>> {
    use ferrite_client::codec::{invalid_data, response_len};
    let cluster = shard.cluster().ok_or_else(|| invalid_data("not in a cluster"))?;
    let b = cluster
        .endpoint(broker)
        .ok_or_else(|| invalid_data(format!("no address for broker {broker}")))?;
    let mut stream = glommio::net::TcpStream::connect(format!("{}:{}", b.host, b.port)).await?;
    let _ = stream.set_nodelay(true);
    stream.write_all(&frame).await?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).await?;
    let len = response_len(size, response_bytes_max)?;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await?;
    Ok(body)
}
