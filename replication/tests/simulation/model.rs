//! The pieces of the simulated world: a deterministic random source, a
//! replica's log as plain memory, and the partition state znode.

use ferrite_engine::types::{LeaderEpoch, Offset};
use ferrite_replication::{BrokerId, EpochHistory, ZkVersion};

pub use ferrite_testkit::rng::Rng;

/// One record: the epoch it was written in and a value unique in the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rec {
    pub epoch: LeaderEpoch,
    pub value: u64,
}

/// A replica's log: records at offsets 0.., and its epoch history.
///
/// A leader's appends are written later (the engine's group write): the
/// records at and above `written` are appended, readable by followers (as
/// the engine's cache serves them), not yet in the kernel, and lost when
/// the broker crashes.
#[derive(Clone, Debug, Default)]
pub struct ModelLog {
    pub records: Vec<Rec>,
    pub epochs: Vec<(LeaderEpoch, Offset)>,
    pub written: usize,
}

impl ModelLog {
    /// The log end offset: what is written.
    pub fn end(&self) -> Offset {
        Offset(self.written as i64)
    }

    /// Where the appends end, written or not.
    pub fn appended_end(&self) -> Offset {
        Offset(self.records.len() as i64)
    }

    /// Appends a record that is written later ([`ModelLog::complete_writes`]).
    pub fn append(&mut self, rec: Rec) {
        self.assign(rec.epoch, self.appended_end());
        self.records.push(rec);
    }

    /// Appends a record and writes it (a follower's append, which ends
    /// before its next fetch).
    pub fn append_written(&mut self, rec: Rec) {
        self.append(rec);
        self.complete_writes();
    }

    /// Every append so far is written. True if that moved the end.
    pub fn complete_writes(&mut self) -> bool {
        let moved = self.written < self.records.len();
        self.written = self.records.len();
        moved
    }

    /// A crash: what was not written is gone.
    pub fn lose_unwritten(&mut self) {
        self.truncate(self.end());
    }

    /// Kafka's epoch cache `assign`: a newer epoch starts here.
    pub fn assign(&mut self, epoch: LeaderEpoch, start: Offset) {
        if self.epochs.last().is_some_and(|(e, _)| *e >= epoch) {
            return;
        }
        self.epochs.retain(|(_, s)| *s < start);
        self.epochs.push((epoch, start));
    }

    pub fn truncate(&mut self, offset: Offset) {
        let keep = (offset.0.max(0) as usize).min(self.records.len());
        self.records.truncate(keep);
        self.written = self.written.min(keep);
        self.epochs.retain(|(_, s)| s.0 < offset.0);
    }
}

impl EpochHistory for ModelLog {
    fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.epochs.last().map(|e| e.0)
    }

    fn end_offset_for(&self, requested: LeaderEpoch, log_end: Offset) -> Option<(LeaderEpoch, Offset)> {
        let latest = self.latest_epoch()?;
        if requested == LeaderEpoch::NONE || requested > latest {
            return None;
        }
        if requested == latest {
            return Some((latest, log_end));
        }
        let higher = self.epochs.iter().find(|e| e.0 > requested)?;
        let floor = self.epochs.iter().rev().find(|e| e.0 <= requested);
        Some((floor.map_or(requested, |f| f.0), higher.1))
    }
}

/// The partition state znode: what the controller and the leaders write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZkState {
    pub leader: Option<BrokerId>,
    pub epoch: LeaderEpoch,
    pub isr: Vec<BrokerId>,
    pub version: ZkVersion,
}
