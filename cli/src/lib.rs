//! The `ferrite` administration commands, in the shape of Kafka's tools:
//! `topics` (`kafka-topics.sh`), `configs` (`kafka-configs.sh`), `groups`
//! (`kafka-consumer-groups.sh`), `leaders` (`kafka-leader-election.sh`),
//! `partitions` (`kafka-reassign-partitions.sh --zookeeper`), `users`
//! (`kafka-configs.sh --entity-type users`: SCRAM credentials), `acls`
//! (`kafka-acls.sh`) and `transactions` (`kafka-transactions.sh`). Each is a clap
//! subcommand and a `run` function over the client; the `ferrite` binary
//! (in `ferrite-broker`) parses them and runs them.
//!
//! Depends on: `ferrite-ids`, `ferrite-protocol`, `ferrite-client`,
//! `ferrite-security` (salting a password) and `ferrite-controller` for
//! its ZooKeeper store (`partitions`). It must not
//! depend on the broker.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod acls;
pub mod cluster;
pub mod configs;
pub mod delete_records;
pub mod groups;
pub mod topics;
pub mod transactions;
pub mod transactions_abort;
pub mod users;

use clap::Subcommand;

/// The administration commands, as `ferrite` parses them.
#[derive(Subcommand)]
pub enum AdminCommand {
    /// Administer topics on a running broker (over the Kafka protocol).
    Topics {
        /// A broker to talk to (may also follow the subcommand).
        #[arg(long, global = true, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        #[command(subcommand)]
        command: topics::TopicsCommand,
    },
    /// Topic configs and dynamic broker configs (over the Kafka protocol).
    Configs {
        /// A broker to talk to (may also follow the subcommand).
        #[arg(long, global = true, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        #[command(subcommand)]
        command: configs::ConfigsCommand,
    },
    /// Consumer groups: list, describe, delete, reset offsets (over the Kafka protocol).
    Groups {
        /// A broker to talk to (may also follow the subcommand).
        #[arg(long, global = true, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        #[command(subcommand)]
        command: groups::GroupsCommand,
    },
    /// Leader elections in a cluster (over the Kafka protocol).
    Leaders {
        /// A broker to talk to (may also follow the subcommand).
        #[arg(long, global = true, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        #[command(subcommand)]
        command: cluster::LeadersCommand,
    },
    /// ACLs: add, list, remove, like kafka-acls.sh (over the Kafka protocol).
    Acls {
        /// A broker to talk to (may also follow the subcommand).
        #[arg(long, global = true, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        #[command(subcommand)]
        command: acls::AclsCommand,
    },
    /// SCRAM users of SASL listeners: add, list, remove (over the Kafka protocol).
    Users {
        /// A broker to talk to (may also follow the subcommand).
        #[arg(long, global = true, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        #[command(subcommand)]
        command: users::UsersCommand,
    },
    /// Transactions: list, describe, producers, abort, like kafka-transactions.sh (over the Kafka protocol).
    Transactions {
        /// A broker to talk to (may also follow the subcommand).
        #[arg(long, global = true, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        #[command(subcommand)]
        command: transactions::TransactionsCommand,
    },
    /// Partition reassignment in a cluster (through ZooKeeper).
    Partitions {
        #[command(subcommand)]
        command: cluster::PartitionsCommand,
    },
}

impl AdminCommand {
    /// Runs the command, writing its answer to `out`. The error starts with
    /// the command's name (`topics: …`).
    pub fn run(self, out: &mut dyn std::io::Write) -> Result<(), String> {
        match self {
            AdminCommand::Topics { bootstrap, command } => {
                topics::run(&bootstrap, command, out).map_err(|e| format!("topics: {e}"))
            }
            AdminCommand::Configs { bootstrap, command } => {
                configs::run(&bootstrap, command, out).map_err(|e| format!("configs: {e}"))
            }
            AdminCommand::Groups { bootstrap, command } => {
                groups::run(&bootstrap, command, out).map_err(|e| format!("groups: {e}"))
            }
            AdminCommand::Leaders { bootstrap, command } => {
                cluster::run_leaders(&bootstrap, command, out).map_err(|e| format!("leaders: {e}"))
            }
            AdminCommand::Acls { bootstrap, command } => {
                acls::run(&bootstrap, command, out).map_err(|e| format!("acls: {e}"))
            }
            AdminCommand::Users { bootstrap, command } => {
                users::run(&bootstrap, command, out).map_err(|e| format!("users: {e}"))
            }
            AdminCommand::Transactions { bootstrap, command } => {
                transactions::run(&bootstrap, command, out).map_err(|e| format!("transactions: {e}"))
            }
            AdminCommand::Partitions { command } => {
                cluster::run_partitions(command, out).map_err(|e| format!("partitions: {e}"))
            }
        }
    }
}

/// `Ok` for error code 0; else the error, with its Kafka name and the
/// broker's message, for `what`.
pub(crate) fn check(what: &str, code: i16, message: Option<String>) -> Result<(), ferrite_client::ClientError> {
    if code == 0 {
        return Ok(());
    }
    Err(ferrite_client::ClientError::Kafka(format!(
        "{what}: {} ({code}){}",
        ferrite_protocol::errors::name(code),
        message.map(|m| format!(": {m}")).unwrap_or_default()
    )))
}
