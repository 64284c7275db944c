//! A history of client operations, as Jepsen keeps one: each operation with
//! the client that ran it, when it was invoked and when it completed, and
//! how it ended — `Ok`, `Fail` (the operation certainly did not take
//! effect) or `Unknown` (a timeout or a broken connection: it may have).
//!
//! Values are unique `u64`s chosen by the workload, so that a record in the
//! log names the one produce that wrote it.

use serde::{Deserialize, Serialize};

/// Milliseconds since the run started.
pub type RunMs = u64;

/// What an operation asked for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpKind {
    /// Append `value` to `partition`.
    Produce { partition: i32, value: u64 },
    /// Records read from `partition`, in the order returned: (offset, value).
    Read { partition: i32, records: Vec<(i64, u64)> },
    /// Consumer group `group` committed `offset` for `partition`.
    Commit { group: String, partition: i32, offset: i64 },
}

/// How an operation ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// Acknowledged; a produce's offset when the broker gave one.
    Ok { offset: Option<i64> },
    /// Certainly not applied (an error the protocol says left nothing).
    Fail { error: String },
    /// May or may not have been applied.
    Unknown { error: String },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    pub client: u32,
    pub kind: OpKind,
    pub invoked_ms: RunMs,
    pub completed_ms: RunMs,
    pub outcome: Outcome,
}

impl Op {
    pub fn is_ok(&self) -> bool {
        matches!(self.outcome, Outcome::Ok { .. })
    }
}

/// Every operation of a run, in completion order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    pub ops: Vec<Op>,
}

impl History {
    pub fn push(&mut self, op: Op) {
        assert!(
            op.invoked_ms <= op.completed_ms,
            "an operation completed before it was invoked"
        );
        self.ops.push(op);
    }

    /// Ok operations of `client` that completed within `[from_ms, to_ms)`.
    pub fn ok_between(&self, client: u32, from_ms: RunMs, to_ms: RunMs) -> usize {
        let within = |o: &&Op| o.client == client && (from_ms..to_ms).contains(&o.completed_ms);
        self.ops.iter().filter(within).filter(|o| o.is_ok()).count()
    }

    /// The clients that appear in the history, in order.
    pub fn clients(&self) -> Vec<u32> {
        let mut c: Vec<u32> = self.ops.iter().map(|o| o.client).collect();
        c.sort_unstable();
        c.dedup();
        c
    }
}
