//! Reads of batches reserved but not yet written: the state between an
//! append's reservation and the end of its write, held here by reserving
//! without writing.

use std::rc::Rc;

use bytes::BytesMut;

use crate::batch::build_batch;
use crate::clock::SystemClock;
use crate::error::EngineError;
use crate::log::{AppendMode, PartitionLog, RecordBytes};
use crate::log_config::LogConfig;
use crate::log_read::{ReadRegion, SizeLimit};
use crate::recovery::{OpenParams, Repair};
use crate::types::{LeaderEpoch, Offset, TimestampMs, TopicPartition};
use crate::write_mode::WriteMode;

const LEADER: AppendMode = AppendMode::Leader { epoch: LeaderEpoch(0) };

fn batch(value: &[u8]) -> BytesMut {
    BytesMut::from(&build_batch(Offset(0), TimestampMs(0), &[value])[..])
}

fn run<T>(f: impl std::future::Future<Output = T>) -> T {
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .make()
        .expect("executor")
        .run(f)
}

async fn open(dir: &std::path::Path, config: LogConfig) -> Rc<PartitionLog> {
    PartitionLog::open(OpenParams {
        tp: TopicPartition::new("t", 0),
        dir: dir.to_path_buf(),
        config,
        mode: WriteMode::Direct,
        clock: Rc::new(SystemClock),
        repair: Repair::Refuse,
        cache_budget: crate::batch_cache::CacheBudget::unshared(),
        file_cache: crate::file_cache::FileCache::unbounded(),
    })
    .await
    .expect("open")
}

/// Reserves `records` the way an append does, without writing them.
fn reserve_only(log: &PartitionLog, records: BytesMut) {
    let batches = log.validate_record_set(&records, LEADER).expect("valid");
    let _ = log.reserve(RecordBytes::Owned(records), &batches, LEADER);
}

#[test]
fn a_follower_reads_what_is_reserved_and_a_consumer_only_what_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    run(async {
        let log = open(dir.path(), LogConfig::default()).await;
        log.append(batch(b"written"), LEADER).await.expect("append");
        let seen = log.reserved_moved().generation();
        reserve_only(&log, batch(b"reserved"));
        assert_ne!(log.reserved_moved().generation(), seen, "a reservation signals");
        assert_eq!(log.log_end_offset(), Offset(1));
        assert_eq!(log.reserved_end_offset(), Offset(2));

        // A consumer (bounded by the log end) sees only the written batch.
        let consumer = log
            .read(Offset(0), 1 << 20, Offset(i64::MAX), SizeLimit::AtLeastOneBatch)
            .await
            .expect("read");
        assert_eq!(consumer.next_offset, Offset(1));

        // A follower gets both, from the cache.
        let follower = log
            .read_for_replica(Offset(0), 1 << 20, SizeLimit::AtLeastOneBatch)
            .await
            .expect("read");
        assert_eq!(follower.next_offset, Offset(2));
        assert!(matches!(follower.region, ReadRegion::Cached(ref b) if b.len() == 2));
        let bytes = follower.to_vec().await.expect("bytes");
        assert!(bytes.windows(8).any(|w| w == b"reserved"));

        // From the reserved end: nothing yet; past it: out of range.
        let at_end = log
            .read_for_replica(Offset(2), 1 << 20, SizeLimit::AtLeastOneBatch)
            .await
            .expect("read");
        assert_eq!(at_end.bytes, 0);
        let past = log
            .read_for_replica(Offset(3), 1 << 20, SizeLimit::AtLeastOneBatch)
            .await;
        assert!(matches!(past, Err(EngineError::OffsetOutOfRange { .. })), "{past:?}");

        // Once written, the consumer sees it too.
        log.drain_reserved().await.expect("drain");
        assert_eq!(log.log_end_offset(), Offset(2));
        let consumer = log
            .read(Offset(1), 1 << 20, Offset(i64::MAX), SizeLimit::AtLeastOneBatch)
            .await
            .expect("read");
        assert_eq!(consumer.next_offset, Offset(2));
        log.close().await.expect("close");
    });
}

#[test]
fn a_reserved_batch_the_cache_does_not_hold_is_read_once_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    run(async {
        let config = LogConfig {
            cache_bytes_max: 16,
            ..LogConfig::default()
        };
        let log = open(dir.path(), config).await;
        log.append(batch(b"written"), LEADER).await.expect("append");
        reserve_only(&log, batch(b"reserved"));
        // Nothing writes it: the read gives up, empty, after a short wait.
        let started = std::time::Instant::now();
        let r = log
            .read_for_replica(Offset(1), 1 << 20, SizeLimit::AtLeastOneBatch)
            .await
            .expect("read");
        assert_eq!(r.bytes, 0);
        assert!(started.elapsed() >= std::time::Duration::from_millis(50));
        // Written meanwhile: the read waits for it and returns it.
        let writer = {
            let log = log.clone();
            glommio::spawn_local(async move {
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
                log.drain_reserved().await.expect("drain");
            })
        };
        let r = log
            .read_for_replica(Offset(1), 1 << 20, SizeLimit::AtLeastOneBatch)
            .await
            .expect("read");
        assert_eq!(r.next_offset, Offset(2));
        assert!(matches!(r.region, ReadRegion::File(_)));
        writer.await;
        log.close().await.expect("close");
    });
}

/// Shared bytes asked for in place (only a leader stamps, and its bytes come
/// owned) are copied first, never written through the shared buffer.
#[test]
fn shared_record_bytes_are_copied_before_stamping() {
    let shared = bytes::Bytes::from(vec![1u8, 2, 3]);
    let mut records = RecordBytes::Shared(shared.clone());
    records.to_mut()[0] = 9;
    assert_eq!(&shared[..], &[1, 2, 3], "the shared buffer is untouched");
    assert_eq!(records.as_slice(), &[9, 2, 3]);
    assert_eq!(&records.freeze()[..], &[9, 2, 3]);
}

/// A follower's appended bytes are not kept once written (its batch cache
/// stays empty), so the fetch response they came in can be reused: the
/// replica fetcher relies on getting its buffer back. A leader's are kept.
#[test]
fn a_replica_append_keeps_no_reference_to_its_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    run(async {
        let log = open(dir.path(), LogConfig::default()).await;
        let mut response = BytesMut::new();
        for (i, value) in [b"one", b"two"].iter().enumerate() {
            let mut b = build_batch(Offset(i as i64), TimestampMs(0), &[&value[..]]);
            crate::batch::stamp(&mut b, Offset(i as i64), LeaderEpoch(3));
            response.extend_from_slice(&b);
        }
        let response = response.freeze();
        log.append_replica(response.slice(..)).await.expect("append");
        assert_eq!(log.log_end_offset(), Offset(2));
        assert_eq!(log.cache.borrow().bytes(), 0, "a follower caches nothing");
        assert!(response.try_into_mut().is_ok(), "the response buffer is free again");

        let leader = AppendMode::Leader { epoch: LeaderEpoch(4) };
        log.append(batch(b"three"), leader).await.expect("append");
        assert!(log.cache.borrow().bytes() > 0, "a leader caches its tail");
        let read = log
            .read(Offset(2), 1 << 20, Offset(i64::MAX), SizeLimit::AtLeastOneBatch)
            .await
            .expect("read");
        assert!(matches!(read.region, ReadRegion::Cached(_)), "served from the cache");
    });
}

/// The periodic checkpoint of an idle log writes nothing; once the recovery
/// point moves (a flush), it writes the new one.
#[test]
fn the_periodic_checkpoint_is_written_only_when_it_changed() {
    let dir = tempfile::tempdir().expect("tempdir");
    run(async {
        let log = open(dir.path(), LogConfig::default()).await;
        let file = dir.path().join(crate::checkpoint::FILE_NAME);
        let modified = || std::fs::metadata(&file).expect("checkpoint").modified().expect("mtime");
        let opened = modified();
        assert!(
            !log.refresh_checkpoint().await.expect("refresh"),
            "nothing changed since open"
        );
        assert_eq!(modified(), opened);
        log.append(batch(b"one"), LEADER).await.expect("append");
        log.flush().await.expect("flush");
        let rp = log.recovery_point();
        assert_eq!(rp.offset, Offset(1));
        // Whether the flush wrote it or the refresh does, the file ends up
        // with the new recovery point, and a second refresh is a no-op.
        log.refresh_checkpoint().await.expect("refresh");
        let on_disk = crate::checkpoint::Checkpoint::load(dir.path())
            .await
            .expect("load")
            .expect("present");
        assert_eq!(on_disk.recovery, rp);
        assert!(!log.refresh_checkpoint().await.expect("refresh"));
    });
}
