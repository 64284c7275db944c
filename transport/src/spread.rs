//! Which shard serves a new connection.
//!
//! Every shard listens on the same address with SO_REUSEPORT, and the
//! kernel picks a listener by a hash of the connection's addresses. With a
//! few connections that hash is a coin toss per connection: four clients on
//! two shards land 2-2 only three times in eight, and 4-0 once in eight, so
//! one shard does all the network work while the other idles. The shard
//! that accepts a connection therefore serves it only if no other shard has
//! fewer open connections; otherwise it hands the socket to the shard with
//! the fewest, which serves it as if it had accepted it.
//!
//! The counts are shared by all shards (one atomic per shard): a placement
//! counts the connection at its shard at once, before the hand-over, so a
//! later placement sees it. Two shards placing at the same instant may
//! both pick the same shard: an imbalance of one, which the next
//! placements correct. A [`Placed`] takes the count back when the
//! connection ends, or when a hand-over is dropped on its way (the broker
//! stopping).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ferrite_ids::ShardId;

/// Open connections per shard, shared by every shard's accept loop.
#[derive(Debug)]
pub struct ConnectionSpread {
    open: Box<[AtomicUsize]>,
}

/// One connection counted at its shard; dropping it takes the count back.
#[derive(Debug)]
pub struct Placed {
    spread: Arc<ConnectionSpread>,
    shard: ShardId,
}

impl Placed {
    /// The shard that is to serve the connection.
    pub fn shard(&self) -> ShardId {
        self.shard
    }

    /// The same connection counted at `shard` instead.
    pub fn moved_to(self, shard: ShardId) -> Placed {
        self.spread.open[shard.0].fetch_add(1, Ordering::Relaxed);
        Placed {
            spread: self.spread.clone(),
            shard,
        }
    }
}

impl Drop for Placed {
    fn drop(&mut self) {
        let before = self.spread.open[self.shard.0].fetch_sub(1, Ordering::Relaxed);
        assert!(before > 0, "a shard's open connections went below zero");
    }
}

impl ConnectionSpread {
    pub fn new(shards: usize) -> Arc<ConnectionSpread> {
        assert!(shards > 0, "a broker has at least one shard");
        Arc::new(ConnectionSpread {
            open: (0..shards).map(|_| AtomicUsize::new(0)).collect(),
        })
    }

    /// Places a connection accepted on shard `here`: at `here` unless
    /// another shard has fewer open connections, else at the first shard
    /// with the fewest. The connection is counted there at once.
    pub fn place(self: &Arc<Self>, here: ShardId) -> Placed {
        assert!(
            here.0 < self.open.len(),
            "the accepting shard is not one of the broker's"
        );
        let count = |s: usize| self.open[s].load(Ordering::Relaxed);
        let mut shard = here.0;
        for s in 0..self.open.len() {
            if count(s) < count(shard) {
                shard = s;
            }
        }
        self.open[shard].fetch_add(1, Ordering::Relaxed);
        Placed {
            spread: self.clone(),
            shard: ShardId(shard),
        }
    }

    /// Open connections counted at `shard`.
    pub fn open(&self, shard: ShardId) -> usize {
        self.open[shard.0].load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_accepted_on_one_shard_are_dealt_evenly() {
        let spread = ConnectionSpread::new(2);
        let placed: Vec<Placed> = (0..4).map(|_| spread.place(ShardId(0))).collect();
        let shards: Vec<usize> = placed.iter().map(|p| p.shard().0).collect();
        assert_eq!(shards, [0, 1, 0, 1]);
        assert_eq!(spread.open(ShardId(0)), 2);
        assert_eq!(spread.open(ShardId(1)), 2);
    }

    #[test]
    fn a_tie_stays_on_the_accepting_shard() {
        let spread = ConnectionSpread::new(3);
        let a = spread.place(ShardId(2));
        assert_eq!(a.shard(), ShardId(2));
        let b = spread.place(ShardId(1));
        assert_eq!(b.shard(), ShardId(1));
        // Shard 0 has none: a connection accepted on shard 2 goes there.
        let c = spread.place(ShardId(2));
        assert_eq!(c.shard(), ShardId(0));
    }

    #[test]
    fn a_closed_connection_frees_its_place() {
        let spread = ConnectionSpread::new(2);
        let a = spread.place(ShardId(1));
        let b = spread.place(ShardId(1));
        assert_eq!((a.shard(), b.shard()), (ShardId(1), ShardId(0)));
        drop(a);
        assert_eq!(spread.open(ShardId(1)), 0);
        assert_eq!(spread.place(ShardId(0)).shard(), ShardId(1));
    }
}
