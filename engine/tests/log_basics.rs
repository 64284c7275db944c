mod common;

use std::rc::Rc;

use common::*;
use ferrite_engine::clock::{Clock, SystemClock};
use ferrite_engine::recovery::OpenReport;
use ferrite_engine::{EngineError, LogConfig, Offset, PartitionLog, ReadRegion, SizeLimit, TimestampMs, WriteMode};

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 512,
        cache_bytes_max: 0,
        ..LogConfig::default()
    }
}

#[test]
fn append_assigns_offsets_and_reads_them_back_across_segments() {
    for mode in [WriteMode::Buffered, WriteMode::Direct, WriteMode::DirectPreallocated] {
        let dir = tempfile::tempdir().unwrap();
        run(|| async {
            let clock: Rc<dyn Clock> = Rc::new(SystemClock);
            let log = PartitionLog::open(params(dir.path(), small_segments(), mode, clock))
                .await
                .unwrap();
            let mut expected = Vec::new();
            for i in 0..100 {
                let info = log
                    .append(producer_batch(3, 100, 1000 + i, i as u8), LEADER)
                    .await
                    .unwrap();
                assert_eq!(info.first_offset, Offset(3 * i));
                assert_eq!(info.next_offset, Offset(3 * i + 3));
                expected.push(info);
            }
            assert!(log.segment_count() > 5, "segments rolled: {}", log.segment_count());
            assert_eq!(log.log_end_offset(), Offset(300));
            let batches = read_all(&log, Offset(0), 1000).await;
            assert_eq!(batches.len(), 100);
            for (i, b) in batches.iter().enumerate() {
                let info = ferrite_engine::batch::validate(b, 1 << 20, ferrite_engine::batch::Validation::Stored)
                    .expect("valid on disk");
                assert_eq!(info.base_offset, Offset(3 * i as i64));
                assert_eq!(info.leader_epoch, ferrite_engine::LeaderEpoch(3));
            }
            // A read from the middle of a batch starts at that batch.
            let r = log
                .read(Offset(151), 10, Offset(300), SizeLimit::AtLeastOneBatch)
                .await
                .unwrap();
            assert_eq!(r.first_offset, Offset(150));
            assert_eq!(r.next_offset, Offset(153), "one batch although max_bytes is tiny");
            assert!(matches!(r.region, ReadRegion::File(_)));
            let r = log.read(Offset(151), 10, Offset(300), SizeLimit::Strict).await.unwrap();
            assert_eq!(r.bytes, 0);
            // The upper bound (high watermark) is respected.
            let r = log
                .read(Offset(0), 1 << 20, Offset(9), SizeLimit::Strict)
                .await
                .unwrap();
            assert_eq!(r.next_offset, Offset(9));
            let r = log
                .read(Offset(0), 1 << 20, Offset(8), SizeLimit::Strict)
                .await
                .unwrap();
            assert_eq!(r.next_offset, Offset(6), "a batch straddling the bound is left out");
            // Out of range.
            assert!(matches!(
                log.read(Offset(301), 100, Offset(400), SizeLimit::Strict).await,
                Err(EngineError::OffsetOutOfRange { .. })
            ));
            log.close().await.unwrap();
        });
    }
}

#[test]
fn caught_up_reads_come_from_memory() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock: Rc<dyn Clock> = Rc::new(SystemClock);
        let config = LogConfig {
            cache_bytes_max: 1 << 20,
            ..LogConfig::default()
        };
        let log = PartitionLog::open(params(dir.path(), config, WriteMode::Buffered, clock))
            .await
            .unwrap();
        for i in 0..10 {
            log.append(producer_batch(1, 1000, i, 1), LEADER).await.unwrap();
        }
        let r = log
            .read(Offset(7), 1 << 20, Offset(10), SizeLimit::Strict)
            .await
            .unwrap();
        assert!(matches!(r.region, ReadRegion::Cached(ref b) if b.len() == 3));
        assert_eq!((r.first_offset, r.next_offset), (Offset(7), Offset(10)));
        log.close().await.unwrap();
    });
}

#[test]
fn rejected_batches_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock: Rc<dyn Clock> = Rc::new(SystemClock);
        let config = LogConfig {
            max_message_bytes: 2000,
            ..LogConfig::default()
        };
        let log = PartitionLog::open(params(dir.path(), config, WriteMode::Buffered, clock))
            .await
            .unwrap();
        log.append(producer_batch(1, 10, 0, 1), LEADER).await.unwrap();
        let size = log.size_bytes();
        let mut bad_crc = producer_batch(2, 10, 0, 1);
        let n = bad_crc.len();
        bad_crc[n - 1] ^= 1;
        let too_big = producer_batch(1, 3000, 0, 1);
        let mut bad_magic = producer_batch(1, 10, 0, 1);
        bad_magic[16] = 1;
        let truncated = {
            let mut b = producer_batch(1, 10, 0, 1);
            b.truncate(b.len() - 3);
            b
        };
        // A good batch followed by a bad one: neither is written.
        let mut mixed = producer_batch(1, 10, 0, 1);
        mixed.extend_from_slice(&bad_crc);
        for (name, bad) in [
            ("crc", bad_crc),
            ("size", too_big),
            ("magic", bad_magic),
            ("truncated", truncated),
            ("mixed", mixed),
        ] {
            let err = log.append(bad, LEADER).await.expect_err(name);
            assert!(matches!(err, EngineError::Batch { .. }), "{name}: {err}");
        }
        assert_eq!(log.size_bytes(), size);
        assert_eq!(log.log_end_offset(), Offset(1));
        log.close().await.unwrap();
    });
}

#[test]
fn clean_restart_opens_without_scanning_and_unclean_restart_scans() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock: Rc<dyn Clock> = Rc::new(SystemClock);
        let open =
            || PartitionLog::open_with_report(params(dir.path(), small_segments(), WriteMode::Direct, clock.clone()));
        let (log, _) = open().await.unwrap();
        for i in 0..50 {
            log.append(producer_batch(2, 150, i, 7), LEADER).await.unwrap();
        }
        let before = read_all(&log, Offset(0), 4096).await;
        log.close().await.unwrap();
        drop(log);
        let (log, report): (_, OpenReport) = open().await.unwrap();
        assert_eq!(report.segments_scanned, 0, "clean open scans nothing: {report:?}");
        assert_eq!(log.log_end_offset(), Offset(100));
        assert_eq!(read_all(&log, Offset(0), 4096).await, before);
        // Crash: no close.
        log.append(producer_batch(2, 150, 99, 8), LEADER).await.unwrap();
        drop(log);
        let checkpoint = dir.path().join("checkpoint");
        let checkpoint_before = std::fs::read(&checkpoint).unwrap();
        let (log, report) = open().await.unwrap();
        assert!(report.segments_scanned >= 1, "{report:?}");
        // Direct writes leave the last block zero-padded: recovery takes the
        // zeros for padding, not for a torn tail, and leaves the file as it is.
        let active_file = dir.path().join("00000000000000000100.log");
        let active_size = std::fs::metadata(&active_file).unwrap().len();
        assert_eq!(report.truncated_at, None, "{report:?}");
        assert!(report.padding_bytes > 0, "{report:?}");
        assert_eq!(active_size % 4096, 0, "the padded block is still there");
        // Nothing to repair: the checkpoint is not rewritten, and its
        // recovery point stays before the batch that was never synced.
        assert!(report.untouched, "{report:?}");
        assert_eq!(std::fs::read(&checkpoint).unwrap(), checkpoint_before);
        assert_eq!(log.recovery_point().offset, Offset(100));
        assert_eq!(log.log_end_offset(), Offset(102));
        assert!(log.has_recovered_tail(), "the checkpoint round is to flush it");
        // Appends continue where the log ends.
        let info = log.append(producer_batch(1, 10, 100, 9), LEADER).await.unwrap();
        assert_eq!(info.first_offset, Offset(102));
        let after = read_all(&log, Offset(0), 4096).await;
        // A second crash recovers the same records, scanning from the same
        // recovery point.
        drop(log);
        let (log, report) = open().await.unwrap();
        assert!(report.untouched, "{report:?}");
        assert_eq!(log.log_end_offset(), Offset(103));
        assert_eq!(read_all(&log, Offset(0), 4096).await, after);
        // A flush (the checkpoint round's) syncs the tail: the recovery
        // point reaches the end, and the next recovery starts there.
        log.flush().await.unwrap();
        assert!(!log.has_recovered_tail());
        assert_eq!(log.recovery_point().offset, Offset(103));
        // A clean close cuts the padding and writes the indexes: the next
        // open trusts them and scans nothing.
        log.close().await.unwrap();
        drop(log);
        let logical: u64 = std::fs::metadata(&active_file).unwrap().len();
        assert_ne!(logical % 4096, 0, "cut to its batches");
        let (log, report) = open().await.unwrap();
        assert_eq!(report.segments_scanned, 0, "{report:?}");
        assert_eq!(read_all(&log, Offset(0), 4096).await, after);
        log.close().await.unwrap();
    });
}

/// Preallocated direct mode (`log.preallocate`) extends an active
/// segment's file ahead of its writes; a crash leaves the preallocated
/// zeros, which recovery cuts at the last batch, and sealing and a clean
/// close cut the file to its data. What was read before reads the same.
#[test]
fn preallocated_segment_space_is_cut_by_recovery_seal_and_close() {
    use ferrite_engine::write_mode::PREALLOCATE_BYTES;
    let dir = tempfile::tempdir().unwrap();
    let len = |name: &str| std::fs::metadata(dir.path().join(name)).unwrap().len();
    run(|| async {
        let clock: Rc<dyn Clock> = Rc::new(SystemClock);
        let config = LogConfig {
            segment_bytes: 64 << 10,
            ..LogConfig::default()
        };
        let open = || {
            PartitionLog::open_with_report(params(
                dir.path(),
                config.clone(),
                WriteMode::DirectPreallocated,
                clock.clone(),
            ))
        };
        let (log, _) = open().await.unwrap();
        let mut bytes = 0u64;
        for i in 0..10 {
            bytes += log.append(producer_batch(3, 333, i, 1), LEADER).await.unwrap().bytes as u64;
        }
        let first = "00000000000000000000.log";
        assert!(len(first) >= PREALLOCATE_BYTES, "the active file is preallocated");
        let before = read_all(&log, Offset(0), 1 << 20).await;
        // Crash: no close.
        drop(log);
        let (log, report) = open().await.unwrap();
        let cut = report.truncated_at.clone().map(|(_, at)| at);
        assert_eq!(
            cut,
            Some(bytes),
            "recovery cuts the zeros at the last batch: {report:?}"
        );
        assert_eq!(len(first), bytes);
        assert_eq!(read_all(&log, Offset(0), 1 << 20).await, before);
        // Enough to roll: the sealed segment is cut to its data.
        let mut more = 0u64;
        while more < 64 << 10 {
            more += log.append(producer_batch(3, 333, 0, 2), LEADER).await.unwrap().bytes as u64;
        }
        let mut files: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".log"))
            .collect();
        files.sort();
        assert!(files.len() >= 2, "rolled: {files:?}");
        let sealed: u64 = files[..files.len() - 1].iter().map(|f| len(f)).sum();
        let active = files[files.len() - 1].clone();
        assert!(len(&active) >= PREALLOCATE_BYTES, "the new active file is preallocated");
        log.close().await.unwrap();
        assert_eq!(
            sealed + len(&active),
            bytes + more,
            "sealed and closed files hold their data only"
        );
        // Reopened cleanly, everything reads back.
        let (log, report) = open().await.unwrap();
        assert_eq!(report.segments_scanned, 0, "{report:?}");
        let all = read_all(&log, Offset(0), 1 << 20).await;
        assert_eq!(all[..before.len()], before[..]);
        log.close().await.unwrap();
    });
}

#[test]
fn timestamp_lookup_finds_the_first_record_at_or_after() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock: Rc<dyn Clock> = Rc::new(SystemClock);
        let log = PartitionLog::open(params(dir.path(), small_segments(), WriteMode::Buffered, clock))
            .await
            .unwrap();
        // Batch i holds 4 records with timestamps 1000*i + 0..3.
        for i in 0..40i64 {
            log.append(producer_batch(4, 50, 1000 * i, 0), LEADER).await.unwrap();
        }
        let end = log.log_end_offset();
        for (target, offset, ts) in [
            (0, 0, 0),
            (1, 1, 1),
            (3, 3, 3),
            (4, 4, 1000),
            (17_002, 70, 17_002),
            (39_003, 159, 39_003),
        ] {
            let hit = log
                .offset_for_timestamp(TimestampMs(target), end)
                .await
                .unwrap()
                .expect("hit");
            assert_eq!(
                (hit.offset, hit.timestamp),
                (Offset(offset), TimestampMs(ts)),
                "target {target}"
            );
        }
        assert_eq!(log.offset_for_timestamp(TimestampMs(39_004), end).await.unwrap(), None);
        log.close().await.unwrap();
    });
}

#[test]
fn truncation_removes_the_tail_and_appends_continue() {
    for mode in [WriteMode::Buffered, WriteMode::Direct, WriteMode::DirectPreallocated] {
        let dir = tempfile::tempdir().unwrap();
        run(|| async {
            let clock: Rc<dyn Clock> = Rc::new(SystemClock);
            let log = PartitionLog::open(params(dir.path(), small_segments(), mode, clock.clone()))
                .await
                .unwrap();
            for i in 0..60 {
                log.append(producer_batch(2, 100, i, 1), LEADER).await.unwrap();
            }
            let segments = log.segment_count();
            let before = read_all(&log, Offset(0), 1 << 20).await;
            // Offset 41 is inside the batch [40, 42): that batch goes too.
            assert_eq!(log.truncate_to(Offset(41)).await.unwrap(), Offset(40));
            assert_eq!(log.log_end_offset(), Offset(40));
            assert!(log.segment_count() < segments);
            assert_eq!(read_all(&log, Offset(0), 1 << 20).await, before[..20].to_vec());
            let info = log.append(producer_batch(2, 100, 0, 2), LEADER).await.unwrap();
            assert_eq!(info.first_offset, Offset(40));
            log.close().await.unwrap();
            drop(log);
            let log = PartitionLog::open(params(dir.path(), small_segments(), mode, clock))
                .await
                .unwrap();
            assert_eq!(log.log_end_offset(), Offset(42));
            assert_eq!(read_all(&log, Offset(0), 1 << 20).await.len(), 21);
            log.close().await.unwrap();
        });
    }
}

#[test]
fn segments_roll_on_age_and_on_a_full_index() {
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock = manual_clock();
        let dyn_clock: Rc<dyn Clock> = clock.clone();
        let config = LogConfig {
            segment_ms: 1000,
            segment_index_bytes: 16, // two entries
            index_interval_bytes: 0,
            ..LogConfig::default()
        };
        let log = PartitionLog::open(params(dir.path(), config, WriteMode::Buffered, dyn_clock))
            .await
            .unwrap();
        log.append(producer_batch(1, 10, 0, 1), LEADER).await.unwrap();
        clock.advance_ms(999);
        log.append(producer_batch(1, 10, 0, 1), LEADER).await.unwrap();
        assert_eq!(log.segment_count(), 1, "not old enough yet");
        clock.advance_ms(1);
        log.append(producer_batch(1, 10, 0, 1), LEADER).await.unwrap();
        assert_eq!(log.segment_bases(), vec![Offset(0), Offset(2)], "rolled on segment.ms");
        // Every batch after the first gets an index entry; the third would
        // not fit in 16 bytes.
        log.append(producer_batch(1, 10, 0, 1), LEADER).await.unwrap();
        log.append(producer_batch(1, 10, 0, 1), LEADER).await.unwrap();
        assert_eq!(log.segment_count(), 2);
        log.append(producer_batch(1, 10, 0, 1), LEADER).await.unwrap();
        assert_eq!(
            log.segment_bases(),
            vec![Offset(0), Offset(2), Offset(5)],
            "rolled on segment.index.bytes"
        );
        log.close().await.unwrap();
    });
}

/// A task waiting on `end_moved` is woken by an append of the partition and
/// not before; a refused append wakes nobody.
#[test]
fn an_append_wakes_what_waits_on_the_log_end() {
    for mode in [WriteMode::Buffered, WriteMode::Direct, WriteMode::DirectPreallocated] {
        let dir = tempfile::tempdir().unwrap();
        run(|| async {
            let clock: Rc<dyn Clock> = Rc::new(SystemClock);
            let log = PartitionLog::open(params(dir.path(), small_segments(), mode, clock))
                .await
                .unwrap();
            let seen = log.end_moved().generation();
            let woken = Rc::new(std::cell::Cell::new(false));
            let waiter = {
                let (log, woken) = (log.clone(), woken.clone());
                glommio::spawn_local(async move {
                    log.end_moved().changed_since(seen).await;
                    woken.set(true);
                    log.log_end_offset()
                })
            };
            glommio::yield_if_needed().await;
            glommio::timer::sleep(std::time::Duration::from_millis(20)).await;
            assert!(!woken.get(), "woken with nothing appended");
            let mut corrupt = producer_batch(1, 10, 1, 1);
            let last = corrupt.len() - 1;
            corrupt[last] ^= 0xff;
            assert!(log.append(corrupt, LEADER).await.is_err());
            glommio::timer::sleep(std::time::Duration::from_millis(20)).await;
            assert!(!woken.get(), "woken by a refused append");
            log.append(producer_batch(2, 10, 1, 1), LEADER).await.unwrap();
            assert_eq!(waiter.await, Offset(2), "woken once the end moved");
            assert_ne!(log.end_moved().generation(), seen);
        });
    }
}

/// Many appends in flight at once, of sizes that fall anywhere in a device
/// block: the appender then submits groups that end inside a batch and
/// holds partial blocks back. Readers running beside them must only ever
/// see whole batches, and every acknowledged batch must come back whole,
/// in offset order, byte for byte (the stamped base offset and epoch
/// aside) — after a clean reopen and after an unclean one.
#[test]
fn concurrent_appends_of_odd_sizes_come_back_whole_and_in_order() {
    for_seeds(seeds(0..3), |seed| {
        for mode in [WriteMode::Direct, WriteMode::DirectPreallocated, WriteMode::Buffered] {
            concurrent_odd_appends(seed, mode);
        }
    });
}

fn concurrent_odd_appends(seed: u64, mode: WriteMode) {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 3 << 20,
        cache_bytes_max: 0,
        ..LogConfig::default()
    };
    let sent = run(|| async {
        let clock: Rc<dyn Clock> = Rc::new(SystemClock);
        let log = PartitionLog::open(params(dir.path(), config.clone(), mode, clock))
            .await
            .unwrap();
        let sent = Rc::new(std::cell::RefCell::new(std::collections::BTreeMap::new()));
        // The reader must run beside the appends, whatever the scheduler
        // does: every appender waits after its first append until the
        // reader has seen a whole batch, and the reader keeps going until
        // the appenders are done and it has read up to the end.
        let seen = Rc::new(std::cell::Cell::new(0usize));
        let appending = Rc::new(std::cell::Cell::new(64usize));
        let appenders: Vec<_> = (0..64u64)
            .map(|task| {
                let (log, sent) = (log.clone(), sent.clone());
                let (seen, appending) = (seen.clone(), appending.clone());
                glommio::spawn_local(async move {
                    let mut rng = Rng::new(seed * 1000 + task);
                    for i in 0..30u64 {
                        let records = 1 + rng.below(8) as usize;
                        let value_len = 1 + rng.below(6000) as usize;
                        let batch = producer_batch(records, value_len, 1000 + i as i64, (task * 31 + i) as u8);
                        let copy = batch.to_vec();
                        let info = log.append(batch, LEADER).await.unwrap();
                        sent.borrow_mut().insert(info.first_offset, copy);
                        while seen.get() == 0 {
                            glommio::timer::sleep(std::time::Duration::from_micros(100)).await;
                        }
                    }
                    appending.set(appending.get() - 1);
                })
            })
            .collect();
        let reader = {
            let log = log.clone();
            let (seen, appending) = (seen.clone(), appending.clone());
            glommio::spawn_local(async move {
                let mut at = Offset(0);
                let mut beside = 0usize;
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
                loop {
                    let done = appending.get() == 0;
                    let end = log.log_end_offset();
                    if at < end {
                        let r = log
                            .read(at, 256 << 10, end, SizeLimit::AtLeastOneBatch)
                            .await
                            .expect("read");
                        // split_batches fails on a partial batch.
                        let batches = split_batches(&r.to_vec().await.expect("bytes"));
                        at = assert_contiguous(&batches, at);
                        seen.set(seen.get() + batches.len());
                        if !done {
                            beside += batches.len();
                        }
                    } else if done {
                        break;
                    }
                    assert!(std::time::Instant::now() < deadline, "the appends never finished");
                    glommio::yield_if_needed().await;
                    glommio::timer::sleep(std::time::Duration::from_micros(200)).await;
                }
                assert_eq!(at, log.log_end_offset(), "the reader stopped short of the end");
                beside
            })
        };
        for a in appenders {
            a.await;
        }
        let read_beside = reader.await;
        assert!(read_beside > 0, "the reader saw nothing while appends ran");
        let sent = Rc::try_unwrap(sent).unwrap().into_inner();
        check_log_matches(&log, &sent).await;
        log.close().await.unwrap();
        sent
    });
    // Clean reopen, then an unclean one (dropped without close).
    for _ in 0..2 {
        run(|| async {
            let clock: Rc<dyn Clock> = Rc::new(SystemClock);
            let log = PartitionLog::open(params(dir.path(), config.clone(), mode, clock))
                .await
                .unwrap();
            check_log_matches(&log, &sent).await;
        });
    }
}

/// The log holds exactly `sent` (first offset → batch as sent), in order.
async fn check_log_matches(log: &PartitionLog, sent: &std::collections::BTreeMap<Offset, Vec<u8>>) {
    let stored = read_all(log, Offset(0), 1 << 20).await;
    assert_eq!(stored.len(), sent.len(), "batches stored against acknowledged");
    assert_contiguous(&stored, Offset(0));
    for (b, (first, s)) in stored.iter().zip(sent) {
        let info = ferrite_engine::batch::validate(b, 1 << 20, ferrite_engine::batch::Validation::Stored).unwrap();
        assert_eq!(info.base_offset, *first);
        assert_eq!(b.len(), s.len(), "batch at {first}: length");
        assert_eq!(b[16..], s[16..], "batch at {first}: bytes");
    }
}
