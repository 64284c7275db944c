//! `ferrite configs …`: describe and change topic configs and dynamic
//! broker configs on running brokers, like `kafka-configs.sh` with
//! `--entity-type topics|brokers` (`--entity-default` is `--broker-default`).
//!
//! A broker's own configs are served by that broker, so `--broker ID` talks
//! to broker ID (found through the bootstrap broker's metadata); a topic or
//! the cluster's default goes to the bootstrap broker.

use clap::{Args, Subcommand};

use crate::check;
use ferrite_client::codec::{self, ALTER_CONFIGS_V, DESCRIBE_CONFIGS_V, METADATA_V};
use ferrite_client::{ClientError, Connection};

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
/// DescribeConfigs' source code of a built-in default.
const SOURCE_DEFAULT: i8 = 5;

/// Whose configs.
#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
pub struct Entity {
    /// A topic.
    #[arg(long)]
    topic: Option<String>,
    /// One broker, by id: its own dynamic configs.
    #[arg(long)]
    broker: Option<i32>,
    /// The cluster-wide default of the dynamic broker configs.
    #[arg(long)]
    broker_default: bool,
}

#[derive(Subcommand, Debug)]
pub enum ConfigsCommand {
    /// Show configs: those set somewhere (not built-in defaults), or all.
    Describe {
        #[command(flatten)]
        entity: Entity,
        /// Every config, built-in defaults too.
        #[arg(long)]
        all: bool,
    },
    /// Set or remove configs (IncrementalAlterConfigs).
    Alter {
        #[command(flatten)]
        entity: Entity,
        /// KEY=VALUE to set (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// KEY to remove (repeatable).
        #[arg(long = "delete", value_name = "KEY")]
        delete: Vec<String>,
    },
}

fn kafka(message: String) -> ClientError {
    ClientError::Kafka(message)
}

/// The resource an entity names, and the broker to ask (`None`: the
/// bootstrap broker).
fn resource(entity: &Entity) -> (i8, String, Option<i32>) {
    match (&entity.topic, entity.broker) {
        (Some(t), _) => (RESOURCE_TOPIC, t.clone(), None),
        (None, Some(id)) => (RESOURCE_BROKER, id.to_string(), Some(id)),
        (None, None) => (RESOURCE_BROKER, String::new(), None),
    }
}

/// A connection to broker `id` (through the bootstrap broker's metadata),
/// or to the bootstrap broker.
fn connect(bootstrap: &str, id: Option<i32>) -> Result<Connection, ClientError> {
    let mut c = Connection::connect(bootstrap, "ferrite-cli")?;
    let Some(id) = id else { return Ok(c) };
    let mut r = c.call(3, METADATA_V, |w| codec::metadata(w, Some(&[])))?;
    let m = codec::decode_metadata(&mut r)?;
    let b = m
        .brokers
        .iter()
        .find(|b| b.id == id)
        .ok_or_else(|| kafka(format!("broker {id} is not in the cluster's metadata")))?;
    Connection::connect(&format!("{}:{}", b.host, b.port), "ferrite-cli")
}

/// How a source code reads.
pub fn source_name(source: i8) -> &'static str {
    match source {
        1 => "topic",
        2 => "dynamic broker",
        3 => "dynamic default",
        4 => "server.properties",
        _ => "default",
    }
}

/// Runs one configs command, writing its report to `out`.
pub fn run(bootstrap: &str, cmd: ConfigsCommand, out: &mut dyn std::io::Write) -> Result<(), ClientError> {
    let w = |e: std::io::Error| kafka(e.to_string());
    match cmd {
        ConfigsCommand::Describe { entity, all } => {
            let (rtype, name, id) = resource(&entity);
            let mut c = connect(bootstrap, id)?;
            let mut r = c.call(32, DESCRIBE_CONFIGS_V, |w| codec::describe_configs(w, rtype, &name))?;
            let (code, msg, configs) = codec::decode_describe_configs(&mut r)?;
            check(&name, code, msg)?;
            for (k, v, source) in configs {
                if all || source != SOURCE_DEFAULT {
                    let v = v.unwrap_or_else(|| "null".into());
                    writeln!(out, "{k}={v} ({})", source_name(source)).map_err(w)?;
                }
            }
        }
        ConfigsCommand::Alter { entity, set, delete } => {
            let (rtype, name, id) = resource(&entity);
            let mut changes: Vec<(String, Option<String>)> = Vec::new();
            for s in &set {
                let (k, v) = s
                    .split_once('=')
                    .ok_or_else(|| kafka(format!("{s}: expected KEY=VALUE")))?;
                changes.push((k.trim().to_string(), Some(v.trim().to_string())));
            }
            changes.extend(delete.into_iter().map(|k| (k, None)));
            if changes.is_empty() {
                return Err(kafka("nothing to change: give --set or --delete".into()));
            }
            let mut c = connect(bootstrap, id)?;
            let mut r = c.call(44, ALTER_CONFIGS_V, |w| codec::alter_configs(w, rtype, &name, &changes))?;
            let (code, msg) = codec::decode_alter_configs(&mut r)?;
            let what = if name.is_empty() {
                "the broker default"
            } else {
                name.as_str()
            };
            check(what, code, msg)?;
            writeln!(out, "Altered the configs of {what}.").map_err(w)?;
        }
    }
    Ok(())
}
