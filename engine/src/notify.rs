//! A shard-local "something changed" signal that wakes every waiter.
//!
//! Waiters read the generation, check their condition, and if it does not
//! hold wait for the generation to move — with no await in between, so on a
//! single-threaded executor no change can slip past unseen.
//!
//! Why not a semaphore for group writes: glommio's semaphore lets a newly
//! arriving task take a released permit before the waiters it woke have run.
//! Tasks whose bytes had already been written then sat in the lock queue
//! while each newcomer wrote a group of one batch (measured: single-batch
//! writes, a twentieth of the disk's speed). Waking everyone lets those that
//! are done return at once.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker};

/// Wakers kept at most. Waiters that gave up (a timeout won a race, say)
/// leave theirs behind until the next notification; past this many they are
/// all woken early, which is harmless: a woken waiter that sees no change
/// waits again.
pub const WAITERS_MAX: usize = 1024;

/// Subscribed signals kept at most ([`Notify::subscribe`]); beyond it the
/// oldest is dropped. A follower's view subscribes to each of its
/// partitions, and a shard keeps at most 64 views.
pub const SUBSCRIBERS_MAX: usize = 128;

#[derive(Default)]
pub struct Notify {
    generation: Cell<u64>,
    waiters: RefCell<Vec<Waker>>,
    /// Signals this one also moves, so that a waiter on many signals can
    /// wait on one instead of leaving a waker in each. Weak: a dropped
    /// subscriber is simply no longer told, and is pruned at the next
    /// subscription or notification.
    subscribers: RefCell<Vec<Weak<Notify>>>,
}

impl Notify {
    pub fn new() -> Notify {
        Notify::default()
    }

    pub fn generation(&self) -> u64 {
        self.generation.get()
    }

    /// Waits until the generation differs from `seen`.
    pub async fn changed_since(&self, seen: u64) {
        poll_fn(|cx| self.poll_changed_since(seen, cx)).await
    }

    /// The poll behind [`Notify::changed_since`], for a future that waits
    /// on several signals at once: ready when the generation differs from
    /// `seen`, else the task's waker is kept (once) until the next change.
    pub fn poll_changed_since(&self, seen: u64, cx: &mut Context<'_>) -> Poll<()> {
        if self.generation.get() != seen {
            return Poll::Ready(());
        }
        let mut waiters = self.waiters.borrow_mut();
        if waiters.iter().any(|w| w.will_wake(cx.waker())) {
            return Poll::Pending;
        }
        if waiters.len() >= WAITERS_MAX {
            for w in waiters.drain(..) {
                w.wake();
            }
        }
        waiters.push(cx.waker().clone());
        Poll::Pending
    }

    /// Drops `waker` from the waiters, for a wait that ended otherwise (its
    /// deadline, another signal): a long poll watches thousands of
    /// signals, and leaving its waker in each made every later wait on
    /// them scan up to [`WAITERS_MAX`] stale ones.
    pub fn forget(&self, waker: &Waker) {
        self.waiters.borrow_mut().retain(|w| !w.will_wake(waker));
    }

    /// Waiters kept (for tests and gauges).
    pub fn waiters(&self) -> usize {
        self.waiters.borrow().len()
    }

    pub fn notify_all(&self) {
        self.generation.set(self.generation.get() + 1);
        let waiters = std::mem::take(&mut *self.waiters.borrow_mut());
        for w in waiters {
            w.wake();
        }
        if self.subscribers.borrow().is_empty() {
            return;
        }
        self.subscribers.borrow_mut().retain(|s| s.strong_count() > 0);
        // Subscribers form no cycle (a log's signal moves its views'), so
        // this borrow is never asked for again below it.
        for s in self.subscribers.borrow().iter() {
            if let Some(s) = s.upgrade() {
                s.notify_all();
            }
        }
    }

    /// From now on every notification of this signal also notifies `to`
    /// (once, however often it subscribes). Whoever waits on `to` for a
    /// change of this one reads `to`'s generation before subscribing, and
    /// this one's after, so that no change falls between the two.
    pub fn subscribe(&self, to: &Rc<Notify>) {
        // `notify_all` walks the subscribers under a shared borrow: a
        // cycle would ask for it again.
        assert!(!std::ptr::eq(self, Rc::as_ptr(to)), "a signal subscribed to itself");
        let mut subscribers = self.subscribers.borrow_mut();
        if subscribers.iter().any(|s| std::ptr::eq(s.as_ptr(), Rc::as_ptr(to))) {
            return;
        }
        subscribers.retain(|s| s.strong_count() > 0);
        if subscribers.len() >= SUBSCRIBERS_MAX {
            subscribers.remove(0);
        }
        subscribers.push(Rc::downgrade(to));
    }

    /// Live subscribers (for tests).
    pub fn subscribers(&self) -> usize {
        self.subscribers
            .borrow()
            .iter()
            .filter(|s| s.strong_count() > 0)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn abandoned_waits_leave_a_bounded_number_of_wakers() {
        let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .make()
            .unwrap();
        ex.run(async {
            let n = Rc::new(Notify::new());
            // Many tasks, each polling twice (one waker kept) and then giving
            // up, as long polls whose timeout wins do.
            for _ in 0..3 * WAITERS_MAX {
                let n = n.clone();
                glommio::spawn_local(async move {
                    let seen = n.generation();
                    let mut polls = 0;
                    futures_lite::future::or(n.changed_since(seen), async {
                        while polls < 2 {
                            polls += 1;
                            glommio::yield_if_needed().await;
                            futures_lite::future::yield_now().await;
                        }
                    })
                    .await;
                })
                .await;
            }
            assert!(
                n.waiters.borrow().len() <= WAITERS_MAX,
                "{} wakers kept",
                n.waiters.borrow().len()
            );
            assert!(!n.waiters.borrow().is_empty());
        });
    }

    /// A wait that gave up and forgot its waker leaves none behind, and
    /// forgetting one waiter keeps the others.
    #[test]
    fn a_forgotten_waker_is_gone_and_the_others_stay() {
        let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .make()
            .expect("executor");
        ex.run(async {
            let n = Rc::new(Notify::new());
            let other = {
                let n = n.clone();
                let seen = n.generation();
                glommio::spawn_local(async move { n.changed_since(seen).await })
            };
            futures_lite::future::yield_now().await;
            assert_eq!(n.waiters(), 1);
            for _ in 0..3 {
                let n = n.clone();
                glommio::spawn_local(async move {
                    let seen = n.generation();
                    let kept: RefCell<Option<Waker>> = RefCell::new(None);
                    let waiting = poll_fn(|cx| {
                        kept.borrow_mut().get_or_insert_with(|| cx.waker().clone());
                        n.poll_changed_since(seen, cx)
                    });
                    futures_lite::future::or(waiting, futures_lite::future::yield_now()).await;
                    assert_eq!(n.waiters(), 2);
                    n.forget(&kept.take().expect("polled"));
                })
                .await;
            }
            assert_eq!(n.waiters(), 1);
            n.notify_all();
            other.await;
            assert_eq!(n.waiters(), 0);
        });
    }

    #[test]
    fn a_notification_moves_its_live_subscribers_once_each() {
        let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .make()
            .expect("executor");
        ex.run(async {
            let (a, b) = (Notify::new(), Notify::new());
            let view = Rc::new(Notify::new());
            a.subscribe(&view);
            a.subscribe(&view);
            b.subscribe(&view);
            assert_eq!(a.subscribers(), 1, "subscribing twice counts once");
            let seen = view.generation();
            let waiting = {
                let view = view.clone();
                glommio::spawn_local(async move { view.changed_since(seen).await })
            };
            futures_lite::future::yield_now().await;
            b.notify_all();
            waiting.await;
            assert_eq!(view.generation(), seen + 1, "one notification, one move");
            a.notify_all();
            assert_eq!(view.generation(), seen + 2);
            // A dropped subscriber is no longer told, and is pruned.
            drop(view);
            a.notify_all();
            assert_eq!(a.subscribers(), 0);
            assert!(a.subscribers.borrow().is_empty());
        });
    }

    #[test]
    fn subscribers_are_bounded_and_the_oldest_goes_first() {
        let n = Notify::new();
        let views: Vec<Rc<Notify>> = (0..SUBSCRIBERS_MAX + 3).map(|_| Rc::new(Notify::new())).collect();
        for v in &views {
            n.subscribe(v);
        }
        assert_eq!(n.subscribers(), SUBSCRIBERS_MAX);
        n.notify_all();
        assert_eq!(views[2].generation(), 0, "among the oldest, dropped");
        assert_eq!(views[3].generation(), 1);
        assert_eq!(views[SUBSCRIBERS_MAX + 2].generation(), 1);
        // Dead ones make room before anyone live is dropped.
        let n = Notify::new();
        for _ in 0..SUBSCRIBERS_MAX {
            n.subscribe(&Rc::new(Notify::new()));
        }
        let kept = Rc::new(Notify::new());
        n.subscribe(&kept);
        n.subscribe(&views[0]);
        n.notify_all();
        assert_eq!(n.subscribers(), 2);
        assert_eq!(kept.generation(), 1);
    }

    #[test]
    fn every_waiter_wakes() {
        let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .make()
            .expect("executor");
        ex.run(async {
            let n = Rc::new(Notify::new());
            let woke = Rc::new(Cell::new(0));
            let seen = n.generation();
            let tasks: Vec<_> = (0..5)
                .map(|_| {
                    let n = n.clone();
                    let woke = woke.clone();
                    glommio::spawn_local(async move {
                        n.changed_since(seen).await;
                        woke.set(woke.get() + 1);
                    })
                })
                .collect();
            glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
            assert_eq!(woke.get(), 0);
            n.notify_all();
            for t in tasks {
                t.await;
            }
            assert_eq!(woke.get(), 5);
            n.changed_since(seen).await; // already moved: returns at once
        });
    }
}
