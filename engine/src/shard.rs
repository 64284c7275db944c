//! The shard runtime: one glommio executor per CPU, each pinned to its CPU,
//! each owning a shard-local service `S` (for the engine, a
//! [`crate::log_manager::LogManager`]; the broker wraps it in its own).
//!
//! `S` is built on its shard and never leaves it (`Rc<S>`, `!Send`). The only
//! way in from another shard or thread is [`ShardHandle::submit`], which sends
//! a closure to the owning shard's bounded inbox; the shard runs it as a task
//! against its `Rc<S>` and sends the result back. Closures and results must be
//! `Send`; the shard-local state they touch never is.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use glommio::{LocalExecutorBuilder, Placement};

use crate::error::{EngineError, Result};
use crate::types::ShardId;

type LocalFuture = Pin<Box<dyn Future<Output = ()>>>;
type Job<S> = Box<dyn FnOnce(Rc<S>) -> LocalFuture + Send>;

/// A shard-local service.
pub trait ShardService: 'static {
    /// Called on the shard when the runtime stops, after the inbox closed.
    fn shutdown(self: Rc<Self>) -> LocalFuture;
}

/// How the executors are placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pinning {
    /// Shard `i` runs on CPU `(first + i) mod online CPUs`.
    PerCpu { first: usize },
    /// Let the OS schedule the threads (several brokers on one host, tests
    /// on busy machines).
    Unpinned,
}

impl Pinning {
    /// The CPU shard `shard` is pinned to, of `cpus` online.
    pub fn cpu_of(self, shard: usize, cpus: usize) -> Option<usize> {
        match self {
            Pinning::PerCpu { first } => Some(first.wrapping_add(shard) % cpus.max(1)),
            Pinning::Unpinned => None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    pub shards: usize,
    pub pinning: Pinning,
    /// Messages queued per shard before senders wait.
    pub inbox_max: usize,
    /// Bytes of registered (pinned) memory per shard for O_DIRECT buffers.
    pub io_memory_bytes: usize,
    /// Threads in each shard's blocking pool (glommio runs `sendfile`,
    /// and some file operations, there).
    pub blocking_threads: usize,
}

/// Registered memory per shard: eight of the write groups it leads to
/// (1 MiB each, [`crate::io_memory`]) fit, so the writes of four busy
/// partitions stay in registered memory; at 32 MiB (4 MiB groups) an idle
/// two-shard broker held 79 MiB, at 8 MiB it holds 31 MiB, for 0.79-0.91
/// of the produce throughput at librdkafka's request shape (`docs/benchmarks.md`). Buffers beyond the pool
/// cost a page-pinning call per write. Locked memory: non-root users need
/// `ulimit -l` at least this times the shard count.
pub const IO_MEMORY_BYTES_DEFAULT: usize = 8 << 20;

/// glommio gives each executor one blocking thread; a slow consumer's
/// sendfile would then delay every other file-served fetch of the shard.
pub const BLOCKING_THREADS_DEFAULT: usize = 4;

impl RuntimeConfig {
    /// One shard per online CPU, pinned.
    pub fn per_cpu() -> RuntimeConfig {
        RuntimeConfig {
            shards: online_cpus(),
            pinning: Pinning::PerCpu { first: 0 },
            inbox_max: 1024,
            io_memory_bytes: IO_MEMORY_BYTES_DEFAULT,
            blocking_threads: BLOCKING_THREADS_DEFAULT,
        }
    }
}

pub fn online_cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// A `Send + Sync` handle to every shard's inbox.
pub struct ShardHandle<S> {
    inboxes: Arc<Vec<async_channel::Sender<Job<S>>>>,
}

impl<S> Clone for ShardHandle<S> {
    fn clone(&self) -> Self {
        ShardHandle {
            inboxes: self.inboxes.clone(),
        }
    }
}

impl<S: 'static> ShardHandle<S> {
    pub fn shard_count(&self) -> usize {
        self.inboxes.len()
    }

    /// Runs `f` on `shard` with its service and returns the result. Waits
    /// when the shard's inbox is full.
    pub async fn submit<R, F, Fut>(&self, shard: ShardId, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(Rc<S>) -> Fut + Send + 'static,
        Fut: Future<Output = R> + 'static,
    {
        self.enqueue(shard, f).await?.await
    }

    /// Queues `f` for `shard` (waiting while its inbox is full); returns the
    /// wait for its result. A shard starts the jobs from one submitter in
    /// the order they were queued: it spawns each as it takes it from its
    /// inbox (FIFO), and its executor first polls tasks in spawn order. So a
    /// job whose effect happens before its first await (an append taking
    /// its place in a log) takes effect after every job queued before it.
    pub async fn enqueue<R, F, Fut>(&self, shard: ShardId, f: F) -> Result<impl Future<Output = Result<R>> + 'static>
    where
        R: Send + 'static,
        F: FnOnce(Rc<S>) -> Fut + Send + 'static,
        Fut: Future<Output = R> + 'static,
    {
        let inbox = self
            .inboxes
            .get(shard.0)
            .ok_or(EngineError::ShardGone { shard: shard.0 })?;
        let (tx, rx) = async_channel::bounded::<R>(1);
        let job: Job<S> = Box::new(move |service: Rc<S>| {
            Box::pin(async move {
                let r = f(service).await;
                // The submitter may have gone away; then nobody wants the result.
                let _ = tx.send(r).await;
            })
        });
        inbox
            .send(job)
            .await
            .map_err(|_| EngineError::ShardGone { shard: shard.0 })?;
        let gone = shard.0;
        Ok(async move { rx.recv().await.map_err(|_| EngineError::ShardGone { shard: gone }) })
    }

    /// Closes every inbox; each shard finishes its queue and shuts down.
    pub fn close(&self) {
        for inbox in self.inboxes.iter() {
            inbox.close();
        }
    }
}

pub struct ShardRuntime<S> {
    handle: ShardHandle<S>,
    threads: Vec<glommio::ExecutorJoinHandle<()>>,
}

/// Builds a shard's service, on that shard.
pub type InitFn<S> = Arc<dyn Fn(ShardId, ShardHandle<S>) -> Pin<Box<dyn Future<Output = Result<Rc<S>>>>> + Send + Sync>;

impl<S: ShardService> ShardRuntime<S> {
    /// Starts `config.shards` executors and builds each one's service with
    /// `init`. Returns once every shard is serving, or the first init error.
    pub fn start(config: RuntimeConfig, init: InitFn<S>) -> Result<ShardRuntime<S>> {
        assert!(config.shards > 0, "at least one shard");
        assert!(config.inbox_max > 0, "inboxes need room");
        let mut senders = Vec::with_capacity(config.shards);
        let mut receivers = Vec::with_capacity(config.shards);
        for _ in 0..config.shards {
            let (tx, rx) = async_channel::bounded::<Job<S>>(config.inbox_max);
            senders.push(tx);
            receivers.push(rx);
        }
        let handle = ShardHandle {
            inboxes: Arc::new(senders),
        };
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
        let cpus = online_cpus();
        let mut threads = Vec::with_capacity(config.shards);
        for (i, inbox) in receivers.into_iter().enumerate() {
            let placement = match config.pinning.cpu_of(i, cpus) {
                Some(cpu) => Placement::Fixed(cpu),
                None => Placement::Unbound,
            };
            let init = init.clone();
            let handle = handle.clone();
            let ready = ready_tx.clone();
            let pool_bytes = config.io_memory_bytes;
            let thread = LocalExecutorBuilder::new(placement)
                .name(&format!("shard-{i}"))
                .io_memory(config.io_memory_bytes)
                .blocking_thread_pool_placement(glommio::PoolPlacement::Unbound(config.blocking_threads.max(1)))
                .spawn(move || {
                    crate::io_memory::set_pool_bytes(pool_bytes);
                    run_shard(ShardId(i), init, handle, inbox, ready)
                })
                .map_err(|e| EngineError::io("start shard executor", format!("shard-{i}"), e))?;
            threads.push(thread);
        }
        drop(ready_tx);
        let runtime = ShardRuntime { handle, threads };
        for _ in 0..config.shards {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    runtime.stop();
                    return Err(e);
                }
                Err(_) => {
                    runtime.stop();
                    return Err(EngineError::ShardGone { shard: usize::MAX });
                }
            }
        }
        Ok(runtime)
    }

    pub fn handle(&self) -> ShardHandle<S> {
        self.handle.clone()
    }

    /// Closes the inboxes and waits for every shard to shut its service down.
    pub fn stop(self) {
        self.handle.close();
        for t in self.threads {
            if let Err(e) = t.join() {
                tracing::error!(error = %e, "shard thread failed");
            }
        }
    }
}

async fn run_shard<S: ShardService>(
    id: ShardId,
    init: InitFn<S>,
    handle: ShardHandle<S>,
    inbox: async_channel::Receiver<Job<S>>,
    ready: std::sync::mpsc::Sender<Result<()>>,
) {
    let _stall_guard = crate::stall_guard::guard_current_executor(&format!("shard-{}", id.0));
    let service = match init(id, handle).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(shard = %id, error = %e, "shard failed to start");
            let _ = ready.send(Err(e));
            return;
        }
    };
    // The starter may have given up already; the shard still serves.
    let _ = ready.send(Ok(()));
    while let Ok(job) = inbox.recv().await {
        glommio::spawn_local(job(service.clone())).detach();
    }
    service.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    struct Counter {
        id: ShardId,
        hits: Cell<u64>,
    }

    impl ShardService for Counter {
        fn shutdown(self: Rc<Self>) -> LocalFuture {
            Box::pin(async {})
        }
    }

    #[test]
    fn messages_reach_the_owning_shard_from_anywhere() {
        let init: InitFn<Counter> =
            Arc::new(|id, _| Box::pin(async move { Ok(Rc::new(Counter { id, hits: Cell::new(0) })) }));
        let config = RuntimeConfig {
            shards: 3,
            pinning: Pinning::Unpinned,
            inbox_max: 4,
            io_memory_bytes: 1 << 20,
            blocking_threads: 1,
        };
        let rt = ShardRuntime::start(config, init).expect("start");
        let h = rt.handle();
        // From a plain thread.
        let got = futures_lite::future::block_on(async {
            let mut out = Vec::new();
            for round in 0..10u64 {
                for s in 0..3 {
                    let r = h
                        .submit(ShardId(s), move |c: Rc<Counter>| async move {
                            c.hits.set(c.hits.get() + 1);
                            (c.id.0, c.hits.get(), round)
                        })
                        .await
                        .expect("submit");
                    out.push(r);
                }
            }
            out
        });
        assert_eq!(got.len(), 30);
        assert!(got.iter().all(|(s, hits, round)| *hits == round + 1 && *s < 3));
        // From one shard to another.
        let h2 = h.clone();
        let hop = futures_lite::future::block_on(h.submit(ShardId(0), move |_c: Rc<Counter>| async move {
            h2.submit(ShardId(2), |c: Rc<Counter>| async move { c.id.0 }).await
        }))
        .expect("outer");
        assert_eq!(hop.expect("inner"), 2);
        rt.stop();
        let after = futures_lite::future::block_on(h.submit(ShardId(1), |c: Rc<Counter>| async move { c.id.0 }));
        assert!(matches!(after, Err(EngineError::ShardGone { shard: 1 })));
    }
}
