//! Kafka's authorizer model (`AclAuthorizer`, KIP-290 pattern types), pure:
//! ACLs in, a decision out.
//!
//! An ACL grants or denies a principal (`User:alice`, or `User:*` for
//! everyone), from a host (an address, or `*`), an operation on resources
//! matched by a pattern: a literal name (`*` is every resource of the type)
//! or a prefix. A request is allowed when:
//!
//! 1. its principal is a super user (`super.users`), or
//! 2. no DENY matches it (principal or `User:*`, host or `*`, the operation
//!    or `All`), and an ALLOW does (the operation, `All`, or one that
//!    implies it: `Read`, `Write`, `Delete` and `Alter` imply `Describe`;
//!    `AlterConfigs` implies `DescribeConfigs`), or
//! 3. no ACL at all names the resource and `allow.everyone.if.no.acl.found`
//!    is set.
//!
//! Deny wins over allow, as in Kafka.

use crate::Principal;

/// Resource types, by Kafka's codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ResourceType {
    Topic = 2,
    Group = 3,
    Cluster = 4,
    TransactionalId = 5,
    DelegationToken = 6,
}

/// Pattern types (stored ones: literal, prefixed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PatternType {
    Literal = 3,
    Prefixed = 4,
}

/// Operations, by Kafka's codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    All = 2,
    Read = 3,
    Write = 4,
    Create = 5,
    Delete = 6,
    Alter = 7,
    Describe = 8,
    ClusterAction = 9,
    DescribeConfigs = 10,
    AlterConfigs = 11,
    IdempotentWrite = 12,
    CreateTokens = 13,
    DescribeTokens = 14,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Permission {
    Deny = 2,
    Allow = 3,
}

/// The one resource name of the cluster (Kafka's `kafka-cluster`).
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The literal name that matches every resource of its type, and the
/// principal and host that match every one.
pub const WILDCARD: &str = "*";
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// One stored ACL.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub name: String,
    pub pattern: PatternType,
    pub principal: String,
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

impl ResourceType {
    pub fn from_code(c: i8) -> Option<ResourceType> {
        [
            ResourceType::Topic,
            ResourceType::Group,
            ResourceType::Cluster,
            ResourceType::TransactionalId,
            ResourceType::DelegationToken,
        ]
        .into_iter()
        .find(|t| *t as i8 == c)
    }
}

impl PatternType {
    pub fn from_code(c: i8) -> Option<PatternType> {
        [PatternType::Literal, PatternType::Prefixed]
            .into_iter()
            .find(|t| *t as i8 == c)
    }
}

impl Operation {
    pub const EVERY: [Operation; 13] = [
        Operation::All,
        Operation::Read,
        Operation::Write,
        Operation::Create,
        Operation::Delete,
        Operation::Alter,
        Operation::Describe,
        Operation::ClusterAction,
        Operation::DescribeConfigs,
        Operation::AlterConfigs,
        Operation::IdempotentWrite,
        Operation::CreateTokens,
        Operation::DescribeTokens,
    ];

    pub fn from_code(c: i8) -> Option<Operation> {
        Operation::EVERY.into_iter().find(|o| *o as i8 == c)
    }

    /// Whether an ACL for `self` allows `wanted`.
    fn covers(self, wanted: Operation) -> bool {
        use Operation::*;
        self == All
            || self == wanted
            || (wanted == Describe && matches!(self, Read | Write | Delete | Alter))
            || (wanted == DescribeConfigs && self == AlterConfigs)
    }
}

impl Permission {
    pub fn from_code(c: i8) -> Option<Permission> {
        [Permission::Deny, Permission::Allow]
            .into_iter()
            .find(|p| *p as i8 == c)
    }
}

impl AclBinding {
    /// Whether this ACL's pattern names `(resource_type, name)`.
    pub fn names(&self, resource_type: ResourceType, name: &str) -> bool {
        self.resource_type == resource_type
            && match self.pattern {
                PatternType::Literal => self.name == name || self.name == WILDCARD,
                PatternType::Prefixed => name.starts_with(&self.name),
            }
    }

    fn applies_to(&self, principal: &str, host: &str) -> bool {
        (self.principal == principal || self.principal == WILDCARD_PRINCIPAL)
            && (self.host == host || self.host == WILDCARD)
    }
}

/// The broker's authorizer: its ACLs and settings.
#[derive(Clone, Debug, Default)]
pub struct Authorizer {
    pub acls: Vec<AclBinding>,
    /// `super.users`, as principals (`User:admin`).
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_if_no_acl: bool,
}

impl Authorizer {
    /// Whether `principal`, from `host`, may do `operation` on the resource.
    pub fn allows(
        &self,
        principal: &Principal,
        host: &str,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        let who = principal.to_string();
        if self.super_users.contains(&who) {
            return true;
        }
        let mut named = self.acls.iter().filter(|a| a.names(resource_type, name)).peekable();
        if named.peek().is_none() {
            return self.allow_if_no_acl;
        }
        let mut allowed = false;
        for a in named.filter(|a| a.applies_to(&who, host)) {
            match a.permission {
                Permission::Deny if a.operation == Operation::All || a.operation == operation => return false,
                Permission::Allow if a.operation.covers(operation) => allowed = true,
                _ => {}
            }
        }
        allowed
    }

    /// Whether the principal may do `operation` on some resource of the type
    /// (Kafka's `authorizeByResourceType`: an ALLOW for it on any pattern,
    /// no DENY on the wildcard). Used where Kafka asks it (idempotent writes).
    pub fn allows_any(
        &self,
        principal: &Principal,
        host: &str,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        let who = principal.to_string();
        if self.super_users.contains(&who) {
            return true;
        }
        let mine = || {
            self.acls
                .iter()
                .filter(|a| a.resource_type == resource_type && a.applies_to(&who, host))
        };
        let denied = mine().any(|a| {
            a.permission == Permission::Deny
                && a.pattern == PatternType::Literal
                && a.name == WILDCARD
                && (a.operation == Operation::All || a.operation == operation)
        });
        if denied {
            return false;
        }
        // No ACL at all of the type: as `allow.everyone.if.no.acl.found` says.
        if !self.acls.iter().any(|a| a.resource_type == resource_type) {
            return self.allow_if_no_acl;
        }
        mine().any(|a| a.permission == Permission::Allow && a.operation.covers(operation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(t: ResourceType, name: &str, p: PatternType, who: &str, op: Operation, perm: Permission) -> AclBinding {
        AclBinding {
            resource_type: t,
            name: name.into(),
            pattern: p,
            principal: who.into(),
            host: "*".into(),
            operation: op,
            permission: perm,
        }
    }

    /// (ACLs, alice a super user, allow-if-none, operation, topic, expected, why).
    type Case = (Vec<AclBinding>, bool, bool, Operation, &'static str, bool, &'static str);

    /// A table of cases for alice.
    #[test]
    fn the_decision_table_is_kafkas() {
        use Operation::*;
        use PatternType::*;
        use Permission::*;
        use ResourceType::Topic;
        let alice = Principal::user("alice");
        let allow_read = acl(Topic, "orders", Literal, "User:alice", Read, Allow);
        let cases: Vec<Case> = vec![
            (vec![], false, false, Read, "orders", false, "no ACL: denied by default"),
            (
                vec![],
                false,
                true,
                Read,
                "orders",
                true,
                "no ACL, allow.everyone.if.no.acl.found",
            ),
            (vec![], true, false, Delete, "orders", true, "a super user"),
            (
                vec![allow_read.clone()],
                false,
                false,
                Read,
                "orders",
                true,
                "a literal allow",
            ),
            (
                vec![allow_read.clone()],
                false,
                false,
                Describe,
                "orders",
                true,
                "read implies describe",
            ),
            (
                vec![allow_read.clone()],
                false,
                false,
                Write,
                "orders",
                false,
                "read does not imply write",
            ),
            (
                vec![allow_read.clone()],
                false,
                true,
                Read,
                "payments",
                true,
                "another topic without ACLs",
            ),
            (
                vec![allow_read.clone()],
                false,
                false,
                Read,
                "orders2",
                false,
                "a literal is not a prefix",
            ),
            (
                vec![acl(Topic, "ord", Prefixed, "User:alice", Write, Allow)],
                false,
                false,
                Write,
                "orders",
                true,
                "a prefix",
            ),
            (
                vec![allow_read.clone(), acl(Topic, "*", Literal, "User:*", Read, Deny)],
                false,
                false,
                Read,
                "orders",
                false,
                "deny wins, from the wildcard",
            ),
            (
                vec![
                    allow_read.clone(),
                    acl(Topic, "orders", Literal, "User:alice", All, Deny),
                ],
                false,
                false,
                Describe,
                "orders",
                false,
                "deny All",
            ),
            (
                vec![acl(Topic, "orders", Literal, "User:bob", Read, Allow)],
                false,
                true,
                Read,
                "orders",
                false,
                "ACLs exist for the topic, none for alice",
            ),
            (
                vec![acl(Topic, "orders", Literal, "User:*", All, Allow)],
                false,
                false,
                Alter,
                "orders",
                true,
                "everyone, all operations",
            ),
            (
                vec![acl(Topic, "orders", Literal, "User:alice", AlterConfigs, Allow)],
                false,
                false,
                DescribeConfigs,
                "orders",
                true,
                "alter configs implies describe configs",
            ),
        ];
        for (acls, is_super, allow_if_none, op, topic, expected, why) in cases {
            let a = Authorizer {
                acls,
                super_users: if is_super { vec!["User:alice".into()] } else { vec![] },
                allow_if_no_acl: allow_if_none,
            };
            assert_eq!(a.allows(&alice, "10.0.0.1", op, Topic, topic), expected, "{why}");
        }
    }

    #[test]
    fn a_host_narrows_an_acl() {
        let mut only_there = acl(
            ResourceType::Topic,
            "t",
            PatternType::Literal,
            "User:alice",
            Operation::Read,
            Permission::Allow,
        );
        only_there.host = "10.0.0.1".into();
        let a = Authorizer {
            acls: vec![only_there],
            ..Authorizer::default()
        };
        let alice = Principal::user("alice");
        assert!(a.allows(&alice, "10.0.0.1", Operation::Read, ResourceType::Topic, "t"));
        assert!(!a.allows(&alice, "10.0.0.2", Operation::Read, ResourceType::Topic, "t"));
    }
}
