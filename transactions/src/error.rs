//! Why a transaction request was refused. Mapped to Kafka error codes in
//! the broker's `error_map` only, at the protocol edge.

/// A transaction request's refusal, named after the Kafka error it becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    #[error("the transactional id is empty")]
    InvalidTransactionalId,
    #[error("the transaction timeout is not positive or exceeds transaction.max.timeout.ms")]
    InvalidTransactionTimeout,
    #[error("the producer id is not the transactional id's")]
    InvalidProducerIdMapping,
    #[error("a newer producer with the same transactional id has fenced this one")]
    ProducerFenced,
    #[error("the transaction is completing or another request is changing it: retry")]
    ConcurrentTransactions,
    #[error("the request is not valid in the transaction's state")]
    InvalidTxnState,
    #[error("the transactional id is not known")]
    TransactionalIdNotFound,
    #[error("the transaction coordinator is not available")]
    CoordinatorNotAvailable,
    #[error("the transaction state is still loading")]
    CoordinatorLoadInProgress,
    #[error("this broker is not the transaction coordinator")]
    NotCoordinator,
    #[error("not authorized for the transactional id")]
    TransactionalIdAuthorizationFailed,
    #[error("a transaction holds at most 100000 partitions")]
    TooManyPartitions,
}
