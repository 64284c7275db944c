//! Every broker setting Ferrite reads, as DescribeConfigs shows a BROKER
//! resource: its name (Kafka's where Kafka has one), kind, built-in default
//! (`None` where Kafka shows null: a setting another one stands in for) and
//! what it does. Which of them may change while running is
//! `ferrite_controller::broker_config::dynamic`.
//!
//! The broker synonyms of topic configs that `config.rs` stores without a
//! field of its own (`log.cleanup.policy`, `compression.type`, …) are taken
//! from the topic config table, so the two cannot drift apart.

use ferrite_controller::broker_config;
use ferrite_controller::topic_config_defs::{ConfigKind, TOPIC_CONFIGS};

pub struct BrokerConfigDef {
    pub name: &'static str,
    pub kind: ConfigKind,
    pub default: Option<&'static str>,
    pub doc: &'static str,
}

macro_rules! b {
    ($name:expr, $kind:ident, $default:expr, $doc:expr) => {
        BrokerConfigDef {
            name: $name,
            kind: ConfigKind::$kind,
            default: $default,
            doc: $doc,
        }
    };
}

const LONG_MAX: &str = "9223372036854775807";

/// The settings `BrokerConfig::apply` reads into fields of its own.
#[rustfmt::skip]
pub const BROKER_CONFIGS: &[BrokerConfigDef] = &[
    b!("broker.id", Int, Some("0"), "This broker's id in the cluster."),
    b!("node.id", Int, None, "Same as broker.id."),
    b!("listeners", String, Some("PLAINTEXT://127.0.0.1:9092"), "Where the broker listens: NAME://host:port,... A standalone broker serves PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL listeners, several at once; a cluster broker one PLAINTEXT listener (others are refused at start)."),
    b!("advertised.listeners", String, None, "The address given to clients per listener name, when not the listener's own; a client is answered with the address of the listener it came in on."),
    b!("listener.security.protocol.map", String, None, "Each listener name's security protocol (NAME:PROTOCOL,...). Without it, a name that is a protocol's is that protocol; with it, every listener must be in it."),
    b!("inter.broker.listener.name", String, None, "The listener brokers use between them (else the first of security.inter.broker.protocol); in a cluster, a PLAINTEXT one."),
    b!("security.inter.broker.protocol", String, Some("PLAINTEXT"), "The security protocol between brokers; a cluster speaks only PLAINTEXT between brokers yet."),
    b!("log.dirs", String, Some("./ferrite-data"), "The data directory (the first entry)."),
    b!("log.dir", String, None, "Same as log.dirs."),
    b!("num.partitions", Int, Some("1"), "Partitions of a topic created without a count."),
    b!("default.replication.factor", Short, Some("1"), "Replicas of a topic created without a factor."),
    b!("auto.create.topics.enable", Boolean, Some("true"), "Whether a Metadata or Produce request for an unknown topic creates it."),
    b!("log.retention.hours", Int, Some("168"), "Hours a segment is kept after its newest record (below log.retention.minutes and log.retention.ms)."),
    b!("log.retention.minutes", Int, None, "Minutes a segment is kept (below log.retention.ms)."),
    b!("log.retention.ms", Long, None, "Milliseconds a segment is kept after its newest record (-1: forever)."),
    b!("log.retention.bytes", Long, Some("-1"), "Bytes a partition keeps before its oldest segments go (-1: no limit)."),
    b!("log.segment.bytes", Int, Some("1073741824"), "Bytes a segment holds before the log rolls."),
    b!("log.roll.ms", Long, None, "Milliseconds after which the active segment rolls (over log.roll.hours)."),
    b!("log.roll.hours", Int, Some("168"), "Hours after which the active segment rolls."),
    b!("log.index.interval.bytes", Int, Some("4096"), "Bytes of log between two index entries."),
    b!("log.index.size.max.bytes", Int, Some("10485760"), "Bytes of one segment's offset index."),
    b!("message.max.bytes", Int, Some("1048588"), "Largest record batch a produce may append."),
    b!("log.flush.interval.messages", Long, Some(LONG_MAX), "Records appended between two fsyncs."),
    b!("log.flush.interval.ms", Long, Some(LONG_MAX), "Milliseconds between two fsyncs."),
    b!("socket.request.max.bytes", Int, Some("104857600"), "Largest request accepted; a larger one closes the connection."),
    b!("zookeeper.connect", String, None, "The ZooKeeper ensemble of a cluster (ferrite broker)."),
    b!("log.retention.check.interval.ms", Long, Some("300000"), "Milliseconds between two retention checks."),
    b!("log.flush.scheduler.interval.ms", Long, Some("1000"), "Milliseconds between two checks of the flush policy."),
    b!("log.flush.offset.checkpoint.interval.ms", Int, Some("60000"), "Milliseconds between two recovery-point checkpoints."),
    b!("log.write.mode", String, Some("direct"), "Ferrite: direct (O_DIRECT through io_uring) or buffered segment writes."),
    b!("log.preallocate", Boolean, Some("false"), "Ferrite: extend active segment files ahead of their writes (direct mode)."),
    b!("log.recovery.repair", Boolean, Some("false"), "Ferrite: truncate a damaged log at start instead of refusing to serve it."),
    b!("zookeeper.session.timeout.ms", Int, Some("18000"), "ZooKeeper session timeout."),
    b!("replica.lag.time.max.ms", Long, Some("30000"), "How long a follower may stay behind before it leaves the ISR."),
    b!("replica.fetch.wait.max.ms", Int, Some("500"), "Longest a follower's fetch waits at its leader for data."),
    b!("replica.fetch.min.bytes", Int, Some("1"), "Bytes a follower's fetch waits for."),
    b!("replica.fetch.max.bytes", Int, Some("1048576"), "Bytes a follower fetches per partition."),
    b!("replica.fetch.response.max.bytes", Int, Some("10485760"), "Bytes a follower fetches per request."),
    b!("num.replica.fetchers", Int, Some("1"), "Fetch connections each shard opens to each leader broker; the partitions it follows from that leader are dealt over them by hash (1 to 16; changes while running)."),
    b!("min.insync.replicas", Int, Some("1"), "Fewest in-sync replicas with which an acks=all produce is accepted."),
    b!("unclean.leader.election.enable", Boolean, Some("false"), "Whether a replica outside the ISR may become leader (loses records)."),
    b!("auto.leader.rebalance.enable", Boolean, Some("true"), "Whether the controller moves leaderships back to preferred replicas."),
    b!("leader.imbalance.check.interval.seconds", Long, Some("300"), "Seconds between two leader balance checks."),
    b!("leader.imbalance.per.broker.percentage", Int, Some("10"), "Share of a broker's partitions led elsewhere that starts a rebalance."),
    b!("controlled.shutdown.enable", Boolean, Some("true"), "Whether a stopping broker first hands over its leaderships."),
    b!("group.min.session.timeout.ms", Int, Some("6000"), "Shortest session a group member may ask for."),
    b!("group.max.session.timeout.ms", Int, Some("1800000"), "Longest session a group member may ask for."),
    b!("group.initial.rebalance.delay.ms", Int, Some("3000"), "How long a new group waits for more members before its first rebalance."),
    b!("group.max.size", Int, Some("1000"), "Most members a group may have."),
    b!("offsets.topic.num.partitions", Int, Some("50"), "Partitions of __consumer_offsets."),
    b!("offsets.topic.replication.factor", Short, Some("3"), "Replicas of __consumer_offsets (fewer when fewer brokers are up)."),
    b!("offsets.topic.segment.bytes", Int, Some("104857600"), "Segment size of __consumer_offsets."),
    b!("offsets.retention.minutes", Int, Some("10080"), "Minutes an empty group's committed offsets are kept."),
    b!("offsets.retention.check.interval.ms", Long, Some("600000"), "Milliseconds between two checks for expired offsets."),
    b!("offset.metadata.max.bytes", Int, Some("4096"), "Longest metadata string an offset commit may carry."),
    b!("transaction.state.log.num.partitions", Int, Some("50"), "Partitions of __transaction_state."),
    b!("transaction.state.log.replication.factor", Short, Some("3"), "Replicas of __transaction_state (fewer when fewer brokers are up)."),
    b!("transaction.state.log.min.isr", Int, Some("2"), "min.insync.replicas of __transaction_state (at most its replicas)."),
    b!("transaction.state.log.segment.bytes", Int, Some("104857600"), "Segment size of __transaction_state."),
    b!("transaction.max.timeout.ms", Int, Some("900000"), "Longest transaction.timeout.ms a producer may ask."),
    b!("transaction.abort.timed.out.transaction.cleanup.interval.ms", Int, Some("10000"), "Milliseconds between two checks for transactions past their timeout."),
    b!("transactional.id.expiration.ms", Int, Some("604800000"), "Milliseconds a transactional id may stay idle (no transaction open) before the coordinator removes its state."),
    b!("transaction.remove.expired.transaction.cleanup.interval.ms", Int, Some("3600000"), "Milliseconds between two removals of expired transactional ids."),
    b!("transaction.partition.verification.enable", Boolean, Some("true"), "A partition's leader asks the transaction coordinator before appending a transaction's first batch, refusing a write the coordinator was not told of (KIP-890)."),
    b!("ferrite.fault.produce.drop.response.every", Long, Some("0"), "Ferrite, for tests (builds with the fault-injection feature): drop the answer of every N-th produce (0: never)."),
    b!("ferrite.log.cache.bytes.per.shard", Long, Some("67108864"), "Ferrite: bytes of recent batches a shard's partitions keep in memory together; the longest cached go first."),
    b!("ferrite.log.open.files.per.shard", Int, Some("0"), "Ferrite: segment files a shard keeps open at most, the least recently used closed beyond it; 0 derives it from the open-files limit, keeping a quarter (at least 1024) for connections."),
    b!("ferrite.scrub.bytes.per.second", Long, Some("16777216"), "Ferrite: how fast each shard re-reads its closed segments to check every batch's CRC (bit rot); 0 turns the scrubber off. A damaged range is no longer served, and a follower fetches it again."),
    b!("ferrite.scrub.interval.ms", Long, Some("3600000"), "Ferrite: milliseconds from the end of one scrub pass over a shard's logs to the start of the next."),
    b!("log.cleaner.enable", Boolean, Some("true"), "Whether each shard's log cleaner compacts the topics whose cleanup.policy holds compact."),
    b!("log.cleaner.backoff.ms", Long, Some("15000"), "Milliseconds between two cleaner passes over a shard's logs."),
    b!("log.cleaner.dedupe.buffer.size", Long, Some("134217728"), "Bytes for the cleaners' key maps, split over the shards (64 bytes a key)."),
    b!("log.cleaner.io.max.bytes.per.second", Double, Some("1.7976931348623157E308"), "Bytes a shard's cleaner reads and writes per second."),
    b!("log.cleaner.threads", Int, Some("1"), "Cleaner threads: only 1 (each shard has one cleaner)."),
    b!("ferrite.io.memory.bytes.per.shard", Long, Some("8388608"), "Ferrite: each shard's pool of buffers registered with io_uring for direct writes and reads, resident from the start; a segment's write groups are at most an eighth of it. Smaller saves memory, larger keeps more and larger writes in flight without pinning pages per write."),
    b!("ferrite.shards", Int, Some("0"), "Ferrite: shards (threads), 0 for one per CPU."),
    b!("ferrite.cpu.pinning", String, Some("per-cpu"), "Ferrite: per-cpu pins each shard to a CPU; none leaves it to the kernel."),
    b!("ferrite.cpu.first", Int, Some("0"), "Ferrite: the CPU of shard 0 when pinned."),
    b!("max.incremental.fetch.session.cache.slots", Int, Some("1000"), "Incremental fetch sessions (KIP-227) the broker keeps, shared out over its shards; 0 keeps none."),
    b!("ferrite.fetch.wait.max.ms", Long, Some("30000"), "Ferrite: the longest a fetch long-polls, whatever it asks."),
    b!("ferrite.fetch.cold.reads", String, Some("direct"), "Ferrite: how a fetch sends segment regions. direct reads a region the page cache does not hold with O_DIRECT the first time, sends it from memory and reads the same length after it ahead for the reader's next fetch; a region read again goes through the page cache, and one the page cache holds whole goes by sendfile on the shard's own thread. sendfile sends every region by sendfile on the blocking pool."),
    b!("ferrite.metrics.listen", String, None, "Ferrite: the address of the Prometheus metrics endpoint."),
];

/// Kafka settings accepted and shown that change nothing in Ferrite.
#[rustfmt::skip]
pub const INERT_CONFIGS: &[BrokerConfigDef] = &[
    b!("num.network.threads", Int, Some("3"), "Kafka's network threads; Ferrite's shards do this work."),
    b!("num.io.threads", Int, Some("8"), "Kafka's request threads; Ferrite's shards do this work."),
    b!("num.recovery.threads.per.data.dir", Int, Some("2"), "Kafka's recovery threads; Ferrite recovers on its shards."),
    b!("background.threads", Int, Some("10"), "Kafka's background threads; Ferrite runs these tasks on its shards."),
    b!("socket.send.buffer.bytes", Int, Some("102400"), "Kafka's socket send buffer; Ferrite keeps the kernel's."),
    b!("socket.receive.buffer.bytes", Int, Some("102400"), "Kafka's socket receive buffer; Ferrite keeps the kernel's."),
    b!("zookeeper.connection.timeout.ms", Int, None, "Ferrite waits for ZooKeeper for the session timeout."),
];

/// Whether `name` is a broker synonym of a topic config.
pub fn is_topic_synonym(name: &str) -> bool {
    TOPIC_CONFIGS.iter().any(|d| d.synonyms.contains(&name))
}

/// The built-in default of broker setting `name`, as [`all`] lists it
/// (without building the list).
pub fn default_of(name: &str) -> Option<&'static str> {
    if let Some(d) = BROKER_CONFIGS.iter().chain(INERT_CONFIGS).find(|d| d.name == name) {
        return d.default;
    }
    TOPIC_CONFIGS
        .iter()
        .find(|t| t.synonyms.first() == Some(&name))
        .map(|t| t.default)
}

/// A broker setting as DescribeConfigs lists it.
pub struct Described {
    pub name: &'static str,
    pub kind: ConfigKind,
    pub default: Option<&'static str>,
    pub doc: String,
    pub dynamic: bool,
}

/// Every broker setting, in a stable order: Ferrite's own fields, the
/// inert Kafka ones, then the topic synonyms stored without a field.
pub fn all() -> Vec<Described> {
    let mut out: Vec<Described> = BROKER_CONFIGS
        .iter()
        .chain(INERT_CONFIGS)
        .map(|d| Described {
            name: d.name,
            kind: d.kind,
            default: d.default,
            doc: d.doc.to_string(),
            dynamic: broker_config::dynamic(d.name).is_some(),
        })
        .collect();
    for t in TOPIC_CONFIGS {
        for (i, s) in t.synonyms.iter().enumerate() {
            if out.iter().any(|d| d.name == *s) {
                continue;
            }
            out.push(Described {
                name: s,
                kind: t.kind,
                // The first synonym carries the topic config's default; the
                // others (hours, jitter hours) stand behind it.
                default: (i == 0).then_some(t.default),
                doc: format!("The default of topic config {}. {}", t.name, t.documentation()),
                dynamic: broker_config::dynamic(s).is_some(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BrokerConfig;

    #[test]
    fn each_listed_setting_is_read_and_its_default_changes_nothing() {
        let base = BrokerConfig::default();
        for d in BROKER_CONFIGS.iter().chain(INERT_CONFIGS) {
            let Some(default) = d.default else { continue };
            let mut c = BrokerConfig::default();
            let unknown = c
                .apply(&[(d.name.to_string(), default.to_string())])
                .unwrap_or_else(|e| panic!("{}={default}: {e}", d.name));
            assert!(unknown.is_empty(), "{} is not read", d.name);
            c.given.clear();
            // The listener settings are kept as given, like `given`.
            c.listener_settings = Default::default();
            assert_eq!(
                format!("{c:?}"),
                format!("{base:?}"),
                "{}={default} is not the default",
                d.name
            );
        }
    }

    #[test]
    fn default_of_agrees_with_the_list() {
        for d in all() {
            assert_eq!(default_of(d.name), d.default, "{}", d.name);
        }
    }

    #[test]
    fn every_dynamic_setting_is_listed_once() {
        let all = all();
        for name in broker_config::dynamic_names() {
            assert_eq!(all.iter().filter(|d| d.name == name).count(), 1, "{name}");
        }
        for (i, d) in all.iter().enumerate() {
            assert!(all[..i].iter().all(|o| o.name != d.name), "{} twice", d.name);
        }
    }
}
