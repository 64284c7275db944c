//! Rebuilding a partition's producer state ([`crate::producer_state`]) from
//! its snapshot and the batch headers after it: when the log opens, and
//! after a truncation. Only headers are read, one per batch (and the one
//! record of a transaction marker), from the snapshot's offset (from the first segment when there is no usable
//! snapshot) to the log end.

use std::collections::VecDeque;
use std::path::Path;
use std::rc::Rc;

use crate::error::Result;
use crate::log::PartitionLog;
use crate::producer_state::ProducerStates;
use crate::segment::Segment;
use crate::types::Offset;

/// The producer state of a log whose segments end at `end`.
pub(crate) async fn rebuild(dir: &Path, segments: &VecDeque<Rc<Segment>>, end: Offset) -> Result<ProducerStates> {
    let (from, mut states) = match ProducerStates::load(dir).await? {
        Some((offset, states)) if offset <= end => (offset, states),
        Some((offset, _)) => {
            // It covers batches that are gone (a crash lost them): once the
            // log grows past it again it would describe other batches.
            tracing::info!(dir = %dir.display(), snapshot = %offset, end = %end,
                "producer-state snapshot past the log end: removed, the state rebuilt from the log");
            let path = dir.join(crate::producer_state::FILE_NAME);
            std::fs::remove_file(&path)
                .map_err(|e| crate::error::EngineError::io("remove producer-state snapshot", &path, e))?;
            (Offset::ZERO, ProducerStates::new())
        }
        None => (Offset::ZERO, ProducerStates::new()),
    };
    let mut batches = 0u64;
    for s in segments {
        if s.next_offset() <= from {
            continue;
        }
        let reader = s.reader().await?;
        let size = s.size();
        let mut pos = if s.base() < from { s.index_lookup(from).1 } else { 0 };
        while let Some(info) = reader.batch_at(pos, size).await? {
            if info.base_offset >= end {
                break;
            }
            if info.base_offset >= from {
                states.record(&info);
                if info.is_transactional {
                    let (marker, coordinator_epoch) = match info.is_control {
                        true => {
                            let bytes = reader.read_at(pos, info.size).await?;
                            (
                                crate::txn_state::marker_if_control(&bytes, &info),
                                crate::txn_state::coordinator_epoch_of(&bytes, &info),
                            )
                        }
                        false => (None, None),
                    };
                    states.apply_txn(&info, marker);
                    states.note_coordinator_epoch(&info, coordinator_epoch);
                }
                batches += 1;
            }
            pos += info.size as u64;
        }
    }
    if batches > 0 {
        tracing::debug!(dir = %dir.display(), from = %from, batches, producers = states.len(), "producer state rebuilt");
    }
    Ok(states)
}

impl PartitionLog {
    /// Writes the producer state as of `offset` (every batch below it
    /// applied). The caller holds the append turn.
    pub(crate) async fn snapshot_producers(&self, offset: Offset) -> Result<()> {
        let states = self.producers.borrow().clone();
        states.store(&self.dir, offset).await
    }

    /// Rebuilds the producer state for the log as it now ends (after a
    /// truncation). The caller holds the append turn.
    pub(crate) async fn rebuild_producers(&self) -> Result<()> {
        let segments = self.segments.borrow().clone();
        let states = rebuild(&self.dir, &segments, self.log_end_offset()).await?;
        *self.producers.borrow_mut() = states;
        Ok(())
    }
}
