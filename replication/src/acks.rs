//! Produce requests waiting for their records to be committed (acks=all):
//! each waits until the high watermark passes its last offset, or until its
//! deadline. Bounded by `waiters_max`.

use std::collections::VecDeque;

use ferrite_engine::types::Offset;

use crate::ids::{MonoMs, WaiterId};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Waiter {
    id: WaiterId,
    /// Committed once the high watermark is at least this.
    required_hw: Offset,
    deadline: MonoMs,
}

#[derive(Debug)]
pub struct AckWaiters {
    waiting: VecDeque<Waiter>,
    waiters_max: usize,
}

impl AckWaiters {
    pub fn new(waiters_max: usize) -> AckWaiters {
        assert!(waiters_max > 0, "waiters_max must be positive");
        AckWaiters {
            waiting: VecDeque::new(),
            waiters_max,
        }
    }

    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    pub fn is_full(&self) -> bool {
        self.waiting.len() >= self.waiters_max
    }

    /// Adds a waiter; the caller has checked [`is_full`](Self::is_full).
    pub fn add(&mut self, id: WaiterId, required_hw: Offset, deadline: MonoMs) {
        assert!(!self.is_full(), "ack waiters over waiters_max");
        assert!(self.waiting.iter().all(|w| w.id != id), "waiter id reused");
        self.waiting.push_back(Waiter {
            id,
            required_hw,
            deadline,
        });
    }

    /// Removes and returns the waiters the high watermark `hw` satisfies.
    pub fn committed_by(&mut self, hw: Offset) -> Vec<WaiterId> {
        self.take(|w| w.required_hw <= hw)
    }

    /// Removes and returns the waiters whose deadline has passed.
    pub fn expired(&mut self, now: MonoMs) -> Vec<(WaiterId, Offset)> {
        let mut out = Vec::new();
        self.waiting.retain(|w| {
            let keep = w.deadline > now;
            if !keep {
                out.push((w.id, w.required_hw));
            }
            keep
        });
        out
    }

    /// Removes and returns every waiter.
    pub fn drain(&mut self) -> Vec<WaiterId> {
        self.waiting.drain(..).map(|w| w.id).collect()
    }

    fn take(&mut self, pred: impl Fn(&Waiter) -> bool) -> Vec<WaiterId> {
        let mut out = Vec::new();
        self.waiting.retain(|w| {
            let hit = pred(w);
            if hit {
                out.push(w.id);
            }
            !hit
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiters_leave_when_committed_or_expired() {
        let mut w = AckWaiters::new(3);
        w.add(WaiterId(1), Offset(5), MonoMs(100));
        w.add(WaiterId(2), Offset(9), MonoMs(50));
        w.add(WaiterId(3), Offset(12), MonoMs(200));
        assert!(w.is_full());
        assert_eq!(w.committed_by(Offset(5)), vec![WaiterId(1)]);
        assert_eq!(w.expired(MonoMs(50)), vec![(WaiterId(2), Offset(9))]);
        assert_eq!(w.committed_by(Offset(11)), vec![]);
        assert_eq!(w.drain(), vec![WaiterId(3)]);
        assert!(w.is_empty());
    }
}
