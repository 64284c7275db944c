//! Errors and retry policy of the group member and its coordinator client.

use std::time::Duration;

use crate::ClientError;
use ferrite_protocol::errors::{self, ErrorCode};
use ferrite_protocol::wire::WireError;

/// A topic and partition.
pub type TopicPartition = (String, i32);

/// Why a group operation failed.
#[derive(Debug, thiserror::Error)]
pub enum MemberError {
    /// Connecting, sending, receiving or decoding failed.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The broker answered with an error code.
    #[error("{api} ({context}): {} ({code})", errors::name(*code))]
    Kafka {
        api: &'static str,
        context: String,
        code: i16,
    },
    /// A subscription or assignment could not be encoded or decoded.
    #[error("consumer protocol: {0}")]
    Protocol(WireError),
    /// An answer that decodes but cannot be used.
    #[error("unusable answer: {0}")]
    BadAnswer(String),
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A retriable failure that persisted through every retry.
    #[error("{what}: gave up after {attempts} attempts: {last}")]
    GaveUp {
        what: &'static str,
        attempts: u32,
        last: Box<MemberError>,
    },
}

impl From<WireError> for MemberError {
    fn from(e: WireError) -> Self {
        MemberError::Client(ClientError::Wire(e))
    }
}

impl MemberError {
    /// The Kafka error code behind this error, if the broker sent one.
    pub fn code(&self) -> Option<i16> {
        match self {
            MemberError::Kafka { code, .. } => Some(*code),
            MemberError::GaveUp { last, .. } => last.code(),
            _ => None,
        }
    }

    /// Worth trying again after a backoff.
    pub fn is_retriable(&self) -> bool {
        match self {
            MemberError::Client(ClientError::Io { .. }) => true,
            MemberError::Kafka { code, .. } => {
                is_coordinator_error(*code) || *code == ErrorCode::RequestTimedOut.code()
            }
            _ => false,
        }
    }

    /// The coordinator connection should be dropped and found again.
    pub(super) fn wants_new_coordinator(&self) -> bool {
        match self {
            MemberError::Client(_) => true,
            MemberError::Kafka { code, .. } => {
                *code == ErrorCode::NotCoordinator.code() || *code == ErrorCode::CoordinatorNotAvailable.code()
            }
            _ => false,
        }
    }
}

/// NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS.
pub fn is_coordinator_error(code: i16) -> bool {
    [
        ErrorCode::NotCoordinator,
        ErrorCode::CoordinatorNotAvailable,
        ErrorCode::CoordinatorLoadInProgress,
    ]
    .iter()
    .any(|e| e.code() == code)
}

/// How often and how patiently retriable failures are retried.
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub retries: u32,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            retries: 10,
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(2),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retriable_errors() {
        let k = |code| MemberError::Kafka {
            api: "x",
            context: String::new(),
            code,
        };
        assert!(k(16).is_retriable() && k(15).is_retriable() && k(14).is_retriable() && k(7).is_retriable());
        assert!(!k(22).is_retriable() && !k(25).is_retriable() && !k(27).is_retriable());
        assert!(k(16).wants_new_coordinator() && !k(14).wants_new_coordinator());
        let gave_up = MemberError::GaveUp {
            what: "x",
            attempts: 3,
            last: Box::new(k(15)),
        };
        assert_eq!(gave_up.code(), Some(15));
    }
}
