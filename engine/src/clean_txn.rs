//! What the log cleaner does with transactions (KIP-98's cleaning rules,
//! as Kafka's cleaner applies them), free of I/O: one [`CleanTxns`] walks
//! a pass's batches in offset order from the log start.
//!
//! - A data batch of a transaction that ended in an abort is removed (its
//!   records: the batch's header stays when it is its producer's last, as
//!   for any emptied batch). No reader needs it: `read_committed` skips it,
//!   and Kafka's cleaner drops it for `read_uncommitted` readers too.
//! - A marker (COMMIT or ABORT control batch) is *removable* once no data
//!   batch of its transaction is left before it: none was traversed in this
//!   pass since the producer's previous marker (removed or emptied ones
//!   count as traversed, so an abort's marker outlives its data by at least
//!   one pass). A removable marker is first stamped with a delete horizon
//!   (`now + delete.retention.ms`, KIP-534, as a tombstone is) and removed
//!   by a pass after it: a reader that had fetched the transaction's data
//!   before the data went still finds the marker that ends it.
//!
//! A marker that carries its producer's current epoch with no data batch of
//! the producer after it stays whatever this says ([`crate::clean_job`]):
//! it is the record of the epoch a coordinator raised to fence the
//! producer, which a state rebuilt from the log must still know.
//!
//! Whether a marker's transaction still has data is judged from the batches
//! themselves, not only from the list of aborted transactions: a marker is
//! never removed while a data batch of its producer that it ends is left,
//! so no transaction is ever left without its end.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::batch::BatchInfo;
use crate::txn_state::{AbortedTxn, Marker};
use crate::types::{Offset, ProducerId, TimestampMs};

/// What becomes of a control batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerFate {
    Keep,
    /// Removable, not yet stamped (or stamped with a later horizon than the
    /// batch says, which cannot happen): stamp it with the pass's horizon.
    StampHorizon,
    Remove,
}

/// A pass's view of the transactions in the log, batch by batch.
#[derive(Debug)]
pub struct CleanTxns {
    /// Aborted transactions not yet reached, by first offset.
    pending: VecDeque<AbortedTxn>,
    /// The aborted transaction each producer is in at the walk's position.
    aborting: HashMap<ProducerId, AbortedTxn>,
    /// Producers with a transactional data batch traversed since their
    /// last marker.
    unended: HashSet<ProducerId>,
}

impl CleanTxns {
    pub fn new(aborted: &[AbortedTxn]) -> CleanTxns {
        let mut pending: Vec<AbortedTxn> = aborted.to_vec();
        pending.sort_by_key(|a| a.first_offset);
        CleanTxns {
            pending: pending.into(),
            aborting: HashMap::new(),
            unended: HashSet::new(),
        }
    }

    fn reach(&mut self, offset: Offset) {
        while self.pending.front().is_some_and(|a| a.first_offset <= offset) {
            let Some(a) = self.pending.pop_front() else { break };
            self.aborting.insert(a.producer_id, a);
        }
    }

    /// A data batch (not a control batch) at the walk's position: whether
    /// it belongs to an aborted transaction (and so is removed).
    pub fn on_data(&mut self, info: &BatchInfo) -> bool {
        assert!(!info.is_control, "a control batch judged as data");
        self.reach(info.last_offset());
        if !info.is_transactional || !info.producer_id.is_producer() {
            return false;
        }
        self.unended.insert(info.producer_id);
        self.aborting
            .get(&info.producer_id)
            .is_some_and(|a| a.first_offset <= info.base_offset && info.base_offset < a.last_offset)
    }

    /// A control batch at the walk's position, with the marker it carries
    /// (`None`: another control record, or one that does not parse — kept)
    /// and `now` the pass's time.
    pub fn on_marker(&mut self, info: &BatchInfo, marker: Option<Marker>, now: TimestampMs) -> MarkerFate {
        assert!(info.is_control, "a data batch judged as a marker");
        self.reach(info.last_offset());
        if marker.is_none() || !info.producer_id.is_producer() {
            return MarkerFate::Keep;
        }
        if self
            .aborting
            .get(&info.producer_id)
            .is_some_and(|a| a.last_offset <= info.base_offset)
        {
            self.aborting.remove(&info.producer_id);
        }
        if self.unended.remove(&info.producer_id) {
            return MarkerFate::Keep;
        }
        match info.delete_horizon() {
            None => MarkerFate::StampHorizon,
            Some(h) if h <= now => MarkerFate::Remove,
            Some(_) => MarkerFate::Keep,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch;
    use crate::txn_state::{marker_batch, marker_of};

    fn data(pid: i64, base: i64, transactional: bool) -> BatchInfo {
        let mut b = batch::build_batch(Offset(base), TimestampMs(1), &[b"x"]);
        if transactional {
            b[21..23].copy_from_slice(&batch::ATTR_TRANSACTIONAL.to_be_bytes());
        }
        batch::set_producer(&mut b, ProducerId(pid), 0, 0);
        batch::peek(&b).unwrap()
    }

    fn marker(pid: i64, at: i64, m: Marker) -> (BatchInfo, Option<Marker>) {
        let mut b = marker_batch(ProducerId(pid), 0, m, 0, TimestampMs(1));
        b[0..8].copy_from_slice(&at.to_be_bytes());
        let i = batch::peek(&b).unwrap();
        let m = marker_of(&b, &i).unwrap();
        (i, m)
    }

    fn aborted(pid: i64, first: i64, last: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: ProducerId(pid),
            first_offset: Offset(first),
            last_offset: Offset(last),
            last_stable_offset: Offset(last + 1),
        }
    }

    const NOW: TimestampMs = TimestampMs(1_000);

    #[test]
    fn aborted_data_goes_and_its_marker_outlives_it_by_a_pass() {
        // pid 1 aborts [0, 2), marker at 2; pid 2 commits 1, marker at 3;
        // a plain batch of pid 3 at 4.
        let list = [aborted(1, 0, 2)];
        let mut t = CleanTxns::new(&list);
        assert!(t.on_data(&data(1, 0, true)), "aborted data removed");
        assert!(!t.on_data(&data(2, 1, true)), "committed data kept");
        let (m, k) = marker(1, 2, Marker::Abort);
        assert_eq!(t.on_marker(&m, k, NOW), MarkerFate::Keep, "its data was traversed");
        let (m, k) = marker(2, 3, Marker::Commit);
        assert_eq!(t.on_marker(&m, k, NOW), MarkerFate::Keep);
        assert!(!t.on_data(&data(3, 4, false)));
        // The next pass: the aborted data is gone, the committed is not.
        let mut t = CleanTxns::new(&list);
        assert!(!t.on_data(&data(2, 1, true)));
        let (m, k) = marker(1, 2, Marker::Abort);
        assert_eq!(t.on_marker(&m, k, NOW), MarkerFate::StampHorizon);
        let (m, k) = marker(2, 3, Marker::Commit);
        assert_eq!(t.on_marker(&m, k, NOW), MarkerFate::Keep, "its data is still there");
    }

    #[test]
    fn a_stamped_marker_goes_after_its_horizon() {
        let mut b = marker_batch(ProducerId(1), 0, Marker::Commit, 0, TimestampMs(1));
        let attrs = batch::ATTR_TRANSACTIONAL | batch::ATTR_CONTROL | batch::ATTR_DELETE_HORIZON;
        b[21..23].copy_from_slice(&attrs.to_be_bytes());
        b[27..35].copy_from_slice(&500i64.to_be_bytes());
        let i = batch::peek(&b).unwrap();
        assert_eq!(i.delete_horizon(), Some(TimestampMs(500)));
        let mut t = CleanTxns::new(&[]);
        assert_eq!(
            t.on_marker(&i, Some(Marker::Commit), TimestampMs(499)),
            MarkerFate::Keep
        );
        let mut t = CleanTxns::new(&[]);
        assert_eq!(
            t.on_marker(&i, Some(Marker::Commit), TimestampMs(500)),
            MarkerFate::Remove
        );
        assert_eq!(
            t.on_marker(&i, None, TimestampMs(500)),
            MarkerFate::Keep,
            "not a marker"
        );
    }

    #[test]
    fn a_marker_is_kept_while_data_it_ends_is_left_even_if_the_abort_list_misses_it() {
        let mut t = CleanTxns::new(&[]);
        assert!(!t.on_data(&data(1, 0, true)), "unknown abort: kept");
        let (m, k) = marker(1, 1, Marker::Abort);
        assert_eq!(t.on_marker(&m, k, NOW), MarkerFate::Keep);
        // The producer's next transaction starts clean.
        let (m, k) = marker(1, 5, Marker::Commit);
        assert_eq!(t.on_marker(&m, k, NOW), MarkerFate::StampHorizon);
    }

    #[test]
    fn only_the_aborted_transaction_of_a_producer_is_removed() {
        // pid 1: committed [0,1) marker 1, aborted [2,4) marker 4, data 5 open.
        let mut t = CleanTxns::new(&[aborted(1, 2, 4)]);
        assert!(!t.on_data(&data(1, 0, true)));
        let (m, k) = marker(1, 1, Marker::Commit);
        assert_eq!(t.on_marker(&m, k, NOW), MarkerFate::Keep);
        assert!(t.on_data(&data(1, 2, true)));
        assert!(t.on_data(&data(1, 3, true)));
        let (m, k) = marker(1, 4, Marker::Abort);
        assert_eq!(t.on_marker(&m, k, NOW), MarkerFate::Keep);
        assert!(!t.on_data(&data(1, 5, true)), "after the abort's marker");
        assert!(!t.on_data(&data(2, 6, false)), "non-transactional");
    }
}
