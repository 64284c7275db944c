//! The authorizer settings, under Kafka's names:
//!
//! | key | what |
//! |---|---|
//! | `authorizer.class.name` | empty (default): no ACLs are checked; Kafka's `kafka.security.authorizer.AclAuthorizer` or `org.apache.kafka.metadata.authorizer.StandardAuthorizer`: ACLs are checked (by Ferrite's own authorizer, with Kafka's rules) |
//! | `super.users` | `User:admin;User:ops`: principals every check allows |
//! | `allow.everyone.if.no.acl.found` | false (default): a resource no ACL names is denied; true: allowed |
//!
//! Another authorizer class is refused (a plug-in cannot be loaded), and
//! so are ACLs in a cluster (they are kept by standalone brokers only so
//! far, issue #21).

use crate::{invalid, ConfigError};

const KAFKA_AUTHORIZERS: &[&str] = &[
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
];

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthorizerSettings {
    pub enabled: bool,
    pub super_users: Vec<String>,
    pub allow_if_no_acl: bool,
}

impl AuthorizerSettings {
    /// Takes one authorizer key; `false` if `key` is not one of them.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        let v = value.trim();
        match key {
            "authorizer.class.name" => {
                self.enabled = match v {
                    "" => false,
                    _ if KAFKA_AUTHORIZERS.contains(&v) => true,
                    _ => {
                        return Err(invalid(
                            key,
                            value,
                            format!(
                                "no plug-in is loaded: give one of {} (Ferrite checks Kafka's ACL rules)",
                                KAFKA_AUTHORIZERS.join(", ")
                            ),
                        ))
                    }
                }
            }
            "super.users" => {
                let mut users = Vec::new();
                for u in v.split(';').map(str::trim).filter(|u| !u.is_empty()) {
                    match u.split_once(':') {
                        Some((kind, name)) if !kind.is_empty() && !name.is_empty() => users.push(u.to_string()),
                        _ => return Err(invalid(key, value, format!("{u}: expected TYPE:NAME, e.g. User:admin"))),
                    }
                }
                self.super_users = users;
            }
            "allow.everyone.if.no.acl.found" => {
                self.allow_if_no_acl = match v.to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(invalid(key, value, "expected true or false")),
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_names_turn_acls_on_and_others_are_refused() {
        let mut a = AuthorizerSettings::default();
        assert!(a
            .set("authorizer.class.name", "kafka.security.authorizer.AclAuthorizer")
            .unwrap());
        assert!(a.enabled);
        a.set("super.users", "User:admin; User:ops").unwrap();
        assert_eq!(a.super_users, ["User:admin", "User:ops"]);
        assert!(a.set("authorizer.class.name", "com.example.Custom").is_err());
        assert!(a.set("super.users", "admin").is_err());
        assert!(a.set("allow.everyone.if.no.acl.found", "yes").is_err());
        assert!(!a.set("ssl.client.auth", "none").unwrap());
    }
}
