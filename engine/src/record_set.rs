//! Checking a record set before it is appended: every batch whole and
//! valid (CRC-32C, header fields), within `max.message.bytes` for a
//! producer's, in offset order for a leader's batches replicated to a
//! follower, and — on a compacted topic — every record keyed; then, in
//! the append's turn, an idempotent producer's sequences.

use crate::batch::{self, BatchInfo, Validation};
use crate::error::{EngineError, Result};
use crate::log::{AppendInfo, AppendMode, PartitionLog};
use crate::producer_state::SeqCheck;

/// What a coordinator writes for a producer: a transaction marker (a
/// control batch holding COMMIT or ABORT) or the producer's transactional
/// records (TxnOffsetCommit's offsets).
fn is_coordinator_batch(bytes: &[u8], info: &BatchInfo) -> bool {
    let marker = || matches!(crate::txn_state::marker_of(bytes, info), Ok(Some(_)));
    info.is_transactional && info.producer_id.is_producer() && (!info.is_control || marker())
}

impl PartitionLog {
    /// Validates every batch of a record set; returns each one's position in
    /// the set and facts. An empty set is refused.
    /// `max.message.bytes` bounds what a leader accepts from producers; a
    /// follower stores what its leader has, whatever the limit is now (a
    /// limit lowered after a larger batch was appended must not stop its
    /// replication, as in Kafka).
    pub(crate) fn validate_record_set(&self, records: &[u8], mode: AppendMode) -> Result<Vec<(usize, BatchInfo)>> {
        let (size_max, validation) = match mode {
            AppendMode::Leader { .. } => (self.config.borrow().max_message_bytes, Validation::Producer),
            AppendMode::Coordinator { .. } | AppendMode::Replica => (records.len(), Validation::Stored),
        };
        let keys_needed = validation == Validation::Producer && self.config.borrow().cleanup_policy.compacts();
        let mut out = Vec::new();
        let mut pos = 0usize;
        while pos < records.len() {
            let info = batch::validate(&records[pos..], size_max, validation).map_err(|source| EngineError::Batch {
                tp: self.tp.clone(),
                position: pos,
                source,
            })?;
            if keys_needed {
                crate::clean_filter::check_keys(&records[pos..pos + info.size], &info).map_err(|source| {
                    EngineError::Batch {
                        tp: self.tp.clone(),
                        position: pos,
                        source,
                    }
                })?;
            }
            if matches!(mode, AppendMode::Coordinator { .. })
                && !is_coordinator_batch(&records[pos..pos + info.size], &info)
            {
                return Err(EngineError::Batch {
                    tp: self.tp.clone(),
                    position: pos,
                    source: crate::error::BatchError::Invalid {
                        reason: "a coordinator writes only a producer's transactional batches",
                    },
                });
            }
            if mode == AppendMode::Replica {
                if let Some((_, prev)) = out.last() {
                    let prev: &BatchInfo = prev;
                    if info.base_offset < prev.next_offset() {
                        return Err(EngineError::Batch {
                            tp: self.tp.clone(),
                            position: pos,
                            source: crate::error::BatchError::Invalid {
                                reason: "replicated batch offsets go backwards",
                            },
                        });
                    }
                }
            }
            out.push((pos, info));
            pos += info.size;
        }
        if out.is_empty() {
            return Err(EngineError::Batch {
                tp: self.tp.clone(),
                position: 0,
                source: crate::error::BatchError::Truncated {
                    needed: batch::HEADER_BYTES,
                    available: 0,
                },
            });
        }
        Ok(out)
    }

    /// A coordinator's markers: each producer's epoch at least the one the
    /// partition knows (a marker of an older epoch comes from a coordinator
    /// that lost the transaction: INVALID_PRODUCER_EPOCH).
    pub(crate) fn check_marker_epochs(&self, records: &[u8], batches: &[(usize, BatchInfo)]) -> Result<()> {
        let producers = self.producers.borrow();
        let refuse = |source| EngineError::Sequence {
            tp: self.tp.clone(),
            source,
        };
        for (pos, info) in batches {
            let Some(entry) = producers.get(info.producer_id) else {
                continue;
            };
            if info.producer_epoch < entry.epoch {
                return Err(refuse(crate::producer_state::SequenceError::StaleEpoch {
                    producer_id: info.producer_id,
                    epoch: info.producer_epoch,
                    current: entry.epoch,
                }));
            }
            // A marker of an older coordinator than the last one's (Kafka's
            // TRANSACTION_COORDINATOR_FENCED).
            let bytes = records.get(*pos..*pos + info.size).unwrap_or_default();
            match crate::txn_state::coordinator_epoch_of(bytes, info) {
                Some(ce) if ce < entry.coordinator_epoch => {
                    return Err(refuse(crate::producer_state::SequenceError::CoordinatorFenced {
                        producer_id: info.producer_id,
                        coordinator_epoch: ce,
                        current: entry.coordinator_epoch,
                    }))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// A leader's check of idempotent batches: `Some` with the original
    /// offsets for a retry of a batch already in the log. An idempotent
    /// batch must be alone in its record set (as Kafka requires of every
    /// v2 produce), so a retry is all or nothing.
    pub(crate) fn check_sequences(&self, batches: &[(usize, BatchInfo)]) -> Result<Option<AppendInfo>> {
        let idempotent = batches.iter().any(|(_, b)| b.producer_id.is_producer());
        if !idempotent {
            return Ok(None);
        }
        let refuse = |source| EngineError::Batch {
            tp: self.tp.clone(),
            position: 0,
            source,
        };
        if batches.len() != 1 {
            return Err(refuse(crate::error::BatchError::Invalid {
                reason: "an idempotent batch must be the only batch of its record set",
            }));
        }
        let info = batches[0].1;
        let checked = self.producers.borrow().check(&info);
        match checked {
            Ok(SeqCheck::Append) => Ok(None),
            Ok(SeqCheck::Duplicate {
                first_offset,
                last_offset,
            }) => {
                tracing::debug!(tp = %self.tp, producer = %info.producer_id, seq = info.base_sequence,
                    first = %first_offset, "duplicate idempotent batch acknowledged with its original offsets");
                Ok(Some(AppendInfo {
                    first_offset,
                    last_offset,
                    next_offset: self.log_end_offset(),
                    max_timestamp: info.max_timestamp,
                    batches: 1,
                    records: i64::from(info.record_count),
                    bytes: 0,
                    duplicate: true,
                }))
            }
            Err(source) => Err(EngineError::Sequence {
                tp: self.tp.clone(),
                source,
            }),
        }
    }
}
