//! The partition's side of transactions: transactional batches open a
//! producer's transaction, markers end it, the first unstable offset and
//! the aborted transactions follow, and all of it survives a clean close,
//! a crash (rebuilt from the batches) and a truncation.

mod common;

use std::rc::Rc;

use bytes::BytesMut;
use common::*;
use ferrite_engine::batch::{self, build_batch, ATTR_TRANSACTIONAL};
use ferrite_engine::clock::Clock;
use ferrite_engine::txn_state::{marker_batch, AbortedTxn, Marker};
use ferrite_engine::{AppendMode, LeaderEpoch, LogConfig, Offset, PartitionLog, ProducerId, TimestampMs, WriteMode};

/// A transactional batch of `n` records of producer `pid`, at `base`.
fn txn_batch(pid: i64, seq: i32, n: usize, base: i64) -> BytesMut {
    let values: Vec<&[u8]> = (0..n).map(|_| &b"v"[..]).collect();
    let mut b = build_batch(Offset(0), TimestampMs(1), &values);
    b[21..23].copy_from_slice(&ATTR_TRANSACTIONAL.to_be_bytes());
    batch::set_producer(&mut b, ProducerId(pid), 0, seq);
    finish(b, base)
}

fn marker(pid: i64, m: Marker, base: i64) -> BytesMut {
    finish(marker_batch(ProducerId(pid), 0, m, 1, TimestampMs(1)), base)
}

fn plain(base: i64) -> BytesMut {
    finish(build_batch(Offset(0), TimestampMs(1), &[b"p"]), base)
}

/// At `base` (the offset and epoch lie before the CRC-covered bytes).
fn finish(mut b: Vec<u8>, base: i64) -> BytesMut {
    batch::stamp(&mut b, Offset(base), LeaderEpoch(0));
    BytesMut::from(&b[..])
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 150,
        ..LogConfig::default()
    }
}

async fn open(dir: &std::path::Path, clock: &Rc<dyn Clock>) -> Rc<PartitionLog> {
    PartitionLog::open(params(dir, config(), WriteMode::Buffered, clock.clone()))
        .await
        .expect("open")
}

fn state(log: &PartitionLog) -> (Option<Offset>, Vec<(ProducerId, Offset)>) {
    (
        log.first_unstable_offset(),
        log.aborted_transactions(Offset(0), Offset(1000)),
    )
}

#[test]
fn markers_end_transactions_and_the_state_survives_closes_crashes_and_truncation() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock: Rc<dyn Clock> = manual_clock();
        let log = open(dir.path(), &clock).await;
        let appends = [
            txn_batch(1, 0, 3, 0), // 0-2: producer 1 opens
            txn_batch(2, 0, 1, 3), // 3: producer 2 opens
            plain(4),
            marker(1, Marker::Commit, 5),
            marker(2, Marker::Abort, 6),
            txn_batch(3, 0, 2, 7), // 7-8: producer 3 opens, stays open
        ];
        for (i, b) in appends.into_iter().enumerate() {
            assert_eq!(
                log.first_unstable_offset().is_some(),
                i > 0 && i != 5,
                "before append {i}"
            );
            log.append(b, AppendMode::Replica).await.expect("append");
        }
        let expected = (Some(Offset(7)), vec![(ProducerId(2), Offset(3))]);
        assert_eq!(state(&log), expected);
        assert_eq!(
            log.aborted_transactions(Offset(7), Offset(9)),
            vec![],
            "the abort marker is before 7"
        );
        assert_eq!(log.aborted_transactions(Offset(0), Offset(3)), vec![], "it began at 3");
        assert!(log.segment_count() > 2, "the history spans segments");

        log.close().await.unwrap();
        let log = open(dir.path(), &clock).await;
        assert_eq!(state(&log), expected, "after a clean close");
        drop(log); // a crash: rebuilt from the snapshot and the batches after it
        let _ = std::fs::remove_file(dir.path().join("producer-state"));
        let log = open(dir.path(), &clock).await;
        assert_eq!(state(&log), expected, "rebuilt from every batch");

        // Cut the abort marker away: producer 2's transaction is open again.
        log.truncate_to(Offset(6)).await.unwrap();
        assert_eq!(state(&log), (Some(Offset(3)), vec![]));
        log.append(marker(2, Marker::Abort, 6), AppendMode::Replica)
            .await
            .unwrap();
        log.append(marker(3, Marker::Commit, 7), AppendMode::Replica)
            .await
            .unwrap();
        assert_eq!(state(&log), (None, vec![(ProducerId(2), Offset(3))]));

        // Deleting the records below the marker forgets the aborted transaction.
        log.delete_records(Offset(7)).await.unwrap();
        assert_eq!(state(&log), (None, vec![]));
        log.close().await.unwrap();
    });
}

fn idempotent(pid: i64, seq: i32) -> BytesMut {
    let mut b = build_batch(Offset(0), TimestampMs(1), &[b"i"]);
    batch::set_producer(&mut b, ProducerId(pid), 0, seq);
    BytesMut::from(&b[..])
}

/// A truncation below the producer-state snapshot, then growth past it
/// without a roll, then a crash: the state must describe the log as it is,
/// not the history cut away (a stale snapshot answered a new batch as a
/// duplicate of one that was cut: acknowledged, never written). Review
/// finding, session 19.
#[test]
fn a_snapshot_of_history_cut_away_is_never_read_back() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock: Rc<dyn Clock> = manual_clock();
        let log = open(dir.path(), &clock).await;
        let leader = AppendMode::Leader { epoch: LeaderEpoch(0) };
        for seq in 0..10 {
            log.append(idempotent(1, seq), leader).await.unwrap();
        }
        assert!(log.segment_count() > 3, "rolls wrote snapshots");
        log.truncate_to(Offset(4)).await.unwrap();
        // No more rolls: the log grows past the old snapshot's offset.
        let mut big = config();
        big.segment_bytes = 1 << 20;
        log.set_config(big);
        for seq in 0..8 {
            log.append(idempotent(2, seq), leader).await.unwrap();
        }
        drop(log); // a crash
        let log = open(dir.path(), &clock).await;
        let end = log.log_end_offset();
        let again = log.append(idempotent(1, 4), leader).await.expect("the next sequence");
        assert!(
            !again.duplicate,
            "sequence 4 of producer 1 was cut away: not a duplicate"
        );
        assert_eq!(again.first_offset, end);
        log.close().await.unwrap();
    });
}

/// A keyed batch of producer `pid` (transactional or not), one record per
/// key, the offsets given by the log.
fn keyed(pid: i64, seq: i32, transactional: bool, keys: &[&str], ts: i64) -> BytesMut {
    let records: Vec<ferrite_engine::record::Record<'_>> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| ferrite_engine::record::Record {
            offset_delta: i as i32,
            timestamp_delta: 0,
            key: Some(k.as_bytes()),
            value: Some(b"v"),
            headers: Vec::new(),
        })
        .collect();
    let mut b = batch::build_batch_of_records(Offset(0), TimestampMs(ts), &records);
    if transactional {
        b[21..23].copy_from_slice(&ATTR_TRANSACTIONAL.to_be_bytes());
    }
    batch::set_producer(&mut b, ProducerId(pid), 0, seq);
    BytesMut::from(&b[..])
}

/// Every batch of the log: (base offset, producer id, is control, records).
async fn batches(log: &PartitionLog) -> Vec<(i64, i64, bool, i32)> {
    read_all(log, log.log_start_offset(), 1 << 20)
        .await
        .iter()
        .map(|b| {
            let i = batch::validate(b, b.len(), batch::Validation::Stored).expect("valid");
            (i.base_offset.0, i.producer_id.0, i.is_control, i.record_count)
        })
        .collect()
}

/// Compaction and transactions (KIP-98's cleaning rules): an aborted
/// transaction's records go at the first pass; its marker, and a committed
/// transaction's marker whose records are all gone, are stamped with a
/// delete horizon by the next pass and removed by one after it; committed
/// records stay at their offsets; and the log rebuilt from its batches has
/// no transaction left open.
#[test]
fn the_cleaner_removes_aborted_records_then_their_markers() {
    use ferrite_engine::cleaner::CleanerParams;
    use ferrite_engine::log_config::{CleanupPolicy, DirtyRatio};
    const HOUR_MS: i64 = 3_600_000;
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock = manual_clock();
        let dyn_clock: Rc<dyn Clock> = clock.clone();
        let config = LogConfig {
            segment_bytes: 150,
            cleanup_policy: CleanupPolicy::Compact,
            min_cleanable_dirty_ratio: DirtyRatio(0),
            delete_retention_ms: HOUR_MS,
            ..LogConfig::default()
        };
        let log = PartitionLog::open(params(
            dir.path(),
            config.clone(),
            WriteMode::Buffered,
            dyn_clock.clone(),
        ))
        .await
        .unwrap();
        let coordinator = AppendMode::Coordinator { epoch: LeaderEpoch(3) };
        let now = clock.now_ms();
        let marker_now = |pid, m| BytesMut::from(&marker_batch(ProducerId(pid), 0, m, 1, now)[..]);
        // The coordinator's abort of a timed-out transaction, at the
        // producer's epoch + 1: the only record of that epoch.
        let fence_5 = BytesMut::from(&marker_batch(ProducerId(5), 1, Marker::Abort, 1, now)[..]);
        let appends = [
            (keyed(1, 0, true, &["a"], now.0), LEADER),      // 0: committed
            (keyed(2, 0, true, &["b", "c"], now.0), LEADER), // 1-2: aborted
            (marker_now(1, Marker::Commit), coordinator),    // 3
            (marker_now(2, Marker::Abort), coordinator),     // 4
            (keyed(3, 0, true, &["a"], now.0), LEADER),      // 5: committed, makes 0 obsolete
            (marker_now(3, Marker::Commit), coordinator),    // 6
            (keyed(1, 1, true, &["x"], now.0), LEADER),      // 7: later transactions,
            (keyed(2, 2, true, &["y"], now.0), LEADER),      // 8: so 0 and 1 are not
            (marker_now(1, Marker::Commit), coordinator),    // 9: their producers' last
            (marker_now(2, Marker::Commit), coordinator),    // 10
            (keyed(-1, -1, false, &["d"], now.0), LEADER),   // 11
            (keyed(-1, -1, false, &["e"], now.0), LEADER),   // 12
            (keyed(5, 0, true, &["z"], now.0), LEADER),      // 13: aborted by a fencing
            (fence_5, coordinator),                          // 14: ABORT at epoch 1
        ];
        for (b, mode) in appends {
            log.append(b, mode).await.expect("append");
        }
        assert_eq!(
            log.aborted_transactions(Offset(0), Offset(100)),
            vec![(ProducerId(2), Offset(1)), (ProducerId(5), Offset(13))]
        );
        let params_ = CleanerParams {
            entries_max: 1 << 20,
            bytes_per_second: None,
        };
        log.clean(params_).await.unwrap().expect("first pass");
        let after: Vec<(i64, i64, bool, i32)> = batches(&log).await;
        assert!(!after.iter().any(|b| b.0 == 1), "the aborted batch is gone: {after:?}");
        assert!(!after.iter().any(|b| b.0 == 0), "the obsolete batch is gone: {after:?}");
        assert!(
            !after.iter().any(|b| b.0 == 13),
            "the fenced transaction's batch is gone: {after:?}"
        );
        assert!(
            after.contains(&(4, 2, true, 1)),
            "the abort's marker stays a pass: {after:?}"
        );
        assert!(after.contains(&(5, 3, false, 1)), "committed data stays: {after:?}");
        // Second pass: the markers with no data left get a horizon; the
        // commit marker at 6 (its data at 5 is the latest "a") stays plain.
        for k in ["f", "g", "h"] {
            log.append(keyed(-1, -1, false, &[k], now.0), LEADER).await.unwrap();
        }
        log.clean(params_).await.unwrap().expect("second pass");
        let stamped = batches(&log).await;
        for marker_at in [3, 4] {
            assert!(
                stamped.iter().any(|b| b.0 == marker_at),
                "{marker_at} kept until its horizon: {stamped:?}"
            );
        }
        // Past the horizon: they go; the marker of live data stays.
        clock.advance_ms(HOUR_MS + 1);
        for k in ["i", "j", "k"] {
            log.append(keyed(-1, -1, false, &[k], clock.now_ms().0), LEADER)
                .await
                .unwrap();
        }
        log.clean(params_).await.unwrap().expect("third pass");
        let last = batches(&log).await;
        assert!(!last.iter().any(|b| b.0 == 3 || b.0 == 4), "markers removed: {last:?}");
        assert_eq!(
            log.aborted_transactions(Offset(0), Offset(100)),
            vec![(ProducerId(5), Offset(13))],
            "listed while its marker stays, and no longer once it is gone"
        );
        assert!(
            last.iter().any(|b| b.0 == 14 && b.2),
            "the marker that says producer 5's epoch stays: {last:?}"
        );
        for marker_at in [6, 9, 10] {
            assert!(
                last.iter().any(|b| b.0 == marker_at && b.2),
                "the marker at {marker_at}, of data still there, stays: {last:?}"
            );
        }
        assert_eq!(log.first_unstable_offset(), None);
        // Rebuilt from the batches alone: nothing is left open.
        log.close().await.unwrap();
        let _ = std::fs::remove_file(dir.path().join("producer-state"));
        let log = PartitionLog::open(params(dir.path(), config, WriteMode::Buffered, dyn_clock))
            .await
            .unwrap();
        assert_eq!(
            log.first_unstable_offset(),
            None,
            "no transaction reopened by the cleaning"
        );
        log.close().await.unwrap();
    });
}

/// A marker of an older coordinator (a lower coordinator epoch than the
/// producer's last marker here) is refused, before and after the state is
/// rebuilt from the log (Kafka's TRANSACTION_COORDINATOR_FENCED).
#[test]
fn a_marker_of_an_older_coordinator_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock: Rc<dyn Clock> = manual_clock();
        let log = open(dir.path(), &clock).await;
        let coordinator = AppendMode::Coordinator { epoch: LeaderEpoch(0) };
        let marker = |ce| BytesMut::from(&marker_batch(ProducerId(6), 0, Marker::Commit, ce, TimestampMs(1))[..]);
        let fenced = |r: Result<ferrite_engine::AppendInfo, ferrite_engine::EngineError>| {
            matches!(
                r,
                Err(ferrite_engine::EngineError::Sequence {
                    source: ferrite_engine::producer_state::SequenceError::CoordinatorFenced { .. },
                    ..
                })
            )
        };
        log.append(txn_batch(6, 0, 1, 0), AppendMode::Replica).await.unwrap();
        log.append(marker(5), coordinator).await.expect("the first marker");
        assert!(
            fenced(log.append(marker(4), coordinator).await),
            "an older coordinator's"
        );
        log.append(marker(5), coordinator)
            .await
            .expect("the same coordinator again");
        log.close().await.unwrap();
        let _ = std::fs::remove_file(dir.path().join("producer-state"));
        let log = open(dir.path(), &clock).await;
        assert!(
            fenced(log.append(marker(4), coordinator).await),
            "after a rebuild from the log"
        );
        log.append(marker(6), coordinator).await.expect("a newer coordinator's");
        log.close().await.unwrap();
    });
}

/// Every `.txnindex` file of `dir`: its segment's base and its entries.
fn txn_index_files(dir: &std::path::Path) -> Vec<(i64, Vec<AbortedTxn>)> {
    let mut out: Vec<(i64, Vec<AbortedTxn>)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            let base = ferrite_engine::segment::parse_file_name(&name, "txnindex")?;
            let bytes = std::fs::read(dir.join(&name)).unwrap();
            assert_eq!(bytes.len() % AbortedTxn::BYTES, 0, "{name}: whole entries");
            let entries = bytes
                .chunks(AbortedTxn::BYTES)
                .map(|c| AbortedTxn::decode(c).unwrap())
                .collect();
            Some((base.0, entries))
        })
        .collect();
    out.sort_by_key(|(b, _)| *b);
    out
}

/// Transactions at offsets from `base`: producer `pid` writes two records
/// and aborts, then a plain record: four offsets.
async fn aborted_txn(log: &Rc<PartitionLog>, pid: i64, base: i64) {
    for b in [
        txn_batch(pid, 0, 2, base),
        marker(pid, Marker::Abort, base + 2),
        plain(base + 3),
    ] {
        log.append(b, AppendMode::Replica).await.expect("append");
    }
}

/// Aborted transactions live in the transaction index of the segment that
/// holds their marker (Kafka's `.txnindex`): written with the segment,
/// entered once whatever a crash kept of the file, rebuilt from the log
/// when a file is damaged, and gone with the segment.
#[test]
fn aborted_transactions_live_in_their_segments_transaction_index_files() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock: Rc<dyn Clock> = manual_clock();
        let log = open(dir.path(), &clock).await;
        for i in 0..6 {
            aborted_txn(&log, 10 + i, 4 * i).await;
        }
        let all = log.aborted_all();
        assert_eq!(all.len(), 6);
        let listed: Vec<_> = all.iter().map(|a| (a.producer_id, a.first_offset)).collect();
        assert_eq!(log.aborted_transactions(Offset(0), Offset(1000)), listed);
        assert_eq!(
            log.aborted_transactions(Offset(7), Offset(12)),
            listed[2..3].to_vec(),
            "marker at 10, began at 8: the one transaction overlapping [7, 12)"
        );
        log.close().await.unwrap();
        let files = txn_index_files(dir.path());
        assert!(files.len() > 1, "the markers lie in several segments: {files:?}");
        let segment_bases: Vec<i64> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().to_string_lossy().into_owned();
                ferrite_engine::segment::parse_file_name(&name, "log").map(|o| o.0)
            })
            .collect();
        for (base, entries) in &files {
            let next = segment_bases
                .iter()
                .copied()
                .filter(|b| b > base)
                .min()
                .unwrap_or(i64::MAX);
            for e in entries {
                assert!(
                    (*base..next).contains(&e.last_offset.0),
                    "{e:?} in the segment at {base}"
                );
            }
        }
        let on_disk: Vec<AbortedTxn> = files.iter().flat_map(|(_, e)| e.clone()).collect();
        assert_eq!(on_disk, all);
        let snapshot = std::fs::read(dir.path().join("producer-state")).unwrap();
        assert_eq!(&snapshot[..4], b"FPS4");

        // A crash after another abort in the active segment: entered once.
        let log = open(dir.path(), &clock).await;
        aborted_txn(&log, 30, 24).await;
        let all = log.aborted_all();
        drop(log);
        let log = open(dir.path(), &clock).await;
        assert_eq!(log.aborted_all(), all, "after a crash");
        drop(log);
        let log = open(dir.path(), &clock).await;
        assert_eq!(log.aborted_all(), all, "after a second crash");
        log.close().await.unwrap();
        let on_disk: Vec<AbortedTxn> = txn_index_files(dir.path()).into_iter().flat_map(|(_, e)| e).collect();
        assert_eq!(on_disk, all);

        // A damaged file: rebuilt from the log.
        let (first_base, _) = txn_index_files(dir.path())[0].clone();
        let damaged = ferrite_engine::segment::SegmentPaths::new(dir.path(), Offset(first_base)).txn_index;
        std::fs::write(&damaged, b"garbage").unwrap();
        let log = open(dir.path(), &clock).await;
        assert_eq!(log.aborted_all(), all, "rebuilt");
        log.close().await.unwrap();
        assert_eq!(std::fs::metadata(&damaged).unwrap().len() % 34, 0, "rewritten whole");

        // Gone with its segment.
        let log = open(dir.path(), &clock).await;
        log.delete_records(Offset(12)).await.unwrap();
        assert!(!damaged.exists(), "deleted with its segment");
        assert!(log.aborted_all().iter().all(|a| a.last_offset.0 >= first_base));
        log.close().await.unwrap();
    });
}

/// A data directory from before transaction indexes: the aborted
/// transactions are in the producer-state snapshot (FPS3) and no segment
/// has a `.txnindex`. Opening puts them into the segments' indexes; the
/// next snapshot is FPS4.
#[test]
fn an_fps3_snapshots_aborted_transactions_move_into_the_transaction_indexes() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock: Rc<dyn Clock> = manual_clock();
        let log = open(dir.path(), &clock).await;
        for i in 0..5 {
            aborted_txn(&log, 10 + i, 4 * i).await;
        }
        let all = log.aborted_all();
        log.close().await.unwrap();
        // Segments: [0, 2), then one from each marker (2, 6, 10, ...).
        let with_files: Vec<i64> = txn_index_files(dir.path()).iter().map(|(b, _)| *b).collect();
        assert_eq!(with_files, [2, 6, 10, 14, 18]);
        // Rewrite the directory as the older version left it.
        for (base, _) in txn_index_files(dir.path()) {
            std::fs::remove_file(ferrite_engine::segment::SegmentPaths::new(dir.path(), Offset(base)).txn_index)
                .unwrap();
        }
        let path = dir.path().join("producer-state");
        let mut v3 = std::fs::read(&path).unwrap();
        v3[..4].copy_from_slice(b"FPS3");
        // The older version's list can name a marker its cleaner removed
        // since (here: a plain record at 3): not placed.
        let gone = AbortedTxn {
            producer_id: ProducerId(77),
            first_offset: Offset(3),
            last_offset: Offset(3),
            last_stable_offset: Offset(4),
        };
        let mut legacy = all.clone();
        legacy.insert(1, gone);
        v3.extend_from_slice(&(legacy.len() as u32).to_be_bytes());
        for a in &legacy {
            a.encode(&mut v3);
        }
        let crc = crc32c::crc32c(&v3[8..]);
        v3[4..8].copy_from_slice(&crc.to_be_bytes());
        std::fs::write(&path, &v3).unwrap();
        let decoded = ferrite_engine::producer_state::ProducerStates::decode(&v3).expect("an FPS3 snapshot");
        assert_eq!(decoded.legacy_aborted, legacy);
        assert_eq!((all[1].last_offset, all[2].last_offset), (Offset(6), Offset(10)));
        // A `.txnindex` an earlier run of this version left, which the
        // older version did not keep up to date (its truncations and
        // cleanings ignore the files): not trusted under its snapshot.
        let stale = AbortedTxn {
            producer_id: ProducerId(88),
            first_offset: Offset(4),
            last_offset: Offset(6),
            last_stable_offset: Offset(7),
        };
        let mut stale_bytes = Vec::new();
        stale.encode(&mut stale_bytes);
        std::fs::write(
            ferrite_engine::segment::SegmentPaths::new(dir.path(), Offset(6)).txn_index,
            &stale_bytes,
        )
        .unwrap();
        // And an orphan where the next segment will be: swept at open.
        let orphan = ferrite_engine::segment::SegmentPaths::new(dir.path(), Offset(20)).txn_index;
        std::fs::write(&orphan, &stale_bytes).unwrap();

        let log = open(dir.path(), &clock).await;
        assert!(!orphan.exists(), "an index without its log is removed");
        assert_eq!(log.aborted_all(), all);
        aborted_txn(&log, 20, 20).await;
        log.close().await.unwrap();
        let all = {
            let log = open(dir.path(), &clock).await;
            let all = log.aborted_all();
            log.close().await.unwrap();
            all
        };
        assert_eq!(all.len(), 6, "and the log goes on: {all:?}");
        let on_disk: Vec<AbortedTxn> = txn_index_files(dir.path()).into_iter().flat_map(|(_, e)| e).collect();
        assert_eq!(on_disk, all);
        assert_eq!(&std::fs::read(&path).unwrap()[..4], b"FPS4");
    });
}
