//! `ferrite topics …`: topic administration against a running broker over
//! the Kafka protocol, like `kafka-topics.sh` / `rpk topic`.

use clap::Subcommand;

use crate::check;
use ferrite_client::codec::{
    self, ALTER_CONFIGS_V, CREATE_PARTITIONS_V, CREATE_TOPICS_V, DELETE_TOPICS_V, DESCRIBE_CONFIGS_V, METADATA_V,
};
use ferrite_client::{ClientError, Connection};

#[derive(Subcommand, Debug)]
pub enum TopicsCommand {
    /// List topics with their partition counts.
    List,
    /// Create a topic.
    Create {
        name: String,
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        #[arg(long, default_value_t = 1)]
        replication_factor: i16,
        /// A topic config, e.g. retention.ms=3600000 (repeatable).
        #[arg(long = "config", value_name = "KEY=VALUE")]
        configs: Vec<String>,
    },
    /// Show a topic's partitions (leader, replicas, ISR) and its configs.
    Describe { name: String },
    /// Delete topics.
    Delete { names: Vec<String> },
    /// Set or remove topic configs.
    AlterConfig {
        name: String,
        /// KEY=VALUE to set (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// KEY to remove, back to the default (repeatable).
        #[arg(long = "delete", value_name = "KEY")]
        delete: Vec<String>,
    },
    /// Delete the records below an offset: the partitions' log start moves
    /// up to it (like kafka-delete-records.sh).
    DeleteRecords {
        name: String,
        /// The new log start; -1: the high watermark (everything).
        #[arg(long, allow_hyphen_values = true)]
        offset: i64,
        /// Only this partition (default: every partition).
        #[arg(long)]
        partition: Option<i32>,
    },
    /// Grow a topic to a total number of partitions.
    AddPartitions {
        name: String,
        #[arg(long)]
        total: i32,
    },
}

fn pair(s: &str) -> Result<(String, String), ClientError> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .ok_or_else(|| ClientError::Kafka(format!("{s}: expected KEY=VALUE")))
}

/// Runs one topics command, writing its report to `out`.
pub fn run(bootstrap: &str, cmd: TopicsCommand, out: &mut dyn std::io::Write) -> Result<(), ClientError> {
    let mut c = Connection::connect(bootstrap, "ferrite-cli")?;
    let w = |e: std::io::Error| ClientError::Kafka(e.to_string());
    match cmd {
        TopicsCommand::DeleteRecords {
            name,
            offset,
            partition,
        } => crate::delete_records::run(bootstrap, &name, partition, offset, out)?,
        TopicsCommand::List => {
            let mut r = c.call(3, METADATA_V, |w| codec::metadata(w, None))?;
            let m = codec::decode_metadata(&mut r)?;
            for t in m.topics {
                writeln!(out, "{}\t{} partition(s)", t.name, t.partitions.len()).map_err(w)?;
            }
        }
        TopicsCommand::Create {
            name,
            partitions,
            replication_factor,
            configs,
        } => {
            let configs = configs.iter().map(|c| pair(c)).collect::<Result<Vec<_>, _>>()?;
            let mut r = c.call(19, CREATE_TOPICS_V, |w| {
                codec::create_topics(w, &name, partitions, replication_factor, &configs)
            })?;
            for (t, code, msg) in codec::decode_create_topics(&mut r)? {
                check(&t, code, msg)?;
                writeln!(out, "Created topic {t}.").map_err(w)?;
            }
        }
        TopicsCommand::Describe { name } => {
            let topics = vec![name.clone()];
            let mut r = c.call(3, METADATA_V, |w| codec::metadata(w, Some(&topics)))?;
            let m = codec::decode_metadata(&mut r)?;
            let t = m
                .topics
                .into_iter()
                .next()
                .ok_or_else(|| ClientError::Kafka("empty metadata".into()))?;
            check(&name, t.error, None)?;
            writeln!(out, "Topic: {}\tPartitionCount: {}", t.name, t.partitions.len()).map_err(w)?;
            for p in &t.partitions {
                let list = |v: &[i32]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",");
                writeln!(
                    out,
                    "\tPartition: {}\tLeader: {}\tReplicas: {}\tIsr: {}",
                    p.partition,
                    p.leader,
                    list(&p.replicas),
                    list(&p.isr)
                )
                .map_err(w)?;
            }
            let mut r = c.call(32, DESCRIBE_CONFIGS_V, |w| codec::describe_topic_configs(w, &name))?;
            let (code, msg, configs) = codec::decode_describe_configs(&mut r)?;
            check(&name, code, msg)?;
            writeln!(out, "Configs:").map_err(w)?;
            for (k, v, source) in configs {
                let origin = crate::configs::source_name(source);
                writeln!(out, "\t{k}={} ({origin})", v.unwrap_or_default()).map_err(w)?;
            }
        }
        TopicsCommand::Delete { names } => {
            let mut r = c.call(20, DELETE_TOPICS_V, |w| codec::delete_topics(w, &names))?;
            for (t, code) in codec::decode_delete_topics(&mut r)? {
                check(&t, code, None)?;
                writeln!(out, "Deleted topic {t}.").map_err(w)?;
            }
        }
        TopicsCommand::AlterConfig { name, set, delete } => {
            let mut changes: Vec<(String, Option<String>)> = Vec::new();
            for s in &set {
                let (k, v) = pair(s)?;
                changes.push((k, Some(v)));
            }
            changes.extend(delete.into_iter().map(|k| (k, None)));
            let mut r = c.call(44, ALTER_CONFIGS_V, |w| codec::alter_topic_configs(w, &name, &changes))?;
            let (code, msg) = codec::decode_alter_configs(&mut r)?;
            check(&name, code, msg)?;
            writeln!(out, "Altered configs of {name}.").map_err(w)?;
        }
        TopicsCommand::AddPartitions { name, total } => {
            let mut r = c.call(37, CREATE_PARTITIONS_V, |w| codec::create_partitions(w, &name, total))?;
            for (t, code, msg) in codec::decode_create_partitions(&mut r)? {
                check(&t, code, msg)?;
                writeln!(out, "Topic {t} now has {total} partitions.").map_err(w)?;
            }
        }
    }
    Ok(())
}
