//! DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554):
//! the users SASL listeners authenticate, kept in a standalone broker's
//! embedded metadata (`ferrite users` is the command line for them). A
//! cluster keeps them in ZooKeeper in Kafka; that is not built yet, and a
//! cluster broker answers both APIs UNSUPPORTED_VERSION with a message.
//!
//! As in Kafka, an alteration is judged per user: every change named for a
//! user is made, or none of them (a bad mechanism, iteration count or
//! salted password; a deletion of a credential that does not exist; the
//! same user and mechanism named twice), and the answer has one result per
//! user.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::Arc;

use ferrite_controller::ClusterMeta;
use ferrite_engine::ShardId;
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::response::ResponseBuilder;
use ferrite_protocol::scram_credentials::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse, UserCredentials,
};
use ferrite_security::credential::ScramCredential;
use ferrite_security::Mechanism;

use super::access::Access;
use crate::shard::{broadcast, BrokerShard};
use ferrite_security::acl::Operation;

const IN_A_CLUSTER: &str = "SCRAM credentials are kept by standalone brokers only so far (issue #21)";

/// The credentials a user has, from the shard's metadata.
pub fn credential(meta: &ClusterMeta, user: &str, mechanism: Mechanism) -> Option<ScramCredential> {
    let text = meta.scram_credentials.get(user)?.get(mechanism.name())?;
    ScramCredential::parse(text).ok()
}

pub fn describe(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: DescribeUserScramCredentialsRequest,
    b: &mut ResponseBuilder,
) {
    if !access.allows_cluster(Operation::Describe) {
        let resp = DescribeUserScramCredentialsResponse {
            error_code: ErrorCode::ClusterAuthorizationFailed.code(),
            error_message: Some("not authorized".into()),
            results: Vec::new(),
        };
        return resp.encode(&mut b.w);
    }
    if shard.cluster().is_some() {
        let resp = DescribeUserScramCredentialsResponse {
            error_code: ErrorCode::UnsupportedVersion.code(),
            error_message: Some(IN_A_CLUSTER.into()),
            results: Vec::new(),
        };
        return resp.encode(&mut b.w);
    }
    let results = described(&shard.meta(), req.users);
    DescribeUserScramCredentialsResponse {
        error_code: 0,
        error_message: None,
        results,
    }
    .encode(&mut b.w);
}

/// Each user's mechanisms and iterations, or why not (named twice, no
/// credential); null or empty `users`: every user, as Kafka reads it.
fn described(meta: &ClusterMeta, users: Option<Vec<String>>) -> Vec<UserCredentials> {
    let infos = |user: &str| -> Vec<(i8, i32)> {
        let Some(m) = meta.scram_credentials.get(user) else {
            return Vec::new();
        };
        m.iter()
            .filter_map(|(name, text)| {
                let t = Mechanism::parse(name)?.scram_type()?;
                let c = ScramCredential::parse(text).ok()?;
                Some((t, i32::try_from(c.iterations).unwrap_or(i32::MAX)))
            })
            .collect()
    };
    let users: Vec<String> = match users {
        Some(u) if !u.is_empty() => u,
        _ => meta.scram_credentials.keys().cloned().collect(),
    };
    let named_twice: BTreeSet<&String> = users
        .iter()
        .filter(|u| users.iter().filter(|x| x == u).count() > 1)
        .collect();
    let mut seen = BTreeSet::new();
    let mut results = Vec::new();
    for user in &users {
        if !seen.insert(user) {
            continue;
        }
        let found = infos(user);
        let (code, message) = if named_twice.contains(user) {
            (
                ErrorCode::DuplicateResource,
                Some("the user is named more than once".to_string()),
            )
        } else if found.is_empty() {
            (
                ErrorCode::ResourceNotFound,
                Some("the user has no SCRAM credential".to_string()),
            )
        } else {
            (ErrorCode::None, None)
        };
        results.push(UserCredentials {
            user: user.clone(),
            error_code: code.code(),
            error_message: message,
            infos: if code == ErrorCode::None { found } else { Vec::new() },
        });
    }
    results
}

/// One user's changes: (mechanism name, credential or `None` to delete).
type Changes = Vec<(String, Option<String>)>;

/// A change asked for one user and mechanism.
enum Asked<'a> {
    Delete,
    Upsert(&'a ferrite_protocol::scram_credentials::Upsertion),
}

pub async fn alter(
    shard: &Rc<BrokerShard>,
    access: &Access,
    req: AlterUserScramCredentialsRequest,
    b: &mut ResponseBuilder,
) {
    let meta = shard.meta();
    let mut asked: BTreeMap<&str, Vec<(i8, Asked)>> = BTreeMap::new();
    for (user, t) in &req.deletions {
        asked.entry(user.as_str()).or_default().push((*t, Asked::Delete));
    }
    for u in &req.upsertions {
        asked
            .entry(u.name.as_str())
            .or_default()
            .push((u.mechanism, Asked::Upsert(u)));
    }
    // A caller refused (or a cluster, which keeps no credentials yet) has
    // nothing judged.
    let refused = match (access.allows_cluster(Operation::Alter), shard.cluster().is_some()) {
        (false, _) => Some((ErrorCode::ClusterAuthorizationFailed, "not authorized".to_string())),
        (true, true) => Some((ErrorCode::UnsupportedVersion, IN_A_CLUSTER.to_string())),
        (true, false) => None,
    };
    let users: BTreeMap<String, Result<Changes, (ErrorCode, String)>> = asked
        .iter()
        .map(|(user, changes)| {
            let judged = match &refused {
                Some(r) => Err(r.clone()),
                None => judge(&meta, user, changes),
            };
            (user.to_string(), judged)
        })
        .collect();
    let changes: Vec<(String, String, Option<String>)> = users
        .iter()
        .filter_map(|(user, r)| r.as_ref().ok().map(|c| (user, c)))
        .flat_map(|(user, c)| c.iter().map(move |(m, cred)| (user.clone(), m.clone(), cred.clone())))
        .collect();
    let stored = match changes.is_empty() {
        true => Ok(()),
        false => store(shard, changes).await,
    };
    let results = users
        .into_iter()
        .map(|(user, r)| match (r, &stored) {
            (Ok(_), Ok(())) => (user, 0, None),
            (Ok(_), Err(e)) => (user, ErrorCode::UnknownServerError.code(), Some(e.clone())),
            (Err((code, message)), _) => (user, code.code(), Some(message)),
        })
        .collect();
    AlterUserScramCredentialsResponse { results }.encode(&mut b.w);
}

/// One user's changes, or why none is made, in Kafka's order of checks: the
/// name, the mechanisms, a mechanism named twice, then each change.
fn judge(meta: &ClusterMeta, user: &str, asked: &[(i8, Asked)]) -> Result<Changes, (ErrorCode, String)> {
    if user.is_empty() {
        return Err((ErrorCode::UnacceptableCredential, "the user name is empty".into()));
    }
    let mut seen = BTreeSet::new();
    let mut mechanisms = Vec::with_capacity(asked.len());
    for (t, _) in asked {
        let m = Mechanism::from_scram_type(*t).ok_or_else(|| {
            (
                ErrorCode::UnsupportedSaslMechanism,
                format!("mechanism {t}: 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512)"),
            )
        })?;
        mechanisms.push(m);
    }
    for m in &mechanisms {
        if !seen.insert(*m) {
            return Err((
                ErrorCode::DuplicateResource,
                format!("{} is named twice for the user", m.name()),
            ));
        }
    }
    let mut changes = Vec::new();
    for (m, (_, change)) in mechanisms.into_iter().zip(asked) {
        match change {
            Asked::Delete if credential(meta, user, m).is_none() => {
                return Err((
                    ErrorCode::ResourceNotFound,
                    format!("the user has no {} credential to delete", m.name()),
                ))
            }
            Asked::Delete => changes.push((m.name().to_string(), None)),
            Asked::Upsert(u) => {
                let iterations = u32::try_from(u.iterations).unwrap_or(0);
                let c = ScramCredential::from_salted_password(m, &u.salt, &u.salted_password, iterations)
                    .map_err(|e| (ErrorCode::UnacceptableCredential, e.to_string()))?;
                changes.push((m.name().to_string(), Some(c.to_string())));
            }
        }
    }
    Ok(changes)
}

/// Writes the changes into the embedded metadata (shard 0) and hands the
/// new metadata to every shard.
async fn store(shard: &Rc<BrokerShard>, changes: Vec<(String, String, Option<String>)>) -> Result<(), String> {
    let handle = shard.handle.clone();
    let meta = handle
        .submit(ShardId(0), move |zero: Rc<BrokerShard>| async move {
            zero.with_store(|store| {
                store.alter_scram_credentials(&changes)?;
                Ok(Arc::new(store.meta().clone()))
            })
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    broadcast(&handle, meta).await.map(|_| ()).map_err(|e| e.to_string())
}
