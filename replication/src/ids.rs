//! The identifiers and quantities replication works with, as newtypes so that
//! a broker id cannot be passed where a znode version or a time is expected.
//! (Offsets and leader epochs come from the engine.)

use std::fmt;

use serde::{Deserialize, Serialize};

/// A broker's `broker.id`; a partition's replicas are named by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BrokerId(pub i32);

impl fmt::Display for BrokerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A znode's data version (ZooKeeper's `Stat.version`). A leader's ISR
/// writes are conditional on the partition state znode's version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ZkVersion(pub i32);

impl fmt::Display for ZkVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A reading of a monotonic clock, in milliseconds from an arbitrary origin.
/// The state machines never read a clock: every event carries the time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MonoMs(pub u64);

impl MonoMs {
    /// Milliseconds from `earlier` to `self`; 0 if `earlier` is later.
    pub fn since(self, earlier: MonoMs) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    pub fn plus_ms(self, ms: u64) -> MonoMs {
        MonoMs(self.0.saturating_add(ms))
    }
}

/// Names one produce request waiting for its acks; chosen by the caller,
/// unique per partition while the request waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WaiterId(pub u64);
