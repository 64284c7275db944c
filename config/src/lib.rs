//! Broker configuration under Kafka's property names (`server.properties`),
//! with `--override key=value` on top. Unknown keys are warned about; keys
//! Kafka has but Ferrite does not need are accepted and reported as inert.
//! What each key means, its default and whether it can change while the
//! broker runs: [`defs`].
//!
//! Depends on: `ferrite-ids`, `ferrite-protocol` (the fetch path setting),
//! `ferrite-engine` (log and shard settings), `ferrite-controller` (the
//! dynamic broker configs and topic config definitions) and
//! `ferrite-groups` (group and offsets-topic settings). It must not depend
//! on the broker, nor do I/O beyond what the caller hands it and resolving
//! a listener's host name.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod authorizer;
pub mod cleaner;
pub mod defs;
pub mod listeners;
pub mod sasl;
pub mod ssl;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use ferrite_engine::log_config::LogConfig;
use ferrite_engine::shard::Pinning;
use ferrite_engine::WriteMode;

use ferrite_groups::{GroupConfig, OffsetsConfig};
use ferrite_transactions::TxnConfig;

/// Bounds of `ferrite.io.memory.bytes.per.shard`.
const IO_MEMORY_BYTES_MIN: usize = 1 << 20;
const IO_MEMORY_BYTES_MAX: usize = 1 << 30;

#[derive(Clone, Debug)]
pub struct BrokerConfig {
    pub broker_id: i32,
    /// Where to listen.
    pub listen: SocketAddr,
    /// What clients are told to connect to.
    pub advertised_host: String,
    pub advertised_port: u16,
    /// The listener settings as given (`listeners`, `advertised.listeners`,
    /// the security protocol map, the inter-broker listener).
    pub listener_settings: listeners::Listeners,
    /// The name and protocol of the listener at `listen` (the primary: the
    /// inter-broker one).
    pub listener_name: String,
    pub listener_protocol: listeners::SecurityProtocol,
    /// The other listeners (a standalone broker's; a cluster has one).
    pub extra_listeners: Vec<listeners::Listener>,
    /// The `ssl.*` settings as given, and the keystore they name when a
    /// listener is SSL.
    pub ssl: ssl::SslSettings,
    /// The `sasl.*` settings of SASL listeners.
    pub sasl: sasl::SaslSettings,
    /// `log.cleaner.*`: the log cleaner of compacted topics.
    pub cleaner: cleaner::CleanerSettings,
    /// `authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found`.
    pub authorizer: authorizer::AuthorizerSettings,
    pub keystore: Option<ssl::Keystore>,
    pub log_dir: PathBuf,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub auto_create_topics: bool,
    /// Defaults for every topic's log (`log.retention.*`, `log.segment.bytes`, …).
    pub log: LogConfig,
    pub socket_request_max_bytes: usize,
    pub zookeeper_connect: Option<String>,
    pub retention_check_interval_ms: u64,
    pub flush_scheduler_interval_ms: u64,
    pub checkpoint_interval_ms: u64,
    /// `ferrite.log.cache.bytes.per.shard`: the bytes of recent batches a
    /// shard's partitions keep in memory together.
    pub cache_bytes_per_shard: usize,
    /// `ferrite.log.open.files.per.shard`: segment files a shard keeps
    /// open at most; 0 derives it from the open-files limit at start.
    pub open_files_per_shard: usize,
    /// `ferrite.scrub.bytes.per.second`: how fast each shard re-reads its
    /// closed segments to find damage; 0 turns the scrubber off.
    pub scrub_bytes_per_second: u64,
    /// `ferrite.scrub.interval.ms`: from the end of one scrub pass to the
    /// start of the next.
    pub scrub_interval_ms: u64,
    /// `ferrite.io.memory.bytes.per.shard`: each shard's pool of buffers
    /// registered with io_uring for direct writes and reads (pinned, so
    /// resident from the start).
    pub io_memory_bytes_per_shard: usize,
    pub write_mode: WriteMode,
    /// `log.preallocate`: extend active segment files ahead of their
    /// writes (direct mode only).
    pub log_preallocate: bool,
    pub recovery_repair: bool,
    /// Shards (executors); 0 = one per CPU.
    pub shards: usize,
    /// `ferrite.cpu.pinning`: each shard on a CPU of its own, or wherever
    /// the kernel puts it.
    pub cpu_pinning: CpuPinning,
    /// `ferrite.cpu.first`: the CPU of shard 0 when pinned per CPU (so that
    /// brokers sharing a host can take different CPUs).
    pub cpu_first: usize,
    /// Prometheus text metrics, if set.
    pub metrics_listen: Option<SocketAddr>,
    /// Requests a connection may have in flight (answered in order).
    pub connection_requests_inflight_max: usize,
    /// The longest a fetch long-polls, whatever it asks (`ferrite.fetch.wait.max.ms`).
    pub fetch_wait_ms_max: u64,
    /// `ferrite.fetch.cold.reads`: how a fetch sends file regions the page
    /// cache does not hold (`transport/src/direct_read.rs`).
    pub fetch_cold_reads: ferrite_protocol::response::SendPath,
    /// `max.incremental.fetch.session.cache.slots`: fetch sessions the
    /// broker keeps, over all its shards (KIP-227).
    pub fetch_session_slots: usize,
    /// Replication and controller settings, used when `zookeeper.connect` is set.
    pub cluster: ClusterConfig,
    /// The group coordinator's `group.*` settings.
    pub groups: GroupConfig,
    /// The `offsets.*` settings of `__consumer_offsets`.
    pub offsets: OffsetsConfig,
    /// The `transaction.*` settings of the transaction coordinator.
    pub transactions: TxnConfig,
    /// `ferrite.fault.produce.drop.response.every`: for tests (builds with
    /// the `fault-injection` feature; others refuse a value but 0), every N-th
    /// produce is appended but its answer dropped by closing the connection
    /// (0: never).
    pub fault_drop_produce_response_every: u64,
    /// Every setting given at start (server.properties, then `--override`),
    /// by its Kafka name, as given: DescribeConfigs' STATIC_BROKER_CONFIG.
    pub given: BTreeMap<String, String>,
}

/// `ferrite.cpu.pinning`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuPinning {
    /// Shard `i` on CPU `ferrite.cpu.first + i` (modulo the CPUs online).
    PerCpu,
    /// Not pinned: the kernel schedules the shards.
    None,
}

impl BrokerConfig {
    /// The shards' placement for the runtime.
    pub fn pinning(&self) -> Pinning {
        match self.cpu_pinning {
            CpuPinning::PerCpu => Pinning::PerCpu { first: self.cpu_first },
            CpuPinning::None => Pinning::Unpinned,
        }
    }
}

/// The settings of a broker in a ZooKeeper cluster, under Kafka's names.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// `zookeeper.session.timeout.ms`.
    pub zk_session_timeout_ms: u64,
    /// `replica.lag.time.max.ms` (Kafka's default 30 s).
    pub replica_lag_time_max_ms: u64,
    /// `replica.fetch.wait.max.ms`.
    pub replica_fetch_wait_max_ms: u64,
    /// `replica.fetch.min.bytes`.
    pub replica_fetch_min_bytes: i32,
    /// `replica.fetch.max.bytes` (per partition), and
    /// `replica.fetch.response.max.bytes` (per request).
    pub replica_fetch_max_bytes: i32,
    pub replica_fetch_response_max_bytes: i32,
    /// `min.insync.replicas` (topics may override it).
    pub min_insync_replicas: usize,
    /// `num.replica.fetchers`: fetch connections each shard opens to each
    /// leader broker, its followed partitions dealt over them by hash.
    pub num_replica_fetchers: usize,
    /// `unclean.leader.election.enable` (topics may override it).
    pub unclean_leader_election: bool,
    /// `auto.leader.rebalance.enable`.
    pub auto_leader_rebalance: bool,
    /// `leader.imbalance.check.interval.seconds`.
    pub leader_imbalance_check_interval_s: u64,
    /// `leader.imbalance.per.broker.percentage`.
    pub leader_imbalance_per_broker_pct: u32,
    /// `controlled.shutdown.enable`.
    pub controlled_shutdown: bool,
}

impl Default for ClusterConfig {
    fn default() -> ClusterConfig {
        ClusterConfig {
            zk_session_timeout_ms: 18_000,
            replica_lag_time_max_ms: 30_000,
            replica_fetch_wait_max_ms: 500,
            replica_fetch_min_bytes: 1,
            replica_fetch_max_bytes: 1 << 20,
            replica_fetch_response_max_bytes: 10 << 20,
            min_insync_replicas: 1,
            num_replica_fetchers: 1,
            unclean_leader_election: false,
            auto_leader_rebalance: true,
            leader_imbalance_check_interval_s: 300,
            leader_imbalance_per_broker_pct: 10,
            controlled_shutdown: true,
        }
    }
}

impl Default for BrokerConfig {
    fn default() -> BrokerConfig {
        BrokerConfig {
            broker_id: 0,
            listen: "127.0.0.1:9092".parse().unwrap_or_else(|_| unreachable!()),
            advertised_host: "127.0.0.1".into(),
            advertised_port: 9092,
            listener_settings: listeners::Listeners::default(),
            listener_name: "PLAINTEXT".into(),
            listener_protocol: listeners::SecurityProtocol::Plaintext,
            extra_listeners: Vec::new(),
            ssl: ssl::SslSettings::default(),
            sasl: sasl::SaslSettings::default(),
            cleaner: cleaner::CleanerSettings::default(),
            authorizer: authorizer::AuthorizerSettings::default(),
            keystore: None,
            log_dir: PathBuf::from("./ferrite-data"),
            num_partitions: 1,
            default_replication_factor: 1,
            auto_create_topics: true,
            log: LogConfig::default(),
            socket_request_max_bytes: 100 * 1024 * 1024,
            zookeeper_connect: None,
            retention_check_interval_ms: 300_000,
            flush_scheduler_interval_ms: 1_000,
            checkpoint_interval_ms: 60_000,
            cache_bytes_per_shard: ferrite_engine::log_manager::CACHE_BYTES_PER_SHARD_DEFAULT,
            open_files_per_shard: 0,
            scrub_bytes_per_second: ferrite_engine::log_manager::SCRUB_BYTES_PER_SECOND_DEFAULT,
            scrub_interval_ms: ferrite_engine::log_manager::SCRUB_INTERVAL_MS_DEFAULT,
            io_memory_bytes_per_shard: ferrite_engine::shard::IO_MEMORY_BYTES_DEFAULT,
            write_mode: WriteMode::Direct,
            log_preallocate: false,
            recovery_repair: false,
            shards: 0,
            cpu_pinning: CpuPinning::PerCpu,
            cpu_first: 0,
            metrics_listen: None,
            connection_requests_inflight_max: 32,
            fetch_wait_ms_max: 30_000,
            fetch_cold_reads: ferrite_protocol::response::SendPath::Direct,
            fetch_session_slots: 1000,
            cluster: ClusterConfig::default(),
            groups: GroupConfig::default(),
            offsets: OffsetsConfig::default(),
            transactions: TxnConfig::default(),
            fault_drop_produce_response_every: 0,
            given: BTreeMap::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{key}={value}: {reason}")]
    Invalid { key: String, value: String, reason: String },
    #[error("line {line}: expected key=value")]
    Syntax { line: usize },
}

/// Parses `server.properties` text: `key=value` or `key: value` lines, `#`
/// and `!` comments, blank lines.
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        let mut line = line.trim().to_string();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        // As Java's Properties: a line ending in an odd number of
        // backslashes goes on, without its leading blanks, on the next
        // (a PEM certificate given inline spans lines so).
        while line.chars().rev().take_while(|c| *c == '\\').count() % 2 == 1 {
            line.pop();
            match lines.next() {
                Some((_, next)) => line.push_str(next.trim_start()),
                None => break,
            }
        }
        let Some(at) = line.find(['=', ':']) else {
            return Err(ConfigError::Syntax { line: i + 1 });
        };
        out.push((line[..at].trim().to_string(), line[at + 1..].trim().to_string()));
    }
    Ok(out)
}

fn invalid(key: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

fn num<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, ConfigError> {
    value.parse().map_err(|_| invalid(key, value, "not a number"))
}

fn boolean(key: &str, value: &str) -> Result<bool, ConfigError> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(key, value, "expected true or false")),
    }
}

impl BrokerConfig {
    /// Where to listen and what to advertise, from the listener settings
    /// given so far (see [`listeners`]); the keystore when a listener is
    /// SSL (see [`ssl`]).
    fn apply_listeners(&mut self) -> Result<(), ConfigError> {
        let deployment = match self.zookeeper_connect {
            Some(_) => listeners::Deployment::Cluster,
            None => listeners::Deployment::Standalone,
        };
        let served = self.listener_settings.served(self.listen, deployment)?;
        let mut resolved = served.into_iter().map(listeners::Served::resolve);
        if let Some(primary) = resolved.next() {
            let primary = primary?;
            let wildcard = primary.listen.ip().is_unspecified();
            let advertised_given = self.listener_settings.advertised.is_some();
            if wildcard && !advertised_given && deployment == listeners::Deployment::Cluster {
                return Err(invalid(
                    "listeners",
                    &primary.listen.to_string(),
                    "every interface, in a cluster: set advertised.listeners to an address the other brokers and \
                     the clients reach (127.0.0.1 would send each broker's followers to themselves)",
                ));
            }
            self.listen = primary.listen;
            self.advertised_host = primary.advertised_host;
            self.advertised_port = primary.advertised_port;
            self.listener_name = primary.name;
            self.listener_protocol = primary.protocol;
            self.extra_listeners = resolved.collect::<Result<_, _>>()?;
        }
        if self.authorizer.enabled && deployment == listeners::Deployment::Cluster {
            return Err(invalid(
                "authorizer.class.name",
                "",
                "ACLs are kept by standalone brokers only so far (issue #21): a cluster would check none of them",
            ));
        }
        if let Some(m) = self.metrics_listen {
            if let Some(l) = self.listeners().iter().find(|l| l.listen.port() == m.port()) {
                return Err(invalid(
                    "ferrite.metrics.listen",
                    &m.to_string(),
                    format!("the port of listener {}: metrics need a port of their own", l.name),
                ));
            }
        }
        let ssl_served = std::iter::once(self.listener_protocol)
            .chain(self.extra_listeners.iter().map(|l| l.protocol))
            .any(|p| {
                matches!(
                    p,
                    listeners::SecurityProtocol::Ssl | listeners::SecurityProtocol::SaslSsl
                )
            });
        self.keystore = match ssl_served {
            true => Some(self.ssl.checked()?),
            false => None,
        };
        Ok(())
    }

    /// Every listener served, the primary first.
    pub fn listeners(&self) -> Vec<listeners::Listener> {
        let primary = listeners::Listener {
            name: self.listener_name.clone(),
            protocol: self.listener_protocol,
            listen: self.listen,
            advertised_host: self.advertised_host.clone(),
            advertised_port: self.advertised_port,
        };
        std::iter::once(primary)
            .chain(self.extra_listeners.iter().cloned())
            .collect()
    }

    /// Applies `pairs` in order; returns the keys that were unknown.
    pub fn apply(&mut self, pairs: &[(String, String)]) -> Result<Vec<String>, ConfigError> {
        let mut unknown = Vec::new();
        let mut retention: BTreeMap<&str, i64> = BTreeMap::new();
        for (k, v) in pairs {
            self.given.insert(k.clone(), v.clone());
            let (k, v) = (k.as_str(), v.as_str());
            let security = self.ssl.set(k, v)? || self.sasl.set(k, v)? || self.authorizer.set(k, v)?;
            if self.listener_settings.set(k, v)? || security || self.cleaner.set(k, v)? {
                continue;
            }
            match k {
                "broker.id" | "node.id" => self.broker_id = num(k, v)?,
                "log.dirs" | "log.dir" => self.log_dir = PathBuf::from(v.split(',').next().unwrap_or(v).trim()),
                "num.partitions" => self.num_partitions = num(k, v)?,
                "default.replication.factor" => self.default_replication_factor = num(k, v)?,
                "auto.create.topics.enable" => self.auto_create_topics = boolean(k, v)?,
                "log.retention.hours" | "log.retention.minutes" | "log.retention.ms" => {
                    retention.insert(k, num(k, v)?);
                }
                "log.retention.bytes" => self.set_log("retention.bytes", k, v)?,
                "log.segment.bytes" => self.set_log("segment.bytes", k, v)?,
                "log.roll.ms" => self.set_log("segment.ms", k, v)?,
                "log.roll.hours" => {
                    let h: i64 = num(k, v)?;
                    self.set_log("segment.ms", k, &(h * 3_600_000).to_string())?
                }
                "log.index.interval.bytes" => self.set_log("index.interval.bytes", k, v)?,
                "log.index.size.max.bytes" => self.set_log("segment.index.bytes", k, v)?,
                "message.max.bytes" => self.set_log("max.message.bytes", k, v)?,
                "log.flush.interval.messages" => self.set_log("flush.messages", k, v)?,
                "log.flush.interval.ms" => self.set_log("flush.ms", k, v)?,
                "log.cleanup.policy" => self.set_log("cleanup.policy", k, v)?,
                "log.cleaner.min.cleanable.ratio" => self.set_log("min.cleanable.dirty.ratio", k, v)?,
                "log.cleaner.delete.retention.ms" => self.set_log("delete.retention.ms", k, v)?,
                "log.cleaner.min.compaction.lag.ms" => self.set_log("min.compaction.lag.ms", k, v)?,
                "log.cleaner.max.compaction.lag.ms" => self.set_log("max.compaction.lag.ms", k, v)?,
                "socket.request.max.bytes" => self.socket_request_max_bytes = num(k, v)?,
                "zookeeper.connect" => self.zookeeper_connect = Some(v.to_string()),
                "log.retention.check.interval.ms" => self.retention_check_interval_ms = num(k, v)?,
                "log.flush.scheduler.interval.ms" => self.flush_scheduler_interval_ms = num(k, v)?,
                "log.flush.offset.checkpoint.interval.ms" => self.checkpoint_interval_ms = num(k, v)?,
                "ferrite.log.cache.bytes.per.shard" => self.cache_bytes_per_shard = num(k, v)?,
                "ferrite.log.open.files.per.shard" => self.open_files_per_shard = num(k, v)?,
                "ferrite.scrub.bytes.per.second" => self.scrub_bytes_per_second = num(k, v)?,
                "ferrite.scrub.interval.ms" => self.scrub_interval_ms = num(k, v)?,
                "ferrite.io.memory.bytes.per.shard" => {
                    self.io_memory_bytes_per_shard = num(k, v)?;
                    if !(IO_MEMORY_BYTES_MIN..=IO_MEMORY_BYTES_MAX).contains(&self.io_memory_bytes_per_shard) {
                        return Err(invalid(k, v, "expected 1 MiB to 1 GiB"));
                    }
                }
                "log.write.mode" => {
                    self.write_mode = WriteMode::parse(v).ok_or_else(|| invalid(k, v, "expected direct or buffered"))?
                }
                "log.preallocate" => self.log_preallocate = boolean(k, v)?,
                "log.recovery.repair" => self.recovery_repair = boolean(k, v)?,
                "zookeeper.session.timeout.ms" => self.cluster.zk_session_timeout_ms = num(k, v)?,
                "replica.lag.time.max.ms" => self.cluster.replica_lag_time_max_ms = num(k, v)?,
                "replica.fetch.wait.max.ms" => self.cluster.replica_fetch_wait_max_ms = num(k, v)?,
                "replica.fetch.min.bytes" => self.cluster.replica_fetch_min_bytes = num(k, v)?,
                "replica.fetch.max.bytes" => self.cluster.replica_fetch_max_bytes = num(k, v)?,
                "replica.fetch.response.max.bytes" => self.cluster.replica_fetch_response_max_bytes = num(k, v)?,
                "min.insync.replicas" => self.cluster.min_insync_replicas = num(k, v)?,
                "num.replica.fetchers" => {
                    let max = ferrite_controller::broker_config::REPLICA_FETCHERS_MAX;
                    self.cluster.num_replica_fetchers = num(k, v)?;
                    if !(1..=max as usize).contains(&self.cluster.num_replica_fetchers) {
                        return Err(invalid(k, v, format!("expected 1 to {max}")));
                    }
                }
                "unclean.leader.election.enable" => self.cluster.unclean_leader_election = boolean(k, v)?,
                "auto.leader.rebalance.enable" => self.cluster.auto_leader_rebalance = boolean(k, v)?,
                "leader.imbalance.check.interval.seconds" => {
                    self.cluster.leader_imbalance_check_interval_s = num(k, v)?
                }
                "leader.imbalance.per.broker.percentage" => self.cluster.leader_imbalance_per_broker_pct = num(k, v)?,
                "controlled.shutdown.enable" => self.cluster.controlled_shutdown = boolean(k, v)?,
                "group.min.session.timeout.ms" => self.groups.session_timeout_min_ms = num(k, v)?,
                "group.max.session.timeout.ms" => self.groups.session_timeout_max_ms = num(k, v)?,
                "group.initial.rebalance.delay.ms" => self.groups.initial_rebalance_delay_ms = num(k, v)?,
                "group.max.size" => self.groups.members_max = num(k, v)?,
                "offsets.topic.num.partitions" => {
                    self.offsets.partitions = num(k, v)?;
                    if !(1..=1000).contains(&self.offsets.partitions) {
                        return Err(invalid(k, v, "expected 1 to 1000"));
                    }
                }
                "offsets.topic.replication.factor" => self.offsets.replication_factor = num(k, v)?,
                "offsets.topic.segment.bytes" => self.offsets.segment_bytes = num(k, v)?,
                "offsets.retention.minutes" => {
                    let minutes: u64 = num(k, v)?;
                    self.offsets.retention_ms = minutes.saturating_mul(60_000);
                }
                "offsets.retention.check.interval.ms" => self.offsets.retention_check_interval_ms = num(k, v)?,
                "offset.metadata.max.bytes" => self.offsets.metadata_bytes_max = num(k, v)?,
                "transaction.state.log.num.partitions" => {
                    self.transactions.partitions = num(k, v)?;
                    if !(1..=1000).contains(&self.transactions.partitions) {
                        return Err(invalid(k, v, "expected 1 to 1000"));
                    }
                }
                "transaction.state.log.replication.factor" => self.transactions.replication_factor = num(k, v)?,
                "transaction.state.log.min.isr" => self.transactions.min_insync_replicas = num(k, v)?,
                "transaction.state.log.segment.bytes" => self.transactions.segment_bytes = num(k, v)?,
                "transaction.max.timeout.ms" => {
                    self.transactions.timeout_ms_max = num(k, v)?;
                    if self.transactions.timeout_ms_max < 1 {
                        return Err(invalid(k, v, "expected a positive number of milliseconds"));
                    }
                }
                "transaction.abort.timed.out.transaction.cleanup.interval.ms" => {
                    self.transactions.abort_check_interval_ms = num(k, v)?
                }
                "transactional.id.expiration.ms" => {
                    self.transactions.id_expiration_ms = num(k, v)?;
                    if self.transactions.id_expiration_ms < 1 {
                        return Err(invalid(k, v, "expected a positive number of milliseconds"));
                    }
                }
                "transaction.remove.expired.transaction.cleanup.interval.ms" => {
                    self.transactions.id_expiration_check_interval_ms = num(k, v)?
                }
                "transaction.partition.verification.enable" => {
                    self.transactions.verification = match boolean(k, v)? {
                        true => ferrite_transactions::Verification::Enabled,
                        false => ferrite_transactions::Verification::Disabled,
                    }
                }
                "ferrite.fault.produce.drop.response.every" => {
                    let every: u64 = num(k, v)?;
                    if every != 0 && !cfg!(feature = "fault-injection") {
                        return Err(invalid(
                            k,
                            v,
                            "this build has no fault injection (cargo feature fault-injection, for tests)",
                        ));
                    }
                    self.fault_drop_produce_response_every = every;
                }
                "ferrite.shards" => self.shards = num(k, v)?,
                "ferrite.cpu.pinning" => {
                    self.cpu_pinning = match v {
                        "per-cpu" => CpuPinning::PerCpu,
                        "none" => CpuPinning::None,
                        _ => return Err(invalid(k, v, "expected per-cpu or none")),
                    }
                }
                "ferrite.cpu.first" => self.cpu_first = num(k, v)?,
                "ferrite.fetch.wait.max.ms" => self.fetch_wait_ms_max = num(k, v)?,
                "ferrite.fetch.cold.reads" => {
                    use ferrite_protocol::response::SendPath;
                    self.fetch_cold_reads = match v {
                        "direct" => SendPath::Direct,
                        "sendfile" => SendPath::Sendfile,
                        _ => return Err(invalid(k, v, "expected direct or sendfile")),
                    }
                }
                "max.incremental.fetch.session.cache.slots" => self.fetch_session_slots = num(k, v)?,
                "ferrite.metrics.listen" => {
                    self.metrics_listen = Some(v.parse().map_err(|_| invalid(k, v, "expected host:port"))?)
                }
                _ if defs::INERT_CONFIGS.iter().any(|d| d.name == k) => {
                    tracing::info!(key = k, "accepted; has no effect in Ferrite");
                }
                // A topic config's broker default without a field here
                // (log.cleanup.policy, compression.type, …): kept in
                // `given`, where DescribeConfigs and the topic logs find it.
                _ if defs::is_topic_synonym(k) => {
                    if ferrite_controller::broker_config::dynamic(k).is_some() {
                        ferrite_controller::broker_config::validate(k, Some(v))
                            .map_err(|e| invalid(k, v, e.to_string()))?;
                    }
                }
                _ => unknown.push(k.to_string()),
            }
        }
        // Kafka's precedence: ms over minutes over hours.
        let ms = retention
            .get("log.retention.ms")
            .copied()
            .or_else(|| retention.get("log.retention.minutes").map(|m| m * 60_000))
            .or_else(|| retention.get("log.retention.hours").map(|h| h * 3_600_000));
        if let Some(ms) = ms {
            self.set_log("retention.ms", "log.retention.ms", &ms.to_string())?;
        }
        self.apply_listeners()?;
        for k in &unknown {
            tracing::warn!(key = %k, "unknown configuration key, ignored");
        }
        if self.log_preallocate && self.write_mode == WriteMode::Buffered {
            tracing::warn!(
                "log.preallocate applies to log.write.mode=direct only; buffered writes are not preallocated"
            );
        }
        Ok(unknown)
    }

    /// How segments are written: `log.write.mode`, preallocated when
    /// `log.preallocate` is on (which only direct writes use).
    pub fn segment_write_mode(&self) -> WriteMode {
        match (self.write_mode, self.log_preallocate) {
            (WriteMode::Direct, true) => WriteMode::DirectPreallocated,
            (mode, _) => mode,
        }
    }

    fn set_log(&mut self, topic_key: &str, key: &str, value: &str) -> Result<(), ConfigError> {
        self.log
            .set(topic_key, value)
            .map_err(|e| invalid(key, value, e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_host_name_is_resolved_and_a_cluster_needs_a_reachable_address() {
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let mut c = BrokerConfig::default();
        c.apply(&pairs(&[("listeners", "PLAINTEXT://localhost:19093")]))
            .unwrap();
        assert!(c.listen.ip().is_loopback(), "{}", c.listen);
        assert_eq!(c.listen.port(), 19093);
        assert_eq!(c.advertised_host, "localhost", "clients are told the name");
        let mut c = BrokerConfig::default();
        let e = c
            .apply(&pairs(&[("listeners", "PLAINTEXT://no-such-host.invalid:9092")]))
            .unwrap_err();
        assert!(e.to_string().contains("does not resolve"), "{e}");
        let wildcard_cluster = [
            ("zookeeper.connect", "127.0.0.1:2181"),
            ("listeners", "PLAINTEXT://:9092"),
        ];
        let e = BrokerConfig::default().apply(&pairs(&wildcard_cluster)).unwrap_err();
        assert!(e.to_string().contains("set advertised.listeners"), "{e}");
        let mut c = BrokerConfig::default();
        c.apply(&pairs(&[
            ("zookeeper.connect", "127.0.0.1:2181"),
            ("listeners", "PLAINTEXT://:9092"),
            ("advertised.listeners", "PLAINTEXT://kafka-1.example:9092"),
        ]))
        .unwrap();
        assert_eq!(
            (c.listen.to_string().as_str(), c.advertised_host.as_str()),
            ("0.0.0.0:9092", "kafka-1.example")
        );
    }

    #[test]
    fn shards_are_pinned_per_cpu_unless_told_otherwise() {
        let mut c = BrokerConfig::default();
        assert_eq!(c.pinning(), Pinning::PerCpu { first: 0 });
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        c.apply(&pairs(&[("ferrite.cpu.first", "1")])).unwrap();
        assert_eq!(c.pinning(), Pinning::PerCpu { first: 1 });
        assert_eq!(c.pinning().cpu_of(0, 2), Some(1));
        assert_eq!(c.pinning().cpu_of(1, 2), Some(0));
        c.apply(&pairs(&[("ferrite.cpu.pinning", "none")])).unwrap();
        assert_eq!(c.pinning(), Pinning::Unpinned);
        assert_eq!(c.pinning().cpu_of(0, 2), None);
        let bad = c.apply(&pairs(&[("ferrite.cpu.pinning", "some")]));
        assert!(bad.is_err());
    }

    #[test]
    fn fault_injection_is_taken_only_by_builds_that_have_it() {
        let mut c = BrokerConfig::default();
        let set = |c: &mut BrokerConfig, v: &str| {
            c.apply(&[("ferrite.fault.produce.drop.response.every".to_string(), v.to_string())])
        };
        assert!(set(&mut c, "0").is_ok(), "off is always accepted");
        let seven = set(&mut c, "7");
        assert_eq!(seven.is_ok(), cfg!(feature = "fault-injection"), "{seven:?}");
    }

    #[test]
    fn the_io_memory_pool_takes_1_mib_to_1_gib() {
        let apply = |v: &str| {
            let mut c = BrokerConfig::default();
            c.apply(&[("ferrite.io.memory.bytes.per.shard".to_string(), v.to_string())])
                .map(|_| c.io_memory_bytes_per_shard)
        };
        assert_eq!(BrokerConfig::default().io_memory_bytes_per_shard, 8 << 20);
        assert_eq!(apply("8388608").unwrap(), 8 << 20);
        assert!(apply("4096").is_err());
        assert!(apply("2147483648").is_err());
    }

    #[test]
    fn a_line_ending_in_a_backslash_goes_on_as_in_java_properties() {
        let text = "a=one \\\n   two\\\n three\nb=c:\\\\\n# d=e\n";
        let pairs = parse_properties(text).unwrap();
        assert_eq!(
            pairs,
            vec![
                ("a".to_string(), "one twothree".to_string()),
                ("b".into(), "c:\\\\".into())
            ],
            "an even run of backslashes ends the line"
        );
    }

    #[test]
    fn server_properties_apply_with_kafka_names() {
        let text = "# comment\nbroker.id=3\nlisteners=PLAINTEXT://0.0.0.0:19092\nlog.dirs=/tmp/a,/tmp/b\n\
                    log.retention.hours=1\nlog.retention.minutes=30\nlog.segment.bytes=1048576\n\
                    num.network.threads=3\nno.such.key=1\nauto.create.topics.enable=false\n";
        let mut c = BrokerConfig::default();
        let unknown = c.apply(&parse_properties(text).unwrap()).unwrap();
        assert_eq!(unknown, vec!["no.such.key".to_string()]);
        assert_eq!(c.broker_id, 3);
        assert_eq!(c.listen.port(), 19092);
        assert_eq!((c.advertised_host.as_str(), c.advertised_port), ("127.0.0.1", 19092));
        assert_eq!(c.log_dir, PathBuf::from("/tmp/a"));
        assert_eq!(c.log.retention_ms, 30 * 60_000, "minutes beat hours");
        assert_eq!(c.log.segment_bytes, 1 << 20);
        assert!(!c.auto_create_topics);
        assert!(c.apply(&[("num.partitions".into(), "x".into())]).is_err());
        assert!(parse_properties("just words").is_err());
    }

    #[test]
    fn log_preallocate_makes_direct_writes_preallocated_and_leaves_buffered_alone() {
        let set = |pairs: &[(&str, &str)]| {
            let mut c = BrokerConfig::default();
            let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            c.apply(&pairs).unwrap();
            c.segment_write_mode()
        };
        assert_eq!(set(&[]), WriteMode::Direct, "off by default, as in Kafka");
        assert_eq!(set(&[("log.preallocate", "true")]), WriteMode::DirectPreallocated);
        // Either order.
        assert_eq!(
            set(&[("log.preallocate", "true"), ("log.write.mode", "direct")]),
            WriteMode::DirectPreallocated
        );
        assert_eq!(
            set(&[("log.write.mode", "buffered"), ("log.preallocate", "true")]),
            WriteMode::Buffered
        );
        let mut c = BrokerConfig::default();
        assert!(c.apply(&[("log.preallocate".into(), "sometimes".into())]).is_err());
        assert!(c
            .apply(&[("log.write.mode".into(), "direct-preallocated".into())])
            .is_err());
    }
}
