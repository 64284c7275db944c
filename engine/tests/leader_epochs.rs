//! The leader-epoch cache of a partition log: how appends, truncation,
//! retention, close, crashes and damaged files affect it and its file.

mod common;

use std::path::Path;
use std::rc::Rc;

use bytes::BytesMut;
use common::*;
use ferrite_engine::batch::{build_batch, stamp};
use ferrite_engine::clock::{Clock, SystemClock};
use ferrite_engine::leader_epoch::FILE_NAME;
use ferrite_engine::{
    AppendMode, EngineError, EpochEntry, LeaderEpoch, LogConfig, Offset, PartitionLog, TimestampMs, WriteMode,
};

fn clock() -> Rc<dyn Clock> {
    Rc::new(SystemClock)
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 512,
        ..LogConfig::default()
    }
}

fn leader(epoch: i32) -> AppendMode {
    AppendMode::Leader {
        epoch: LeaderEpoch(epoch),
    }
}

async fn open(dir: &Path, mode: WriteMode) -> Rc<PartitionLog> {
    PartitionLog::open(params(dir, config(), mode, clock())).await.unwrap()
}

fn pairs(entries: &[EpochEntry]) -> Vec<(i32, i64)> {
    entries.iter().map(|e| (e.epoch.0, e.start_offset.0)).collect()
}

fn file_text(dir: &Path) -> String {
    std::fs::read_to_string(dir.join(FILE_NAME)).unwrap()
}

/// Appends `n` single-record batches of ~300 bytes under `epoch`.
async fn append_n(log: &Rc<PartitionLog>, epoch: i32, n: usize) {
    for i in 0..n {
        log.append(producer_batch(1, 300, i as i64, epoch as u8), leader(epoch))
            .await
            .unwrap();
    }
}

/// A replicated batch of `records` records at `base`, stamped with `epoch`.
fn replica_batch(base: i64, records: usize, epoch: i32) -> BytesMut {
    let values: Vec<&[u8]> = (0..records).map(|_| &b"replicated"[..]).collect();
    let mut b = build_batch(Offset(0), TimestampMs(0), &values);
    stamp(&mut b, Offset(base), LeaderEpoch(epoch));
    BytesMut::from(&b[..])
}

#[test]
fn leader_appends_record_where_each_epoch_starts() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let log = open(dir.path(), WriteMode::Buffered).await;
        assert_eq!(log.latest_epoch(), None);
        assert_eq!(log.end_offset_for_epoch(LeaderEpoch(0)), None);
        assert_eq!(file_text(dir.path()), "0\n0\n", "a new log has an empty file");
        for (epoch, n) in [(1, 10), (1, 5), (2, 10), (5, 10)] {
            append_n(&log, epoch, n).await;
        }
        assert_eq!(pairs(&log.epoch_entries()), vec![(1, 0), (2, 15), (5, 25)]);
        assert_eq!(log.latest_epoch(), Some(LeaderEpoch(5)));
        // The file is written before the appends that start epochs return.
        assert_eq!(file_text(dir.path()), "0\n3\n1 0\n2 15\n5 25\n");
        let end = |e: i32| log.end_offset_for_epoch(LeaderEpoch(e)).map(|(e, o)| (e.0, o.0));
        assert_eq!(end(0), Some((0, 0)));
        assert_eq!(end(1), Some((1, 15)));
        assert_eq!(end(2), Some((2, 25)));
        assert_eq!(end(3), Some((2, 25)));
        assert_eq!(end(4), Some((2, 25)));
        assert_eq!(end(5), Some((5, 35)));
        assert_eq!(end(6), None);
        assert_eq!(end(-1), None);
        // An older epoch is appended (a stale leader) but not recorded.
        append_n(&log, 3, 1).await;
        assert_eq!(pairs(&log.epoch_entries()), vec![(1, 0), (2, 15), (5, 25)]);
        log.close().await.unwrap();
    });
}

#[test]
fn replica_appends_keep_the_batch_epochs() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let log = open(dir.path(), WriteMode::Buffered).await;
        // Several batches in one record set, epochs changing inside it; a
        // batch without an epoch (old client) is not recorded.
        let mut set = BytesMut::new();
        for (base, records, epoch) in [(0, 3, 0), (3, 2, 0), (5, 4, 3)] {
            set.extend_from_slice(&replica_batch(base, records, epoch));
        }
        log.append(set, AppendMode::Replica).await.unwrap();
        log.append(replica_batch(9, 1, -1), AppendMode::Replica).await.unwrap();
        log.append(replica_batch(10, 2, 7), AppendMode::Replica).await.unwrap();
        assert_eq!(pairs(&log.epoch_entries()), vec![(0, 0), (3, 5), (7, 10)]);
        assert_eq!(file_text(dir.path()), "0\n3\n0 0\n3 5\n7 10\n");
        assert_eq!(
            log.end_offset_for_epoch(LeaderEpoch(3)),
            Some((LeaderEpoch(3), Offset(10)))
        );
        log.close().await.unwrap();
    });
}

#[test]
fn a_new_leader_epoch_starts_at_the_log_end_in_append_order() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let log = open(dir.path(), WriteMode::Direct).await;
        append_n(&log, 1, 10).await;
        log.assign_leader_epoch(LeaderEpoch(2)).await.unwrap();
        assert_eq!(pairs(&log.epoch_entries()), vec![(1, 0), (2, 10)]);
        assert_eq!(file_text(dir.path()), "0\n2\n1 0\n2 10\n");
        assert_eq!(
            log.end_offset_for_epoch(LeaderEpoch(1)),
            Some((LeaderEpoch(1), Offset(10)))
        );
        assert_eq!(
            log.end_offset_for_epoch(LeaderEpoch(2)),
            Some((LeaderEpoch(2), Offset(10)))
        );
        // An append called before the assignment still belongs to the old
        // epoch: the new one starts after it.
        let before = log.append(producer_batch(3, 10, 0, 0), leader(2));
        let assign = log.assign_leader_epoch(LeaderEpoch(4));
        let after = log.append(producer_batch(1, 10, 0, 0), leader(4));
        let ((b, a), c) = futures_lite::future::zip(futures_lite::future::zip(before, assign), after).await;
        let (b, c) = (b.unwrap(), c.unwrap());
        a.unwrap();
        assert_eq!(b.first_offset, Offset(10));
        assert_eq!(c.first_offset, Offset(13));
        assert_eq!(pairs(&log.epoch_entries()), vec![(1, 0), (2, 10), (4, 13)]);
        // The same or an older epoch changes nothing.
        log.assign_leader_epoch(LeaderEpoch(4)).await.unwrap();
        log.assign_leader_epoch(LeaderEpoch(3)).await.unwrap();
        assert_eq!(pairs(&log.epoch_entries()), vec![(1, 0), (2, 10), (4, 13)]);
        assert_eq!(file_text(dir.path()), "0\n3\n1 0\n2 10\n4 13\n");
        log.close().await.unwrap();
    });
}

#[test]
fn truncation_removes_later_epochs_and_the_file_follows() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let log = open(dir.path(), WriteMode::Buffered).await;
        for epoch in [1, 2, 3] {
            append_n(&log, epoch, 10).await;
        }
        assert_eq!(pairs(&log.epoch_entries()), vec![(1, 0), (2, 10), (3, 20)]);
        assert_eq!(log.truncate_to(Offset(25)).await.unwrap(), Offset(25));
        assert_eq!(pairs(&log.epoch_entries()), vec![(1, 0), (2, 10), (3, 20)]);
        assert_eq!(log.truncate_to(Offset(15)).await.unwrap(), Offset(15));
        assert_eq!(pairs(&log.epoch_entries()), vec![(1, 0), (2, 10)]);
        assert_eq!(file_text(dir.path()), "0\n2\n1 0\n2 10\n");
        assert_eq!(
            log.end_offset_for_epoch(LeaderEpoch(2)),
            Some((LeaderEpoch(2), Offset(15)))
        );
        // Cut exactly at an epoch start: that epoch goes.
        assert_eq!(log.truncate_to(Offset(10)).await.unwrap(), Offset(10));
        assert_eq!(pairs(&log.epoch_entries()), vec![(1, 0)]);
        // A follower then appends the leader's epochs.
        log.append(replica_batch(10, 2, 4), AppendMode::Replica).await.unwrap();
        assert_eq!(pairs(&log.epoch_entries()), vec![(1, 0), (4, 10)]);
        log.close().await.unwrap();
    });
    run(|| async {
        let log = open(dir.path(), WriteMode::Buffered).await;
        assert_eq!(pairs(&log.epoch_entries()), vec![(1, 0), (4, 10)]);
        assert_eq!(log.log_end_offset(), Offset(12));
        log.close().await.unwrap();
    });
}

#[test]
fn truncating_at_the_log_end_drops_only_the_epochs_starting_there() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let log = open(dir.path(), WriteMode::Buffered).await;
        append_n(&log, 1, 5).await;
        // A leader that never appended in epoch 3, now a follower whose new
        // leader never had epoch 3: it cuts at its own log end.
        log.assign_leader_epoch(LeaderEpoch(3)).await.unwrap();
        assert_eq!(pairs(&log.epoch_entries()), vec![(1, 0), (3, 5)]);
        assert_eq!(log.truncate_to(Offset(5)).await.unwrap(), Offset(5));
        assert_eq!(pairs(&log.epoch_entries()), vec![(1, 0)]);
        assert_eq!(file_text(dir.path()), "0\n1\n1 0\n");
        assert_eq!(log.truncate_to(Offset(9)).await.unwrap(), Offset(5));
        assert_eq!(pairs(&log.epoch_entries()), vec![(1, 0)]);
        log.close().await.unwrap();
    });
}

#[test]
fn restart_at_empties_the_log_and_moves_it_past_its_end() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let log = open(dir.path(), WriteMode::Buffered).await;
        append_n(&log, 1, 5).await;
        assert_eq!(log.restart_at(Offset(40)).await.unwrap(), Offset(40));
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (Offset(40), Offset(40)));
        assert_eq!(pairs(&log.epoch_entries()), vec![]);
        log.append(replica_batch(40, 3, 2), AppendMode::Replica).await.unwrap();
        assert_eq!(pairs(&log.epoch_entries()), vec![(2, 40)]);
        log.close().await.unwrap();
    });
    run(|| async {
        let log = open(dir.path(), WriteMode::Buffered).await;
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (Offset(40), Offset(43)));
        assert_eq!(pairs(&log.epoch_entries()), vec![(2, 40)]);
        log.close().await.unwrap();
    });
}

#[test]
fn clean_close_and_reopen_keep_the_entries() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let log = open(dir.path(), WriteMode::Direct).await;
        for epoch in [2, 3, 9] {
            append_n(&log, epoch, 7).await;
        }
        log.close().await.unwrap();
    });
    run(|| async {
        let (log, report) = PartitionLog::open_with_report(params(dir.path(), config(), WriteMode::Direct, clock()))
            .await
            .unwrap();
        assert_eq!(report.shutdown, ferrite_engine::checkpoint::Shutdown::Clean);
        assert!(!report.epochs_rebuilt);
        assert_eq!(pairs(&log.epoch_entries()), vec![(2, 0), (3, 7), (9, 14)]);
        assert_eq!(
            log.end_offset_for_epoch(LeaderEpoch(3)),
            Some((LeaderEpoch(3), Offset(14)))
        );
        log.close().await.unwrap();
    });
    // Entries past the log end (an epoch assigned to an empty tail, or a
    // file ahead of the data) are dropped at open, as Kafka does.
    run(|| async {
        let log = open(dir.path(), WriteMode::Direct).await;
        log.assign_leader_epoch(LeaderEpoch(10)).await.unwrap();
        assert_eq!(pairs(&log.epoch_entries()), vec![(2, 0), (3, 7), (9, 14), (10, 21)]);
        log.close().await.unwrap();
    });
    run(|| async {
        let log = open(dir.path(), WriteMode::Direct).await;
        assert_eq!(pairs(&log.epoch_entries()), vec![(2, 0), (3, 7), (9, 14)]);
        assert_eq!(file_text(dir.path()), "0\n3\n2 0\n3 7\n9 14\n");
        log.close().await.unwrap();
    });
}

/// A crash (the log dropped without close) after the file fell behind the
/// data: the recovery scan rebuilds the entries of the batches it scans,
/// and those below the recovery point come from the file.
#[test]
fn an_unclean_reopen_rebuilds_entries_from_the_scan() {
    for mode in [WriteMode::Buffered, WriteMode::Direct, WriteMode::DirectPreallocated] {
        let dir = tempfile::tempdir().unwrap();
        run(|| async {
            let log = open(dir.path(), mode).await;
            append_n(&log, 1, 20).await;
            append_n(&log, 2, 20).await;
            log.flush().await.unwrap();
            log.write_checkpoint(ferrite_engine::checkpoint::Shutdown::Unclean)
                .await
                .unwrap();
            append_n(&log, 4, 3).await;
            append_n(&log, 6, 3).await;
            assert!(log.segment_count() > 3);
            // A crash: dropped without close.
        });
        // The file as if the latest epochs had not been written, with a
        // claim past the end of the log besides.
        std::fs::write(dir.path().join(FILE_NAME), "0\n3\n1 0\n2 20\n3 1000\n").unwrap();
        run(|| async {
            let (log, report) = PartitionLog::open_with_report(params(dir.path(), config(), mode, clock()))
                .await
                .unwrap();
            assert_eq!(report.shutdown, ferrite_engine::checkpoint::Shutdown::Unclean);
            assert!(!report.epochs_rebuilt, "rebuilt by the scan, not by a header walk");
            assert!(
                report.segments_scanned < log.segment_count(),
                "segments below the recovery point are not scanned: {report:?}"
            );
            assert_eq!(pairs(&log.epoch_entries()), vec![(1, 0), (2, 20), (4, 40), (6, 43)]);
            assert_eq!(file_text(dir.path()), "0\n4\n1 0\n2 20\n4 40\n6 43\n");
            log.close().await.unwrap();
        });
    }
}

/// Below the recovery point the file is what counts: those segments are not
/// read again. (Here the file is doctored to show it: it says epoch 0 where
/// the batches say 1.)
#[test]
fn an_unclean_reopen_takes_the_file_below_the_recovery_point() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let log = open(dir.path(), WriteMode::Buffered).await;
        append_n(&log, 1, 30).await;
        append_n(&log, 2, 1).await;
        log.flush().await.unwrap();
        log.write_checkpoint(ferrite_engine::checkpoint::Shutdown::Unclean)
            .await
            .unwrap();
        append_n(&log, 2, 1).await;
    });
    let cp =
        ferrite_engine::checkpoint::Checkpoint::decode(&std::fs::read(dir.path().join("checkpoint")).unwrap()).unwrap();
    let scan_from = cp.recovery.segment_base;
    assert!(scan_from > Offset(0) && scan_from < Offset(30), "{cp:?}");
    std::fs::write(dir.path().join(FILE_NAME), "0\n2\n0 0\n2 30\n").unwrap();
    run(|| async {
        let log = open(dir.path(), WriteMode::Buffered).await;
        assert_eq!(pairs(&log.epoch_entries()), vec![(0, 0), (1, scan_from.0), (2, 30)]);
        log.close().await.unwrap();
    });
}

#[test]
fn a_damaged_or_missing_file_is_rebuilt_from_the_segments() {
    let damage: [(&str, Option<&[u8]>); 4] = [
        ("garbage", Some(b"hello\n")),
        ("wrong count", Some(b"0\n5\n1 0\n")),
        ("out of order", Some(b"0\n2\n2 0\n1 10\n")),
        ("missing", None),
    ];
    for (what, bytes) in damage {
        let dir = tempfile::tempdir().unwrap();
        run(|| async {
            let log = open(dir.path(), WriteMode::Buffered).await;
            for epoch in [1, 3, 4] {
                append_n(&log, epoch, 12).await;
            }
            log.close().await.unwrap();
        });
        let path = dir.path().join(FILE_NAME);
        match bytes {
            Some(b) => std::fs::write(&path, b).unwrap(),
            None => std::fs::remove_file(&path).unwrap(),
        }
        run(|| async {
            let (log, report) =
                PartitionLog::open_with_report(params(dir.path(), config(), WriteMode::Buffered, clock()))
                    .await
                    .unwrap();
            assert!(report.epochs_rebuilt, "{what}");
            assert!(log.segment_count() > 1, "{what}");
            assert_eq!(pairs(&log.epoch_entries()), vec![(1, 0), (3, 12), (4, 24)], "{what}");
            assert_eq!(file_text(dir.path()), "0\n3\n1 0\n3 12\n4 24\n", "{what}");
            log.close().await.unwrap();
        });
        run(|| async {
            let (_log, report) =
                PartitionLog::open_with_report(params(dir.path(), config(), WriteMode::Buffered, clock()))
                    .await
                    .unwrap();
            assert!(!report.epochs_rebuilt, "{what}: rewritten at the first open");
        });
    }
}

#[test]
fn retention_moves_the_first_epoch_start_and_full_truncation_clears() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let config = LogConfig {
            retention_bytes: 4096,
            ..config()
        };
        let log = PartitionLog::open(params(dir.path(), config, WriteMode::Buffered, clock()))
            .await
            .unwrap();
        append_n(&log, 1, 5).await;
        append_n(&log, 2, 30).await;
        append_n(&log, 3, 5).await;
        let outcome = log.apply_retention().await.unwrap();
        assert!(outcome.segments_deleted > 0);
        let start = log.log_start_offset();
        assert!(start > Offset(5) && start < Offset(35), "log start {start}");
        assert_eq!(pairs(&log.epoch_entries()), vec![(2, start.0), (3, 35)]);
        assert_eq!(file_text(dir.path()), format!("0\n2\n2 {start}\n3 35\n"));
        // The first epoch still answers for everything before the start.
        assert_eq!(log.end_offset_for_epoch(LeaderEpoch(1)), Some((LeaderEpoch(1), start)));
        log.close().await.unwrap();
    });
    run(|| async {
        let log = open(dir.path(), WriteMode::Buffered).await;
        let start = log.log_start_offset();
        assert_eq!(pairs(&log.epoch_entries()), vec![(2, start.0), (3, 35)]);
        // Truncating below the log start empties the log, and the cache.
        assert_eq!(log.truncate_to(Offset(2)).await.unwrap(), Offset(2));
        assert_eq!(log.epoch_entries(), vec![]);
        assert_eq!(file_text(dir.path()), "0\n0\n");
        log.append(replica_batch(2, 1, 8), AppendMode::Replica).await.unwrap();
        assert_eq!(pairs(&log.epoch_entries()), vec![(8, 2)]);
        log.close().await.unwrap();
    });
}

#[test]
fn a_failed_write_of_the_file_poisons_the_log() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let log = open(dir.path(), WriteMode::Buffered).await;
        append_n(&log, 1, 2).await;
        // The temporary file cannot be created where a directory stands.
        let tmp = dir.path().join("leader-epoch-checkpoint.tmp");
        std::fs::create_dir(&tmp).unwrap();
        // No new epoch: the file is not written, the append succeeds.
        append_n(&log, 1, 1).await;
        let err = log
            .append(producer_batch(1, 10, 0, 0), leader(2))
            .await
            .expect_err("the epoch file could not be written");
        assert!(
            matches!(
                err,
                EngineError::Io {
                    op: "create leader-epoch checkpoint",
                    ..
                }
            ),
            "{err}"
        );
        assert!(log.is_poisoned());
        let err = log
            .append(producer_batch(1, 10, 0, 0), leader(2))
            .await
            .expect_err("poisoned");
        assert!(matches!(err, EngineError::Poisoned { .. }), "{err}");
        std::fs::remove_dir(&tmp).unwrap();
    });
}
