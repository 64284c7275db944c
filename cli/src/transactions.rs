//! `ferrite transactions`: the transactions the coordinators hold, like
//! `kafka-transactions.sh`.
//!
//! - `list [--state S]...` asks every broker (ListTransactions v1) and
//!   prints one line per transactional id: id, producer id, state.
//! - `describe ID` finds the id's coordinator (FindCoordinator, key type
//!   transaction) and prints its state (DescribeTransactions v0): producer
//!   id and epoch, state, timeout, start time and the partitions of the
//!   open transaction.
//! - `producers --topic T --partition P` and `abort ...`: see
//!   [`crate::transactions_abort`].

use clap::Subcommand;
use ferrite_client::codec::{self, METADATA_V};
use ferrite_client::{ClientError, Connection};
use ferrite_protocol::group_membership as gm;
use ferrite_protocol::txn_admin as ta;

use crate::check;

const CLIENT_ID: &str = "ferrite-cli";
const FIND_COORDINATOR_V: i16 = 3;
const LIST_V: i16 = 1;
const DESCRIBE_V: i16 = 0;

#[derive(Subcommand)]
pub enum TransactionsCommand {
    /// Every transactional id the brokers coordinate.
    List {
        /// Only these states (Empty, Ongoing, PrepareCommit, PrepareAbort,
        /// CompleteCommit, CompleteAbort, ...).
        #[arg(long = "state")]
        states: Vec<String>,
    },
    /// One transactional id's state and its open transaction's partitions.
    Describe {
        /// The transactional id.
        id: String,
    },
    /// A partition's producers and the first offset of each one's open
    /// transaction (DescribeProducers), like describe-producers.
    Producers {
        /// The topic.
        #[arg(long)]
        topic: String,
        /// The partition (its leader answers).
        #[arg(long)]
        partition: i32,
    },
    /// Ends a hanging transaction on one partition with an ABORT marker.
    Abort(crate::transactions_abort::AbortArgs),
}

pub fn run(bootstrap: &str, command: TransactionsCommand, out: &mut dyn std::io::Write) -> Result<(), ClientError> {
    let w = |e: std::io::Error| ClientError::Kafka(e.to_string());
    match command {
        TransactionsCommand::List { states } => {
            for t in list(bootstrap, states)? {
                writeln!(
                    out,
                    "{}\t{}\t{}",
                    t.transactional_id, t.producer_id.0, t.transaction_state
                )
                .map_err(w)?;
            }
        }
        TransactionsCommand::Describe { id } => {
            let d = describe(bootstrap, &id)?;
            writeln!(out, "transactional id: {}", d.transactional_id).map_err(w)?;
            writeln!(out, "producer id: {}, epoch {}", d.producer_id.0, d.producer_epoch).map_err(w)?;
            writeln!(out, "state: {}", d.transaction_state).map_err(w)?;
            writeln!(out, "timeout ms: {}", d.transaction_timeout_ms).map_err(w)?;
            writeln!(out, "started at ms: {}", d.transaction_start_time_ms).map_err(w)?;
            for t in d.topics {
                for p in t.partitions {
                    writeln!(out, "partition: {}-{p}", t.topic).map_err(w)?;
                }
            }
        }
        TransactionsCommand::Producers { topic, partition } => {
            writeln!(
                out,
                "producer_id\tepoch\tlast_sequence\tlast_timestamp\ttxn_start_offset"
            )
            .map_err(w)?;
            for p in crate::transactions_abort::producers(bootstrap, &topic, partition)? {
                writeln!(
                    out,
                    "{}\t{}\t{}\t{}\t{}",
                    p.producer_id.0, p.producer_epoch, p.last_sequence, p.last_timestamp, p.current_txn_start_offset
                )
                .map_err(w)?;
            }
        }
        TransactionsCommand::Abort(a) => {
            let (id, epoch) = crate::transactions_abort::abort(bootstrap, &a)?;
            writeln!(
                out,
                "aborted the transaction of producer {} (epoch {epoch}) on {}-{}",
                id.0, a.topic, a.partition
            )
            .map_err(w)?;
        }
    }
    Ok(())
}

fn list(bootstrap: &str, states: Vec<String>) -> Result<Vec<ta::ListedTransaction>, ClientError> {
    let mut c = Connection::connect(bootstrap, CLIENT_ID)?;
    let mut r = c.call(3, METADATA_V, |w| codec::metadata(w, Some(&[])))?;
    let m = codec::decode_metadata(&mut r)?;
    let req = ta::ListTransactionsRequest {
        state_filters: states,
        producer_id_filters: Vec::new(),
        duration_filter: ta::NO_DURATION_FILTER,
    };
    let mut all = Vec::new();
    for b in &m.brokers {
        let mut c = Connection::connect(&format!("{}:{}", b.host, b.port), CLIENT_ID)?;
        let mut r = c.call_flexible(ta::LIST_TRANSACTIONS_KEY, LIST_V, |w| req.encode(w, LIST_V))?;
        let resp = ta::ListTransactionsResponse::decode(&mut r, LIST_V)?;
        check(&format!("broker {}", b.id), resp.error_code, None)?;
        if let Some(s) = resp.unknown_state_filters.first() {
            return Err(ClientError::Kafka(format!("--state {s}: no such state")));
        }
        all.extend(resp.transaction_states);
    }
    all.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
    Ok(all)
}

fn describe(bootstrap: &str, id: &str) -> Result<ta::TransactionDescription, ClientError> {
    let mut c = Connection::connect(bootstrap, CLIENT_ID)?;
    let find = gm::FindCoordinatorRequest {
        key: id.to_string(),
        key_type: gm::KEY_TYPE_TRANSACTION,
    };
    let mut r = c.call_flexible(gm::FIND_COORDINATOR_KEY, FIND_COORDINATOR_V, |w| {
        find.encode(w, FIND_COORDINATOR_V)
    })?;
    let coordinator = gm::FindCoordinatorResponse::decode(&mut r, FIND_COORDINATOR_V)?;
    check(
        &format!("finding the coordinator of '{id}'"),
        coordinator.error_code,
        coordinator.error_message,
    )?;
    let mut c = Connection::connect(&format!("{}:{}", coordinator.host, coordinator.port), CLIENT_ID)?;
    let req = ta::DescribeTransactionsRequest {
        transactional_ids: vec![id.to_string()],
    };
    let mut r = c.call_flexible(ta::DESCRIBE_TRANSACTIONS_KEY, DESCRIBE_V, |w| req.encode(w, DESCRIBE_V))?;
    let resp = ta::DescribeTransactionsResponse::decode(&mut r, DESCRIBE_V)?;
    let d = resp
        .transaction_states
        .into_iter()
        .next()
        .ok_or_else(|| ClientError::Kafka(format!("describing '{id}': an empty answer")))?;
    check(&format!("describing '{id}'"), d.error_code, None)?;
    Ok(d)
}
