//! Compaction of `__consumer_offsets`: keeping the latest value per key.
//!
//! The coordinator holds every live value of its partitions in memory, so
//! instead of rewriting old segments in place (Kafka's log cleaner) it
//! appends the live state again — one record per group and per committed
//! offset, the latest values — and then deletes the segments that lie
//! wholly below the point where that rewrite began. Every write of the
//! partition is held back meanwhile (the coordinator's write gate), so the
//! records above that point describe the whole state; tombstoned keys are
//! simply not rewritten. A crash in the middle leaves the old segments and
//! part of the rewrite, which replay the same state.
//!
//! Offsets of surviving records change (unlike Kafka's cleaner): nothing
//! reads this topic by offset but the coordinator.

use super::group::GroupState;
use super::offsets_format::{encode_group, encode_key, encode_offset, RecordKey};
use super::partition_state::PartitionGroups;
use super::KeyValue;

/// Records per batch of the rewrite.
pub const RECORDS_PER_BATCH: usize = 500;
/// Dead records a partition carries before compaction is worth a rewrite.
const DEAD_RECORDS_MIN: i64 = 100;

/// Records the live state takes.
pub fn live_records(pg: &PartitionGroups) -> usize {
    pg.groups
        .values()
        .map(|e| e.offsets.len() + usize::from(has_record(e)))
        .sum()
}

fn has_record(e: &super::partition_state::GroupEntry) -> bool {
    e.group.state() != GroupState::Dead && (e.group.generation() > 0 || e.group.member_count() > 0)
}

/// Whether a partition of `total` records, `live` of them live, in
/// `segments` segments, is worth compacting: at least half of it dead, and
/// a sealed segment to delete.
pub fn worth_it(total: i64, live: i64, segments: usize) -> bool {
    segments >= 2 && total - live >= live.max(DEAD_RECORDS_MIN)
}

/// The live state as records: each group's metadata, then its offsets.
pub fn live_state(pg: &PartitionGroups, now_ms: i64) -> Vec<KeyValue> {
    let mut out = Vec::with_capacity(live_records(pg));
    for (id, e) in &pg.groups {
        if e.group.state() == GroupState::Dead {
            continue;
        }
        if has_record(e) {
            let key = RecordKey::Group { group: id.clone() };
            out.push((encode_key(&key), Some(encode_group(&e.group.snapshot(), now_ms))));
        }
        for ((topic, partition), o) in &e.offsets {
            let key = RecordKey::Offset {
                group: id.clone(),
                topic: topic.clone(),
                partition: *partition,
            };
            out.push((encode_key(&key), Some(encode_offset(o))));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use ferrite_ids::MonoMs;

    use super::super::offsets_format::CommittedOffset;
    use super::*;

    #[test]
    fn the_rewrite_replays_to_the_same_state() {
        let mut pg = PartitionGroups::default();
        for g in 0..3 {
            let e = pg.get_or_create(&format!("g{g}"));
            for p in 0..4 {
                e.offsets.insert(
                    ("t".to_string(), p),
                    CommittedOffset {
                        offset: i64::from(p * 10 + g),
                        leader_epoch: -1,
                        metadata: String::new(),
                        commit_timestamp_ms: 5,
                    },
                );
            }
        }
        let records = live_state(&pg, 7);
        assert_eq!(records.len(), live_records(&pg));
        assert_eq!(records.len(), 12);
        let (back, report) =
            PartitionGroups::replay(records.iter().map(|(k, v)| (Some(&k[..]), v.as_deref())), MonoMs(0));
        assert_eq!(report.skipped, 0);
        for (id, e) in &pg.groups {
            assert_eq!(back.groups[id].offsets, e.offsets);
        }
    }

    #[test]
    fn compaction_waits_for_dead_records_and_a_sealed_segment() {
        assert!(!worth_it(150, 100, 3), "not half dead");
        assert!(!worth_it(1_000, 10, 1), "nothing sealed");
        assert!(!worth_it(50, 0, 2), "too few dead records to bother");
        assert!(worth_it(1_000, 10, 2));
    }
}
