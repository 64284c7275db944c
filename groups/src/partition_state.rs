//! What one partition of `__consumer_offsets` holds once replayed: the
//! groups that hash to it, each with its membership and committed offsets.
//! Free of I/O: records in (from the log at load, or as just written), state
//! out.
//!
//! Every committed offset remembers where in the log its record is (the
//! offset of its batch). A transaction's offset commit, counted at the
//! transaction's COMMIT marker, replaces a partition's committed offset only
//! if that one's record lies before the transaction's: a plain commit made
//! while the transaction was open wins, as in Kafka.

use std::collections::BTreeMap;

use ferrite_ids::{MonoMs, Offset, ProducerId};

use super::group::{Group, GroupSnapshot, GroupState};
use super::offsets_format::{decode_key, decode_value, CommittedOffset, OffsetsRecord, RecordKey};

/// A group and its committed offsets.
#[derive(Debug)]
pub struct GroupEntry {
    pub group: Group,
    pub offsets: BTreeMap<(String, i32), CommittedOffset>,
    /// Where each committed offset's record is in the log (its batch's
    /// offset); kept in step with `offsets` by the methods below.
    positions: BTreeMap<(String, i32), Offset>,
}

impl GroupEntry {
    pub fn new(id: &str) -> GroupEntry {
        GroupEntry {
            group: Group::new(id),
            offsets: BTreeMap::new(),
            positions: BTreeMap::new(),
        }
    }

    /// Takes the offsets of a batch written at `position`.
    pub fn set_offsets(
        &mut self,
        written: impl IntoIterator<Item = ((String, i32), CommittedOffset)>,
        position: Offset,
    ) {
        for (key, value) in written {
            self.positions.insert(key.clone(), position);
            self.offsets.insert(key, value);
        }
    }

    /// A transaction's committed offset: taken unless the partition's
    /// current offset was written after it (`position`; `None` when not
    /// known, which counts as latest).
    fn set_txn_offset(&mut self, key: (String, i32), value: CommittedOffset, position: Option<Offset>) {
        let current = self
            .offsets
            .contains_key(&key)
            .then(|| self.positions.get(&key))
            .flatten();
        if let (Some(current), Some(txn)) = (current, position) {
            if *current > txn {
                return;
            }
        }
        match position {
            Some(at) => self.positions.insert(key.clone(), at),
            None => self.positions.remove(&key),
        };
        self.offsets.insert(key, value);
    }

    pub fn remove_offset(&mut self, key: &(String, i32)) -> Option<CommittedOffset> {
        self.positions.remove(key);
        self.offsets.remove(key)
    }

    /// Where a partition's committed offset was written (`None`: no offset,
    /// or written before this state knew positions).
    pub fn position_of(&self, key: &(String, i32)) -> Option<Offset> {
        self.offsets.get(key).and(self.positions.get(key).copied())
    }
}

/// The groups of one `__consumer_offsets` partition, and the offsets
/// transactions committed (TxnOffsetCommit) that wait for their
/// transaction's marker.
#[derive(Debug, Default)]
pub struct PartitionGroups {
    pub groups: BTreeMap<String, GroupEntry>,
    pub pending_txns: BTreeMap<ProducerId, Vec<PendingOffset>>,
}

/// A transaction's offset for a group's partition, counted once the
/// transaction commits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingOffset {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub offset: CommittedOffset,
    /// Where its record is in the log (`None` until its append returns).
    pub position: Option<Offset>,
}

impl PendingOffset {
    /// The same commit, wherever it was written.
    fn same(&self, other: &PendingOffset) -> bool {
        (&self.group, &self.topic, self.partition, &self.offset)
            == (&other.group, &other.topic, other.partition, &other.offset)
    }
}

/// One item of a partition's log, oldest first, as replayed; a record
/// comes with its batch's offset.
#[derive(Clone, Copy, Debug)]
pub enum Replayed<'a> {
    /// A record (key, value or `None` for a tombstone).
    Record(Offset, Option<&'a [u8]>, Option<&'a [u8]>),
    /// A record of a producer's transaction.
    Transactional(Offset, ProducerId, Option<&'a [u8]>, Option<&'a [u8]>),
    /// A producer's transaction ended: committed (`true`) or aborted.
    Marker(ProducerId, bool),
}

/// What replaying found that it could not use.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ReplayReport {
    pub records: u64,
    pub skipped: u64,
}

/// What a replay has gathered so far.
#[derive(Default)]
struct Replay {
    offsets: BTreeMap<String, GroupEntry>,
    snapshots: BTreeMap<String, GroupSnapshot>,
    pending: BTreeMap<ProducerId, Vec<PendingOffset>>,
    report: ReplayReport,
}

impl Replay {
    fn marker(&mut self, producer_id: ProducerId, commit: bool) {
        let ended = self.pending.remove(&producer_id).unwrap_or_default();
        for p in ended.into_iter().filter(|_| commit) {
            let entry = self
                .offsets
                .entry(p.group.clone())
                .or_insert_with(|| GroupEntry::new(&p.group));
            entry.set_txn_offset((p.topic, p.partition), p.offset, p.position);
        }
    }

    fn record(&mut self, at: Offset, key: Option<&[u8]>, value: Option<&[u8]>, producer: Option<ProducerId>) {
        self.report.records += 1;
        let Some(key) = key.and_then(|k| decode_key(k).ok()) else {
            self.report.skipped += 1;
            return;
        };
        let Ok(record) = decode_value(&key, value) else {
            self.report.skipped += 1;
            return;
        };
        match (key, record, producer) {
            (
                RecordKey::Offset {
                    group,
                    topic,
                    partition,
                },
                OffsetsRecord::Offset(offset),
                Some(pid),
            ) => {
                let pending = PendingOffset {
                    group,
                    topic,
                    partition,
                    offset,
                    position: Some(at),
                };
                self.pending.entry(pid).or_default().push(pending);
            }
            (
                RecordKey::Offset {
                    group,
                    topic,
                    partition,
                },
                OffsetsRecord::Offset(o),
                None,
            ) => {
                let entry = self
                    .offsets
                    .entry(group.clone())
                    .or_insert_with(|| GroupEntry::new(&group));
                entry.set_offsets([((topic, partition), o)], at);
            }
            (
                RecordKey::Offset {
                    group,
                    topic,
                    partition,
                },
                OffsetsRecord::Tombstone,
                None,
            ) => {
                if let Some(g) = self.offsets.get_mut(&group) {
                    g.remove_offset(&(topic, partition));
                }
            }
            (RecordKey::Group { group }, OffsetsRecord::Group(s), None) => {
                self.snapshots.insert(group, s);
            }
            (RecordKey::Group { group }, OffsetsRecord::Tombstone, None) => {
                self.snapshots.remove(&group);
                self.offsets.remove(&group);
            }
            _ => self.report.skipped += 1,
        }
    }
}

impl PartitionGroups {
    /// Rebuilds the state from the partition's log, oldest first. Records
    /// that do not decode are skipped and counted; a transaction's offsets
    /// count at its commit marker.
    pub fn replay<'a>(items: impl Iterator<Item = Replayed<'a>>, now: MonoMs) -> (PartitionGroups, ReplayReport) {
        let mut r = Replay::default();
        for item in items {
            match item {
                Replayed::Record(at, k, v) => r.record(at, k, v, None),
                Replayed::Transactional(at, pid, k, v) => r.record(at, k, v, Some(pid)),
                Replayed::Marker(pid, commit) => r.marker(pid, commit),
            }
        }
        let mut state = PartitionGroups {
            pending_txns: r.pending,
            ..PartitionGroups::default()
        };
        for (id, snap) in r.snapshots {
            let entry = state.groups.entry(id.clone()).or_insert_with(|| GroupEntry::new(&id));
            entry.group = Group::from_snapshot(&id, snap, now);
        }
        for (id, offs) in r.offsets {
            if offs.offsets.is_empty() {
                continue;
            }
            let entry = state.groups.entry(id.clone()).or_insert_with(|| GroupEntry::new(&id));
            entry.offsets = offs.offsets;
            entry.positions = offs.positions;
        }
        (state, r.report)
    }

    /// A producer's transaction ended (its marker is in the log): its
    /// pending offsets count if it committed (each unless a plain commit
    /// of its partition was written after it), and are dropped if not.
    pub fn end_txn(&mut self, producer_id: ProducerId, commit: bool) {
        let ended = self.pending_txns.remove(&producer_id).unwrap_or_default();
        for p in ended.into_iter().filter(|_| commit) {
            let entry = self.get_or_create(&p.group);
            entry.set_txn_offset((p.topic, p.partition), p.offset, p.position);
        }
    }

    /// A producer's transactional offsets, pending until its marker.
    pub fn add_pending(&mut self, producer_id: ProducerId, offsets: Vec<PendingOffset>) {
        self.pending_txns.entry(producer_id).or_default().extend(offsets);
    }

    /// Adds those of `offsets` the producer's pending offsets lack (a
    /// reload may have replaced the state they were added to), and notes
    /// where their records were written.
    pub fn ensure_pending(&mut self, producer_id: ProducerId, offsets: &[PendingOffset], position: Offset) {
        let held = self.pending_txns.entry(producer_id).or_default();
        for o in offsets {
            match held.iter_mut().find(|h| h.same(o)) {
                Some(h) => h.position = Some(position),
                None => held.push(PendingOffset {
                    position: Some(position),
                    ..o.clone()
                }),
            }
        }
    }

    /// Takes back offsets [`PartitionGroups::add_pending`] added (their
    /// write failed), once each.
    pub fn remove_pending(&mut self, producer_id: ProducerId, offsets: &[PendingOffset]) {
        let Some(held) = self.pending_txns.get_mut(&producer_id) else {
            return;
        };
        for o in offsets {
            if let Some(at) = held.iter().position(|h| h.same(o)) {
                held.remove(at);
            }
        }
        if held.is_empty() {
            self.pending_txns.remove(&producer_id);
        }
    }

    pub fn get_or_create(&mut self, id: &str) -> &mut GroupEntry {
        self.groups.entry(id.to_string()).or_insert_with(|| GroupEntry::new(id))
    }

    /// Groups that are gone: Dead, or Empty with no offsets left.
    pub fn drop_finished(&mut self) {
        self.groups.retain(|_, e| match e.group.state() {
            GroupState::Dead => false,
            GroupState::Empty => !e.offsets.is_empty() || e.group.generation() > 0,
            _ => true,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::offsets_format::{encode_group, encode_key, encode_offset};
    use super::*;

    fn offset_key(g: &str, t: &str, p: i32) -> Vec<u8> {
        encode_key(&RecordKey::Offset {
            group: g.into(),
            topic: t.into(),
            partition: p,
        })
    }

    fn offset_value(o: i64) -> Vec<u8> {
        encode_offset(&CommittedOffset {
            offset: o,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: 0,
        })
    }

    #[test]
    fn later_records_win_and_tombstones_delete() {
        let group_key = encode_key(&RecordKey::Group { group: "g".into() });
        let snap = GroupSnapshot {
            protocol_type: "consumer".into(),
            generation: 4,
            protocol: None,
            leader: None,
            members: Vec::new(),
        };
        let group_value = encode_group(&snap, 0);
        let records: Vec<(Vec<u8>, Option<Vec<u8>>)> = vec![
            (offset_key("g", "t", 0), Some(offset_value(5))),
            (offset_key("g", "t", 0), Some(offset_value(9))),
            (offset_key("g", "t", 1), Some(offset_value(3))),
            (offset_key("g", "t", 1), None),
            (group_key.clone(), Some(group_value)),
            (offset_key("h", "t", 0), Some(offset_value(1))),
            (encode_key(&RecordKey::Group { group: "h".into() }), None),
            (b"junk".to_vec(), Some(b"x".to_vec())),
        ];
        let (state, report) = PartitionGroups::replay(
            records
                .iter()
                .enumerate()
                .map(|(i, (k, v))| Replayed::Record(Offset(i as i64), Some(k.as_slice()), v.as_deref())),
            MonoMs(0),
        );
        assert_eq!(report, ReplayReport { records: 8, skipped: 1 });
        let g = &state.groups["g"];
        assert_eq!(g.group.generation(), 4);
        assert_eq!(g.offsets.len(), 1);
        assert_eq!(g.offsets[&("t".to_string(), 0)].offset, 9);
        assert!(
            !state.groups.contains_key("h"),
            "the group tombstone removed h's offsets"
        );
    }

    #[test]
    fn a_transactions_offsets_count_at_its_commit_marker() {
        let (k0, k1) = (offset_key("g", "t", 0), offset_key("g", "t", 1));
        let (v5, v7, v9) = (offset_value(5), offset_value(7), offset_value(9));
        let items = [
            Replayed::Record(Offset(0), Some(&k0), Some(&v5)),
            Replayed::Transactional(Offset(1), ProducerId(1), Some(&k0), Some(&v7)),
            Replayed::Transactional(Offset(2), ProducerId(2), Some(&k1), Some(&v9)),
            Replayed::Marker(ProducerId(2), false),
            Replayed::Transactional(Offset(4), ProducerId(3), Some(&k1), Some(&v7)),
        ];
        let (state, _) = PartitionGroups::replay(items.into_iter(), MonoMs(0));
        let g = &state.groups["g"];
        assert_eq!(g.offsets[&("t".to_string(), 0)].offset, 5, "not committed yet");
        assert!(!g.offsets.contains_key(&("t".to_string(), 1)), "aborted, then open");
        let pending = |s: &PartitionGroups, p: i32| {
            s.pending_txns
                .values()
                .flatten()
                .any(|o| (o.group.as_str(), o.topic.as_str(), o.partition) == ("g", "t", p))
        };
        assert!(pending(&state, 0));
        assert!(pending(&state, 1));
        let (mut state, _) = PartitionGroups::replay(
            items.into_iter().chain([Replayed::Marker(ProducerId(1), true)]),
            MonoMs(0),
        );
        assert_eq!(state.groups["g"].offsets[&("t".to_string(), 0)].offset, 7);
        assert!(!pending(&state, 0));
        // Added again after a reload that already replayed them: once.
        let again: Vec<PendingOffset> = state.pending_txns[&ProducerId(3)].clone();
        state.ensure_pending(ProducerId(3), &again, Offset(4));
        assert_eq!(state.pending_txns[&ProducerId(3)], again);
        state.remove_pending(ProducerId(3), &again);
        assert!(!state.pending_txns.contains_key(&ProducerId(3)));
        state.ensure_pending(ProducerId(3), &again, Offset(4));
        state.end_txn(ProducerId(3), true);
        assert_eq!(state.groups["g"].offsets[&("t".to_string(), 1)].offset, 7);
        assert!(state.pending_txns.is_empty());
    }

    /// Kafka orders a transaction's offset commit against a plain commit of
    /// the same partition by where their records are in the log.
    #[test]
    fn a_plain_commit_written_after_the_transactions_offset_wins() {
        let k0 = offset_key("g", "t", 0);
        let (v5, v7) = (offset_value(5), offset_value(7));
        let committed = |s: &PartitionGroups| s.groups["g"].offsets[&("t".to_string(), 0)].offset;
        // Replayed: the transaction's record (1) before the plain one (2).
        let items = [
            Replayed::Transactional(Offset(1), ProducerId(1), Some(&k0), Some(&v7)),
            Replayed::Record(Offset(2), Some(&k0), Some(&v5)),
            Replayed::Marker(ProducerId(1), true),
        ];
        let (state, _) = PartitionGroups::replay(items.into_iter(), MonoMs(0));
        assert_eq!(committed(&state), 5, "the later plain commit stands");
        assert_eq!(state.groups["g"].position_of(&("t".to_string(), 0)), Some(Offset(2)));
        // The other way round the transaction's offset replaces it.
        let items = [
            Replayed::Record(Offset(1), Some(&k0), Some(&v5)),
            Replayed::Transactional(Offset(2), ProducerId(1), Some(&k0), Some(&v7)),
            Replayed::Marker(ProducerId(1), true),
        ];
        let (state, _) = PartitionGroups::replay(items.into_iter(), MonoMs(0));
        assert_eq!(committed(&state), 7);
        // Live, the same: a plain commit at 12 after the transaction's 10.
        let (mut live, _) = PartitionGroups::replay(std::iter::empty(), MonoMs(0));
        let pending = |o: i64| PendingOffset {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
            offset: CommittedOffset {
                offset: o,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp_ms: 0,
            },
            position: None,
        };
        live.add_pending(ProducerId(4), vec![pending(70)]);
        live.ensure_pending(ProducerId(4), &[pending(70)], Offset(10));
        assert_eq!(
            live.pending_txns[&ProducerId(4)].len(),
            1,
            "the position is noted, not a copy"
        );
        let plain = pending(50).offset;
        live.get_or_create("g")
            .set_offsets([(("t".to_string(), 0), plain)], Offset(12));
        live.end_txn(ProducerId(4), true);
        assert_eq!(committed(&live), 50);
        // A later transaction (written at 20) does replace it.
        live.add_pending(ProducerId(4), vec![pending(90)]);
        live.ensure_pending(ProducerId(4), &[pending(90)], Offset(20));
        live.end_txn(ProducerId(4), true);
        assert_eq!(committed(&live), 90);
        // An offset removed leaves no position behind to compare with.
        live.get_or_create("g")
            .set_offsets([(("t".to_string(), 0), pending(1).offset)], Offset(30));
        live.get_or_create("g").remove_offset(&("t".to_string(), 0));
        live.add_pending(ProducerId(5), vec![pending(60)]);
        live.ensure_pending(ProducerId(5), &[pending(60)], Offset(25));
        live.end_txn(ProducerId(5), true);
        assert_eq!(committed(&live), 60);
    }
}
