//! A first-come, first-served turn order for a log's appends.
//!
//! A caller takes a ticket when it calls (synchronously), and later waits for
//! its turn; turns are served in ticket order. This keeps appends in the
//! order they were made even though each runs as its own task and may wait
//! (for a roll, say) — glommio's semaphore, by contrast, lets a newcomer take
//! a freed permit ahead of the tasks already waiting, which could reorder two
//! pipelined produce requests of one connection.
//!
//! A ticket dropped before its turn is skipped when the turn comes.

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;

use crate::notify::Notify;

#[derive(Default)]
pub struct TurnOrder {
    next: Cell<u64>,
    serving: Cell<u64>,
    skipped: RefCell<BTreeSet<u64>>,
    moved: Notify,
}

/// A place in line. Dropping it unused gives the place up.
pub struct Ticket<'a> {
    order: &'a TurnOrder,
    n: u64,
    used: bool,
}

/// The turn; dropping it passes the turn on.
pub struct Turn<'a> {
    order: &'a TurnOrder,
}

impl TurnOrder {
    pub fn new() -> TurnOrder {
        TurnOrder::default()
    }

    /// Takes the next place in line (no await: call order is ticket order).
    pub fn ticket(&self) -> u64 {
        let n = self.next.get();
        self.next.set(n + 1);
        n
    }

    /// Wraps a ticket number taken earlier.
    pub fn hold(&self, n: u64) -> Ticket<'_> {
        assert!(n < self.next.get(), "ticket {n} was never issued");
        Ticket {
            order: self,
            n,
            used: false,
        }
    }

    fn advance(&self) {
        let mut s = self.serving.get() + 1;
        let mut skipped = self.skipped.borrow_mut();
        while skipped.remove(&s) {
            s += 1;
        }
        drop(skipped);
        self.serving.set(s);
        self.moved.notify_all();
    }
}

impl<'a> Ticket<'a> {
    /// Waits until every earlier ticket has had its turn.
    pub async fn turn(mut self) -> Turn<'a> {
        loop {
            let seen = self.order.moved.generation();
            if self.order.serving.get() == self.n {
                break;
            }
            self.order.moved.changed_since(seen).await;
        }
        self.used = true;
        Turn { order: self.order }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if self.used {
            return;
        }
        if self.order.serving.get() == self.n {
            self.order.advance();
        } else {
            self.order.skipped.borrow_mut().insert(self.n);
        }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.order.advance();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn turns_follow_ticket_order_and_skip_dropped_tickets() {
        let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .make()
            .expect("executor");
        ex.run(async {
            let order = Rc::new(TurnOrder::new());
            let log = Rc::new(RefCell::new(Vec::new()));
            let tickets: Vec<u64> = (0..6).map(|_| order.ticket()).collect();
            // Start them in reverse, with different delays; ticket 3 is dropped.
            let mut tasks = Vec::new();
            for &n in tickets.iter().rev() {
                let order = order.clone();
                let log = log.clone();
                tasks.push(glommio::spawn_local(async move {
                    let ticket = order.hold(n);
                    if n == 3 {
                        return;
                    }
                    glommio::timer::sleep(std::time::Duration::from_millis(6 - n)).await;
                    let _turn = ticket.turn().await;
                    log.borrow_mut().push(n);
                    glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
                }));
            }
            for t in tasks {
                t.await;
            }
            assert_eq!(*log.borrow(), vec![0, 1, 2, 4, 5]);
        });
    }
}
