//! The scrubber: damage in a closed segment is found, fenced from readers,
//! and cut away by a truncation to it.

mod common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use common::*;
use ferrite_engine::clock::Clock;
use ferrite_engine::log_manager::{LogManager, LogManagerConfig};
use ferrite_engine::scrub::ScrubPacer;
use ferrite_engine::{EngineError, LogConfig, Offset, PartitionLog, ShardId, SizeLimit, WriteMode};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        ..LogConfig::default()
    }
}

/// The log's segment files, oldest first.
fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    files
}

/// Where each batch of a segment file starts, and its base offset.
fn batch_starts(file: &Path) -> Vec<(u64, Offset)> {
    let bytes = std::fs::read(file).expect("read segment");
    let mut pos = 0usize;
    let mut out = Vec::new();
    while pos < bytes.len() {
        let info = ferrite_engine::batch::peek(&bytes[pos..]).expect("batch header");
        out.push((pos as u64, info.base_offset));
        pos += info.size as usize;
    }
    out
}

/// Flips every bit of the byte at `pos` of `file`.
fn flip(file: &Path, pos: u64) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .expect("open");
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, pos).expect("read byte");
    b[0] ^= 0xff;
    f.write_all_at(&b, pos).expect("write byte");
    f.sync_all().expect("sync");
}

async fn filled_log(dir: &Path) -> Rc<PartitionLog> {
    let log = PartitionLog::open(params(dir, config(), WriteMode::Buffered, manual_clock()))
        .await
        .expect("open");
    for n in 0..20u8 {
        log.append(producer_batch(1, 900, 1_700_000_000_000, n), LEADER)
            .await
            .expect("append");
    }
    log.flush().await.expect("flush");
    assert!(log.segment_count() >= 4, "{} segments", log.segment_count());
    // Closed cleanly and opened again: nothing cached, every read goes to
    // the files, and nothing is scanned at the open.
    log.close().await.expect("close");
    PartitionLog::open(params(dir, config(), WriteMode::Buffered, manual_clock()))
        .await
        .expect("reopen")
}

#[derive(Clone, Copy)]
enum Reader {
    Consumer,
    Follower,
}

/// Reads on from `from` (a segment at a time, as file reads go) until a
/// read returns nothing more or meets the damaged range; returns where the
/// reads stopped.
async fn read_until_stopped(log: &PartitionLog, from: Offset, who: Reader) -> Offset {
    let mut at = from;
    loop {
        let r = match who {
            Reader::Consumer => {
                log.read(at, 1 << 30, log.log_end_offset(), SizeLimit::AtLeastOneBatch)
                    .await
            }
            Reader::Follower => log.read_for_replica(at, 1 << 30, SizeLimit::AtLeastOneBatch).await,
        };
        let r = match r {
            Err(EngineError::Damaged { .. }) => return at,
            other => other.expect("a read below the damage"),
        };
        if r.next_offset == at {
            return at;
        }
        at = r.next_offset;
    }
}

fn pacer() -> ScrubPacer {
    ScrubPacer::new(1 << 30)
}

#[test]
fn a_flipped_byte_in_a_closed_segment_is_found_fenced_and_cut_away() {
    let dir = tempfile::tempdir().expect("tempdir");
    run(|| async {
        let log = filled_log(dir.path()).await;
        let intact = read_all(&log, Offset(0), 1 << 20).await;
        let clean = log.scrub(&mut pacer()).await.expect("scrub");
        assert!(clean.damage.is_none());
        let files = segment_files(dir.path());
        let closed: u64 = files[..files.len() - 1]
            .iter()
            .map(|f| std::fs::metadata(f).expect("stat").len())
            .sum();
        assert_eq!(
            clean.bytes_verified, closed,
            "every closed byte, not the active segment"
        );

        // A byte inside the second batch's records, in the second segment.
        let victim = &files[1];
        let (position, offset) = batch_starts(victim)[1];
        flip(victim, position + 100);
        let found = log
            .scrub(&mut pacer())
            .await
            .expect("scrub")
            .damage
            .expect("damage found");
        assert_eq!((found.offset, found.position), (offset, position));
        assert_eq!(found.path, *victim);
        let next_segment = batch_starts(&files[2])[0].1;
        assert_eq!(found.end, next_segment, "the fence runs to the segment's end");
        assert_eq!(log.damage(), Some(found.clone()));

        // Inside the range: refused, for consumers and followers alike.
        let end = log.log_end_offset();
        for at in [offset, Offset(next_segment.0 - 1)] {
            let r = log.read(at, 1 << 20, end, SizeLimit::AtLeastOneBatch).await;
            assert!(
                matches!(r, Err(EngineError::Damaged { offset: o, .. }) if o == offset),
                "{r:?}"
            );
            let r = log.read_for_replica(at, 1 << 20, SizeLimit::AtLeastOneBatch).await;
            assert!(matches!(r, Err(EngineError::Damaged { .. })), "{r:?}");
        }
        // From below: up to the damage, not into it.
        assert_eq!(read_until_stopped(&log, Offset(0), Reader::Consumer).await, offset);
        assert_eq!(read_until_stopped(&log, Offset(0), Reader::Follower).await, offset);
        // Past it: served.
        let after = read_all(&log, next_segment, 1 << 20).await;
        assert_eq!(after[..], intact[next_segment.0 as usize..]);
        // A second pass reports nothing new while the fence stands.
        assert!(log.scrub(&mut pacer()).await.expect("scrub").damage.is_none());

        // A truncation above the damage cuts at it.
        let new_end = log.truncate_to(Offset(offset.0 + 3)).await.expect("truncate");
        assert_eq!(new_end, offset);
        assert_eq!(log.damage(), None, "the damaged range is gone");
        let kept = read_all(&log, Offset(0), 1 << 20).await;
        assert_eq!(kept[..], intact[..offset.0 as usize]);
        // The log goes on from there, and scrubs clean.
        for n in 0..8u8 {
            log.append(producer_batch(1, 900, 1_700_000_000_000, 100 + n), LEADER)
                .await
                .expect("append");
        }
        log.flush().await.expect("flush");
        assert_contiguous(&read_all(&log, Offset(0), 1 << 20).await, Offset(0));
        assert!(log.scrub(&mut pacer()).await.expect("scrub").damage.is_none());
        log.close().await.expect("close");
    });
}

#[test]
fn a_damaged_batch_header_is_found_and_cut_at_its_known_position() {
    let dir = tempfile::tempdir().expect("tempdir");
    run(|| async {
        let log = filled_log(dir.path()).await;
        let files = segment_files(dir.path());
        let victim = &files[2];
        let starts = batch_starts(victim);
        let (position, offset) = starts[1];
        // The batch length: the walk over headers cannot pass it.
        flip(victim, position + 8);
        let found = log
            .scrub(&mut pacer())
            .await
            .expect("scrub")
            .damage
            .expect("damage found");
        assert_eq!((found.offset, found.position), (offset, position));
        let end = log.log_end_offset();
        let r = log
            .read(Offset(0), 1 << 30, end, SizeLimit::AtLeastOneBatch)
            .await
            .expect("read");
        assert!(r.next_offset <= offset);
        // From the damaged segment's own first batch: served up to the
        // damage, whose garbled header is never walked over.
        let first = starts[0].1;
        for read in [
            log.read(first, 1 << 30, end, SizeLimit::AtLeastOneBatch).await,
            log.read_for_replica(first, 1 << 30, SizeLimit::AtLeastOneBatch).await,
        ] {
            let r = read.expect("a read below the damage in its segment");
            assert_eq!((r.first_offset, r.next_offset), (first, offset));
        }
        let cut = log.truncate_to(Offset(end.0 - 1)).await.expect("truncate");
        assert_eq!(cut, offset);
        assert_eq!(log.damage(), None);
        assert_contiguous(&read_all(&log, Offset(0), 1 << 20).await, Offset(0));
        log.close().await.expect("close");
        // Reopened: the cut held.
        let log = PartitionLog::open(params(dir.path(), config(), WriteMode::Buffered, manual_clock()))
            .await
            .expect("reopen");
        assert_eq!(log.log_end_offset(), offset);
        log.close().await.expect("close");
    });
}

/// The base offset is not covered by the CRC: lowered, it would pass the
/// damaged batch off as the one holding an earlier offset.
#[test]
fn a_lowered_base_offset_is_found_and_never_served() {
    let dir = tempfile::tempdir().expect("tempdir");
    run(|| async {
        let log = filled_log(dir.path()).await;
        let files = segment_files(dir.path());
        let victim = &files[1];
        let starts = batch_starts(victim);
        let (position, offset) = starts[1];
        let f = std::fs::OpenOptions::new().write(true).open(victim).expect("open");
        f.write_all_at(&starts[0].1 .0.to_be_bytes(), position)
            .expect("lower the base offset");
        f.sync_all().expect("sync");
        let found = log
            .scrub(&mut pacer())
            .await
            .expect("scrub")
            .damage
            .expect("damage found");
        assert_eq!((found.offset, found.position), (offset, position));
        let end = log.log_end_offset();
        let r = log
            .read(starts[0].1, 1 << 30, end, SizeLimit::AtLeastOneBatch)
            .await
            .expect("read");
        assert_eq!(r.next_offset, offset);
        let bytes = r.to_vec().await.expect("bytes");
        assert_eq!(split_batches(&bytes).len(), 1, "only the batch before the damage");
        log.close().await.expect("close");
    });
}

#[test]
fn the_log_manager_scrubs_every_interval_and_retention_lifts_a_fence() {
    let dir = tempfile::tempdir().expect("tempdir");
    run(|| async {
        let clock = manual_clock();
        let dyn_clock: Rc<dyn Clock> = clock.clone();
        let mut mc = LogManagerConfig::new(dir.path());
        mc.scrub_interval_ms = 20;
        mc.scrub_bytes_per_second = 64 << 20;
        let with_retention = LogConfig {
            retention_ms: 3_600_000,
            ..config()
        };
        let for_open = with_retention.clone();
        let manager = LogManager::open(mc, ShardId(0), 1, dyn_clock, &move |_| for_open.clone())
            .await
            .expect("manager");
        manager.start_background();
        let log = manager.create(&tp(), with_retention.clone()).await.expect("create");
        for n in 0..20u8 {
            log.append(producer_batch(1, 900, clock.now_ms().0, n), LEADER)
                .await
                .expect("append");
        }
        log.flush().await.expect("flush");
        let passes = manager.scrub_stats().passes;
        let mut waited = 0;
        while manager.scrub_stats().passes < passes + 2 {
            assert!(waited < 5000, "no scrub pass ran");
            glommio::timer::sleep(Duration::from_millis(10)).await;
            waited += 10;
        }
        assert_eq!(manager.scrub_stats().damage_found, 0);
        assert!(manager.scrub_stats().bytes_verified > 0);
        let files = segment_files(&dir.path().join("t-0"));
        let (position, _) = batch_starts(&files[0])[0];
        flip(&files[0], position + 80);
        let mut waited = 0;
        while log.damage().is_none() {
            assert!(waited < 5000, "the scrubber did not find the damage");
            glommio::timer::sleep(Duration::from_millis(10)).await;
            waited += 10;
        }
        assert_eq!(manager.scrub_stats().damage_found, 1);
        assert!(matches!(
            log.read(Offset(0), 1 << 20, log.log_end_offset(), SizeLimit::Strict)
                .await,
            Err(EngineError::Damaged { .. })
        ));
        // Retention removes the damaged (oldest) segment: nothing is fenced.
        clock.advance_ms(2 * 3_600_000);
        log.append(producer_batch(1, 900, clock.now_ms().0, 99), LEADER)
            .await
            .expect("append");
        log.apply_retention().await.expect("retention");
        assert_eq!(log.damage(), None);
        let start = log.log_start_offset();
        assert!(log
            .read(start, 1 << 20, log.log_end_offset(), SizeLimit::Strict)
            .await
            .is_ok());
        manager.shutdown().await;
    });
}
