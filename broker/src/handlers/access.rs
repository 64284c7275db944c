//! What a request's caller may do: the authorizer's decision (Kafka's
//! rules, `ferrite-security`'s `acl.rs`) for the caller's principal and
//! host, or everything when no authorizer is configured
//! (`authorizer.class.name` empty, as in Kafka).
//!
//! Each handler asks for the operations Kafka's handler checks, and
//! answers Kafka's error where one is refused (TOPIC_AUTHORIZATION_FAILED,
//! GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED); Metadata
//! leaves out the topics the caller may not describe.

use std::rc::Rc;

use ferrite_controller::metadata::AclEntry;
use ferrite_security::acl::{AclBinding, Authorizer, Operation, PatternType, Permission, ResourceType, CLUSTER_NAME};
use ferrite_security::Principal;

use crate::shard::BrokerShard;

/// A caller's rights, for one request.
pub struct Access {
    principal: Rc<Principal>,
    host: String,
    authorizer: Option<Rc<Authorizer>>,
}

impl Access {
    pub fn of(shard: &BrokerShard, principal: Rc<Principal>, peer: Option<std::net::SocketAddr>) -> Access {
        Access {
            principal,
            // An IPv4 client of a dual-stack listener as its IPv4 address,
            // as ACLs name it.
            host: peer.map(|p| p.ip().to_canonical().to_string()).unwrap_or_default(),
            authorizer: shard.authorizer(),
        }
    }

    pub fn allows(&self, op: Operation, resource: ResourceType, name: &str) -> bool {
        match &self.authorizer {
            None => true,
            Some(a) => a.allows(&self.principal, &self.host, op, resource, name),
        }
    }

    pub fn allows_topic(&self, op: Operation, topic: &str) -> bool {
        self.allows(op, ResourceType::Topic, topic)
    }

    pub fn allows_group(&self, op: Operation, group: &str) -> bool {
        self.allows(op, ResourceType::Group, group)
    }

    pub fn allows_cluster(&self, op: Operation) -> bool {
        self.allows(op, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Create on the cluster, or on the topic (what auto-creation and
    /// CreateTopics need).
    pub fn may_create_topic(&self, topic: &str) -> bool {
        self.allows_cluster(Operation::Create) || self.allows_topic(Operation::Create, topic)
    }

    /// `op` on some resource of the type (Kafka's check for idempotent
    /// producers: Write on any topic).
    pub fn allows_any(&self, op: Operation, resource: ResourceType) -> bool {
        match &self.authorizer {
            None => true,
            Some(a) => a.allows_any(&self.principal, &self.host, op, resource),
        }
    }

    /// Whether an authorizer is configured (the ACL APIs answer
    /// SECURITY_DISABLED without one).
    pub fn checks(&self) -> bool {
        self.authorizer.is_some()
    }
}

/// A stored ACL as the authorizer reads it (`None`: codes it does not
/// know, which are never stored).
pub fn binding(e: &AclEntry) -> Option<AclBinding> {
    Some(AclBinding {
        resource_type: ResourceType::from_code(e.resource_type)?,
        name: e.name.clone(),
        pattern: PatternType::from_code(e.pattern_type)?,
        principal: e.principal.clone(),
        host: e.host.clone(),
        operation: Operation::from_code(e.operation)?,
        permission: Permission::from_code(e.permission)?,
    })
}

/// The authorizer for `acls` and the broker's settings.
pub fn authorizer(settings: &ferrite_config::authorizer::AuthorizerSettings, acls: &[AclEntry]) -> Authorizer {
    Authorizer {
        acls: acls.iter().filter_map(binding).collect(),
        super_users: settings.super_users.clone(),
        allow_if_no_acl: settings.allow_if_no_acl,
    }
}
