//! Who a client is: the SASL mechanisms a broker's SASL listeners offer,
//! as state machines that take a client's tokens and answer the next
//! token, a principal, or a refusal (no I/O: the broker's connection code
//! carries the tokens, and looks the credentials up), and SCRAM
//! credentials in the form Kafka stores them.
//!
//! - [`mechanism`]: the mechanisms and their names;
//! - [`acl`]: Kafka's authorizer model: ACLs in, allow or deny out;
//! - [`credential`]: a SCRAM credential (`salt=…,stored_key=…,server_key=…,iterations=…`);
//! - [`scram`]: the server's side of SCRAM-SHA-256/512 (RFC 5802, 7677);
//! - [`plain`]: PLAIN (RFC 4616), checked against the SCRAM credentials;
//! - [`session`]: one connection's authentication, SaslHandshake then
//!   SaslAuthenticate, in Kafka's order.
//!
//! Depends on no crate of ours; ring for the digests, HMACs, PBKDF2 and
//! random nonces (the TLS stack already links it).

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod acl;
pub mod credential;
pub mod error;
pub mod mechanism;
pub mod plain;
pub mod scram;
pub mod session;

pub use error::SecurityError;
pub use mechanism::Mechanism;

/// An authenticated client, as Kafka names it: `User:<name>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal {
    pub kind: String,
    pub name: String,
}

impl Principal {
    pub fn user(name: &str) -> Principal {
        Principal {
            kind: "User".into(),
            name: name.into(),
        }
    }

    /// Who a connection is before, or without, authentication.
    pub fn anonymous() -> Principal {
        Principal::user("ANONYMOUS")
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.kind, self.name)
    }
}
