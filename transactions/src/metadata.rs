//! A transactional id's state and the transitions requests make of it, as
//! Kafka's `TransactionMetadata`: each returns the state to write to
//! `__transaction_state`, which the coordinator makes durable before it
//! answers and before it takes the state as current.
//!
//! ```text
//!   Empty ──AddPartitions──▶ Ongoing ──EndTxn──▶ PrepareCommit ──markers──▶ CompleteCommit
//!     ▲                        │  ╲                PrepareAbort  ──markers──▶ CompleteAbort
//!     └─InitProducerId─────────┘   ╲─timeout or InitProducerId: PrepareAbort at epoch + 1
//! ```

use std::collections::BTreeSet;

use ferrite_ids::{ProducerId, TopicPartition};

use crate::error::TxnError;

/// A transaction's status, with Kafka's codes and names (the records and
/// DescribeTransactions carry them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TxnStatus {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnStatus {
    pub const ALL: [TxnStatus; 8] = [
        TxnStatus::Empty,
        TxnStatus::Ongoing,
        TxnStatus::PrepareCommit,
        TxnStatus::PrepareAbort,
        TxnStatus::CompleteCommit,
        TxnStatus::CompleteAbort,
        TxnStatus::Dead,
        TxnStatus::PrepareEpochFence,
    ];

    pub fn code(self) -> i8 {
        match self {
            TxnStatus::Empty => 0,
            TxnStatus::Ongoing => 1,
            TxnStatus::PrepareCommit => 2,
            TxnStatus::PrepareAbort => 3,
            TxnStatus::CompleteCommit => 4,
            TxnStatus::CompleteAbort => 5,
            TxnStatus::Dead => 6,
            TxnStatus::PrepareEpochFence => 7,
        }
    }

    pub fn of_code(code: i8) -> Option<TxnStatus> {
        TxnStatus::ALL.into_iter().find(|s| s.code() == code)
    }

    pub fn name(self) -> &'static str {
        match self {
            TxnStatus::Empty => "Empty",
            TxnStatus::Ongoing => "Ongoing",
            TxnStatus::PrepareCommit => "PrepareCommit",
            TxnStatus::PrepareAbort => "PrepareAbort",
            TxnStatus::CompleteCommit => "CompleteCommit",
            TxnStatus::CompleteAbort => "CompleteAbort",
            TxnStatus::Dead => "Dead",
            TxnStatus::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub fn of_name(name: &str) -> Option<TxnStatus> {
        TxnStatus::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether markers are being written (the transaction is decided but
    /// not complete).
    pub fn is_prepared(self) -> bool {
        matches!(self, TxnStatus::PrepareCommit | TxnStatus::PrepareAbort)
    }
}

/// The largest epoch a producer gets; past it the coordinator hands out a
/// new producer id (Kafka keeps `Short.MaxValue` out of use).
pub const EPOCH_MAX: i16 = i16::MAX - 1;

/// One transactional id's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnMeta {
    pub producer_id: ProducerId,
    pub producer_epoch: i16,
    /// The epoch before the last InitProducerId that named its epoch
    /// raised it (KIP-360): a retry of that call, whose answer was lost,
    /// gets the current epoch again. -1 otherwise (a new instance or a
    /// fencing forgets it). Not in the record: forgotten when the state is
    /// loaded again, as with Kafka's version 0 records.
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub status: TxnStatus,
    pub partitions: BTreeSet<TopicPartition>,
    /// When the open (or last) transaction began; -1 before the first.
    pub start_ms: i64,
    pub update_ms: i64,
}

/// The producer a request names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caller {
    pub producer_id: ProducerId,
    pub producer_epoch: i16,
}

/// What an InitProducerId with a transactional id does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitStep {
    /// A producer id is needed (an unknown transactional id, or its epochs
    /// are used up): the caller takes a fresh one and writes
    /// [`TxnMeta::fresh`].
    FreshId,
    /// Write this (the epoch raised, no transaction), then answer with its
    /// producer id and epoch.
    Write(TxnMeta),
    /// A retry whose epoch was raised already: answer the current one.
    Current,
    /// A transaction is open: it is aborted first, at the raised epoch,
    /// which fences its producer. Write this (PrepareAbort), complete it,
    /// and answer CONCURRENT_TRANSACTIONS: the producer asks again.
    AbortFirst(TxnMeta),
}

/// What an EndTxn does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndStep {
    /// Write this (PrepareCommit or PrepareAbort), answer, then write the
    /// markers and complete it.
    Prepare(TxnMeta),
    /// A retry of an EndTxn that completed: answer success.
    Done,
}

impl TxnMeta {
    /// A transactional id's first state, or its state under a new producer
    /// id once the old one's epochs are used up.
    pub fn fresh(producer_id: ProducerId, timeout_ms: i32, now_ms: i64) -> TxnMeta {
        TxnMeta {
            producer_id,
            producer_epoch: 0,
            last_producer_epoch: -1,
            timeout_ms,
            status: TxnStatus::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            update_ms: now_ms,
        }
    }

    fn check_caller(&self, caller: Caller) -> Result<(), TxnError> {
        if caller.producer_id != self.producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if caller.producer_epoch != self.producer_epoch {
            return Err(TxnError::ProducerFenced);
        }
        Ok(())
    }

    /// The state an abort the coordinator starts on its own is written
    /// as: PrepareAbort at the raised epoch (up to `i16::MAX`, which no
    /// producer is given: the next InitProducerId takes a new producer id),
    /// so the markers fence the old instance.
    fn fenced_abort(&self, now_ms: i64) -> TxnMeta {
        let mut next = self.clone();
        next.producer_epoch = self.producer_epoch.saturating_add(1);
        next.last_producer_epoch = -1;
        next.status = TxnStatus::PrepareAbort;
        next.update_ms = now_ms;
        next
    }

    /// InitProducerId: `expected` is the producer id and epoch a producer
    /// that had one gives (v3+), to be told apart from a new instance.
    pub fn init(
        meta: Option<&TxnMeta>,
        timeout_ms: i32,
        expected: Option<Caller>,
        now_ms: i64,
    ) -> Result<InitStep, TxnError> {
        let Some(meta) = meta else {
            return Ok(InitStep::FreshId);
        };
        // Kafka's rule: another producer id is fenced; the epoch is
        // judged when it is raised.
        if expected.is_some_and(|e| e.producer_id != meta.producer_id) {
            return Err(TxnError::ProducerFenced);
        }
        match meta.status {
            TxnStatus::PrepareCommit | TxnStatus::PrepareAbort | TxnStatus::PrepareEpochFence => {
                Err(TxnError::ConcurrentTransactions)
            }
            TxnStatus::Ongoing => Ok(InitStep::AbortFirst(meta.fenced_abort(now_ms))),
            TxnStatus::Empty | TxnStatus::CompleteCommit | TxnStatus::CompleteAbort | TxnStatus::Dead => {
                let at_current = expected.is_none_or(|e| e.producer_epoch == meta.producer_epoch);
                if meta.producer_epoch >= EPOCH_MAX && at_current {
                    return Ok(InitStep::FreshId);
                }
                let last = match expected {
                    None => -1,
                    Some(e) if e.producer_epoch == meta.producer_epoch => meta.producer_epoch,
                    // A retry of a call that raised the epoch.
                    Some(e) if e.producer_epoch == meta.last_producer_epoch => return Ok(InitStep::Current),
                    Some(_) => return Err(TxnError::ProducerFenced),
                };
                if meta.producer_epoch >= EPOCH_MAX {
                    return Ok(InitStep::FreshId);
                }
                let mut next = meta.clone();
                next.producer_epoch = meta.producer_epoch + 1;
                next.last_producer_epoch = last;
                next.timeout_ms = timeout_ms;
                next.status = TxnStatus::Empty;
                next.partitions.clear();
                next.update_ms = now_ms;
                Ok(InitStep::Write(next))
            }
        }
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn's offsets partition): `None`
    /// when the transaction holds them all already (nothing to write).
    pub fn add_partitions(
        &self,
        caller: Caller,
        partitions: &[TopicPartition],
        now_ms: i64,
    ) -> Result<Option<TxnMeta>, TxnError> {
        self.check_caller(caller)?;
        match self.status {
            TxnStatus::PrepareCommit | TxnStatus::PrepareAbort | TxnStatus::PrepareEpochFence => {
                Err(TxnError::ConcurrentTransactions)
            }
            TxnStatus::Dead => Err(TxnError::InvalidTxnState),
            _ if partitions.is_empty() => Ok(None),
            TxnStatus::Ongoing if partitions.iter().all(|p| self.partitions.contains(p)) => Ok(None),
            TxnStatus::Ongoing | TxnStatus::Empty | TxnStatus::CompleteCommit | TxnStatus::CompleteAbort => {
                let held = if self.status == TxnStatus::Ongoing {
                    self.partitions.len()
                } else {
                    0
                };
                // The state record must stay loadable (see `log_format`).
                if held + partitions.len() > crate::log_format::PARTITIONS_MAX {
                    return Err(TxnError::TooManyPartitions);
                }
                let mut next = self.clone();
                if self.status != TxnStatus::Ongoing {
                    next.start_ms = now_ms;
                    next.partitions.clear();
                }
                next.status = TxnStatus::Ongoing;
                next.partitions.extend(partitions.iter().cloned());
                next.update_ms = now_ms;
                Ok(Some(next))
            }
        }
    }

    /// KIP-890's verification: whether `caller`'s transaction is open and
    /// holds `partition`, so that its leader may append the transaction's
    /// first batch there. Not in it: INVALID_TXN_STATE (the write is
    /// refused); ending: CONCURRENT_TRANSACTIONS (retried, then refused).
    pub fn verify(&self, caller: Caller, partition: &TopicPartition) -> Result<(), TxnError> {
        self.check_caller(caller)?;
        match self.status {
            TxnStatus::PrepareCommit | TxnStatus::PrepareAbort | TxnStatus::PrepareEpochFence => {
                Err(TxnError::ConcurrentTransactions)
            }
            TxnStatus::Ongoing if self.partitions.contains(partition) => Ok(()),
            _ => Err(TxnError::InvalidTxnState),
        }
    }

    /// EndTxn: commit or abort the open transaction.
    pub fn end(&self, caller: Caller, commit: bool, now_ms: i64) -> Result<EndStep, TxnError> {
        self.check_caller(caller)?;
        match (self.status, commit) {
            (TxnStatus::Ongoing, _) => {
                let mut next = self.clone();
                next.status = if commit {
                    TxnStatus::PrepareCommit
                } else {
                    TxnStatus::PrepareAbort
                };
                next.update_ms = now_ms;
                Ok(EndStep::Prepare(next))
            }
            (TxnStatus::CompleteCommit, true) | (TxnStatus::CompleteAbort, false) => Ok(EndStep::Done),
            (TxnStatus::PrepareCommit, true) | (TxnStatus::PrepareAbort, false) => {
                Err(TxnError::ConcurrentTransactions)
            }
            (TxnStatus::PrepareEpochFence, _) => Err(TxnError::ConcurrentTransactions),
            _ => Err(TxnError::InvalidTxnState),
        }
    }

    /// The state once every marker of a prepared transaction is written.
    pub fn complete(&self, now_ms: i64) -> TxnMeta {
        assert!(self.status.is_prepared(), "only a prepared transaction completes");
        let mut next = self.clone();
        next.status = match self.status {
            TxnStatus::PrepareCommit => TxnStatus::CompleteCommit,
            _ => TxnStatus::CompleteAbort,
        };
        next.partitions.clear();
        next.update_ms = now_ms;
        next
    }

    /// An open transaction past its timeout is aborted at the raised epoch
    /// (its producer is fenced, as in Kafka).
    pub fn expire(&self, now_ms: i64) -> Option<TxnMeta> {
        let open = self.status == TxnStatus::Ongoing;
        let past = self.start_ms.saturating_add(i64::from(self.timeout_ms)) < now_ms;
        (open && past).then(|| self.fenced_abort(now_ms))
    }

    /// Whether the id has been idle (no transaction open or ending) for
    /// longer than `expiration_ms` (`transactional.id.expiration.ms`): its
    /// state is then removed, as Kafka does.
    pub fn idle_past(&self, now_ms: i64, expiration_ms: i64) -> bool {
        let idle = matches!(
            self.status,
            TxnStatus::Empty | TxnStatus::CompleteCommit | TxnStatus::CompleteAbort
        );
        idle && self.update_ms.saturating_add(expiration_ms) < now_ms
    }

    /// How long the transaction has been open (`None`: none is), for
    /// ListTransactions' duration filter.
    pub fn open_for_ms(&self, now_ms: i64) -> Option<i64> {
        (self.status == TxnStatus::Ongoing).then(|| now_ms.saturating_sub(self.start_ms))
    }
}

#[cfg(test)]
#[path = "metadata_tests.rs"]
mod tests;
