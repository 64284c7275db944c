//! A cluster for tests: a real ZooKeeper (the testkit's) and `ferrite
//! broker` processes configured with Kafka's property names, on free
//! loopback ports, plus the raw requests the tests need.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ferrite_testkit::zookeeper::ZooKeeper;

pub struct ClusterBroker {
    pub id: i32,
    pub port: u16,
    pub dir: tempfile::TempDir,
    pub child: Option<Child>,
    zk: String,
    extra: Vec<String>,
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

impl ClusterBroker {
    pub fn new(id: i32, zk: &str, extra: &[&str]) -> ClusterBroker {
        let mut b = ClusterBroker {
            id,
            port: free_port(),
            dir: tempfile::tempdir().expect("tempdir"),
            child: None,
            zk: zk.to_string(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        b.spawn();
        b
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("broker.log")
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    pub fn spawn(&mut self) {
        let mut props = format!(
            "broker.id={}\nlisteners=PLAINTEXT://127.0.0.1:{}\nlog.dirs={}\nzookeeper.connect={}\n\
             zookeeper.session.timeout.ms=4000\nferrite.shards=1\nlog.write.mode=buffered\n\
             replica.lag.time.max.ms=3000\nreplica.fetch.wait.max.ms=100\n",
            self.id,
            self.port,
            self.data_dir().display(),
            self.zk
        );
        for e in &self.extra {
            props.push_str(e);
            props.push('\n');
        }
        let config = self.dir.path().join("server.properties");
        std::fs::write(&config, props).expect("server.properties");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("log");
        let child = Command::new(env!("CARGO_BIN_EXE_ferrite"))
            .arg("broker")
            .arg("--config")
            .arg(&config)
            .env("FERRITE_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn ferrite broker");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(self.addr()).is_err() {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("broker {} exited with {status}: {}", self.id, self.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "broker {} did not listen: {}",
                self.id,
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait for the exit status.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("running");
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        c.wait().expect("wait")
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }
}

impl Drop for ClusterBroker {
    fn drop(&mut self) {
        self.kill9();
        if std::thread::panicking() {
            eprintln!("--- broker {} log ---\n{}", self.id, self.log_text());
        }
    }
}

pub struct Cluster {
    pub zk: ZooKeeper,
    pub brokers: Vec<ClusterBroker>,
}

impl Cluster {
    /// ZooKeeper and `n` brokers with ids 1..=n.
    pub fn start(n: i32, extra: &[&str]) -> Cluster {
        let zk = ZooKeeper::standalone();
        let connect = zk.connect_string();
        let brokers = (1..=n).map(|id| ClusterBroker::new(id, &connect, extra)).collect();
        Cluster { zk, brokers }
    }

    pub fn broker(&mut self, id: i32) -> &mut ClusterBroker {
        self.brokers.iter_mut().find(|b| b.id == id).expect("broker id")
    }

    /// Every running broker's bootstrap address, comma separated.
    pub fn bootstrap(&self) -> String {
        let v: Vec<String> = self
            .brokers
            .iter()
            .filter(|b| b.is_running())
            .map(|b| b.bootstrap())
            .collect();
        v.join(",")
    }
}

/// Cluster tests run one at a time: each starts ZooKeeper and three
/// brokers on a two-core machine.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `f` against the ZooKeeper store of `connect` on a fresh runtime.
pub fn with_zk<T>(connect: &str, f: impl AsyncFnOnce(&ferrite_controller::zk::ZkStore) -> T) -> T {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let store = ferrite_controller::zk::ZkStore::connect(connect, Duration::from_secs(10))
            .await
            .expect("connect to ZooKeeper");
        f(&store).await
    })
}

/// Polls `f` every 100 ms until it returns `Some`, or panics after `limit`.
pub fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
