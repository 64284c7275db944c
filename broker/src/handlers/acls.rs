//! DescribeAcls, CreateAcls and DeleteAcls: the ACLs a standalone broker
//! keeps in its embedded metadata (`ferrite acls` is the command line for
//! them). As in Kafka: without an authorizer (`authorizer.class.name`)
//! they answer SECURITY_DISABLED; describing needs Describe on the
//! cluster, creating and deleting Alter on it; a creation that is not a
//! whole ACL (an "any" code, a name the resource type cannot have, a
//! principal that is not TYPE:NAME) is answered INVALID_REQUEST.

use std::rc::Rc;
use std::sync::Arc;

use ferrite_controller::metadata::AclEntry;
use ferrite_engine::ShardId;
use ferrite_protocol::acls::{self, Acl, AclFilter, Outcome};
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::response::ResponseBuilder;
use ferrite_security::acl::{Operation, PatternType, ResourceType, CLUSTER_NAME};

use super::access::{binding, Access};
use crate::shard::{broadcast, BrokerShard};

const ANY: i8 = 1;
const MATCH: i8 = 2;
const NO_AUTHORIZER: &str = "No Authorizer is configured (authorizer.class.name)";

fn refusal(code: ErrorCode, message: &str) -> Outcome {
    (code.code(), Some(message.to_string()))
}

/// Why the caller may not change or read ACLs, if so.
fn refused(access: &Access, op: Operation) -> Option<Outcome> {
    if !access.checks() {
        return Some(refusal(ErrorCode::SecurityDisabled, NO_AUTHORIZER));
    }
    (!access.allows_cluster(op)).then(|| refusal(ErrorCode::ClusterAuthorizationFailed, "not authorized"))
}

fn entry(a: &Acl) -> AclEntry {
    AclEntry {
        resource_type: a.resource_type,
        name: a.resource_name.clone(),
        pattern_type: a.pattern_type,
        principal: a.principal.clone(),
        host: a.host.clone(),
        operation: a.operation,
        permission: a.permission,
    }
}

fn acl(e: &AclEntry) -> Acl {
    Acl {
        resource_type: e.resource_type,
        resource_name: e.name.clone(),
        pattern_type: e.pattern_type,
        principal: e.principal.clone(),
        host: e.host.clone(),
        operation: e.operation,
        permission: e.permission,
    }
}

/// Whether `filter` picks stored ACL `e` (Kafka's `AclBindingFilter.matches`).
pub fn picks(filter: &AclFilter, e: &AclEntry) -> bool {
    let code = |f: i8, v: i8| f == ANY || f == v;
    let text = |f: &Option<String>, v: &str| f.as_deref().is_none_or(|f| f == v);
    let name = match (&filter.resource_name, filter.pattern_type) {
        (None, p) => p == ANY || p == MATCH || p == e.pattern_type,
        (Some(n), ANY) => *n == e.name,
        (Some(n), MATCH) => match PatternType::from_code(e.pattern_type) {
            Some(PatternType::Literal) => e.name == *n || e.name == "*",
            Some(PatternType::Prefixed) => n.starts_with(&e.name),
            None => false,
        },
        (Some(n), p) => p == e.pattern_type && *n == e.name,
    };
    code(filter.resource_type, e.resource_type)
        && name
        && text(&filter.principal, &e.principal)
        && text(&filter.host, &e.host)
        && code(filter.operation, e.operation)
        && code(filter.permission, e.permission)
}

pub fn describe(shard: &Rc<BrokerShard>, access: &Access, filter: AclFilter, v: i16, b: &mut ResponseBuilder) {
    if let Some(outcome) = refused(access, Operation::Describe) {
        return acls::encode_describe_response(&mut b.w, v, &outcome, &[]);
    }
    let meta = shard.meta();
    let found: Vec<Acl> = meta.acls.iter().filter(|e| picks(&filter, e)).map(acl).collect();
    acls::encode_describe_response(&mut b.w, v, &(0, None), &found);
}

/// Why a creation is not a whole ACL, if so.
fn invalid(a: &Acl) -> Option<String> {
    let e = entry(a);
    let Some(bound) = binding(&e) else {
        return Some("the resource type, pattern type, operation and permission must each be a definite one".into());
    };
    if a.resource_name.is_empty() {
        return Some("the resource name is empty".into());
    }
    if bound.resource_type == ResourceType::Cluster && a.resource_name != CLUSTER_NAME {
        return Some(format!("the cluster's resource name is {CLUSTER_NAME}"));
    }
    if bound.pattern == PatternType::Prefixed && a.resource_name == "*" {
        return Some("a prefixed pattern cannot be *: use a literal *".into());
    }
    match a.principal.split_once(':') {
        Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {}
        _ => {
            return Some(format!(
                "principal {}: expected TYPE:NAME, e.g. User:alice",
                a.principal
            ))
        }
    }
    if a.host.is_empty() {
        return Some("the host is empty: give an address or *".into());
    }
    None
}

pub async fn create(shard: &Rc<BrokerShard>, access: &Access, creations: Vec<Acl>, v: i16, b: &mut ResponseBuilder) {
    if let Some(outcome) = refused(access, Operation::Alter) {
        return acls::encode_create_response(&mut b.w, v, &vec![outcome; creations.len()]);
    }
    let mut results: Vec<Outcome> = creations
        .iter()
        .map(|a| match invalid(a) {
            Some(why) => (ErrorCode::InvalidRequest.code(), Some(why)),
            None => (0, None),
        })
        .collect();
    let add: Vec<AclEntry> = creations
        .iter()
        .zip(&results)
        .filter(|(_, r)| r.0 == 0)
        .map(|(a, _)| entry(a))
        .collect();
    if !add.is_empty() {
        if let Err(e) = store(shard, add, Vec::new()).await {
            for r in results.iter_mut().filter(|r| r.0 == 0) {
                *r = (ErrorCode::UnknownServerError.code(), Some(e.clone()));
            }
        }
    }
    acls::encode_create_response(&mut b.w, v, &results);
}

pub async fn delete(
    shard: &Rc<BrokerShard>,
    access: &Access,
    filters: Vec<AclFilter>,
    v: i16,
    b: &mut ResponseBuilder,
) {
    if let Some(outcome) = refused(access, Operation::Alter) {
        let results: Vec<(Outcome, Vec<Acl>)> = filters.iter().map(|_| (outcome.clone(), Vec::new())).collect();
        return acls::encode_delete_response(&mut b.w, v, &results);
    }
    let removed = match store(shard, Vec::new(), filters.clone()).await {
        Ok(removed) => removed,
        Err(e) => {
            let failed = (ErrorCode::UnknownServerError.code(), Some(e));
            let results: Vec<(Outcome, Vec<Acl>)> = filters.iter().map(|_| (failed.clone(), Vec::new())).collect();
            return acls::encode_delete_response(&mut b.w, v, &results);
        }
    };
    let results: Vec<(Outcome, Vec<Acl>)> = filters
        .iter()
        .map(|f| ((0, None), removed.iter().filter(|e| picks(f, e)).map(acl).collect()))
        .collect();
    acls::encode_delete_response(&mut b.w, v, &results);
}

/// Adds `add` and removes what `remove` picks, in the embedded metadata
/// (shard 0), and hands the new metadata to every shard; the ACLs removed.
async fn store(shard: &Rc<BrokerShard>, add: Vec<AclEntry>, remove: Vec<AclFilter>) -> Result<Vec<AclEntry>, String> {
    let handle = shard.handle.clone();
    let (meta, removed) = handle
        .submit(ShardId(0), move |zero: Rc<BrokerShard>| async move {
            zero.with_store(|store| {
                let removed = store.alter_acls(&add, &|e| remove.iter().any(|f| picks(f, e)))?;
                Ok((Arc::new(store.meta().clone()), removed))
            })
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    broadcast(&handle, meta).await.map_err(|e| e.to_string())?;
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(name: &str, pattern: i8) -> AclEntry {
        AclEntry {
            resource_type: 2,
            name: name.into(),
            pattern_type: pattern,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: 3,
            permission: 3,
        }
    }

    fn filter(name: Option<&str>, pattern: i8) -> AclFilter {
        AclFilter {
            resource_type: 2,
            resource_name: name.map(String::from),
            pattern_type: pattern,
            principal: None,
            host: None,
            operation: ANY,
            permission: ANY,
        }
    }

    #[test]
    fn filters_pick_as_kafkas_do() {
        let literal = stored("orders", 3);
        let wildcard = stored("*", 3);
        let prefixed = stored("ord", 4);
        let picked = |f: &AclFilter| [&literal, &wildcard, &prefixed].map(|e| picks(f, e));
        assert_eq!(picked(&filter(None, ANY)), [true, true, true], "any name, any pattern");
        assert_eq!(picked(&filter(None, 3)), [true, true, false], "every literal");
        assert_eq!(
            picked(&filter(Some("orders"), MATCH)),
            [true, true, true],
            "what applies to orders"
        );
        assert_eq!(
            picked(&filter(Some("orders"), ANY)),
            [true, false, false],
            "exactly that name"
        );
        assert_eq!(picked(&filter(Some("ord"), 4)), [false, false, true], "that prefix");
        let mut other_op = filter(None, ANY);
        other_op.operation = 4;
        assert_eq!(picked(&other_op), [false, false, false], "another operation");
    }
}
