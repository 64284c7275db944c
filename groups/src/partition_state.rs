//! What one partition of `__consumer_offsets` holds once replayed: the
//! groups that hash to it, each with its membership and committed offsets.
//! Free of I/O: records in (from the log at load, or as just written), state
//! out.

use std::collections::BTreeMap;

use ferrite_ids::MonoMs;

use super::group::{Group, GroupSnapshot, GroupState};
use super::offsets_format::{decode_key, decode_value, CommittedOffset, OffsetsRecord, RecordKey};

/// A group and its committed offsets.
#[derive(Debug)]
pub struct GroupEntry {
    pub group: Group,
    pub offsets: BTreeMap<(String, i32), CommittedOffset>,
}

impl GroupEntry {
    pub fn new(id: &str) -> GroupEntry {
        GroupEntry {
            group: Group::new(id),
            offsets: BTreeMap::new(),
        }
    }
}

/// The groups of one `__consumer_offsets` partition.
#[derive(Debug, Default)]
pub struct PartitionGroups {
    pub groups: BTreeMap<String, GroupEntry>,
}

/// What replaying found that it could not use.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ReplayReport {
    pub records: u64,
    pub skipped: u64,
}

impl PartitionGroups {
    /// Rebuilds the state from the partition's records, oldest first
    /// (key bytes, value bytes or `None` for a tombstone). Records that do
    /// not decode are skipped and counted.
    pub fn replay<'a>(
        records: impl Iterator<Item = (Option<&'a [u8]>, Option<&'a [u8]>)>,
        now: MonoMs,
    ) -> (PartitionGroups, ReplayReport) {
        let mut offsets: BTreeMap<String, BTreeMap<(String, i32), CommittedOffset>> = BTreeMap::new();
        let mut snapshots: BTreeMap<String, GroupSnapshot> = BTreeMap::new();
        let mut report = ReplayReport::default();
        for (key, value) in records {
            report.records += 1;
            let Some(key) = key.and_then(|k| decode_key(k).ok()) else {
                report.skipped += 1;
                continue;
            };
            let Ok(record) = decode_value(&key, value) else {
                report.skipped += 1;
                continue;
            };
            match (key, record) {
                (
                    RecordKey::Offset {
                        group,
                        topic,
                        partition,
                    },
                    OffsetsRecord::Offset(o),
                ) => {
                    offsets.entry(group).or_default().insert((topic, partition), o);
                }
                (
                    RecordKey::Offset {
                        group,
                        topic,
                        partition,
                    },
                    OffsetsRecord::Tombstone,
                ) => {
                    if let Some(g) = offsets.get_mut(&group) {
                        g.remove(&(topic, partition));
                    }
                }
                (RecordKey::Group { group }, OffsetsRecord::Group(s)) => {
                    snapshots.insert(group, s);
                }
                (RecordKey::Group { group }, OffsetsRecord::Tombstone) => {
                    snapshots.remove(&group);
                    offsets.remove(&group);
                }
                _ => report.skipped += 1,
            }
        }
        let mut state = PartitionGroups::default();
        for (id, snap) in snapshots {
            let entry = state.groups.entry(id.clone()).or_insert_with(|| GroupEntry::new(&id));
            entry.group = Group::from_snapshot(&id, snap, now);
        }
        for (id, offs) in offsets {
            if offs.is_empty() {
                continue;
            }
            let entry = state.groups.entry(id.clone()).or_insert_with(|| GroupEntry::new(&id));
            entry.offsets = offs;
        }
        (state, report)
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
            records.iter().map(|(k, v)| (Some(k.as_slice()), v.as_deref())),
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
}
