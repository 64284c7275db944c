//! `ferrite-chaos`: runs the fault suite. See the crate's docs and
//! `docs/reliability.md`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ferrite_chaos::fault::Fault;
use ferrite_chaos::runner::{self, RunConfig};

#[derive(Parser)]
#[command(
    name = "ferrite-chaos",
    about = "Ferrite's fault suite: a cluster in a private network namespace, faults, a checked history (needs root)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// One run of one fault; prints its report as JSON and exits 1 if a
    /// record was lost, doubled or misplaced or the replicas differ.
    Run(RunArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// The fault: none, kill-leader, kill-follower, kill-controller,
    /// pause-leader, isolate-leader-from-followers,
    /// isolate-leader-from-zookeeper, isolate-leader, isolate-follower,
    /// kill-zk-member.
    #[arg(long)]
    fault: Fault,
    /// How long the fault holds before it heals, in seconds.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// How long the clients go on after healing, in seconds.
    #[arg(long, default_value_t = 15)]
    recovery_seconds: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The producers' acks (-1: all, 1: the leader's).
    #[arg(long, default_value_t = -1, allow_hyphen_values = true)]
    acks: i16,
    /// The brokers' min.insync.replicas.
    #[arg(long = "min-insync", default_value_t = 2)]
    min_insync: i32,
    /// Sets unclean.leader.election.enable=true.
    #[arg(long)]
    unclean: bool,
    #[arg(long, default_value_t = 3)]
    brokers: usize,
    #[arg(long, default_value_t = 3)]
    partitions: i32,
    #[arg(long, default_value_t = 3)]
    producers: u32,
    /// The `ferrite` binary (default: the one beside this one).
    #[arg(long)]
    ferrite: Option<PathBuf>,
}

fn main() -> ExitCode {
    let Command::Run(a) = Cli::parse().command;
    let ferrite = a.ferrite.unwrap_or_else(|| {
        let me = std::env::current_exe().unwrap_or_default();
        me.with_file_name("ferrite")
    });
    let cfg = RunConfig {
        fault: a.fault,
        fault_seconds: a.seconds,
        recovery_seconds: a.recovery_seconds,
        seed: a.seed,
        acks: a.acks,
        min_insync_replicas: a.min_insync,
        unclean_leader_election: a.unclean,
        brokers: a.brokers,
        partitions: a.partitions,
        producers: a.producers,
        ferrite,
    };
    match runner::run(&cfg) {
        Ok(report) => {
            println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
            if report.safe() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("ferrite-chaos: {e}");
            ExitCode::from(2)
        }
    }
}
