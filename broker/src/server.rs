//! Starting and stopping a broker: the metadata store, the shards, the
//! listeners, and a clean shutdown on SIGTERM/SIGINT.

use std::rc::Rc;
use std::sync::{Arc, Mutex};

use ferrite_controller::embedded::EmbeddedStore;
use ferrite_controller::{BrokerId, BrokerMeta, ClusterMeta};
use ferrite_engine::clock::SystemClock;
use ferrite_engine::log_manager::{LogManager, LogManagerConfig};
use ferrite_engine::recovery::Repair;
use ferrite_engine::shard::{online_cpus, InitFn, RuntimeConfig, ShardRuntime};
use ferrite_engine::{LogConfig, TopicPartition};

use crate::cluster::replicas::ShardReplicas;
use crate::cluster::zk_thread::ClusterThread;
use crate::cluster::{ClusterRequest, ClusterShared};
use crate::config_live::LiveConfig;
use crate::shard::{BrokerShard, Stale};
use ferrite_config::BrokerConfig;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("metadata: {0}")]
    Metadata(#[from] ferrite_controller::ControllerError),
    #[error("storage: {0}")]
    Engine(#[from] ferrite_engine::EngineError),
    #[error("{0}")]
    Other(String),
}

/// A running broker.
pub struct Server {
    runtime: ShardRuntime<BrokerShard>,
    /// In a cluster: the thread talking to ZooKeeper.
    cluster: Option<ClusterThread>,
    /// Held until the broker is dropped (after `stop` closed every log).
    _data_dir_lock: crate::data_dir_lock::DataDirLock,
}

/// Where a broker's metadata comes from.
enum MetaSource {
    /// `ferrite standalone` and a broker without `zookeeper.connect`.
    Embedded(EmbeddedStore),
    /// The cluster: the controller's UpdateMetadata requests.
    Cluster(Arc<ClusterShared>),
}

fn log_manager_config(c: &BrokerConfig, shards: usize) -> LogManagerConfig {
    let mut m = LogManagerConfig::new(&c.log_dir);
    m.write_mode = c.segment_write_mode();
    m.repair = if c.recovery_repair {
        Repair::Truncate
    } else {
        Repair::Refuse
    };
    m.retention_check_interval_ms = c.retention_check_interval_ms;
    m.flush_scheduler_interval_ms = c.flush_scheduler_interval_ms;
    m.checkpoint_interval_ms = c.checkpoint_interval_ms;
    m.cache_bytes_per_shard = c.cache_bytes_per_shard;
    m.open_files_per_shard = c.open_files_per_shard;
    m.scrub_bytes_per_second = c.scrub_bytes_per_second;
    m.scrub_interval_ms = c.scrub_interval_ms;
    m.cleaner = c.cleaner.enabled.then(|| ferrite_engine::cleaner::CleanerParams {
        entries_max: c.cleaner.entries_per_shard(shards),
        bytes_per_second: c.cleaner.io_bytes_per_second,
    });
    m.cleaner_backoff_ms = c.cleaner.backoff_ms;
    m
}

/// The log config of a partition found on disk, from the metadata (with
/// the dynamic broker configs it holds).
fn config_for(live: &LiveConfig, meta: &ClusterMeta, tp: &TopicPartition) -> LogConfig {
    match meta.topic(&tp.topic) {
        Some(t) => live.topic_log_config(&t.name, &t.configs),
        None => live.topic_log_config(&tp.topic, &Default::default()),
    }
}

/// Makes sure the data directory exists and takes files, so that a path
/// that cannot be used stops the broker at start-up, not its first produce,
/// and takes its lock (one broker per directory).
fn check_data_dir(dir: &std::path::Path) -> Result<crate::data_dir_lock::DataDirLock, ServerError> {
    let refused = |what: &str, e: std::io::Error| {
        ServerError::Other(format!("data directory {} (log.dirs): {what}: {e}", dir.display()))
    };
    std::fs::create_dir_all(dir).map_err(|e| refused("cannot create it", e))?;
    // The lock first: a second broker touches nothing in a directory in use.
    let lock = crate::data_dir_lock::acquire(dir)?;
    let probe = dir.join(".ferrite-write-probe");
    std::fs::write(&probe, b"").map_err(|e| refused("cannot write in it", e))?;
    std::fs::remove_file(&probe).map_err(|e| refused("cannot remove a file in it", e))?;
    Ok(lock)
}

/// Longest a broker waits at start for a listener left by a broker killed
/// a moment ago to go (see [`ferrite_transport::port_taken`]).
const LISTEN_RELEASE_WAIT_MS: u64 = 10_000;

/// No other socket listens on the Kafka or metrics address (see
/// [`ferrite_transport::port_taken`]).
fn check_listen_addresses(config: &BrokerConfig) -> Result<(), ServerError> {
    let taken = |what: &str, addr: std::net::SocketAddr, e: std::io::Error| {
        ServerError::Other(format!("{what} on {addr}: {e} (is another broker running there?)"))
    };
    let patience = std::time::Duration::from_millis(LISTEN_RELEASE_WAIT_MS);
    for l in config.listeners() {
        ferrite_transport::port_taken::wait_free(l.listen, patience).map_err(|e| taken("listen", l.listen, e))?;
    }
    if let Some(addr) = config.metrics_listen {
        ferrite_transport::port_taken::wait_free(addr, patience).map_err(|e| taken("metrics listen", addr, e))?;
    }
    Ok(())
}

impl Server {
    /// Opens the metadata and the logs (recovering them if needed) and
    /// starts listening. Returns once every shard serves.
    pub fn start(config: BrokerConfig) -> Result<Server, ServerError> {
        let data_dir_lock = check_data_dir(&config.log_dir)?;
        // Before recovery and registration, so that a second broker on a
        // taken port fails at once; again just before binding.
        check_listen_addresses(&config)?;
        let mut config = config;
        let (soft_limit, _) = crate::open_files::raise_to_hard();
        crate::metrics::install();
        let broker = BrokerMeta {
            id: BrokerId(config.broker_id),
            host: config.advertised_host.clone(),
            port: config.advertised_port,
            rack: None,
        };
        let (source, cluster) = if config.zookeeper_connect.is_some() {
            let thread =
                ClusterThread::start(&config).map_err(|e| ServerError::Other(format!("cluster thread: {e}")))?;
            (MetaSource::Cluster(thread.shared.clone()), Some(thread))
        } else {
            (
                MetaSource::Embedded(EmbeddedStore::open(&config.log_dir, broker.clone())?),
                None,
            )
        };
        let (meta, store, shared) = match source {
            MetaSource::Embedded(store) => (Arc::new(store.meta().clone()), Some(store), None),
            MetaSource::Cluster(shared) => {
                // Until the controller's first UpdateMetadata: this broker
                // alone, no topics, no controller known.
                let meta = ClusterMeta {
                    version: 0,
                    cluster_id: String::new(),
                    controller: BrokerId(-1),
                    brokers: vec![broker],
                    topics: Default::default(),
                    broker_configs: Default::default(),
                    scram_credentials: Default::default(),
                    acls: Vec::new(),
                };
                (Arc::new(meta), None, Some(shared))
            }
        };
        let store = Arc::new(Mutex::new(store));
        let shards = if config.shards == 0 {
            online_cpus()
        } else {
            config.shards
        };
        if config.open_files_per_shard == 0 {
            config.open_files_per_shard = crate::open_files::segment_files_per_shard(soft_limit, shards);
        }
        tracing::info!(
            per_shard = config.open_files_per_shard,
            shards,
            "segment files kept open at most (ferrite.log.open.files.per.shard)"
        );
        let config = Arc::new(config);
        let init: InitFn<BrokerShard> = {
            let config = config.clone();
            Arc::new(move |id, handle| {
                let config = config.clone();
                let meta = meta.clone();
                let shared = shared.clone();
                let store = if id.0 == 0 {
                    store.lock().ok().and_then(|mut s| s.take())
                } else {
                    None
                };
                Box::pin(async move {
                    let live = LiveConfig::compose(&config, meta.broker_configs.clone());
                    let m = meta.clone();
                    let logs = LogManager::open(
                        log_manager_config(&config, handle.shard_count()),
                        id,
                        handle.shard_count(),
                        Rc::new(SystemClock),
                        &move |tp| config_for(&live, &m, tp),
                    )
                    .await?;
                    logs.start_background();
                    let replicas = shared.map(ShardReplicas::new);
                    if let Some(r) = &replicas {
                        glommio::spawn_local(r.clone().run_ticks()).detach();
                    }
                    let shard = Rc::new(BrokerShard::new(
                        id,
                        config.clone(),
                        logs,
                        handle,
                        meta.clone(),
                        store,
                        replicas,
                    ));
                    shard.apply_metadata(meta, Stale::Keep).await?;
                    if let Some(cluster) = shard.cluster() {
                        let changed = cluster.listen_topic_configs();
                        glommio::spawn_local(shard.clone().follow_topic_configs(changed)).detach();
                    }
                    glommio::spawn_local(crate::metrics::report_logs(shard.clone())).detach();
                    glommio::spawn_local(crate::shard_groups::run_group_clock(shard.clone())).detach();
                    glommio::spawn_local(crate::transactions::run_clock(shard.clone())).detach();
                    if shard.id.0 == 0 {
                        glommio::spawn_local(crate::clock_watch::watch_wall_clock(shard.clone())).detach();
                    }
                    Ok(shard)
                })
            })
        };
        let runtime = ShardRuntime::start(
            RuntimeConfig {
                shards,
                pinning: config.pinning(),
                inbox_max: 1024,
                io_memory_bytes: config.io_memory_bytes_per_shard,
                blocking_threads: ferrite_engine::shard::BLOCKING_THREADS_DEFAULT,
            },
            init,
        );
        let runtime = match runtime {
            Ok(r) => r,
            Err(e) => {
                if let Some(c) = cluster {
                    c.stop();
                }
                return Err(e.into());
            }
        };
        // Listen only once every shard has opened (and recovered) its logs;
        // metrics first, so that a broker answering Kafka requests is
        // already scraped.
        let handle = runtime.handle();
        if let Err(e) = check_listen_addresses(&config) {
            runtime.stop();
            if let Some(c) = cluster {
                c.stop();
            }
            return Err(e);
        }
        if let Some(addr) = config.metrics_listen {
            let served = futures_lite::future::block_on(handle.submit(
                ferrite_engine::ShardId(0),
                move |s: Rc<BrokerShard>| async move {
                    let listener = glommio::net::TcpListener::bind(addr)?;
                    glommio::spawn_local(crate::metrics::serve(s, listener)).detach();
                    Ok::<(), std::io::Error>(())
                },
            ))?;
            if let Err(e) = served {
                runtime.stop();
                if let Some(c) = cluster {
                    c.stop();
                }
                return Err(ServerError::Other(format!("metrics listen on {addr}: {e}")));
            }
            tracing::info!(%addr, "metrics at http://{addr}/metrics");
        }
        let spread = ferrite_transport::spread::ConnectionSpread::new(shards);
        let ears = match crate::net::tls_setup::ears(&config) {
            Ok(ears) => ears,
            Err(e) => {
                runtime.stop();
                if let Some(c) = cluster {
                    c.stop();
                }
                return Err(ServerError::Other(e));
            }
        };
        for (listener, ear) in config.listeners().into_iter().zip(ears) {
            for shard in 0..shards {
                let listen = listener.listen;
                let spread = spread.clone();
                let ear = ear.clone();
                let bound = futures_lite::future::block_on(handle.submit(
                    ferrite_engine::ShardId(shard),
                    move |s: Rc<BrokerShard>| async move {
                        let listener = glommio::net::TcpListener::bind(listen)?;
                        glommio::spawn_local(crate::net::accept_loop(s, listener, spread, ear)).detach();
                        Ok::<(), std::io::Error>(())
                    },
                ))?;
                if let Err(e) = bound {
                    runtime.stop();
                    if let Some(c) = cluster {
                        c.stop();
                    }
                    return Err(ServerError::Other(format!("listen on {listen}: {e}")));
                }
            }
            tracing::info!(
                listener = %listener.name,
                protocol = listener.protocol.name(),
                listen = %listener.listen,
                advertised = %format!("{}:{}", listener.advertised_host, listener.advertised_port),
                "listening"
            );
        }
        tracing::info!(listen = %config.listen, shards, data = %config.log_dir.display(), "ferrite is serving");
        Ok(Server {
            runtime,
            cluster,
            _data_dir_lock: data_dir_lock,
        })
    }

    /// Every shard's inbox (tests and fuzzing drive handlers through it).
    pub fn handle(&self) -> ferrite_engine::shard::ShardHandle<BrokerShard> {
        self.runtime.handle()
    }

    /// Stops accepting, lets connections answer what they have, flushes and
    /// closes every log cleanly.
    pub fn stop(self) {
        tracing::info!("shutting down");
        if let Some(c) = &self.cluster {
            controlled_shutdown(&c.shared);
        }
        // First every shard stops accepting and lets its connections finish,
        // while the shards can still reach each other; only then do the
        // inboxes close and the logs flush and close.
        let handle = self.runtime.handle();
        futures_lite::future::block_on(async {
            for s in 0..handle.shard_count() {
                let stop = handle.submit(ferrite_engine::ShardId(s), |shard: Rc<BrokerShard>| async move {
                    shard.begin_stop()
                });
                if let Err(e) = stop.await {
                    tracing::warn!(error = %e, "stopping a shard");
                }
            }
            for s in 0..handle.shard_count() {
                let drain = handle.submit(ferrite_engine::ShardId(s), |shard: Rc<BrokerShard>| async move {
                    shard.drain_connections(std::time::Duration::from_secs(10)).await
                });
                if let Err(e) = drain.await {
                    tracing::warn!(error = %e, "draining a shard");
                }
            }
        });
        self.runtime.stop();
        if let Some(c) = self.cluster {
            c.stop();
        }
        tracing::info!("stopped");
    }
}

/// Controlled shutdown (`controlled.shutdown.enable`): asks the controller
/// to move this broker's leaderships away, a few times, before stopping.
fn controlled_shutdown(shared: &Arc<ClusterShared>) {
    const ATTEMPTS_MAX: usize = 3;
    const RETRY_BACKOFF: std::time::Duration = std::time::Duration::from_millis(500);
    if !shared.config.controlled_shutdown {
        return;
    }
    for attempt in 1..=ATTEMPTS_MAX {
        let answer = futures_lite::future::block_on(shared.ask(|reply| ClusterRequest::ControlledShutdown { reply }));
        match answer {
            Some(Ok(left)) if left.is_empty() => {
                tracing::info!("controlled shutdown: no leaderships left");
                return;
            }
            Some(Ok(left)) => tracing::warn!(attempt, still_leading = left.len(), "controlled shutdown incomplete"),
            Some(Err(e)) => tracing::warn!(attempt, error = %e, "controlled shutdown failed"),
            None => return,
        }
        std::thread::sleep(RETRY_BACKOFF);
    }
}

/// Blocks SIGINT and SIGTERM in this thread (and the threads it starts
/// later), so that `wait_for_signal` can take them synchronously.
pub fn block_stop_signals() {
    // SAFETY: plain signal-mask calls on a local sigset.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Waits for SIGINT or SIGTERM; returns its name.
pub fn wait_for_signal() -> &'static str {
    // SAFETY: sigwait on a local, initialised sigset.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        let mut sig: libc::c_int = 0;
        libc::sigwait(&set, &mut sig);
        if sig == libc::SIGINT {
            "SIGINT"
        } else {
            "SIGTERM"
        }
    }
}
