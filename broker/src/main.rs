//! `ferrite`: the broker binary.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use ferrite_broker::server::{block_stop_signals, wait_for_signal, Server};
use ferrite_config::{parse_properties, BrokerConfig};

/// mimalloc instead of glibc's malloc: a broker allocates and frees per
/// request (frame buffers that the batch cache later drops, tasks, response
/// parts), and glibc spent 12 % of a CPU-bound standalone produce run in
/// malloc, free and their chunk consolidation (`docs/benchmarks.md`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "ferrite", version, about = "A Kafka-compatible commit-log broker")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one broker with embedded metadata (no ZooKeeper needed).
    Standalone {
        /// Address to listen on, and to advertise (127.0.0.1 for 0.0.0.0; see advertised.listeners).
        #[arg(long, default_value = "127.0.0.1:9092")]
        listen: SocketAddr,
        /// Where partitions and metadata live.
        #[arg(long, default_value = "./ferrite-data")]
        data_dir: PathBuf,
        /// Shards (one per CPU when 0).
        #[arg(long, default_value_t = 0)]
        shards: usize,
        /// Serve Prometheus metrics at http://ADDR/metrics.
        #[arg(long)]
        metrics_listen: Option<SocketAddr>,
        /// A broker property, Kafka name (repeatable), e.g. log.retention.hours=1.
        #[arg(long = "override", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
    },
    #[command(flatten)]
    Admin(ferrite_cli::AdminCommand),
    /// Run a broker from a Kafka-style server.properties.
    Broker {
        /// The properties file.
        #[arg(long)]
        config: PathBuf,
        /// A property that overrides the file (repeatable).
        #[arg(long = "override", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
    },
}

fn split_overrides(overrides: &[String]) -> Result<Vec<(String, String)>, String> {
    overrides
        .iter()
        .map(|o| {
            o.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| format!("--override {o}: expected KEY=VALUE"))
        })
        .collect()
}

fn config_from(command: Command) -> Result<BrokerConfig, String> {
    let mut config = BrokerConfig::default();
    match command {
        Command::Standalone {
            listen,
            data_dir,
            shards,
            metrics_listen,
            overrides,
        } => {
            config.metrics_listen = metrics_listen;
            config.listen = listen;
            config.advertised_host = ferrite_config::listeners::advertise(&listen.ip().to_string());
            config.advertised_port = listen.port();
            config.log_dir = data_dir;
            config.shards = shards;
            config.apply(&split_overrides(&overrides)?).map_err(|e| e.to_string())?;
        }
        Command::Broker {
            config: path,
            overrides,
        } => {
            let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let mut pairs = parse_properties(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            pairs.extend(split_overrides(&overrides)?);
            config.apply(&pairs).map_err(|e| e.to_string())?;
        }
        Command::Admin(_) => unreachable!("handled before"),
    }
    // Relative to where the broker was started, said once, in full.
    config.log_dir =
        std::path::absolute(&config.log_dir).map_err(|e| format!("log.dirs {}: {e}", config.log_dir.display()))?;
    Ok(config)
}

/// Colour codes only on a terminal, and not there when `NO_COLOR` is set
/// (no-color.org): a log written to a file or a pipe is plain text.
fn log_in_colour() -> bool {
    use std::io::IsTerminal;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    std::io::stderr().is_terminal() && !no_color
}

/// Transparent huge pages off for this process: mimalloc's heap is one
/// large mapping, and with THP `always` (a common kernel default) every
/// 2 MiB of it a shard touched became resident whole — 13 MiB of an idle
/// broker's 88 MiB, measured. Process-wide: `docs/benchmarks.md` has the
/// throughput with and without.
fn huge_pages_off() {
    // SAFETY: prctl(PR_SET_THP_DISABLE) takes integer arguments only and
    // changes nothing but this process's page-fault policy.
    let r = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if r != 0 {
        eprintln!(
            "ferrite: transparent huge pages left on: {}",
            std::io::Error::last_os_error()
        );
    }
}

fn main() {
    huge_pages_off();
    let started = std::env::var("FERRITE_LOG").unwrap_or_else(|_| "info".into());
    let filter = tracing_subscriber::EnvFilter::try_new(&started).unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(log_in_colour())
        // A log pipe that breaks (its reader gone) must not stop the broker:
        // reporting the failed write on stderr would panic the shard.
        .log_internal_errors(false)
        .with_filter_reloading();
    let reload = builder.reload_handle();
    builder.init();
    // Levels changed while running (BROKER_LOGGER, `log_levels.rs`).
    ferrite_broker::log_levels::install(
        &started,
        Box::new(move |directives| {
            let filter = tracing_subscriber::EnvFilter::try_new(directives).map_err(|e| e.to_string())?;
            reload.reload(filter).map_err(|e| e.to_string())
        }),
    );
    let cli = Cli::parse();
    let command = match cli.command {
        Command::Admin(admin) => {
            if let Err(e) = admin.run(&mut std::io::stdout()) {
                eprintln!("ferrite {e}");
                std::process::exit(1);
            }
            return;
        }
        other => other,
    };
    let config = match config_from(command) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ferrite: {e}");
            std::process::exit(2);
        }
    };
    block_stop_signals();
    let server = match Server::start(config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ferrite: {e}");
            std::process::exit(1);
        }
    };
    let sig = wait_for_signal();
    tracing::info!(signal = sig, "stopping");
    server.stop();
}
