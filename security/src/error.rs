//! The security crate's errors. A failed authentication says to the
//! client only that it failed (no "unknown user" against "wrong
//! password": that would let anyone list the users); the reason is kept
//! for the broker's log.

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SecurityError {
    /// The client's credentials do not check out (unknown user, wrong
    /// password or proof, a nonce not the server's).
    #[error("authentication failed: {reason}")]
    Authentication { reason: String },
    /// A token that is not the mechanism's message at this step.
    #[error("{mechanism}: malformed message: {reason}")]
    Malformed { mechanism: &'static str, reason: String },
    /// A request out of the SASL order (SaslAuthenticate before
    /// SaslHandshake, a second handshake, …).
    #[error("illegal SASL state: {reason}")]
    IllegalState { reason: String },
    /// A mechanism this broker does not offer.
    #[error("unsupported SASL mechanism {name}")]
    UnsupportedMechanism { name: String },
    /// A stored credential, or one to be stored, that is not valid.
    #[error("SCRAM credential: {reason}")]
    BadCredential { reason: String },
    /// The system's random source failed.
    #[error("random source failed")]
    Random,
}

impl SecurityError {
    pub(crate) fn auth(reason: impl Into<String>) -> SecurityError {
        SecurityError::Authentication { reason: reason.into() }
    }
}
