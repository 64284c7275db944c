//! Whether every replica of a new topic got its log: asked by the broker
//! that created the topic, of each broker the assignment names, once the
//! metadata shows the topic's leaders.
//!
//! A broker that cannot create a replica's log (open files, disk space,
//! permissions) answers the controller's LeaderAndIsr with an error, and
//! keeps the reason (`ShardReplicas::not_created`). The creating broker
//! sends each replica broker a ListOffsets from Kafka's debugging replica
//! id (-2), which reads that broker's own replica whether it leads or not,
//! until each partition answers either an offset (created) or
//! KAFKA_STORAGE_ERROR (could not be), polling every [`POLL`] while some
//! answer UNKNOWN_TOPIC_OR_PARTITION (not there yet). A broker that cannot
//! be reached, or a deadline that passes first, counts as created: that
//! broker catches up when it returns, as with Kafka. Runs on the cluster
//! thread's tokio runtime, as a task of its own.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ferrite_controller::{BrokerId, BrokerMeta};
use ferrite_engine::TopicPartition;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use ferrite_client::codec::{self, LIST_OFFSETS_V};
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::list_offsets::{DEBUGGING_REPLICA_ID, LATEST};

/// The longest a creation waits for its replicas' answers.
pub const CHECK_MAX: Duration = Duration::from_secs(10);
/// Between two asks of a broker whose replicas are not all there yet.
pub const POLL: Duration = Duration::from_millis(50);
const LIST_OFFSETS_KEY: i16 = 2;
const CLIENT_ID: &str = "ferrite-create-check";
const RESPONSE_BYTES_MAX: usize = 16 << 20;

/// A replica whose log could not be created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotCreated {
    pub broker: BrokerId,
    pub tp: TopicPartition,
    /// Replicas that could not be created, on all brokers.
    pub count: usize,
}

/// Asks each broker in `replicas` (partition → brokers) about its replicas
/// of `topic`, until `deadline`; the first failure found, if any.
pub async fn check(
    topic: String,
    replicas: Vec<(i32, Vec<BrokerId>)>,
    endpoints: BTreeMap<BrokerId, BrokerMeta>,
    deadline: Instant,
) -> Option<NotCreated> {
    let mut by_broker: BTreeMap<BrokerId, Vec<i32>> = BTreeMap::new();
    for (partition, brokers) in replicas {
        for b in brokers {
            by_broker.entry(b).or_default().push(partition);
        }
    }
    let asks = by_broker.into_iter().filter_map(|(broker, partitions)| {
        let to = endpoints.get(&broker)?.clone();
        let topic = topic.clone();
        Some(async move { (broker, check_broker(&to, &topic, &partitions, deadline).await) })
    });
    let mut first: Option<NotCreated> = None;
    let mut count = 0;
    for (broker, failed) in futures::future::join_all(asks).await {
        count += failed.len();
        if first.is_none() {
            first = failed.first().map(|p| NotCreated {
                broker,
                tp: TopicPartition::new(topic.clone(), *p),
                count: 0,
            });
        }
    }
    first.map(|f| NotCreated { count, ..f })
}

/// The partitions `to` could not create (empty: all there, or no answer).
async fn check_broker(to: &BrokerMeta, topic: &str, partitions: &[i32], deadline: Instant) -> Vec<i32> {
    let mut conn: Option<TcpStream> = None;
    let mut correlation = 0i32;
    loop {
        if Instant::now() >= deadline {
            tracing::warn!(broker = %to.id, topic, "could not tell whether every new replica of the topic was created");
            return Vec::new();
        }
        if conn.is_none() {
            conn = TcpStream::connect((to.host.as_str(), to.port)).await.ok();
        }
        let answers = match conn.as_mut() {
            Some(c) => {
                correlation = correlation.wrapping_add(1);
                ask(c, correlation, topic, partitions).await.ok()
            }
            None => None,
        };
        match answers {
            Some(answers) => {
                let failed: Vec<i32> = answers
                    .iter()
                    .filter(|(_, e)| *e == ErrorCode::KafkaStorageError.code())
                    .map(|(p, _)| *p)
                    .collect();
                // Anything else (UNKNOWN_TOPIC_OR_PARTITION): not there yet.
                let all_there = answers.len() == partitions.len() && answers.iter().all(|(_, e)| *e == 0);
                if !failed.is_empty() || all_there {
                    return failed;
                }
            }
            None => conn = None,
        }
        tokio::time::sleep(POLL).await;
    }
}

/// One ListOffsets from the debugging replica id: (partition, error) each.
async fn ask(c: &mut TcpStream, correlation: i32, topic: &str, partitions: &[i32]) -> std::io::Result<Vec<(i32, i16)>> {
    let asked = [(topic.to_string(), partitions.to_vec())];
    let frame = codec::frame(LIST_OFFSETS_KEY, LIST_OFFSETS_V, correlation, CLIENT_ID, |w| {
        codec::list_offsets_as(w, DEBUGGING_REPLICA_ID, LATEST, &asked)
    });
    c.write_all(&frame).await?;
    let mut size = [0u8; 4];
    c.read_exact(&mut size).await?;
    let mut buf = vec![0u8; codec::response_len(size, RESPONSE_BYTES_MAX)?];
    c.read_exact(&mut buf).await?;
    let mut r = codec::response_body(buf, correlation, false)?;
    let listed = codec::decode_list_offsets(&mut r).map_err(codec::invalid_data)?;
    Ok(listed.into_iter().map(|l| (l.partition, l.error)).collect())
}
