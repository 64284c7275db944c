//! `ferrite` processes the cluster benchmarks start themselves, and what
//! they read of them from `/proc` (resident memory, CPU time, open
//! descriptors).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ferrite_client::{codec, Connection};

/// How a benchmark broker runs.
#[derive(Clone, Debug)]
pub enum Role {
    /// `ferrite standalone`: embedded metadata.
    Standalone,
    /// `ferrite broker` on ZooKeeper.
    Clustered { id: i32, zookeeper: String },
}

/// A `ferrite` child process, killed when dropped.
pub struct BrokerProcess {
    child: Child,
    ferrite: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    pub port: u16,
}

impl BrokerProcess {
    /// Starts a broker listening on 127.0.0.1:`port` with its data and its
    /// log (`broker.log`) under `dir`, and `extra` as further broker
    /// properties (`server.properties` lines in a cluster, `--override`s
    /// standalone).
    pub fn start(
        ferrite: &Path,
        role: &Role,
        port: u16,
        dir: &Path,
        extra: &[String],
    ) -> std::io::Result<BrokerProcess> {
        std::fs::create_dir_all(dir)?;
        let mut props = format!(
            "listeners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={}\nferrite.cpu.pinning=none\n",
            dir.join("data").display()
        );
        if let Role::Clustered { id, zookeeper } = role {
            props.push_str(&format!(
                "broker.id={id}\nzookeeper.connect={zookeeper}\nzookeeper.session.timeout.ms=10000\n\
                 auto.leader.rebalance.enable=false\n"
            ));
        }
        for line in extra {
            props.push_str(line);
            props.push('\n');
        }
        let args = match role {
            Role::Standalone => vec![
                "standalone".to_string(),
                "--listen".to_string(),
                format!("127.0.0.1:{port}"),
                "--data-dir".to_string(),
                dir.join("data").display().to_string(),
            ]
            .into_iter()
            .chain(extra.iter().flat_map(|l| ["--override".to_string(), l.clone()]))
            .collect(),
            Role::Clustered { .. } => {
                let config = dir.join("server.properties");
                std::fs::write(&config, props)?;
                vec![
                    "broker".to_string(),
                    "--config".to_string(),
                    config.display().to_string(),
                ]
            }
        };
        let log = dir.join("broker.log");
        let child = spawn(ferrite, &args, &log)?;
        Ok(BrokerProcess {
            child,
            ferrite: ferrite.to_path_buf(),
            args,
            log,
            port,
        })
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the process (SIGTERM and a wait for its exit when `graceful`,
    /// SIGKILL otherwise) and starts it again with the same arguments.
    pub fn restart(&mut self, graceful: bool) -> std::io::Result<()> {
        let signal = if graceful { libc::SIGTERM } else { libc::SIGKILL };
        // SAFETY: kill(2) on our own child's pid, which has not been waited
        // for yet (so it cannot have been reused).
        unsafe { libc::kill(self.child.id() as i32, signal) };
        self.child.wait()?;
        self.child = spawn(&self.ferrite, &self.args, &self.log)?;
        Ok(())
    }

    /// Resident memory, MiB.
    pub fn rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    }

    /// Open descriptors.
    pub fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid())).map_or(0, |d| d.count())
    }

    /// User plus system CPU time so far, seconds.
    pub fn cpu_seconds(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap_or_default();
        // The fields after the command name (which may hold spaces) start
        // at the state, field 3; utime and stime are fields 14 and 15.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: f64 = [11, 12]
            .iter()
            .filter_map(|i| fields.get(*i)?.parse::<f64>().ok())
            .sum();
        // SAFETY: sysconf has no preconditions.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        ticks / per_second
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(ferrite: &Path, args: &[String], log: &Path) -> std::io::Result<Child> {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(log)?;
    Command::new(ferrite)
        .args(args)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
}

/// Waits (60 s at most) until `bootstrap`'s metadata lists `n` brokers.
pub fn wait_for_brokers(bootstrap: &str, n: usize) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let seen = Connection::connect(bootstrap, "ferrite-bench")
            .ok()
            .and_then(|mut c| {
                let mut r = c.call(3, codec::METADATA_V, |w| codec::metadata(w, Some(&[]))).ok()?;
                codec::decode_metadata(&mut r).ok()
            })
            .map_or(0, |m| m.brokers.len());
        if seen >= n {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{seen} of {n} brokers registered after 60 s"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Each process's CPU share (percent of one core) over `period`.
pub fn cpu_percent(brokers: &[BrokerProcess], period: Duration) -> Vec<f64> {
    let before: Vec<f64> = brokers.iter().map(BrokerProcess::cpu_seconds).collect();
    std::thread::sleep(period);
    brokers
        .iter()
        .zip(before)
        .map(|(b, was)| ((b.cpu_seconds() - was) / period.as_secs_f64() * 1000.0).round() / 10.0)
        .collect()
}
