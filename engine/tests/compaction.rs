//! The log cleaner against a model: random key/value/tombstone histories,
//! cleaned, must keep each key's latest record at its own offset, remove
//! what a later record of the same key made obsolete, drop tombstones only
//! after `delete.retention.ms`, keep offsets increasing, let a reader that
//! started before the cleaning read on, and survive a restart and a crash
//! in the middle of a swap.

mod common;

use std::collections::BTreeMap;
use std::rc::Rc;

use bytes::BytesMut;
use common::*;
use ferrite_engine::batch::{self, build_batch_of_records, Validation};
use ferrite_engine::clean_filter;
use ferrite_engine::cleaner::CleanerParams;
use ferrite_engine::clock::Clock;
use ferrite_engine::log_config::{CleanupPolicy, DirtyRatio};
use ferrite_engine::record::Record;
use ferrite_engine::{LogConfig, Offset, PartitionLog, SizeLimit, TimestampMs, WriteMode};

const HOUR_MS: i64 = 3_600_000;

/// One record of the model: its key and value (`None`: a tombstone).
type Entry = (Vec<u8>, Option<Vec<u8>>);

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        cleanup_policy: CleanupPolicy::Compact,
        min_cleanable_dirty_ratio: DirtyRatio(0),
        delete_retention_ms: HOUR_MS,
        ..LogConfig::default()
    }
}

const PARAMS: CleanerParams = CleanerParams {
    entries_max: 1 << 20,
    bytes_per_second: None,
};

fn batch_of(entries: &[Entry], ts: i64) -> BytesMut {
    let records: Vec<Record<'_>> = entries
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            offset_delta: i as i32,
            timestamp_delta: i as i64,
            key: Some(k),
            value: v.as_deref(),
            headers: Vec::new(),
        })
        .collect();
    BytesMut::from(&build_batch_of_records(Offset(0), TimestampMs(ts), &records)[..])
}

/// Appends `batches` random batches over `keys` keys; returns the model.
async fn append_history(
    log: &Rc<PartitionLog>,
    rng: &mut Rng,
    batches: usize,
    keys: u64,
    ts: i64,
    model: &mut BTreeMap<i64, Entry>,
) {
    for _ in 0..batches {
        let n = 1 + rng.below(4) as usize;
        let entries: Vec<Entry> = (0..n)
            .map(|_| {
                let key = format!("k{}", rng.below(keys)).into_bytes();
                let value = (rng.below(10) != 0).then(|| format!("v{}", rng.next_u64()).into_bytes());
                (key, value)
            })
            .collect();
        let info = log.append(batch_of(&entries, ts), LEADER).await.expect("append");
        for (i, e) in entries.into_iter().enumerate() {
            model.insert(info.first_offset.0 + i as i64, e);
        }
    }
}

/// Every record in the log from its start: offset → entry, checking that
/// offsets only increase.
async fn contents(log: &PartitionLog) -> BTreeMap<i64, Entry> {
    let mut out = BTreeMap::new();
    let mut last = -1;
    for b in read_all(log, log.log_start_offset(), 1 << 20).await {
        let info = batch::validate(&b, b.len(), Validation::Stored).expect("a valid batch");
        let mut scratch = Vec::new();
        for r in clean_filter::records_of(&b, &info, &mut scratch, 1 << 20)
            .expect("records")
            .expect("data")
        {
            let offset = info.base_offset.0 + i64::from(r.offset_delta);
            assert!(offset > last, "offset {offset} after {last}");
            last = offset;
            out.insert(offset, (r.key.expect("keyed").to_vec(), r.value.map(<[u8]>::to_vec)));
        }
    }
    out
}

/// Checks a cleaned log against the model: nothing invented or moved,
/// every key's latest record kept, obsolete records below `cleaned_to`
/// gone.
fn check(model: &BTreeMap<i64, Entry>, got: &BTreeMap<i64, Entry>, cleaned_to: Offset) {
    for (offset, e) in got {
        assert_eq!(
            model.get(offset),
            Some(e),
            "offset {offset} holds what was written there"
        );
    }
    let mut latest: BTreeMap<&[u8], i64> = BTreeMap::new();
    for (offset, (k, _)) in model.range(..cleaned_to.0) {
        latest.insert(k, *offset);
    }
    for (offset, (k, _)) in model {
        let newest_below = latest.get(&k[..]).copied();
        let newest_anywhere = model.iter().rev().find(|(_, (k2, _))| k2 == k).map(|(o, _)| *o);
        if Some(*offset) == newest_anywhere {
            assert!(
                got.contains_key(offset),
                "key {:?}'s latest record at {offset} is gone",
                String::from_utf8_lossy(k)
            );
        }
        if *offset < cleaned_to.0 && newest_below.is_some_and(|n| n > *offset) {
            assert!(!got.contains_key(offset), "obsolete record at {offset} kept");
        }
    }
}

#[test]
fn cleaning_keeps_the_latest_record_of_each_key_at_its_offset() {
    for_seeds(seeds(0..12), |seed| {
        let dir = tempfile::tempdir().unwrap();
        run(|| async {
            let mut rng = Rng::new(seed);
            let clock = manual_clock();
            let dyn_clock: Rc<dyn ferrite_engine::clock::Clock> = clock.clone();
            let log = PartitionLog::open(params(dir.path(), config(), WriteMode::Buffered, dyn_clock.clone()))
                .await
                .unwrap();
            let mut model = BTreeMap::new();
            let keys = 5 + rng.below(30);
            append_history(&log, &mut rng, 150, keys, clock.now_ms().0, &mut model).await;
            log.flush().await.unwrap();
            let segments = log.segment_count();
            assert!(segments > 3, "the history spans segments ({segments})");
            // A reader halfway through, before the cleaning.
            let middle = Offset(log.log_end_offset().0 / 2);
            let before = log
                .read(middle, 300, log.log_end_offset(), SizeLimit::AtLeastOneBatch)
                .await
                .unwrap();
            let outcome = log.clean(PARAMS).await.unwrap().expect("a pass ran");
            assert!(outcome.segments_replaced > 0);
            assert!(outcome.first_dirty > Offset::ZERO);
            assert_eq!(
                before.to_vec().await.unwrap().len() as u64,
                before.bytes,
                "a region found before the cleaning reads whole"
            );
            let after = log
                .read(
                    before.next_offset,
                    1 << 20,
                    log.log_end_offset(),
                    SizeLimit::AtLeastOneBatch,
                )
                .await
                .unwrap();
            assert!(
                after.first_offset >= before.next_offset,
                "the reader reads on, forwards"
            );
            let got = contents(&log).await;
            check(&model, &got, outcome.first_dirty);
            let tombstones_kept = got.values().filter(|(_, v)| v.is_none()).count();

            // Past the delete horizon, a second pass removes the tombstones
            // the first one stamped.
            clock.advance_ms(2 * HOUR_MS);
            append_history(&log, &mut rng, 40, keys, clock.now_ms().0, &mut model).await;
            log.flush().await.unwrap();
            let second = log.clean(PARAMS).await.unwrap().expect("a second pass ran");
            let got2 = contents(&log).await;
            check(&model, &got2, second.first_dirty);
            let stamped_gone = got
                .iter()
                .filter(|(o, (_, v))| v.is_none() && **o < outcome.first_dirty.0)
                .all(|(o, _)| !got2.contains_key(o));
            assert!(
                stamped_gone,
                "tombstones past their horizon stay ({tombstones_kept} before)"
            );

            // A restart reads the same.
            log.close().await.unwrap();
            let log = PartitionLog::open(params(dir.path(), config(), WriteMode::Buffered, dyn_clock))
                .await
                .unwrap();
            assert_eq!(contents(&log).await, got2);
            assert_eq!(log.first_dirty_offset(), second.first_dirty);
            log.close().await.unwrap();
        });
    });
}

#[test]
fn a_tombstone_stays_until_its_horizon() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock = manual_clock();
        let dyn_clock: Rc<dyn ferrite_engine::clock::Clock> = clock.clone();
        let log = PartitionLog::open(params(dir.path(), config(), WriteMode::Buffered, dyn_clock))
            .await
            .unwrap();
        // No flush: the cleaner flushes what it needs on the device itself.
        let big = Some(vec![b'x'; 1500]);
        let now = clock.now_ms().0;
        log.append(batch_of(&[(b"a".to_vec(), big.clone())], now), LEADER)
            .await
            .unwrap();
        log.append(batch_of(&[(b"a".to_vec(), None)], now), LEADER)
            .await
            .unwrap();
        for _ in 0..3 {
            log.append(batch_of(&[(b"b".to_vec(), big.clone())], now), LEADER)
                .await
                .unwrap();
        }
        log.clean(PARAMS).await.unwrap().expect("pass");
        let got = contents(&log).await;
        assert!(!got.contains_key(&0), "a's value is obsolete");
        assert_eq!(got.get(&1), Some(&(b"a".to_vec(), None)), "a's tombstone stays");
        // Not yet past the horizon: a pass keeps it.
        clock.advance_ms(HOUR_MS / 2);
        log.append(batch_of(&[(b"b".to_vec(), big.clone())], clock.now_ms().0), LEADER)
            .await
            .unwrap();
        log.append(batch_of(&[(b"c".to_vec(), big.clone())], clock.now_ms().0), LEADER)
            .await
            .unwrap();
        log.clean(PARAMS).await.unwrap();
        assert!(contents(&log).await.contains_key(&1), "kept before its horizon");
        clock.advance_ms(HOUR_MS);
        log.append(batch_of(&[(b"c".to_vec(), big.clone())], clock.now_ms().0), LEADER)
            .await
            .unwrap();
        log.append(batch_of(&[(b"d".to_vec(), big)], clock.now_ms().0), LEADER)
            .await
            .unwrap();
        log.clean(PARAMS).await.unwrap().expect("pass");
        assert!(!contents(&log).await.contains_key(&1), "gone after its horizon");
        log.close().await.unwrap();
    });
}

#[test]
fn a_crash_after_the_swap_is_committed_is_completed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock: Rc<dyn Clock> = manual_clock();
        let log = PartitionLog::open(params(dir.path(), config(), WriteMode::Buffered, clock.clone()))
            .await
            .unwrap();
        let mut rng = Rng::new(7);
        let mut model = BTreeMap::new();
        append_history(&log, &mut rng, 120, 8, clock.now_ms().0, &mut model).await;
        log.close().await.unwrap();
        let before = {
            let log = PartitionLog::open(params(dir.path(), config(), WriteMode::Buffered, clock.clone()))
                .await
                .unwrap();
            let c = contents(&log).await;
            log.close().await.unwrap();
            c
        };
        // What a pass would write, and its commit record, with the crash
        // before anything was renamed or deleted.
        let mut bases: Vec<i64> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().to_string_lossy().into_owned();
                ferrite_engine::segment::parse_file_name(&name, "log").map(|o| o.0)
            })
            .collect();
        bases.sort();
        let active = bases.pop().unwrap();
        let segments: Vec<_> = bases
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let path = ferrite_engine::segment::SegmentPaths::new(dir.path(), Offset(*b)).log;
                let size = std::fs::metadata(&path).unwrap().len();
                let next = bases.get(i + 1).copied().unwrap_or(active);
                ferrite_engine::clean_job::JobSegment {
                    base: Offset(*b),
                    path,
                    size,
                    next_offset: Offset(next),
                    aborted: Vec::new(),
                }
            })
            .collect();
        let job = ferrite_engine::clean_job::CleanJob {
            dir: dir.path().to_path_buf(),
            segments,
            dirty_from: Offset::ZERO,
            now: clock.now_ms(),
            delete_retention_ms: HOUR_MS,
            entries_max: 1 << 20,
            group_bytes_max: 1 << 30,
            index_interval_bytes: 4096,
            producer_last: Default::default(),
            producer_epochs: Default::default(),
            bytes_per_second: None,
            aborted: Vec::new(),
        };
        use ferrite_engine::clean_job::{build_map, clean_group, groups, Pace};
        let mut pace = Pace::new(None);
        let (map, cleaned_to) = build_map(&job, &mut pace).unwrap();
        let all = groups(&job.segments, cleaned_to, job.group_bytes_max);
        assert_eq!(all.len(), 1);
        let mut txns = ferrite_engine::clean_txn::CleanTxns::new(&job.aborted);
        let (group, _) = clean_group(&job, &all[0], (&map, cleaned_to), &mut pace, &mut txns).unwrap();
        let manifest = ferrite_engine::clean_swap::Manifest {
            base: group.base,
            replaces: group.replaces.clone(),
        };
        manifest.store(dir.path()).await.unwrap();
        // Half carried out: one replaced segment deleted.
        let doomed = ferrite_engine::segment::SegmentPaths::new(dir.path(), group.replaces[1]);
        std::fs::remove_file(&doomed.log).unwrap();
        let log = PartitionLog::open(params(dir.path(), config(), WriteMode::Buffered, clock.clone()))
            .await
            .unwrap();
        let after = contents(&log).await;
        assert!(after.len() < before.len(), "the cleaned segment is in place");
        check(&model, &after, cleaned_to);
        assert!(!dir.path().join(ferrite_engine::clean_swap::MANIFEST_FILE).exists());
        log.close().await.unwrap();
        // Leftovers of an unfinished cleaning (no commit record) are removed.
        let stray = ferrite_engine::clean_swap::cleaned_paths(dir.path(), Offset(0));
        std::fs::write(&stray.log, b"partial").unwrap();
        let log = PartitionLog::open(params(dir.path(), config(), WriteMode::Buffered, clock))
            .await
            .unwrap();
        assert!(!stray.log.exists());
        assert_eq!(contents(&log).await, after);
        log.close().await.unwrap();
    });
}

#[test]
fn a_compacted_log_refuses_records_without_a_key() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock: Rc<dyn Clock> = manual_clock();
        let log = PartitionLog::open(params(dir.path(), config(), WriteMode::Buffered, clock))
            .await
            .unwrap();
        let keyless = producer_batch(2, 10, 0, 1);
        let e = log.append(keyless, LEADER).await.expect_err("refused");
        assert!(e.to_string().contains("without a key"), "{e}");
        log.append(batch_of(&[(b"k".to_vec(), Some(b"v".to_vec()))], 0), LEADER)
            .await
            .expect("a keyed record is taken");
        let mut delete = config();
        delete.cleanup_policy = CleanupPolicy::Delete;
        log.set_config(delete);
        log.append(producer_batch(2, 10, 0, 1), LEADER)
            .await
            .expect("a deleting topic takes keyless records");
        log.close().await.unwrap();
    });
}

/// A kill right after a pass (no clean close, no checkpoint round since):
/// the checkpoint file must not send recovery into a replaced segment.
#[test]
fn an_unclean_stop_right_after_a_cleaning_reopens_the_same_log() {
    let dir = tempfile::tempdir().unwrap();
    let got = run(|| async {
        let clock: Rc<dyn Clock> = manual_clock();
        let log = PartitionLog::open(params(dir.path(), config(), WriteMode::Buffered, clock.clone()))
            .await
            .unwrap();
        let mut rng = Rng::new(11);
        let mut model = BTreeMap::new();
        append_history(&log, &mut rng, 80, 6, clock.now_ms().0, &mut model).await;
        log.clean(PARAMS).await.unwrap().expect("a first pass");
        // The checkpoint file names the active segment as where recovery
        // starts; later appends roll past it and are not flushed, and the
        // next pass merges it into the small cleaned segments before it.
        log.flush().await.unwrap();
        log.refresh_checkpoint().await.unwrap();
        let named = log.recovery_point().segment_base;
        append_history(&log, &mut rng, 80, 6, clock.now_ms().0, &mut model).await;
        // Larger segments from now on: the pass merges every segment.
        let mut merging = config();
        merging.segment_bytes = 1 << 20;
        log.set_config(merging);
        let outcome = log.clean(PARAMS).await.unwrap().expect("a second pass");
        assert!(!log.segment_bases().contains(&named), "segment {named} was merged away");
        let got = contents(&log).await;
        check(&model, &got, outcome.first_dirty);
        drop(log);
        got
    });
    run(|| async {
        let clock: Rc<dyn Clock> = manual_clock();
        let log = PartitionLog::open(params(dir.path(), config(), WriteMode::Buffered, clock))
            .await
            .expect("reopens after an unclean stop");
        assert_eq!(contents(&log).await, got);
        log.close().await.unwrap();
    });
}

/// A key map that fills before a tombstone: the tombstone is not judged
/// (nor stamped) by that pass, so it never goes while an older value of its
/// key stays (a deleted key coming back). Review finding, session 19.
#[test]
fn a_tombstone_outlives_the_older_values_of_its_key_whatever_the_map_holds() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock = manual_clock();
        let dyn_clock: Rc<dyn Clock> = clock.clone();
        let mut cfg = config();
        cfg.segment_bytes = 500;
        cfg.delete_retention_ms = 0;
        let log = PartitionLog::open(params(dir.path(), cfg, WriteMode::Buffered, dyn_clock))
            .await
            .unwrap();
        let now = clock.now_ms().0;
        let mut keys: Vec<(&[u8], Option<&[u8]>)> = vec![(b"a", Some(b"old")), (b"b", Some(b"1")), (b"c", Some(b"1"))];
        keys.extend([(&b"d"[..], Some(&b"1"[..])), (b"e", Some(b"1")), (b"a", None)]);
        for k in [b"f", b"g", b"h", b"i", b"j", b"k", b"l", b"m", b"n", b"o", b"p", b"q"] {
            keys.push((k, Some(b"1")));
        }
        for (k, v) in &keys {
            log.append(batch_of(&[(k.to_vec(), v.map(<[u8]>::to_vec))], now), LEADER)
                .await
                .unwrap();
        }
        let small = CleanerParams {
            entries_max: 2,
            bytes_per_second: None,
        };
        for pass in 0..12 {
            clock.advance_ms(10);
            log.clean(small).await.unwrap();
            let got = contents(&log).await;
            let tombstone = got.contains_key(&5);
            let old_value = got.contains_key(&0);
            assert!(
                tombstone || !old_value,
                "pass {pass}: a's tombstone is gone but its old value is back"
            );
        }
        let got = contents(&log).await;
        assert!(!got.contains_key(&0), "a's old value goes in the end");
        log.close().await.unwrap();
    });
}
