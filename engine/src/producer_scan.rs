//! Rebuilding a partition's producer state ([`crate::producer_state`]) from
//! its snapshot and the batch headers after it: when the log opens, and
//! after a truncation. Only headers are read, one per batch (and the one
//! record of a transaction marker), from the snapshot's offset (from the
//! first segment when there is no usable snapshot) to the log end.
//!
//! The segments' transaction indexes ([`crate::txn_index`]) are brought
//! in line on the way: their entries of markers at or past the snapshot's
//! offset are cut (a crash may have kept some of them, or none) and every
//! ABORT marker the scan finds is entered again; the entries below it were
//! made durable before the snapshot was written. A transaction index that
//! did not load makes the rebuild start from the first segment.

use std::collections::VecDeque;
use std::path::Path;
use std::rc::Rc;

use crate::error::Result;
use crate::log::PartitionLog;
use crate::producer_state::{Decoded, ProducerStates};
use crate::segment::Segment;
use crate::txn_state::AbortedTxn;
use crate::types::Offset;

/// Whether the segments' transaction indexes loaded whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TxnIndexes {
    Loaded,
    /// One did not parse (it was emptied): every entry is found again.
    Broken,
}

/// The producer state of a log whose segments end at `end`, and their
/// transaction indexes made to match it.
pub(crate) async fn rebuild(
    dir: &Path,
    segments: &VecDeque<Rc<Segment>>,
    end: Offset,
    txn_indexes: TxnIndexes,
) -> Result<ProducerStates> {
    let snapshot = usable_snapshot(dir, end, txn_indexes).await?;
    // The entries the snapshot vouches for: those below its offset, if it
    // was written by a version that keeps `.txnindex` files. A snapshot of
    // an older version (FPS1-3) vouches for none (a version with them may
    // have run before it, and its truncations and cleanings did not keep
    // them): they are rebuilt from its list and the batches after it.
    let trusted_below = match &snapshot {
        Some(d) if d.txn_indexes_kept => d.offset,
        _ => Offset::ZERO,
    };
    for s in segments {
        s.meta_mut().cut_aborted_from(trusted_below);
    }
    let (from, mut states) = match snapshot {
        Some(d) => {
            place_legacy(segments, &d.legacy_aborted, d.offset).await?;
            (d.offset, d.states)
        }
        None => (Offset::ZERO, ProducerStates::new()),
    };
    let mut batches = 0u64;
    for s in segments.iter().filter(|s| s.next_offset() > from) {
        batches += scan_segment(s, (from, end), &mut states).await?;
    }
    if batches > 0 {
        tracing::debug!(dir = %dir.display(), from = %from, batches, producers = states.len(), "producer state rebuilt");
    }
    Ok(states)
}

/// `dir`'s snapshot, unless it cannot be used: past the log end `end` (a
/// crash lost batches it covers), or beside a transaction index that did
/// not load. An unusable one is removed.
async fn usable_snapshot(dir: &Path, end: Offset, txn_indexes: TxnIndexes) -> Result<Option<Decoded>> {
    let remove = || {
        let path = dir.join(crate::producer_state::FILE_NAME);
        std::fs::remove_file(&path)
            .map_err(|e| crate::error::EngineError::io("remove producer-state snapshot", &path, e))
    };
    match ProducerStates::load(dir).await? {
        Some(d) if d.offset > end => {
            // Once the log grows past it again it would describe other
            // batches.
            tracing::info!(dir = %dir.display(), snapshot = %d.offset, end = %end,
                "producer-state snapshot past the log end: removed, the state rebuilt from the log");
            remove()?;
            Ok(None)
        }
        Some(_) if txn_indexes == TxnIndexes::Broken => {
            tracing::warn!(dir = %dir.display(),
                "a transaction index did not load: the producer state and every transaction index rebuilt from the log");
            // Every index is about to be cut and written again: a crash
            // meanwhile must not find a snapshot that trusts them.
            remove()?;
            crate::checkpoint::sync_dir(dir).await?;
            Ok(None)
        }
        found => Ok(found),
    }
}

/// Applies the batches of `s` in `[from, end)` to `states`, entering the
/// transactions they abort in the segment's transaction index; returns
/// how many it applied.
async fn scan_segment(s: &Segment, (from, end): (Offset, Offset), states: &mut ProducerStates) -> Result<u64> {
    let reader = s.reader().await?;
    let size = s.size();
    let mut pos = if s.base() < from { s.index_lookup(from).1 } else { 0 };
    let mut batches = 0;
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
                if let Some(aborted) = states.apply_txn(&info, marker) {
                    s.meta_mut().push_aborted(aborted);
                }
                states.note_coordinator_epoch(&info, coordinator_epoch);
            }
            batches += 1;
        }
        pos += info.size as u64;
    }
    Ok(batches)
}

/// Puts an FPS3/FPS2 snapshot's aborted transactions (those below its
/// offset `covered`) into the transaction indexes of the segments holding
/// their markers, where not there yet — each only if its ABORT marker is
/// still in the log (the version that wrote the list did not take an entry
/// out when its cleaner removed the marker, and a consumer told of an
/// abort skips the producer's batches until it meets the marker).
async fn place_legacy(segments: &VecDeque<Rc<Segment>>, legacy: &[AbortedTxn], covered: Offset) -> Result<()> {
    for a in legacy.iter().filter(|a| a.last_offset < covered) {
        let at = segments.partition_point(|s| s.next_offset() <= a.last_offset);
        let Some(s) = segments.get(at).filter(|s| s.base() <= a.last_offset) else {
            continue;
        };
        let after_last = s.meta().txn_index.last().is_none_or(|l| l.last_offset < a.last_offset);
        if after_last && abort_marker_at(s, a).await? {
            s.meta_mut().push_aborted(*a);
        }
    }
    Ok(())
}

/// Whether `a`'s producer's ABORT marker is at `a.last_offset` in `s`.
async fn abort_marker_at(s: &Segment, a: &AbortedTxn) -> Result<bool> {
    let (_, mut pos) = s.index_lookup(a.last_offset);
    let reader = s.reader().await?;
    let size = s.size();
    while let Some(info) = reader.batch_at(pos, size).await? {
        if info.base_offset > a.last_offset {
            break;
        }
        if info.base_offset == a.last_offset {
            if !info.is_control || info.producer_id != a.producer_id {
                return Ok(false);
            }
            let bytes = reader.read_at(pos, info.size).await?;
            return Ok(crate::txn_state::marker_if_control(&bytes, &info) == Some(crate::txn_state::Marker::Abort));
        }
        pos += info.size as u64;
    }
    Ok(false)
}

impl PartitionLog {
    /// Writes the producer state as of `offset` (every batch below it
    /// applied), once the transaction indexes are on the device. The
    /// caller holds the append turn.
    pub(crate) async fn snapshot_producers(&self, offset: Offset) -> Result<()> {
        let states = self.producers.borrow().clone();
        let segments = self.segments.borrow().clone();
        for s in segments.iter().filter(|s| !s.meta().txn_index_durable) {
            s.sync_txn_index().await?;
        }
        states.store(&self.dir, offset).await
    }

    /// Rebuilds the producer state for the log as it now ends (after a
    /// truncation). The caller holds the append turn.
    pub(crate) async fn rebuild_producers(&self) -> Result<()> {
        let segments = self.segments.borrow().clone();
        let states = rebuild(&self.dir, &segments, self.log_end_offset(), TxnIndexes::Loaded).await?;
        *self.producers.borrow_mut() = states;
        Ok(())
    }
}
