//! `ferrite-bench`: Ferrite's load generator and benchmarks.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use std::time::Duration;

use ferrite_bench::cold_read;
use ferrite_bench::engine_run::{self, EngineRunConfig};
use ferrite_bench::group_consume::{self, GroupOptions};
use ferrite_bench::load::{self, LoadConfig};
use ferrite_bench::size::parse_size;
use ferrite_client::group::member::AssignorKind;
use ferrite_engine::WriteMode;

#[derive(Parser)]
#[command(name = "ferrite-bench", about = "Benchmarks and load generation for Ferrite")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum AssignorArg {
    Range,
    Roundrobin,
    Sticky,
}

#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    Direct,
    /// Direct, with the segment file extended ahead of the writes
    /// (the broker's `log.preallocate=true`).
    DirectPreallocated,
    Buffered,
}

/// Options shared by `produce` and `consume`.
#[derive(clap::Args, Clone)]
struct LoadArgs {
    /// A broker to talk to.
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    #[arg(long, default_value = "ferrite-bench")]
    topic: String,
    /// Partitions to use (the topic is created with this many if missing).
    #[arg(long, default_value_t = 8)]
    partitions: i32,
    /// Connections (one thread each); partitions are dealt among them.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Requests in flight per connection.
    #[arg(long, default_value_t = 32)]
    inflight: usize,
    /// Stop after this many seconds…
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// …or after this many records (0: no limit; for consume, 0 with no
    /// duration reached means "until caught up").
    #[arg(long, default_value_t = 0)]
    count: u64,
}

#[derive(Subcommand)]
enum Command {
    /// Produce to a broker as fast as possible or at a fixed rate; prints a
    /// line per second, then one JSON line with records_per_sec, mb_per_sec
    /// (record payload), p50_ms, p99_ms, p999_ms, max_ms, and the loopback
    /// TCP bandwidth measured just before (loopback_mb_s, loopback_ratio).
    Produce {
        #[command(flatten)]
        load: LoadArgs,
        #[arg(long, default_value = "1KiB", value_parser = parse_size)]
        record_size: u64,
        /// Records per batch. 16 of 1 KiB fill the Java client's 16 KiB
        /// batch.size; librdkafka (kcat, confluent-kafka) fills batches up
        /// to its 1,000,000-byte batch.size under load: about 900 records
        /// of 1 KiB per request, measured (docs/benchmarks.md).
        #[arg(long, default_value_t = 16)]
        batch_records: usize,
        /// Batches per request, each for another of the connection's
        /// partitions in turn (at most as many as it serves; 0 = one for
        /// each, as the Java client and kafka-python send a broker every
        /// partition's ready batch in one request; librdkafka sends one
        /// partition per request, which is 1). With --rate, a request of k
        /// batches leaves when its last record is due. --count stops at the
        /// first request that reaches it. The JSON's batches_per_request is
        /// what was sent.
        #[arg(long, default_value_t = 0)]
        request_partitions: usize,
        /// 0, 1 or -1 (all). With 0 nothing is answered: records_per_sec
        /// is then what the broker appended (its log end offsets, read
        /// back until they stop moving) and sent_records what was sent.
        #[arg(long, default_value_t = 1, allow_hyphen_values = true)]
        acks: i16,
        /// Records per second in all; 0 = as fast as possible. Each record
        /// then has its time in an open-loop schedule, and its latency
        /// runs from that time to its acknowledgement.
        #[arg(long, default_value_t = 0)]
        rate: u64,
        /// With --rate: batches hold only the records due within this long
        /// of a request's first (as a client's linger.ms closes them), at
        /// least one record each; without it batches are always whole. The
        /// JSON's linger_ms_mean is the part of the latency spent waiting
        /// for batches to close.
        #[arg(long)]
        linger_ms: Option<f64>,
        /// Seconds of loopback TCP measurement before the run (0 skips it).
        #[arg(long, default_value_t = 2.0)]
        loopback_seconds: f64,
    },
    /// Consume from a broker (fetching from offset 0 of every partition);
    /// prints a line per second, then one JSON line like produce's.
    Consume {
        #[command(flatten)]
        load: LoadArgs,
        /// Fetch max bytes per request.
        #[arg(long, default_value = "1MiB", value_parser = parse_size)]
        fetch_max_bytes: u64,
        /// Consume as members of this consumer group (one per connection):
        /// the assigned partitions from their committed offsets, committing
        /// every second and at the end.
        #[arg(long)]
        group: Option<String>,
        /// The group's partition assignor (with --group).
        #[arg(long, value_enum, default_value = "range", requires = "group")]
        assignor: AssignorArg,
        /// The broker's data directory: before consuming, time the disk
        /// reading its segment files with O_DIRECT (as `dd iflag=direct
        /// bs=4M`, up to 2 GiB), then drop the page cache (root), so that
        /// the consume reads cold; the JSON adds disk_read_mb_per_sec and
        /// ratio_to_disk.
        #[arg(long, value_name = "DATA_DIR")]
        cold: Option<PathBuf>,
    },
    /// Start a 3-broker loopback cluster (and its ZooKeeper) and measure
    /// produce throughput and latency over acks 0/1/all, RF 1/3, 100 B and
    /// 1 KiB records, flush policy none and group commit. Writes
    /// DIR/matrix.md, DIR/matrix.json and DIR/matrix.svg.
    Matrix {
        /// Where the table, the JSON and the chart go.
        #[arg(long, default_value = "./ferrite-matrix")]
        out: PathBuf,
        /// The ferrite binary (default: beside this one).
        #[arg(long)]
        ferrite: Option<PathBuf>,
        /// Seconds of load per cell.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        #[arg(long, default_value_t = 6)]
        partitions: i32,
        #[arg(long, default_value_t = 3)]
        connections: usize,
        /// Produce requests in flight per connection (one ~16 KiB batch
        /// each); 32 keeps the brokers busy in every cell.
        #[arg(long, default_value_t = 32)]
        inflight: usize,
        /// Which cells to measure.
        #[arg(long, value_enum, default_value_t = ferrite_bench::matrix::CellSet::All)]
        cells: ferrite_bench::matrix::CellSet,
        /// Records per second per cell (0: as fast as the brokers take
        /// them); a low rate measures latency rather than throughput.
        #[arg(long, default_value_t = 0)]
        rate: u64,
        /// An extra server.properties line for the three brokers, e.g.
        /// `--broker-config log.write.mode=buffered` (repeatable).
        #[arg(long, value_name = "KEY=VALUE")]
        broker_config: Vec<String>,
    },
    /// What a broker pays for its partition count: starts a broker (or,
    /// with --cluster 3, a ZooKeeper cluster), creates --count partitions,
    /// writes to every one, keeps a produce load over all of them (and
    /// over 8 partitions, the baseline), measures idle CPU and, standalone,
    /// restarts (SIGTERM, then SIGKILL). Prints one JSON line with
    /// partitions, rss_idle_mib, rss_mib, open_fds, create_seconds,
    /// restart_seconds, records_per_sec, p99_ms, idle_cpu_percent and more.
    Partitions {
        /// Partitions in all.
        #[arg(long, default_value_t = 1000)]
        count: i32,
        /// Topics the partitions are dealt over.
        #[arg(long, default_value_t = 1)]
        topics: i32,
        #[arg(long, default_value = "1KiB", value_parser = parse_size)]
        record_size: u64,
        #[arg(long, default_value_t = 4)]
        batch_records: usize,
        /// Batches per produce request (as `produce --request-partitions`;
        /// 1 is librdkafka's shape).
        #[arg(long, default_value_t = 1)]
        request_partitions: usize,
        /// Producer connections in all (at least one per topic).
        #[arg(long, default_value_t = 2)]
        connections: usize,
        #[arg(long, default_value_t = 32)]
        inflight: usize,
        /// Seconds of each produce load (the baseline and the full one).
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// 1: `ferrite standalone`; more: `ferrite broker`s on a ZooKeeper
        /// server this command starts.
        #[arg(long = "cluster", default_value_t = 1)]
        brokers: usize,
        #[arg(long, default_value_t = 1)]
        replication_factor: i16,
        /// Seconds over which idle CPU is measured.
        #[arg(long, default_value_t = 10.0)]
        idle_seconds: f64,
        /// Where the brokers' data goes (a temporary directory under it,
        /// removed after a run that succeeded).
        #[arg(long, default_value = "./ferrite-bench-data")]
        dir: PathBuf,
        /// The ferrite binary (default: beside this one).
        #[arg(long)]
        ferrite: Option<PathBuf>,
        /// An extra broker property, e.g. `--broker-config ferrite.shards=1`
        /// (repeatable).
        #[arg(long, value_name = "KEY=VALUE")]
        broker_config: Vec<String>,
    },
    /// Loopback TCP bandwidth of this machine.
    Loopback {
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
    },
    /// Append to one partition through the storage engine and compare with a
    /// plain sequential O_DIRECT writer on the same disk, in the same run.
    /// Prints progress, then one JSON line with append_mb_s, raw_write_mb_s,
    /// ratio, recovery_mb_s, and the share of each side the disk was busy
    /// (append_device_busy, raw_device_busy).
    Engine {
        /// Bytes to append (e.g. 2GiB, 512MiB).
        #[arg(long, default_value = "2GiB", value_parser = parse_size)]
        bytes: u64,
        /// Directory for the partition and the raw file (on the disk to measure).
        #[arg(long, default_value = "./ferrite-bench-data")]
        dir: PathBuf,
        /// Record size.
        #[arg(long, default_value = "1KiB", value_parser = parse_size)]
        record_bytes: u64,
        /// Records per batch (16 x 1 KiB records make a 16 KiB batch).
        #[arg(long, default_value_t = 16)]
        batch_records: usize,
        /// Appends in flight at once (as produce requests from many clients).
        #[arg(long, default_value_t = 256)]
        inflight: usize,
        /// How the engine writes segments.
        #[arg(long, value_enum, default_value = "direct")]
        write_mode: Mode,
    },
}

fn load_config(l: LoadArgs) -> LoadConfig {
    LoadConfig {
        bootstrap: l.bootstrap,
        topic: l.topic,
        partitions: l.partitions,
        record_bytes: 1024,
        batch_records: 16,
        request_partitions: 1,
        acks: 1,
        inflight: l.inflight,
        connections: l.connections,
        duration: Duration::from_secs_f64(l.duration),
        count: l.count,
        rate: 0,
        linger: None,
        fetch_max_bytes: 1 << 20,
        replication_factor: 1,
        topic_configs: Vec::new(),
    }
}

fn fail(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("ferrite-bench {what}: {e}");
    std::process::exit(1);
}

/// A binary in this one's directory.
fn beside_me(name: &str) -> PathBuf {
    let me = std::env::current_exe().unwrap_or_else(|e| fail("locating ferrite-bench", e));
    me.with_file_name(name)
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::Produce {
            load: l,
            record_size,
            batch_records,
            request_partitions,
            acks,
            rate,
            linger_ms,
            loopback_seconds,
        } => {
            let mut cfg = load_config(l);
            cfg.linger = linger_ms.map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1000.0));
            cfg.record_bytes = record_size as usize;
            cfg.batch_records = batch_records;
            cfg.request_partitions = request_partitions;
            cfg.acks = acks;
            cfg.rate = rate;
            let loopback = if loopback_seconds > 0.0 {
                let mb = ferrite_bench::loopback::measure(Duration::from_secs_f64(loopback_seconds))
                    .unwrap_or_else(|e| fail("loopback", e));
                println!("loopback TCP: {mb:.0} MB/s");
                Some(mb)
            } else {
                None
            };
            let result = load::produce(&cfg).unwrap_or_else(|e| fail("produce", e));
            let mut json = result.to_json("produce", &cfg);
            if let Some(mb) = loopback {
                json["loopback_mb_s"] = serde_json::json!((mb * 10.0).round() / 10.0);
                json["loopback_ratio"] = serde_json::json!((result.mb_per_sec() / mb * 1000.0).round() / 1000.0);
            }
            println!("{json}");
        }
        Command::Consume {
            load: l,
            fetch_max_bytes,
            group,
            assignor,
            cold,
        } => {
            let mut cfg = load_config(l);
            cfg.fetch_max_bytes = fetch_max_bytes.min(i32::MAX as u64) as i32;
            let disk = cold.map(|dir| {
                let (rate, bytes) = cold_read::disk_read_mb_per_sec(&dir).unwrap_or_else(|e| fail("cold", e));
                eprintln!("disk: {rate:.0} MB/s reading {bytes} bytes of segment files with O_DIRECT");
                cold_read::drop_caches().unwrap_or_else(|e| fail("cold", e));
                rate
            });
            let with_disk = |json: &mut serde_json::Value| {
                if let Some(rate) = disk {
                    let consumed = json["mb_per_sec"].as_f64().unwrap_or(0.0);
                    json["disk_read_mb_per_sec"] = serde_json::json!(rate.round());
                    json["ratio_to_disk"] = serde_json::json!((consumed / rate * 1000.0).round() / 1000.0);
                }
            };
            let Some(group) = group else {
                let result = load::consume(&cfg).unwrap_or_else(|e| fail("consume", e));
                let mut json = result.to_json("consume", &cfg);
                with_disk(&mut json);
                println!("{json}");
                return;
            };
            let kind = match assignor {
                AssignorArg::Range => AssignorKind::Range,
                AssignorArg::Roundrobin => AssignorKind::RoundRobin,
                AssignorArg::Sticky => AssignorKind::Sticky,
            };
            let opts = GroupOptions::new(&group, kind);
            let result = group_consume::consume(&cfg, &opts).unwrap_or_else(|e| fail("consume", e));
            let mut json = result.to_json("consume", &cfg);
            json["group"] = serde_json::json!(group);
            json["assignor"] = serde_json::json!(kind.boxed().name());
            with_disk(&mut json);
            println!("{json}");
        }
        Command::Matrix {
            out,
            ferrite,
            seconds,
            partitions,
            connections,
            inflight,
            cells,
            rate,
            broker_config,
        } => {
            let ferrite = ferrite.unwrap_or_else(|| beside_me("ferrite"));
            let cfg = ferrite_bench::matrix::MatrixConfig {
                out,
                ferrite,
                seconds,
                partitions,
                connections,
                inflight,
                cells,
                rate,
                broker_config,
            };
            let cells = ferrite_bench::matrix::run(&cfg).unwrap_or_else(|e| fail("matrix", e));
            println!("{}", ferrite_bench::matrix::table(&cells));
            let ratio = ferrite_bench::matrix::target_ratio(&cells);
            println!(
                "{}",
                serde_json::json!({"bench": "matrix", "cells": cells.len(), "rf3_all_over_rf1_one": ratio,
                                   "out": cfg.out.display().to_string()})
            );
        }
        Command::Partitions {
            count,
            topics,
            record_size,
            batch_records,
            request_partitions,
            connections,
            inflight,
            seconds,
            brokers,
            replication_factor,
            idle_seconds,
            dir,
            ferrite,
            broker_config,
        } => {
            let cfg = ferrite_bench::partitions::PartitionsConfig {
                ferrite: ferrite.unwrap_or_else(|| beside_me("ferrite")),
                dir,
                count,
                topics,
                record_bytes: record_size as usize,
                batch_records,
                request_partitions,
                connections,
                inflight,
                seconds,
                brokers,
                replication_factor,
                idle_seconds,
                broker_config,
            };
            let json = ferrite_bench::partitions::run(&cfg).unwrap_or_else(|e| fail("partitions", e));
            println!("{json}");
        }
        Command::Loopback { seconds } => {
            let mb = ferrite_bench::loopback::measure(Duration::from_secs_f64(seconds))
                .unwrap_or_else(|e| fail("loopback", e));
            println!(
                "{}",
                serde_json::json!({"bench": "loopback", "mb_per_sec": (mb * 10.0).round() / 10.0})
            );
        }
        Command::Engine {
            bytes,
            dir,
            record_bytes,
            batch_records,
            inflight,
            write_mode,
        } => {
            let cfg = EngineRunConfig {
                bytes,
                dir,
                batch_records,
                record_bytes: record_bytes as usize,
                inflight,
                mode: match write_mode {
                    Mode::Direct => WriteMode::Direct,
                    Mode::DirectPreallocated => WriteMode::DirectPreallocated,
                    Mode::Buffered => WriteMode::Buffered,
                },
                progress: true,
            };
            match engine_run::run(&cfg) {
                Ok(result) => println!("{}", result.to_json(&cfg)),
                Err(e) => {
                    eprintln!("ferrite-bench engine: {e}");
                    std::process::exit(1);
                }
            }
        }
    }
}
