//! `ferrite acls …`: Kafka's ACLs on a running broker (CreateAcls,
//! DescribeAcls, DeleteAcls), in the shape of `kafka-acls.sh`:
//!
//! ```text
//! ferrite acls add --allow-principal User:alice --operation Read --topic orders
//! ferrite acls add --allow-principal User:bob --consumer --topic orders --group billing
//! ferrite acls list [--topic orders] [--principal User:alice]
//! ferrite acls remove --allow-principal User:alice --operation Read --topic orders
//! ```
//!
//! `--producer` is Write, Describe and Create on the topics (with
//! `--idempotent`, IdempotentWrite on the cluster too); `--consumer` is
//! Read and Describe on the topics and Read on the group, as `kafka-acls.sh`
//! has them. `list --topic T` shows every ACL that applies to T, prefixed
//! and wildcard ones too (a MATCH filter).

use clap::Args;
use clap::Subcommand;

use crate::check;
use ferrite_client::{ClientError, Connection};
use ferrite_protocol::acls::{self, Acl, AclFilter, CREATE_KEY, DELETE_KEY, DESCRIBE_KEY};

/// The version spoken (flexible, with pattern types).
const VERSION: i16 = 3;
const ANY: i8 = 1;
const MATCH: i8 = 2;
const LITERAL: i8 = 3;
const PREFIXED: i8 = 4;
const TOPIC: i8 = 2;
const GROUP: i8 = 3;
const CLUSTER: i8 = 4;
const TRANSACTIONAL_ID: i8 = 5;
const DENY: i8 = 2;
const ALLOW: i8 = 3;

/// Which resources.
#[derive(Args, Debug, Default)]
pub struct Resources {
    #[arg(long = "topic")]
    topics: Vec<String>,
    #[arg(long = "group")]
    groups: Vec<String>,
    #[arg(long)]
    cluster: bool,
    #[arg(long = "transactional-id")]
    transactional_ids: Vec<String>,
    /// literal or prefixed (add, remove); also any or match (list, remove).
    #[arg(long, default_value = "literal")]
    resource_pattern_type: String,
}

/// Who, from where, doing what.
#[derive(Args, Debug, Default)]
pub struct Entries {
    #[arg(long = "allow-principal")]
    allow_principals: Vec<String>,
    #[arg(long = "deny-principal")]
    deny_principals: Vec<String>,
    #[arg(long = "allow-host")]
    allow_hosts: Vec<String>,
    #[arg(long = "deny-host")]
    deny_hosts: Vec<String>,
    /// Read, Write, Create, Delete, Alter, Describe, ClusterAction,
    /// DescribeConfigs, AlterConfigs, IdempotentWrite, All (repeatable).
    #[arg(long = "operation")]
    operations: Vec<String>,
    /// Write, Describe and Create on the topics.
    #[arg(long)]
    producer: bool,
    /// With --producer: IdempotentWrite on the cluster too.
    #[arg(long)]
    idempotent: bool,
    /// Read and Describe on the topics; Read on the groups.
    #[arg(long)]
    consumer: bool,
}

#[derive(Subcommand, Debug)]
pub enum AclsCommand {
    /// Add ACLs.
    Add {
        #[command(flatten)]
        resources: Resources,
        #[command(flatten)]
        entries: Entries,
    },
    /// List ACLs (every one, or those of the resources and principal named).
    List {
        #[command(flatten)]
        resources: Resources,
        #[arg(long)]
        principal: Option<String>,
    },
    /// Remove the ACLs the options name.
    Remove {
        #[command(flatten)]
        resources: Resources,
        #[command(flatten)]
        entries: Entries,
    },
}

fn kafka(message: String) -> ClientError {
    ClientError::Kafka(message)
}

fn operation(name: &str) -> Result<i8, ClientError> {
    let code = match name.to_ascii_lowercase().replace(['-', '_'], "").as_str() {
        "all" => 2,
        "read" => 3,
        "write" => 4,
        "create" => 5,
        "delete" => 6,
        "alter" => 7,
        "describe" => 8,
        "clusteraction" => 9,
        "describeconfigs" => 10,
        "alterconfigs" => 11,
        "idempotentwrite" => 12,
        _ => return Err(kafka(format!("operation {name}: expected Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite or All"))),
    };
    Ok(code)
}

fn operation_name(code: i8) -> &'static str {
    match code {
        2 => "All",
        3 => "Read",
        4 => "Write",
        5 => "Create",
        6 => "Delete",
        7 => "Alter",
        8 => "Describe",
        9 => "ClusterAction",
        10 => "DescribeConfigs",
        11 => "AlterConfigs",
        12 => "IdempotentWrite",
        13 => "CreateTokens",
        14 => "DescribeTokens",
        _ => "Unknown",
    }
}

fn pattern(name: &str) -> Result<i8, ClientError> {
    match name.to_ascii_lowercase().as_str() {
        "any" => Ok(ANY),
        "match" => Ok(MATCH),
        "literal" => Ok(LITERAL),
        "prefixed" => Ok(PREFIXED),
        _ => Err(kafka(format!(
            "resource pattern type {name}: expected literal, prefixed, any or match"
        ))),
    }
}

/// (resource type, name) of each resource named.
fn named(r: &Resources) -> Vec<(i8, String)> {
    let mut out: Vec<(i8, String)> = r.topics.iter().map(|t| (TOPIC, t.clone())).collect();
    out.extend(r.groups.iter().map(|g| (GROUP, g.clone())));
    out.extend(r.transactional_ids.iter().map(|t| (TRANSACTIONAL_ID, t.clone())));
    if r.cluster {
        out.push((CLUSTER, "kafka-cluster".into()));
    }
    out
}

/// The ACLs `add` (or `remove`) names: every resource × principal × host
/// × operation.
fn acls_of(r: &Resources, e: &Entries) -> Result<Vec<Acl>, ClientError> {
    let p = pattern(&r.resource_pattern_type)?;
    let mut ops: Vec<(i8, i8)> = Vec::new(); // (resource type or 0 for every, operation)
    for o in &e.operations {
        ops.push((0, operation(o)?));
    }
    if e.producer {
        ops.extend([(TOPIC, 4), (TOPIC, 8), (TOPIC, 5)]);
    }
    if e.producer && e.idempotent {
        ops.push((CLUSTER, 12));
    }
    if e.consumer {
        ops.extend([(TOPIC, 3), (TOPIC, 8), (GROUP, 3)]);
    }
    if ops.is_empty() {
        return Err(kafka("name an --operation, or --producer or --consumer".into()));
    }
    let mut resources = named(r);
    if e.producer && e.idempotent && !resources.iter().any(|(t, _)| *t == CLUSTER) {
        resources.push((CLUSTER, "kafka-cluster".into()));
    }
    if resources.is_empty() {
        return Err(kafka("name a --topic, --group, --transactional-id or --cluster".into()));
    }
    let hosts = |given: &[String]| {
        if given.is_empty() {
            vec!["*".to_string()]
        } else {
            given.to_vec()
        }
    };
    let who: Vec<(String, String, i8)> = e
        .allow_principals
        .iter()
        .flat_map(|p| hosts(&e.allow_hosts).into_iter().map(move |h| (p.clone(), h, ALLOW)))
        .chain(
            e.deny_principals
                .iter()
                .flat_map(|p| hosts(&e.deny_hosts).into_iter().map(move |h| (p.clone(), h, DENY))),
        )
        .collect();
    if who.is_empty() {
        return Err(kafka("name an --allow-principal or --deny-principal".into()));
    }
    let mut out = Vec::new();
    for (rtype, name) in &resources {
        for (for_type, op) in &ops {
            if *for_type != 0 && for_type != rtype {
                continue;
            }
            for (principal, host, permission) in &who {
                out.push(Acl {
                    resource_type: *rtype,
                    resource_name: name.clone(),
                    pattern_type: if *rtype == CLUSTER { LITERAL } else { p },
                    principal: principal.clone(),
                    host: host.clone(),
                    operation: *op,
                    permission: *permission,
                });
            }
        }
    }
    Ok(out)
}

fn show(a: &Acl) -> String {
    let kind = match a.resource_type {
        TOPIC => "Topic",
        GROUP => "Group",
        CLUSTER => "Cluster",
        TRANSACTIONAL_ID => "TransactionalId",
        _ => "Unknown",
    };
    let pattern = if a.pattern_type == PREFIXED {
        "PREFIXED"
    } else {
        "LITERAL"
    };
    let permission = if a.permission == ALLOW { "Allow" } else { "Deny" };
    format!(
        "{kind}:{pattern}:{} {} {} {} from {}",
        a.resource_name,
        a.principal,
        permission,
        operation_name(a.operation),
        a.host
    )
}

/// Runs one acls command, writing its report to `out`.
pub fn run(bootstrap: &str, cmd: AclsCommand, out: &mut dyn std::io::Write) -> Result<(), ClientError> {
    let w = |e: std::io::Error| kafka(e.to_string());
    let mut c = Connection::connect(bootstrap, "ferrite-cli")?;
    match cmd {
        AclsCommand::Add { resources, entries } => {
            let wanted = acls_of(&resources, &entries)?;
            let mut r = c.call_flexible(CREATE_KEY, VERSION, |w| acls::encode_create(w, VERSION, &wanted))?;
            for (a, (code, message)) in wanted.iter().zip(acls::decode_create_response(&mut r, VERSION)?) {
                check(&show(a), code, message)?;
                writeln!(out, "Added {}", show(a)).map_err(w)?;
            }
        }
        AclsCommand::Remove { resources, entries } => {
            let filters: Vec<AclFilter> = acls_of(&resources, &entries)?
                .into_iter()
                .map(|a| AclFilter {
                    resource_type: a.resource_type,
                    resource_name: Some(a.resource_name),
                    pattern_type: a.pattern_type,
                    principal: Some(a.principal),
                    host: Some(a.host),
                    operation: a.operation,
                    permission: a.permission,
                })
                .collect();
            let mut r = c.call_flexible(DELETE_KEY, VERSION, |w| acls::encode_delete(w, VERSION, &filters))?;
            for ((code, message), removed) in acls::decode_delete_response(&mut r, VERSION)? {
                check("remove", code, message)?;
                for a in removed {
                    writeln!(out, "Removed {}", show(&a)).map_err(w)?;
                }
            }
        }
        AclsCommand::List { resources, principal } => {
            let p = pattern(&resources.resource_pattern_type)?;
            let mut filters: Vec<AclFilter> = named(&resources)
                .into_iter()
                .map(|(t, n)| AclFilter {
                    resource_type: t,
                    resource_name: Some(n),
                    pattern_type: if p == LITERAL { MATCH } else { p },
                    principal: principal.clone(),
                    host: None,
                    operation: ANY,
                    permission: ANY,
                })
                .collect();
            if filters.is_empty() {
                filters.push(AclFilter {
                    resource_type: ANY,
                    resource_name: None,
                    pattern_type: ANY,
                    principal,
                    host: None,
                    operation: ANY,
                    permission: ANY,
                });
            }
            for f in filters {
                let mut r = c.call_flexible(DESCRIBE_KEY, VERSION, |w| acls::encode_describe(w, VERSION, &f))?;
                let ((code, message), found) = acls::decode_describe_response(&mut r, VERSION)?;
                check("list", code, message)?;
                for a in found {
                    writeln!(out, "{}", show(&a)).map_err(w)?;
                }
            }
        }
    }
    Ok(())
}
