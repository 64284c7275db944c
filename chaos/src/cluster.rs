//! The cluster a run injects faults into: three ZooKeeper servers and
//! `ferrite broker` processes, each node on its own loopback address and
//! running as its own user (see [`crate::net`]), all in the run's network
//! namespace.
//!
//! Node numbers: ZooKeeper server `i` is `11 + i` (127.0.0.11, …), broker
//! `i` is `21 + i` (127.0.0.21, …), broker id `i + 1`. Every broker listens
//! on port 9092 of its own address; every ZooKeeper server on 2181.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ferrite_testkit::zookeeper::{ZkPlace, ZooKeeper};

use crate::clock::FakeClock;
use crate::disk::OwnDisk;
use crate::error::ChaosError;
use crate::fault::Node;
use crate::net::{self, NodeNumber};

pub const BROKER_PORT: u16 = 9092;
pub const ZK_SERVERS: usize = 3;
/// Small segments, so that a run rolls many (under every fault) and has
/// closed segments for bit rot to hit.
pub const SEGMENT_BYTES: u64 = 16 << 10;
/// The brokers' scrubbers start a pass this long after the last.
pub const SCRUB_INTERVAL_MS: u64 = 1_000;
/// The ZooKeeper session timeout the brokers ask for.
pub const ZK_SESSION_TIMEOUT: Duration = Duration::from_secs(6);

pub fn zk_number(i: usize) -> NodeNumber {
    11 + i as NodeNumber
}

pub fn broker_number(i: usize) -> NodeNumber {
    21 + i as NodeNumber
}

pub fn number(node: Node) -> NodeNumber {
    match node {
        Node::Zk(i) => zk_number(i),
        Node::Broker(i) => broker_number(i),
    }
}

/// What a run's brokers need besides their processes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// Each broker's data directory on a small disk of its own
    /// ([`crate::disk`]).
    pub own_disks: bool,
    /// Each broker's wall clock stepped at will ([`crate::clock`]).
    pub fake_clocks: bool,
}

/// One `ferrite broker` process.
pub struct Broker {
    pub index: usize,
    dir: PathBuf,
    child: Option<Child>,
    clock: Option<FakeClock>,
}

impl Broker {
    pub fn id(&self) -> i32 {
        self.index as i32 + 1
    }

    pub fn bootstrap(&self) -> String {
        format!("{}:{BROKER_PORT}", net::address(broker_number(self.index)))
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("broker.log")
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn spawn(&mut self, ferrite: &Path) -> Result<(), ChaosError> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(io("open broker.log"))?;
        let uid = net::uid(broker_number(self.index));
        let mut command = Command::new(ferrite);
        if let Some(clock) = &self.clock {
            command.envs(clock.env());
        }
        let child = command
            .arg("broker")
            .arg("--config")
            .arg(self.dir.join("server.properties"))
            .env("FERRITE_LOG", "info")
            .uid(uid)
            .gid(uid)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(io("spawn ferrite broker"))?;
        self.child = Some(child);
        Ok(())
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }
}

/// ZooKeeper and the brokers.
pub struct Cluster {
    pub zk: ZooKeeper,
    pub brokers: Vec<Broker>,
    ferrite: PathBuf,
    /// Holds every broker's directory; removed on drop unless the
    /// environment has `FERRITE_CHAOS_KEEP`.
    root: Option<tempfile::TempDir>,
    /// The brokers' own disks, by broker index (none unless asked for).
    /// Dropped (unmounted) after the brokers are killed.
    disks: Vec<OwnDisk>,
}

impl Cluster {
    /// Starts the ensemble, then `brokers` brokers with `extra` properties
    /// and what `needs` asks for, and waits until every broker listens.
    pub fn start(ferrite: &Path, brokers: usize, extra: &[String], needs: Needs) -> Result<Cluster, ChaosError> {
        let places: Vec<ZkPlace> = (0..ZK_SERVERS)
            .map(|i| ZkPlace {
                host: net::address(zk_number(i)),
                client_port: 2181,
                quorum_port: 2888,
                election_port: 3888,
            })
            .collect();
        let uids: Vec<Option<u32>> = (0..ZK_SERVERS).map(|i| Some(net::uid(zk_number(i)))).collect();
        let zk = ZooKeeper::ensemble_at(&places, &uids);
        let root = tempfile::Builder::new()
            .prefix("ferrite-chaos.")
            .tempdir()
            .map_err(|source| ChaosError::Io { op: "tempdir", source })?;
        // The brokers run as users of their own: they must get through.
        let open = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(root.path(), open).map_err(|source| ChaosError::Io { op: "chmod", source })?;
        let mut cluster = Cluster {
            zk,
            brokers: Vec::new(),
            ferrite: ferrite.to_path_buf(),
            root: Some(root),
            disks: Vec::new(),
        };
        let connect = cluster.zk.connect_string();
        for index in 0..brokers {
            let dir = cluster.root_path().join(format!("broker-{}", index + 1));
            let mut broker = Broker {
                index,
                dir,
                child: None,
                clock: None,
            };
            write_config(&broker, &connect, extra)?;
            if needs.fake_clocks {
                broker.clock = Some(FakeClock::create(&broker.dir.join("clock"))?);
            }
            if needs.own_disks {
                let image = cluster.root_path().join(format!("broker-{}.img", index + 1));
                let uid = net::uid(broker_number(index));
                cluster.disks.push(OwnDisk::create(&image, &broker.data_dir(), uid)?);
            }
            cluster.brokers.push(broker);
        }
        for index in 0..brokers {
            cluster.start_broker(index)?;
        }
        Ok(cluster)
    }

    /// Starts broker `index` and waits until it listens.
    pub fn start_broker(&mut self, index: usize) -> Result<(), ChaosError> {
        let ferrite = self.ferrite.clone();
        let b = &mut self.brokers[index];
        b.spawn(&ferrite)?;
        let addr = b.bootstrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(&addr).is_err() {
            if let Some(status) = b.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                b.child = None;
                return Err(ChaosError::Cluster(format!(
                    "broker {} exited with {status}:\n{}",
                    b.id(),
                    tail(&b.log_text())
                )));
            }
            if Instant::now() > deadline {
                return Err(ChaosError::Cluster(format!("broker {} did not listen", b.id())));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    pub fn kill(&mut self, node: Node) {
        match node {
            Node::Broker(i) => self.brokers[i].kill(),
            Node::Zk(i) => self.zk.servers[i].stop(),
        }
    }

    pub fn restart(&mut self, node: Node) -> Result<(), ChaosError> {
        match node {
            Node::Broker(i) => self.start_broker(i),
            Node::Zk(i) => {
                self.zk.servers[i].start();
                Ok(())
            }
        }
    }

    /// Sends `signal` to the node's process, if it runs.
    pub fn signal(&self, node: Node, signal: i32) {
        let pid = match node {
            Node::Broker(i) => self.brokers[i].pid(),
            Node::Zk(i) => self.zk.servers[i].pid(),
        };
        if let Some(pid) = pid {
            // SAFETY: kill(2) on a child process of ours that has not been
            // waited for (its pid cannot have been reused).
            unsafe { libc::kill(pid as i32, signal) };
        }
    }

    /// Steps broker `node`'s wall clock to `offset_s` seconds from true
    /// time.
    pub fn step_clock(&self, node: Node, offset_s: i64) -> Result<(), ChaosError> {
        let clock = match node {
            Node::Broker(i) => self.brokers[i].clock.as_ref(),
            Node::Zk(_) => None,
        };
        let clock =
            clock.ok_or_else(|| ChaosError::Cluster(format!("{node:?} has no clock to step (the run made none)")))?;
        clock.set_offset_s(offset_s)
    }

    /// Fills `node`'s own disk; returns the bytes it took.
    pub fn fill_disk(&self, node: Node) -> Result<u64, ChaosError> {
        self.disk(node)?.fill()
    }

    /// Gives `node`'s own disk its room back.
    pub fn free_disk(&self, node: Node) -> Result<(), ChaosError> {
        self.disk(node)?.free()
    }

    fn disk(&self, node: Node) -> Result<&OwnDisk, ChaosError> {
        let Node::Broker(i) = node else {
            return Err(ChaosError::Cluster(format!("{node:?} has no disk of its own")));
        };
        self.disks
            .get(i)
            .ok_or_else(|| ChaosError::Cluster(format!("{node:?} has no disk of its own (the run made none)")))
    }

    /// Changes the last byte of the first batch of the newest closed
    /// segment of `node`'s replica of `topic`-`partition` (a CRC-covered
    /// byte: the batch's last record). Returns the file and position;
    /// `None` when the replica has no closed segment, or the node is not a
    /// broker.
    pub fn rot(&self, node: Node, topic: &str, partition: i32) -> Result<Option<(PathBuf, u64)>, ChaosError> {
        let Node::Broker(i) = node else { return Ok(None) };
        let dir = self.brokers[i].data_dir().join(format!("{topic}-{partition}"));
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(io("list the partition's segments"))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .collect();
        files.sort();
        let Some(file) = files.len().checked_sub(2).map(|n| files[n].clone()) else {
            return Ok(None);
        };
        let mut head = [0u8; ferrite_engine::batch::HEADER_BYTES];
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&file)
            .map_err(io("open a segment to rot"))?;
        use std::os::unix::fs::FileExt;
        f.read_exact_at(&mut head, 0).map_err(io("read a batch header"))?;
        let Ok(info) = ferrite_engine::batch::peek(&head) else {
            return Ok(None);
        };
        let at = info.size as u64 - 1;
        let mut byte = [0u8; 1];
        f.read_exact_at(&mut byte, at).map_err(io("read the byte to rot"))?;
        f.write_all_at(&[byte[0] ^ 0x10], at).map_err(io("rot a byte"))?;
        f.sync_all().map_err(io("sync the rotted segment"))?;
        Ok(Some((file, at)))
    }

    fn root_path(&self) -> PathBuf {
        self.root.as_ref().map(|r| r.path().to_path_buf()).unwrap_or_default()
    }

    pub fn bootstrap(&self) -> Vec<String> {
        self.brokers.iter().map(Broker::bootstrap).collect()
    }
}

/// Every node's number in a cluster of `brokers` brokers, for the firewall.
pub fn node_numbers(brokers: usize) -> Vec<NodeNumber> {
    let zk = (0..ZK_SERVERS).map(zk_number);
    zk.chain((0..brokers).map(broker_number)).collect()
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for b in &mut self.brokers {
            // A paused broker must be resumed to die quickly and cleanly.
            if let Some(pid) = b.pid() {
                // SAFETY: as in `signal`.
                unsafe { libc::kill(pid as i32, libc::SIGCONT) };
            }
            b.kill();
        }
        if std::env::var_os("FERRITE_CHAOS_KEEP").is_none() {
            return;
        }
        if let Some(root) = self.root.take() {
            let root = root.keep();
            eprintln!("ferrite-chaos: keeping {} (FERRITE_CHAOS_KEEP)", root.display());
            for (i, z) in self.zk.servers.iter().enumerate() {
                let _ = std::fs::copy(z.dir.path().join("server.log"), root.join(format!("zk-{}.log", i + 1)));
            }
        }
    }
}

fn write_config(b: &Broker, zk_connect: &str, extra: &[String]) -> Result<(), ChaosError> {
    std::fs::create_dir_all(b.data_dir()).map_err(io("create the broker's data dir"))?;
    let mut props = format!(
        "broker.id={}\nlisteners=PLAINTEXT://{}\nlog.dirs={}\nzookeeper.connect={zk_connect}\n\
         zookeeper.session.timeout.ms={}\nferrite.shards=1\nferrite.cpu.pinning=none\n\
         replica.lag.time.max.ms=4000\nreplica.fetch.wait.max.ms=200\n\
         log.segment.bytes={SEGMENT_BYTES}\nferrite.scrub.interval.ms={SCRUB_INTERVAL_MS}\n",
        b.id(),
        b.bootstrap(),
        b.data_dir().display(),
        ZK_SESSION_TIMEOUT.as_millis(),
    );
    for e in extra {
        props.push_str(e);
        props.push('\n');
    }
    std::fs::write(b.dir.join("server.properties"), props).map_err(io("write server.properties"))?;
    let uid = net::uid(broker_number(b.index));
    for p in [b.dir.clone(), b.data_dir(), b.dir.join("server.properties")] {
        std::os::unix::fs::chown(&p, Some(uid), Some(uid)).map_err(io("chown the broker's files"))?;
    }
    Ok(())
}

/// An I/O error's context, for `map_err`.
fn io(op: &'static str) -> impl FnOnce(std::io::Error) -> ChaosError {
    move |source| ChaosError::Io { op, source }
}

/// The last lines of a log, for an error.
pub fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
