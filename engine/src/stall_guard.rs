//! A guard against executors that sleep through their own I/O completions.
//!
//! Seen here (Linux 6.18, glommio 0.9): now and then an executor thread
//! sleeps in `io_uring_enter` (the kernel's `io_cqring_wait`) although the
//! I/O it waits for has finished — its io-wq worker is idle — and it stays
//! asleep until the thread takes a signal. A SIGSTOP/SIGCONT pair, or a
//! debugger attaching, wakes it, and the work then goes on correctly. The
//! engine's `log_model` test hung this way in about one run in 75 on a busy
//! machine, once for nine minutes in CI.
//!
//! The guard: every guarded executor runs a heartbeat task that bumps a
//! counter every [`HEARTBEAT_MS`]. One watchdog thread per process looks
//! every [`CHECK_MS`] and sends SIGURG to an executor whose heartbeat has
//! not moved for [`STALE_CHECKS`] looks. SIGURG gets a handler that does
//! nothing (with `SA_RESTART`): taking it makes the thread leave the kernel
//! wait, run its pending completion work and reap what finished. An executor
//! that is merely busy (a long task) gets the same harmless signal. Kicks
//! are counted ([`kicks`]) and each stall is logged once.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// How often a guarded executor's heartbeat task runs.
pub const HEARTBEAT_MS: u64 = 100;
/// How often the watchdog looks at the heartbeats.
pub const CHECK_MS: u64 = 250;
/// Looks without a heartbeat before an executor is kicked (so a stall is
/// noticed after 500-750 ms).
pub const STALE_CHECKS: u32 = 2;
/// Executors guarded at once, at most (one per shard and test executor).
pub const GUARDED_MAX: usize = 4096;

const _: () = assert!(CHECK_MS > HEARTBEAT_MS);
const _: () = assert!(STALE_CHECKS >= 1);

struct Entry {
    id: u64,
    name: String,
    tid: libc::pid_t,
    heartbeat: Arc<AtomicU64>,
    kicks: Arc<AtomicU64>,
    last_seen: u64,
    stale: u32,
}

struct Watchdog {
    entries: Mutex<Vec<Entry>>,
    next_id: AtomicU64,
}

static WATCHDOG: OnceLock<Watchdog> = OnceLock::new();
static KICKS: AtomicU64 = AtomicU64::new(0);

/// Kicks sent since the process started.
pub fn kicks() -> u64 {
    KICKS.load(Ordering::Relaxed)
}

extern "C" fn on_sigurg(_: libc::c_int) {}

fn watchdog() -> &'static Watchdog {
    WATCHDOG.get_or_init(|| {
        install_handler();
        // Without its thread the guard only records: nothing breaks a
        // stalled call out, as before the guard existed.
        if let Err(e) = std::thread::Builder::new().name("stall-guard".into()).spawn(watch) {
            tracing::warn!(error = %e, "the stall-guard thread did not start; stalled I/O calls will not be interrupted");
        }
        Watchdog {
            entries: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
        }
    })
}

fn install_handler() {
    // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value;
    // the handler is an extern "C" fn that touches nothing, which is
    // async-signal-safe.
    let result = unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigurg as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGURG, &action, std::ptr::null_mut())
    };
    assert_eq!(
        result,
        0,
        "installing the SIGURG handler: {}",
        std::io::Error::last_os_error()
    );
}

fn watch() {
    loop {
        std::thread::sleep(Duration::from_millis(CHECK_MS));
        let Some(w) = WATCHDOG.get() else { continue };
        let mut entries = w.entries.lock().unwrap_or_else(|e| e.into_inner());
        for e in entries.iter_mut() {
            let beat = e.heartbeat.load(Ordering::Relaxed);
            if beat != e.last_seen {
                e.last_seen = beat;
                e.stale = 0;
                continue;
            }
            e.stale += 1;
            if e.stale < STALE_CHECKS {
                continue;
            }
            if e.stale == STALE_CHECKS {
                tracing::warn!(executor = %e.name, "executor stalled; sending it SIGURG to wake it");
            }
            KICKS.fetch_add(1, Ordering::Relaxed);
            e.kicks.fetch_add(1, Ordering::Relaxed);
            // SAFETY: tgkill with this process's id only signals a thread of
            // this process; the entry is removed before its thread ends.
            unsafe {
                libc::syscall(libc::SYS_tgkill, libc::getpid(), e.tid, libc::SIGURG);
            }
        }
    }
}

/// Keeps the current executor guarded until dropped; drop it on the
/// executor's thread before that thread ends.
pub struct StallGuard {
    id: u64,
    stopped: Arc<AtomicBool>,
    kicks: Arc<AtomicU64>,
}

impl StallGuard {
    /// Kicks this executor got.
    pub fn kicks(&self) -> u64 {
        self.kicks.load(Ordering::Relaxed)
    }
}

/// Guards the executor this is called in: starts its heartbeat task and
/// registers its thread with the watchdog. Call from inside a glommio
/// executor.
pub fn guard_current_executor(name: &str) -> StallGuard {
    let w = watchdog();
    let heartbeat = Arc::new(AtomicU64::new(0));
    let stopped = Arc::new(AtomicBool::new(false));
    let kicks = Arc::new(AtomicU64::new(0));
    {
        let (heartbeat, stopped) = (heartbeat.clone(), stopped.clone());
        glommio::spawn_local(async move {
            while !stopped.load(Ordering::Relaxed) {
                glommio::timer::sleep(Duration::from_millis(HEARTBEAT_MS)).await;
                heartbeat.fetch_add(1, Ordering::Relaxed);
            }
        })
        .detach();
    }
    let id = w.next_id.fetch_add(1, Ordering::Relaxed);
    let mut entries = w.entries.lock().unwrap_or_else(|e| e.into_inner());
    assert!(entries.len() < GUARDED_MAX, "more than {GUARDED_MAX} guarded executors");
    entries.push(Entry {
        id,
        name: name.to_string(),
        // SAFETY: gettid has no preconditions.
        tid: unsafe { libc::gettid() },
        heartbeat,
        kicks: kicks.clone(),
        last_seen: 0,
        stale: 0,
    });
    StallGuard { id, stopped, kicks }
}

impl Drop for StallGuard {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::Relaxed);
        if let Some(w) = WATCHDOG.get() {
            let mut entries = w.entries.lock().unwrap_or_else(|e| e.into_inner());
            entries.retain(|e| e.id != self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An executor kept from running its heartbeat (a task that blocks its
    /// thread for 1.5 s) is kicked; one that runs freely is not.
    #[test]
    fn a_stalled_executor_is_kicked_and_a_free_one_is_not() {
        let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .make()
            .expect("executor");
        ex.run(async {
            let guard = guard_current_executor("stall-guard-test");
            glommio::timer::sleep(Duration::from_millis(1_000)).await;
            let idle = guard.kicks();
            // Blocks the executor's thread: no heartbeat can run.
            std::thread::sleep(Duration::from_millis(1_500));
            let blocked = guard.kicks() - idle;
            assert_eq!(idle, 0, "an executor that ran freely was kicked");
            assert!(blocked >= 1, "a blocked executor was not kicked");
        });
    }
}
