//! Partitions on shards: each lives on the shard `shard_for` names, and is
//! reached from other threads only through the shard's inbox.

mod common;

use std::rc::Rc;
use std::sync::Arc;

use common::producer_batch;
use ferrite_engine::clock::SystemClock;
use ferrite_engine::log_manager::{shard_for, LogManager, LogManagerConfig};
use ferrite_engine::shard::{InitFn, Pinning, RuntimeConfig, ShardRuntime};
use ferrite_engine::{AppendMode, EngineError, LeaderEpoch, LogConfig, Offset, SizeLimit, TopicPartition};

fn start(dir: std::path::PathBuf) -> ShardRuntime<LogManager> {
    let init: InitFn<LogManager> = Arc::new(move |shard, handle| {
        let dir = dir.clone();
        Box::pin(async move {
            let manager = LogManager::open(
                LogManagerConfig::new(dir),
                shard,
                handle.shard_count(),
                Rc::new(SystemClock),
                &|_| LogConfig::default(),
            )
            .await?;
            manager.start_background();
            Ok(manager)
        })
    });
    let config = RuntimeConfig {
        shards: 3,
        pinning: Pinning::Unpinned,
        inbox_max: 16,
        io_memory_bytes: 4 << 20,
        blocking_threads: 1,
    };
    ShardRuntime::start(config, init).expect("runtime")
}

#[test]
fn partitions_live_on_their_shard_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let rt = start(dir.path().to_path_buf());
    let h = rt.handle();
    let tps: Vec<TopicPartition> = (0..6).map(|p| TopicPartition::new("orders", p)).collect();
    futures_lite::future::block_on(async {
        for tp in &tps {
            let owner = shard_for(tp, 3);
            let t = tp.clone();
            let next = h
                .submit(owner, move |m: Rc<LogManager>| async move {
                    let log = m.create(&t, LogConfig::default()).await?;
                    let mut last = Offset(0);
                    for i in 0..5 {
                        let batch = producer_batch(2, 100, i, t.partition as u8);
                        last = log
                            .append(batch, AppendMode::Leader { epoch: LeaderEpoch(0) })
                            .await?
                            .next_offset;
                    }
                    Ok::<_, EngineError>(last)
                })
                .await
                .unwrap()
                .unwrap();
            assert_eq!(next, Offset(10));
            // Another shard does not own it and refuses to create it.
            let other = ferrite_engine::ShardId((owner.0 + 1) % 3);
            let t = tp.clone();
            let refused = h
                .submit(other, move |m: Rc<LogManager>| async move {
                    m.create(&t, LogConfig::default()).await.map(|_| ())
                })
                .await
                .unwrap();
            assert!(matches!(refused, Err(EngineError::UnknownPartition { .. })));
        }
    });
    rt.stop();
    let rt = start(dir.path().to_path_buf());
    let h = rt.handle();
    futures_lite::future::block_on(async {
        for tp in &tps {
            let t = tp.clone();
            let bytes = h
                .submit(shard_for(tp, 3), move |m: Rc<LogManager>| async move {
                    let log = m.get(&t).expect("reopened on its shard");
                    let r = log
                        .read(Offset(0), 1 << 20, log.log_end_offset(), SizeLimit::Strict)
                        .await
                        .unwrap();
                    (log.log_end_offset(), r.to_vec().await.unwrap().len())
                })
                .await
                .unwrap();
            assert_eq!(bytes.0, Offset(10));
            assert!(bytes.1 > 5 * 200);
        }
    });
    rt.stop();
}
