//! `ferrite leaders …` and `ferrite partitions …`: cluster administration.
//!
//! - `leaders elect --preferred [--topic T [--partition P]]` sends
//!   ElectLeaders to a running broker (like `kafka-leader-election.sh`).
//! - `partitions reassign --plan plan.json` writes the plan, in Kafka's
//!   JSON shape (`{"version":1,"partitions":[{"topic":…,"partition":…,
//!   "replicas":[…]}]}`), to `/admin/reassign_partitions`, and `--verify`
//!   reports the moves still under way — both against ZooKeeper, as
//!   `kafka-reassign-partitions.sh --zookeeper` did.

use std::path::PathBuf;
use std::time::Duration;

use clap::Subcommand;
use ferrite_controller::zk::ZkStore;
use ferrite_ids::{BrokerId, TopicPartition};

use ferrite_client::Connection;
use ferrite_protocol::elect_leaders::{self, ElectLeadersRequest, ElectLeadersResponse, ElectTopic};
use ferrite_protocol::errors;

const ELECT_LEADERS_V: i16 = 1;
/// Largest plan file read.
const PLAN_BYTES_MAX: u64 = 16 << 20;

#[derive(Subcommand, Debug)]
pub enum LeadersCommand {
    /// Move leadership back to each partition's preferred replica.
    Elect {
        /// Elect the preferred replica (the only kind there is).
        #[arg(long, required = true)]
        preferred: bool,
        /// Only this topic's partitions (all partitions when absent).
        #[arg(long)]
        topic: Option<String>,
        /// Only this partition of --topic.
        #[arg(long, requires = "topic")]
        partition: Option<i32>,
    },
}

#[derive(Subcommand, Debug)]
pub enum PartitionsCommand {
    /// Move partitions to new replicas (Kafka's reassignment JSON).
    Reassign {
        /// ZooKeeper to write the reassignment to.
        #[arg(long)]
        zookeeper: String,
        /// The plan: {"version":1,"partitions":[{"topic","partition","replicas"}]}.
        #[arg(long, required_unless_present = "verify")]
        plan: Option<PathBuf>,
        /// Report the moves still under way instead.
        #[arg(long)]
        verify: bool,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Client(#[from] ferrite_client::ClientError),
    #[error("malformed response: {0}")]
    Wire(#[from] ferrite_protocol::wire::WireError),
    #[error("{0}")]
    Controller(#[from] ferrite_controller::ControllerError),
    #[error("{0}")]
    Usage(String),
}

pub fn run_leaders(bootstrap: &str, command: LeadersCommand, out: &mut dyn std::io::Write) -> Result<(), CliError> {
    let LeadersCommand::Elect { topic, partition, .. } = command;
    let mut c = Connection::connect(bootstrap, "ferrite-leaders")?;
    let topics = match (topic, partition) {
        (None, _) => None,
        (Some(t), Some(p)) => Some(vec![ElectTopic {
            topic: t,
            partitions: vec![p],
        }]),
        (Some(t), None) => {
            let names = [t.clone()];
            let mut r = c.call(3, ferrite_client::codec::METADATA_V, |w| {
                ferrite_client::codec::metadata(w, Some(&names))
            })?;
            let meta = ferrite_client::codec::decode_metadata(&mut r)?;
            let parts = meta
                .topics
                .iter()
                .find(|x| x.name == t && x.error == 0)
                .map(|x| x.partitions.iter().map(|p| p.partition).collect())
                .ok_or_else(|| CliError::Usage(format!("unknown topic {t}")))?;
            Some(vec![ElectTopic {
                topic: t,
                partitions: parts,
            }])
        }
    };
    let req = ElectLeadersRequest {
        election_type: elect_leaders::PREFERRED,
        topics,
        timeout_ms: 30_000,
    };
    let mut r = c.call(elect_leaders::API_KEY, ELECT_LEADERS_V, |w| {
        req.encode(w, ELECT_LEADERS_V)
    })?;
    let resp = ElectLeadersResponse::decode(&mut r, ELECT_LEADERS_V)?;
    if resp.error_code != 0 {
        return Err(CliError::Usage(format!(
            "election refused: {}",
            errors::name(resp.error_code)
        )));
    }
    if resp.results.is_empty() {
        let _ = writeln!(out, "preferred replica election started for every partition");
    }
    for t in resp.results {
        for p in t.partitions {
            let _ = writeln!(out, "{}-{}\t{}", t.topic, p.partition, errors::name(p.error_code));
        }
    }
    Ok(())
}

/// Parses Kafka's reassignment JSON.
pub fn parse_plan(text: &str) -> Result<Vec<(TopicPartition, Vec<BrokerId>)>, CliError> {
    #[derive(serde::Deserialize)]
    struct Move {
        topic: String,
        partition: i32,
        replicas: Vec<i32>,
    }
    #[derive(serde::Deserialize)]
    struct Plan {
        partitions: Vec<Move>,
    }
    let plan: Plan = serde_json::from_str(text).map_err(|e| CliError::Usage(format!("plan: {e}")))?;
    let mut moves = Vec::new();
    for m in plan.partitions {
        let mut seen = m.replicas.clone();
        seen.sort();
        seen.dedup();
        if m.replicas.is_empty() || seen.len() != m.replicas.len() {
            return Err(CliError::Usage(format!(
                "{}-{}: replicas must be distinct and non-empty",
                m.topic, m.partition
            )));
        }
        moves.push((
            TopicPartition::new(m.topic, m.partition),
            m.replicas.into_iter().map(BrokerId).collect(),
        ));
    }
    Ok(moves)
}

pub fn run_partitions(command: PartitionsCommand, out: &mut dyn std::io::Write) -> Result<(), CliError> {
    let PartitionsCommand::Reassign {
        zookeeper,
        plan,
        verify,
    } = command;
    let moves = match &plan {
        Some(path) if !verify => {
            let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            if size > PLAN_BYTES_MAX {
                return Err(CliError::Usage(format!(
                    "{}: larger than {PLAN_BYTES_MAX} bytes",
                    path.display()
                )));
            }
            let text =
                std::fs::read_to_string(path).map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
            Some(parse_plan(&text)?)
        }
        _ => None,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Usage(e.to_string()))?;
    rt.block_on(async {
        let store = ZkStore::connect(&zookeeper, Duration::from_secs(10)).await?;
        match moves {
            Some(moves) => {
                store.request_reassignment(&moves).await?;
                let _ = writeln!(out, "reassignment of {} partition(s) started", moves.len());
            }
            None => {
                let left = store.reassignments().await?;
                if left.is_empty() {
                    let _ = writeln!(out, "no reassignment in progress");
                }
                for (tp, replicas) in left {
                    let r: Vec<String> = replicas.iter().map(|b| b.0.to_string()).collect();
                    let _ = writeln!(out, "{tp}\tin progress\t[{}]", r.join(","));
                }
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_kafkas_json_and_checked() {
        let plan = r#"{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3,4]}]}"#;
        let moves = parse_plan(plan).unwrap();
        assert_eq!(
            moves,
            vec![(TopicPartition::new("t", 0), vec![BrokerId(2), BrokerId(3), BrokerId(4)])]
        );
        assert!(parse_plan(r#"{"partitions":[{"topic":"t","partition":0,"replicas":[2,2]}]}"#).is_err());
        assert!(parse_plan("{}").is_err());
    }
}
