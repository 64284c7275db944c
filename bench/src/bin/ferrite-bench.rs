//! `ferrite-bench`: Ferrite's load generator and benchmarks.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use ferrite_bench::engine_run::{self, EngineRunConfig};
use ferrite_bench::size::parse_size;
use ferrite_engine::WriteMode;

#[derive(Parser)]
#[command(name = "ferrite-bench", about = "Benchmarks and load generation for Ferrite")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    Direct,
    Buffered,
}

#[derive(Subcommand)]
enum Command {
    /// Append to one partition through the storage engine and compare with a
    /// plain sequential O_DIRECT writer on the same disk, in the same run.
    /// Prints progress, then one JSON line with append_mb_s, raw_write_mb_s,
    /// ratio and recovery_mb_s.
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

fn main() {
    let cli = Cli::parse();
    match cli.command {
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
