//! Crash recovery: torn tails are cut, corruption below the recovery point
//! is refused (or repaired on request), and kill -9 loses nothing that was
//! acknowledged.

mod common;

use std::io::{BufRead, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use common::*;
use ferrite_engine::checkpoint::Shutdown;
use ferrite_engine::clock::{Clock, SystemClock};
use ferrite_engine::{EngineError, LogConfig, Offset, PartitionLog, Repair, WriteMode};

fn clock() -> Rc<dyn Clock> {
    Rc::new(SystemClock)
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    v.sort();
    v
}

/// Appends N batches, optionally flushes and checkpoints part-way, then
/// overwrites the last segment from a random point (at or after the recovery
/// point) to its end with garbage, and recovers. Exactly the batches that
/// ended before that point must survive.
#[test]
fn torn_tails_are_cut_exactly_at_the_damage() {
    for_seeds(seeds(0..150), |seed| {
        let mut rng = Rng::new(seed);
        let mode = if rng.below(2) == 0 {
            WriteMode::Buffered
        } else {
            WriteMode::Direct
        };
        let config = LogConfig {
            segment_bytes: [2048, 8192, 1 << 20][rng.below(3) as usize],
            index_interval_bytes: [0, 256, 4096][rng.below(3) as usize],
            cache_bytes_max: 0,
            ..LogConfig::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let n = 5 + rng.below(40) as usize;
        let flush_after = rng.below(n as u64 + 1) as usize;
        let specs: Vec<(usize, usize)> = (0..n)
            .map(|_| (1 + rng.below(4) as usize, rng.below(900) as usize))
            .collect();
        run(|| async {
            let log = PartitionLog::open(params(dir.path(), config.clone(), mode, clock()))
                .await
                .unwrap();
            for (i, (records, value_len)) in specs.iter().enumerate() {
                let b = producer_batch(*records, *value_len, i as i64, i as u8);
                log.append(b, LEADER).await.unwrap();
                if i + 1 == flush_after {
                    log.flush().await.unwrap();
                    log.write_checkpoint(Shutdown::Unclean).await.unwrap();
                }
            }
            // A crash: the log is dropped without close.
        });
        let last = segment_files(dir.path()).pop().unwrap();
        let cp = ferrite_engine::checkpoint::Checkpoint::decode(&std::fs::read(dir.path().join("checkpoint")).unwrap())
            .unwrap();
        let last_base = Offset(last.file_stem().unwrap().to_string_lossy().parse().unwrap());
        let floor = if cp.recovery.segment_base == last_base {
            cp.recovery.position
        } else {
            0
        };
        let len = std::fs::metadata(&last).unwrap().len();
        let logical = logical_batches(&std::fs::read(&last).unwrap());
        let point = floor + rng.below(len - floor + 1);
        // Garbage from `point` to the end; the first byte surely differs.
        if point < len {
            let f = std::fs::OpenOptions::new().read(true).write(true).open(&last).unwrap();
            let mut garbage: Vec<u8> = (0..len - point).map(|_| rng.next_u64() as u8).collect();
            let mut orig = [0u8; 1];
            f.read_at(&mut orig, point).unwrap();
            garbage[0] = orig[0] ^ (1 + (rng.below(255) as u8));
            f.write_all_at(&garbage, point).unwrap();
        }
        let survivors: Vec<&(u64, Offset)> = logical.iter().filter(|(end, _)| *end <= point).collect();
        let expected_end = survivors.last().map(|(_, next)| *next).unwrap_or(last_base);
        run(|| async {
            let (log, report) = PartitionLog::open_with_report(params(dir.path(), config.clone(), mode, clock()))
                .await
                .unwrap();
            assert_eq!(
                log.log_end_offset(),
                expected_end,
                "seed {seed}: {report:?}, point {point} of {len}"
            );
            // Everything left reads back valid and contiguous.
            let all = read_all(&log, Offset(0), 1 << 20).await;
            let next = assert_contiguous(&all, Offset(0));
            assert_eq!(next, expected_end);
            // And the log takes appends again.
            let info = log.append(producer_batch(1, 10, 0, 0), LEADER).await.unwrap();
            assert_eq!(info.first_offset, expected_end);
            log.close().await.unwrap();
        });
    });
}

/// (end position, next offset) of each valid batch in a segment file.
fn logical_batches(bytes: &[u8]) -> Vec<(u64, Offset)> {
    let (found, _, _) = ferrite_engine::scan::scan_bytes(bytes, Offset(0));
    found
        .iter()
        .map(|(pos, info)| (pos + info.size as u64, info.next_offset()))
        .collect()
}

/// Flushes and checkpoints, then damages a batch the checkpoint says is on
/// the device: opening refuses, naming the file and the batch's position;
/// with repair it opens, cut before that batch.
#[test]
fn corruption_below_the_recovery_point_is_refused_not_truncated() {
    for mode in [WriteMode::Buffered, WriteMode::Direct, WriteMode::DirectPreallocated] {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 1 << 20,
            ..LogConfig::default()
        };
        let positions: Vec<(u64, Offset)> = run(|| async {
            let log = PartitionLog::open(params(dir.path(), config.clone(), mode, clock()))
                .await
                .unwrap();
            let mut out = Vec::new();
            let mut pos = 0;
            for i in 0..20 {
                let info = log.append(producer_batch(2, 300, i, 1), LEADER).await.unwrap();
                out.push((pos, info.first_offset));
                pos += info.bytes as u64;
            }
            log.flush().await.unwrap();
            log.write_checkpoint(Shutdown::Unclean).await.unwrap();
            // More data after the recovery point, then a crash (no close).
            log.append(producer_batch(2, 300, 99, 1), LEADER).await.unwrap();
            out
        });
        let seg = segment_files(dir.path()).pop().unwrap();
        let (victim_pos, victim_offset) = positions[7];
        let f = std::fs::OpenOptions::new().write(true).read(true).open(&seg).unwrap();
        let mut byte = [0u8; 1];
        f.read_at(&mut byte, victim_pos + 100).unwrap();
        f.write_all_at(&[byte[0] ^ 0x55], victim_pos + 100).unwrap();
        let size_before = std::fs::metadata(&seg).unwrap().len();
        run(|| async {
            let err = match PartitionLog::open(params(dir.path(), config.clone(), mode, clock())).await {
                Ok(_) => panic!("corrupt log opened"),
                Err(e) => e,
            };
            match &err {
                EngineError::CorruptBelowRecoveryPoint { path, position, .. } => {
                    assert_eq!(path, &seg);
                    assert_eq!(*position, victim_pos);
                }
                other => panic!("unexpected error {other}"),
            }
            assert!(err.to_string().contains(&seg.display().to_string()));
        });
        assert!(
            std::fs::metadata(&seg).unwrap().len() >= size_before,
            "refusal must not truncate"
        );
        run(|| async {
            let mut p = params(dir.path(), config.clone(), mode, clock());
            p.repair = Repair::Truncate;
            let log = PartitionLog::open(p).await.unwrap();
            assert_eq!(log.log_end_offset(), victim_offset);
            log.close().await.unwrap();
        });
    }
}

/// A sealed segment whose index is gone and whose data is damaged is
/// rebuilt by a scan, which finds the damage below the recovery point.
#[test]
fn corruption_in_an_older_segment_with_a_lost_index_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 512,
        ..LogConfig::default()
    };
    run(|| async {
        let log = PartitionLog::open(params(dir.path(), config.clone(), WriteMode::Buffered, clock()))
            .await
            .unwrap();
        for i in 0..40 {
            log.append(producer_batch(1, 400, i, 2), LEADER).await.unwrap();
        }
        log.close().await.unwrap();
    });
    let segs = segment_files(dir.path());
    assert!(segs.len() >= 3);
    std::fs::remove_file(segs[0].with_extension("index")).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&segs[0]).unwrap();
    f.write_all_at(b"\xff\xff\xff", 1000).unwrap();
    run(|| async {
        match PartitionLog::open(params(dir.path(), config.clone(), WriteMode::Buffered, clock())).await {
            Err(EngineError::CorruptBelowRecoveryPoint { path, .. }) => assert_eq!(path, segs[0]),
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("corrupt log opened"),
        }
    });
}

/// The child side of the kill -9 test: appends forever, printing each
/// acknowledged end offset. Run only by the parent test.
#[test]
#[ignore]
fn kill9_child_appends_forever() {
    let Ok(dir) = std::env::var("FERRITE_KILL9_DIR") else {
        return;
    };
    let mode = match std::env::var("FERRITE_KILL9_MODE").as_deref() {
        Ok("direct") => WriteMode::Direct,
        Ok("direct-preallocated") => WriteMode::DirectPreallocated,
        _ => WriteMode::Buffered,
    };
    let config = LogConfig {
        segment_bytes: 64 << 10,
        ..LogConfig::default()
    };
    run(|| async move {
        let log = PartitionLog::open(params(Path::new(&dir), config, mode, clock()))
            .await
            .unwrap();
        let stdout = std::io::stdout();
        let mut i = 0i64;
        loop {
            let info = log.append(producer_batch(3, 200, i, i as u8), LEADER).await.unwrap();
            let mut out = stdout.lock();
            writeln!(out, "acked {}", info.next_offset).unwrap();
            out.flush().unwrap();
            i += 1;
        }
    });
}

/// kill -9 during appends: every acknowledged batch is there after
/// recovery, and the log ends at a valid batch.
#[test]
fn kill9_loses_nothing_acknowledged() {
    for mode in ["buffered", "direct", "direct-preallocated"] {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "kill9_child_appends_forever",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("FERRITE_KILL9_DIR", dir.path())
            .env("FERRITE_KILL9_MODE", mode)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut last_acked = Offset(0);
        let mut acks = 0;
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.unwrap();
            if let Some(n) = line.strip_prefix("acked ") {
                last_acked = Offset(n.parse().unwrap());
                acks += 1;
                if acks == 3000 {
                    child.kill().unwrap();
                    break;
                }
            }
        }
        child.wait().unwrap();
        assert_eq!(acks, 3000, "child stopped early");
        let wm = match mode {
            "direct" => WriteMode::Direct,
            "direct-preallocated" => WriteMode::DirectPreallocated,
            _ => WriteMode::Buffered,
        };
        run(|| async {
            let config = LogConfig {
                segment_bytes: 64 << 10,
                ..LogConfig::default()
            };
            let log = PartitionLog::open(params(dir.path(), config, wm, clock()))
                .await
                .unwrap();
            assert!(
                log.log_end_offset() >= last_acked,
                "{mode}: acked {last_acked}, recovered {}",
                log.log_end_offset()
            );
            let all = read_all(&log, Offset(0), 1 << 20).await;
            let next = assert_contiguous(&all, Offset(0));
            assert_eq!(next, log.log_end_offset());
            log.close().await.unwrap();
        });
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..proptest::prelude::ProptestConfig::default() })]

    /// A segment made of arbitrary bytes after some valid batches, with no
    /// checkpoint (nothing known durable): opening never fails or panics, and
    /// keeps exactly the valid prefix.
    #[test]
    fn recovery_of_arbitrary_bytes_keeps_only_the_valid_prefix(
        batches in 0usize..6,
        garbage in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..3000),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = Vec::new();
        let mut next = Offset(0);
        for i in 0..batches {
            let mut b = producer_batch(1 + i, 50, i as i64, i as u8).to_vec();
            ferrite_engine::batch::stamp(&mut b, next, ferrite_engine::LeaderEpoch(0));
            next = next.plus(1 + i as i64);
            bytes.extend_from_slice(&b);
        }
        bytes.extend_from_slice(&garbage);
        let (_, valid_end, _) = ferrite_engine::scan::scan_bytes(&bytes, Offset(0));
        let expected_end = logical_batches(&bytes).last().map(|(_, n)| *n).unwrap_or(Offset(0));
        std::fs::create_dir_all(dir.path()).unwrap();
        std::fs::write(dir.path().join("00000000000000000000.log"), &bytes).unwrap();
        run(|| async {
            let log = PartitionLog::open(params(dir.path(), LogConfig::default(), WriteMode::Buffered, clock())).await.unwrap();
            assert_eq!(log.log_end_offset(), expected_end);
            assert_eq!(log.size_bytes(), valid_end);
            log.close().await.unwrap();
        });
        assert!(next >= expected_end);
    }
}
