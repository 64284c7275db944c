//! The transaction coordinator (KIP-98): the per-shard driver that loads
//! `__transaction_state` partitions and writes their records
//! ([`coordinator`]), and the transaction markers it sends to the
//! partitions of a transaction ([`markers`]); and a partition leader's
//! check that a transactional write belongs to an open transaction
//! ([`verify`], KIP-890). The state and its
//! transitions are in `ferrite-transactions`.

pub mod coordinator;
pub mod inter_broker;
pub mod markers;
pub mod verify;

pub use coordinator::TxnCoordinator;
pub use ferrite_transactions::{TxnConfig, TxnError, TRANSACTION_STATE_TOPIC};

use std::rc::Rc;

use crate::shard::BrokerShard;

/// How often a shard looks for `__transaction_state` partitions it now
/// serves (a coordinator that takes over completes what was decided).
const LOAD_CHECK_MS: u64 = 500;

/// The shard's transaction clock: loads what this shard now serves every
/// [`LOAD_CHECK_MS`], aborts what is past its timeout every
/// `transaction.abort.timed.out.transaction.cleanup.interval.ms`, and
/// removes the ids idle past `transactional.id.expiration.ms` every
/// `transaction.remove.expired.transaction.cleanup.interval.ms`. Ends
/// when the broker stops.
pub async fn run_clock(shard: Rc<BrokerShard>) {
    use std::time::{Duration, Instant};
    let config = &shard.transactions.config;
    let expire_every = Duration::from_millis(config.abort_check_interval_ms.max(1));
    let remove_every = Duration::from_millis(config.id_expiration_check_interval_ms.max(1));
    let tick = Duration::from_millis(LOAD_CHECK_MS).min(expire_every).min(remove_every);
    let (mut expired_at, mut removed_at) = (Instant::now(), Instant::now());
    while !shard.stopping.get() {
        glommio::timer::sleep(tick).await;
        shard.transactions.load_served(&shard).await;
        if expired_at.elapsed() >= expire_every {
            expired_at = Instant::now();
            shard.transactions.abort_expired(&shard).await;
        }
        if removed_at.elapsed() >= remove_every {
            removed_at = Instant::now();
            shard.transactions.remove_expired_ids(&shard).await;
        }
    }
}
