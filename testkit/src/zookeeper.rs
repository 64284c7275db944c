//! Real ZooKeeper servers for tests: Debian's `zookeeper` package run as
//! `java … QuorumPeerMain <cfg>` in a temporary directory, on free loopback
//! ports. `scripts/test.sh` installs the package when it is missing; without
//! it these fixtures panic with the command to run, rather than skip.
//!
//! Each server is a child process of the test; dropping the fixture kills
//! it (SIGKILL) and removes its directory. Nothing else is touched.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::free_port;

/// Where Debian puts the server classes.
const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
const CONF_DIR: &str = "/etc/zookeeper/conf";
/// slf4j's simple logger (Debian's libslf4j-java, which the zookeeper package
/// pulls in): without a binding on the class path the server logs nothing,
/// and a failing ensemble test would have no server side to read.
const SLF4J_SIMPLE_JAR: &str = "/usr/share/java/slf4j-simple.jar";

/// How much of a server's log a failing test prints.
const LOG_TAIL_LINES: usize = 60;

/// How long a server may take to answer after it starts.
const START_TIMEOUT: Duration = Duration::from_secs(60);

fn require_installed() {
    assert!(
        std::path::Path::new(ZOOKEEPER_JAR).exists(),
        "ZooKeeper is not installed: run `apt-get install -y zookeeper` (scripts/test.sh does)"
    );
}

/// Where a server listens: its address (127.0.0.0/8), its client port and
/// its quorum and election ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZkPlace {
    pub host: Ipv4Addr,
    pub client_port: u16,
    pub quorum_port: u16,
    pub election_port: u16,
}

impl ZkPlace {
    /// On 127.0.0.1, at free ports.
    pub fn free() -> ZkPlace {
        ZkPlace {
            host: Ipv4Addr::LOCALHOST,
            client_port: free_port(),
            quorum_port: free_port(),
            election_port: free_port(),
        }
    }
}

/// One server of a standalone setup or an ensemble.
pub struct ZkServer {
    pub host: Ipv4Addr,
    pub client_port: u16,
    pub dir: tempfile::TempDir,
    config: PathBuf,
    child: Option<Child>,
    /// The user the server runs as (its files are chowned to it); `None`:
    /// the test's own.
    uid: Option<u32>,
}

impl ZkServer {
    fn configure(myid: Option<usize>, peers: &[ZkPlace], place: ZkPlace, uid: Option<u32>) -> ZkServer {
        require_installed();
        let client_port = place.client_port;
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).expect("data dir");
        let mut cfg = format!(
            "tickTime=500\ninitLimit=20\nsyncLimit=10\ndataDir={}\nclientPort={client_port}\n\
             clientPortAddress={}\nadmin.enableServer=false\nminSessionTimeout=1000\n\
             maxSessionTimeout=60000\n4lw.commands.whitelist=ruok,srvr\n",
            data.display(),
            place.host
        );
        if let Some(id) = myid {
            std::fs::write(data.join("myid"), format!("{id}\n")).expect("myid");
            for (i, p) in peers.iter().enumerate() {
                let (host, quorum, election) = (p.host, p.quorum_port, p.election_port);
                cfg.push_str(&format!("server.{}={host}:{quorum}:{election}\n", i + 1));
            }
        }
        let config = dir.path().join("zoo.cfg");
        std::fs::write(&config, cfg).expect("zoo.cfg");
        if let Some(uid) = uid {
            for p in [dir.path(), &data, &data.join("myid"), &config] {
                if p.exists() {
                    std::os::unix::fs::chown(p, Some(uid), Some(uid)).expect("chown");
                }
            }
        }
        ZkServer {
            host: place.host,
            client_port,
            dir,
            config,
            child: None,
            uid,
        }
    }

    /// Starts (or restarts) the server process.
    pub fn start(&mut self) {
        assert!(self.child.is_none(), "already running");
        let log = std::fs::File::create(self.dir.path().join("server.log")).expect("log");
        let mut classpath = format!("{CONF_DIR}:{ZOOKEEPER_JAR}");
        if std::path::Path::new(SLF4J_SIMPLE_JAR).exists() {
            classpath.push(':');
            classpath.push_str(SLF4J_SIMPLE_JAR);
        }
        let mut command = Command::new("java");
        if let Some(uid) = self.uid {
            command.uid(uid).gid(uid);
        }
        let child = command
            .args([
                "-Xmx256m",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
                "-cp",
                &classpath,
                "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            ])
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("spawn java (is a JRE installed?)");
        self.child = Some(child);
    }

    /// Kills the server (SIGKILL) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// The server process's id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((self.host, self.client_port))
    }

    /// Whether the server answers `srvr` as a leader, follower or standalone
    /// server (that is, it serves clients).
    pub fn serving(&self) -> bool {
        let Ok(mut s) = TcpStream::connect_timeout(&self.addr(), Duration::from_millis(500)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.write_all(b"srvr").is_err() {
            return false;
        }
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out.contains("Mode: ")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for ZkServer {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(LOG_TAIL_LINES).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            eprintln!(
                "--- ZooKeeper server on port {} (last {} lines) ---\n{}",
                self.client_port,
                tail.len(),
                tail.join("\n")
            );
        }
    }
}

/// A ZooKeeper of one server or of three.
pub struct ZooKeeper {
    pub servers: Vec<ZkServer>,
}

impl ZooKeeper {
    /// One standalone server, serving when this returns.
    pub fn standalone() -> ZooKeeper {
        let mut server = ZkServer::configure(None, &[], ZkPlace::free(), None);
        server.start();
        let zk = ZooKeeper { servers: vec![server] };
        zk.wait_serving(1);
        zk
    }

    /// An ensemble of three servers, with a quorum when this returns.
    pub fn ensemble() -> ZooKeeper {
        let places: Vec<ZkPlace> = (0..3).map(|_| ZkPlace::free()).collect();
        ZooKeeper::ensemble_at(&places, &[None, None, None])
    }

    /// An ensemble of one server at each of `places`, server i running as
    /// `uids[i]`, with a quorum when this returns.
    pub fn ensemble_at(places: &[ZkPlace], uids: &[Option<u32>]) -> ZooKeeper {
        assert_eq!(places.len(), uids.len(), "one user per server");
        let mut servers: Vec<ZkServer> = (0..places.len())
            .map(|i| ZkServer::configure(Some(i + 1), places, places[i], uids[i]))
            .collect();
        for s in &mut servers {
            s.start();
        }
        let zk = ZooKeeper { servers };
        zk.wait_serving(places.len());
        zk
    }

    /// The connect string: every server, comma separated.
    pub fn connect_string(&self) -> String {
        let addrs: Vec<String> = self
            .servers
            .iter()
            .map(|s| format!("{}:{}", s.host, s.client_port))
            .collect();
        addrs.join(",")
    }

    /// Waits until at least `n` servers serve clients.
    pub fn wait_serving(&self, n: usize) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let serving = self.servers.iter().filter(|s| s.is_running() && s.serving()).count();
            if serving >= n {
                return;
            }
            if Instant::now() > deadline {
                let logs: Vec<String> = self.servers.iter().map(|s| s.log()).collect();
                panic!("ZooKeeper: {serving} of {n} servers serving after {START_TIMEOUT:?}; logs:\n{logs:#?}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
