//! The identifiers and quantities replication works with: the workspace's
//! newtypes (`ferrite-ids`), and the one only replication uses.

pub use ferrite_ids::{BrokerId, MonoMs, ZkVersion};

/// Names one produce request waiting for its acks; chosen by the caller,
/// unique per partition while the request waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WaiterId(pub u64);
