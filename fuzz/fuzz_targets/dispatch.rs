//! Arbitrary bytes as a request frame, decoded and dispatched to the real
//! handlers of a running broker (one shard, data in a temporary directory):
//! never a panic or an abort, and the shard stays alive.
#![no_main]

use std::rc::Rc;
use std::sync::OnceLock;

use bytes::Bytes;
use ferrite_config::BrokerConfig;
use ferrite_broker::handlers;
use ferrite_broker::server::Server;
use ferrite_broker::shard::BrokerShard;
use ferrite_engine::shard::ShardHandle;
use ferrite_engine::ShardId;
use ferrite_protocol::request::{decode_frame, Decoded};
use libfuzzer_sys::fuzz_target;

fn broker() -> &'static ShardHandle<BrokerShard> {
    static HANDLE: OnceLock<ShardHandle<BrokerShard>> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("ferrite-fuzz-dispatch-{}", std::process::id()));
        let mut config = BrokerConfig::default();
        config.listen = "127.0.0.1:0".parse().unwrap();
        config.log_dir = dir;
        config.shards = 1;
        config.log.segment_bytes = 1 << 20;
        // A fuzzed fetch may ask to wait minutes; a millisecond will do.
        config.fetch_wait_ms_max = 1;
        // A group's first rebalance completes at once; later joins may wait
        // for members of earlier inputs, which the timeout below cuts short.
        config.groups.initial_rebalance_delay_ms = 0;
        let server = Server::start(config).expect("broker starts");
        let handle = server.handle();
        // The broker lives as long as the fuzzing process.
        std::mem::forget(server);
        handle
    })
}

fuzz_target!(|data: &[u8]| {
    let frame = Bytes::copy_from_slice(data);
    let done = futures_lite::future::block_on(broker().submit(ShardId(0), move |shard: Rc<BrokerShard>| async move {
        if let Ok(Decoded::Request(req)) = decode_frame(frame) {
            // A JoinGroup or SyncGroup waits for other members (up to a
            // fuzzed rebalance timeout): a second is plenty.
            let answer = async {
                let _ = handlers::handle(&shard, *req).await;
            };
            let limit = glommio::timer::sleep(std::time::Duration::from_secs(1));
            futures_lite::future::or(answer, async {
                limit.await;
            })
            .await;
        }
    }));
    assert!(done.is_ok(), "the shard died");
});
