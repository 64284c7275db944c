//! A cluster for tests: a real ZooKeeper (the testkit's) and `ferrite
//! broker` processes configured with Kafka's property names, on free
//! loopback ports, plus the raw requests the tests need.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ferrite_client::codec::{self, MetadataInfo};
use ferrite_client::Connection;
use ferrite_testkit::zookeeper::ZooKeeper;

pub struct ClusterBroker {
    pub id: i32,
    pub port: u16,
    pub dir: tempfile::TempDir,
    pub child: Option<Child>,
    zk: String,
    extra: Vec<String>,
}

impl ClusterBroker {
    pub fn new(id: i32, zk: &str, extra: &[&str]) -> ClusterBroker {
        let mut b = ClusterBroker {
            id,
            port: ferrite_testkit::free_port(),
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
             ferrite.cpu.pinning=none\nreplica.lag.time.max.ms=3000\nreplica.fetch.wait.max.ms=100\n",
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

    /// SIGSTOP: the process stops, its connections and ZooKeeper session
    /// stay open until they time out.
    pub fn pause(&self) {
        let c = self.child.as_ref().expect("running");
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(c.id() as i32, libc::SIGSTOP) };
    }

    pub fn resume(&self) {
        let c = self.child.as_ref().expect("running");
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(c.id() as i32, libc::SIGCONT) };
    }

    /// The bytes of every segment of a partition, oldest first (a segment
    /// deleted while they are read is left out).
    pub fn log_bytes(&self, topic: &str, partition: i32) -> Vec<u8> {
        let dir = self.data_dir().join(format!("{topic}-{partition}"));
        let mut segments: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        segments.retain(|p| p.extension().is_some_and(|e| e == "log"));
        segments.sort();
        let mut out = Vec::new();
        for s in segments {
            match std::fs::read(&s) {
                Ok(bytes) => out.extend(bytes),
                // Deleted since the listing (retention, a truncation):
                // callers that need a settled log wait for one.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => panic!("segment {}: {e}", s.display()),
            }
        }
        out
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
        Cluster::start_on(ZooKeeper::standalone(), n, extra)
    }

    /// `n` brokers on a ZooKeeper the caller started (an ensemble, say).
    pub fn start_on(zk: ZooKeeper, n: i32, extra: &[&str]) -> Cluster {
        let connect = zk.connect_string();
        let brokers = (1..=n).map(|id| ClusterBroker::new(id, &connect, extra)).collect();
        Cluster { zk, brokers }
    }

    /// ZooKeeper and brokers 1..=3, broker `metrics_on` serving its
    /// metrics; the cluster and that broker's metrics port.
    pub fn start_with_metrics_on(metrics_on: i32) -> (Cluster, u16) {
        let zk = ZooKeeper::standalone();
        let connect = zk.connect_string();
        let port = ferrite_testkit::free_port();
        let metrics = format!("ferrite.metrics.listen=127.0.0.1:{port}");
        let brokers = (1..=3)
            .map(|id| {
                let extra: &[&str] = if id == metrics_on { &[&metrics] } else { &[] };
                ClusterBroker::new(id, &connect, extra)
            })
            .collect();
        (Cluster { zk, brokers }, port)
    }

    pub fn broker(&mut self, id: i32) -> &mut ClusterBroker {
        self.brokers.iter_mut().find(|b| b.id == id).expect("broker id")
    }

    /// Broker `id` (one of ours: a leader the metadata names, say).
    pub fn broker_ref(&self, id: i32) -> &ClusterBroker {
        self.brokers.iter().find(|b| b.id == id).expect("a broker of ours")
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

// ---- requests the tests make ----

pub fn metadata(bootstrap: &str, topic: &str) -> Option<MetadataInfo> {
    let mut c = Connection::connect(bootstrap, "cluster-test").ok()?;
    let topics = [topic.to_string()];
    let mut r = c
        .call(3, codec::METADATA_V, |w| codec::metadata(w, Some(&topics)))
        .ok()?;
    codec::decode_metadata(&mut r).ok()
}

/// partition → (leader, ISR size), once every partition of `topic` has a
/// leader.
pub fn partitions_of(bootstrap: &str, topic: &str, partitions: usize) -> Option<Vec<(i32, usize)>> {
    let m = metadata(bootstrap, topic)?;
    let t = m.topics.iter().find(|t| t.name == topic)?;
    if t.error != 0 || t.partitions.len() != partitions {
        return None;
    }
    let mut out = vec![(-1, 0); partitions];
    for p in &t.partitions {
        if p.leader < 0 {
            return None;
        }
        out[p.partition as usize] = (p.leader, p.isr.len());
    }
    Some(out)
}

pub fn leaders_of(bootstrap: &str, topic: &str, partitions: usize) -> Option<Vec<i32>> {
    Some(
        partitions_of(bootstrap, topic, partitions)?
            .into_iter()
            .map(|p| p.0)
            .collect(),
    )
}

pub fn create_topic(bootstrap: &str, name: &str, partitions: i32, rf: i16, configs: &[(&str, &str)]) -> i16 {
    let mut c = Connection::connect(bootstrap, "cluster-test").expect("connect");
    let configs: Vec<(String, String)> = configs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let mut r = c
        .call(19, codec::CREATE_TOPICS_V, |w| {
            codec::create_topics(w, name, partitions, rf, &configs)
        })
        .expect("create topics");
    codec::decode_create_topics(&mut r).expect("decode")[0].1
}

/// CreatePartitions growing `name` to `total`: (error code, message).
pub fn create_partitions(bootstrap: &str, name: &str, total: i32) -> (i16, Option<String>) {
    let mut c = Connection::connect(bootstrap, "cluster-test").expect("connect");
    let mut r = c
        .call(37, codec::CREATE_PARTITIONS_V, |w| {
            codec::create_partitions(w, name, total)
        })
        .expect("create partitions");
    let (_, code, message) = codec::decode_create_partitions(&mut r).expect("decode").swap_remove(0);
    (code, message)
}

pub fn produce(bootstrap: &str, topic: &str, partition: i32, acks: i16, value: &[u8]) -> (i16, i64) {
    let Ok(mut c) = Connection::connect(bootstrap, "cluster-test") else {
        return (-1, -1);
    };
    let batch = ferrite_engine::batch::build_batch(ferrite_engine::Offset(0), ferrite_engine::TimestampMs(1), &[value]);
    match c.call(0, codec::PRODUCE_V, |w| {
        codec::produce(w, acks, 10_000, topic, partition, &batch)
    }) {
        Ok(mut r) => codec::decode_produce(&mut r).unwrap_or((-1, -1)),
        Err(_) => (-1, -1),
    }
}

/// ListOffsets "latest" for one partition: (error code, offset).
pub fn latest_offset(bootstrap: &str, topic: &str, partition: i32) -> (i16, i64) {
    let Ok(mut c) = Connection::connect(bootstrap, "cluster-test") else {
        return (-1, -1);
    };
    let topics = [(topic.to_string(), vec![partition])];
    match c.call(2, codec::LIST_OFFSETS_V, |w| codec::list_offsets(w, -1, &topics)) {
        Ok(mut r) => codec::decode_list_offsets(&mut r)
            .ok()
            .and_then(|l| l.first().map(|p| (p.error, p.offset)))
            .unwrap_or((-1, -1)),
        Err(_) => (-1, -1),
    }
}

/// The log end of the broker's own replica of a partition (ListOffsets
/// from Kafka's debugging replica id, -2, which a follower answers too);
/// `None` if it does not answer one.
pub fn own_log_end(bootstrap: &str, topic: &str, partition: i32) -> Option<i64> {
    let mut c = Connection::connect(bootstrap, "cluster-test").ok()?;
    let topics = [(topic.to_string(), vec![partition])];
    let mut r = c
        .call(2, codec::LIST_OFFSETS_V, |w| codec::list_offsets_as(w, -2, -1, &topics))
        .ok()?;
    let answers = codec::decode_list_offsets(&mut r).ok()?;
    answers.first().filter(|p| p.error == 0).map(|p| p.offset)
}

/// Waits until every broker of `ids` holds the partition's records below
/// `hw` (its own replica's log end reached it).
pub fn wait_replicas_reach(cluster: &Cluster, ids: &[i32], topic: &str, partition: i32, hw: i64) {
    for id in ids {
        let bootstrap = cluster.broker_ref(*id).bootstrap();
        wait_for(
            &format!("broker {id}'s replica to reach {hw}"),
            Duration::from_secs(30),
            || own_log_end(&bootstrap, topic, partition).filter(|end| *end >= hw),
        );
    }
}

/// Every record of partition `partition` from offset 0, as (offset, value);
/// `None` if the broker answers an error (not the leader yet, say).
pub fn try_consume_all(bootstrap: &str, topic: &str, partition: i32) -> Option<Vec<(i64, Vec<u8>)>> {
    let mut c = Connection::connect(bootstrap, "cluster-test").ok()?;
    let mut out = Vec::new();
    let mut at = 0i64;
    loop {
        let mut r = c
            .call(1, codec::FETCH_V, |w| {
                codec::fetch(w, 100, 1 << 20, topic, partition, at)
            })
            .ok()?;
        let fetched = codec::decode_fetch(&mut r).ok()?;
        if fetched.error != 0 {
            return None;
        }
        if fetched.records.is_empty() {
            return Some(out);
        }
        let (batches, _, _) = ferrite_engine::scan::scan_bytes(&fetched.records, ferrite_engine::Offset(0));
        assert!(!batches.is_empty(), "no whole batch in a non-empty fetch");
        for (pos, info) in batches {
            let pos = pos as usize;
            let body = &fetched.records[pos + ferrite_engine::batch::HEADER_BYTES..pos + info.size];
            let records = ferrite_engine::record::decode_records(body, info.record_count).expect("records");
            for rec in records {
                let offset = info.base_offset.0 + i64::from(rec.offset_delta);
                out.push((offset, rec.value.unwrap_or_default().to_vec()));
            }
            at = info.next_offset().0;
        }
    }
}

/// [`try_consume_all`], waiting (20 s at most) for the broker to answer.
pub fn consume_all(bootstrap: &str, topic: &str, partition: i32) -> Vec<(i64, Vec<u8>)> {
    wait_for("a fetch answered without error", Duration::from_secs(20), || {
        try_consume_all(bootstrap, topic, partition)
    })
}

/// The controller's broker id, from ZooKeeper.
pub fn controller_id(cluster: &Cluster) -> i32 {
    let zk = cluster.zk.connect_string();
    wait_for("a controller", Duration::from_secs(20), || {
        with_zk(&zk, async |s| s.controller().await.ok().flatten().map(|c| c.0))
    })
}

pub fn wait_brokers(cluster: &Cluster, n: usize) {
    let first = cluster.brokers[0].bootstrap();
    wait_for("every broker in the metadata", Duration::from_secs(30), || {
        metadata(&first, "none").filter(|m| m.brokers.len() == n)
    });
}

/// FindCoordinator (v2) for `group` on `bootstrap`: (error code, node id);
/// `None` if the broker does not answer.
pub fn find_coordinator(bootstrap: &str, group: &str) -> Option<(i16, i32)> {
    use ferrite_protocol::group_membership::{FindCoordinatorRequest, FindCoordinatorResponse};
    let mut c = Connection::connect(bootstrap, "cluster-test").ok()?;
    let req = FindCoordinatorRequest {
        key: group.to_string(),
        key_type: 0,
    };
    let mut r = c.call(10, 2, |w| req.encode(w, 2)).ok()?;
    let resp = FindCoordinatorResponse::decode(&mut r, 2).ok()?;
    Some((resp.error_code, resp.node_id))
}

/// The coordinator of `group` as the first running broker that names one
/// sees it.
pub fn coordinator_of(cluster: &Cluster, group: &str) -> Option<i32> {
    cluster.brokers.iter().filter(|b| b.is_running()).find_map(|b| {
        find_coordinator(&b.bootstrap(), group)
            .filter(|(e, _)| *e == 0)
            .map(|(_, id)| id)
    })
}

/// A metric summed over the shards of the broker whose metrics listen on
/// `port` (`None` before its first report or when unreachable).
pub fn metric_sum(port: u16, name: &str) -> Option<f64> {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut text = String::new();
    c.read_to_string(&mut text).ok()?;
    let values: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

/// Every partition of `topic` takes an acks=all produce (through its
/// leader): each needs its followers to fetch it.
pub fn acks_all_everywhere(cluster: &Cluster, topic: &str, partitions: usize, value: &[u8]) {
    let first = cluster.brokers[0].bootstrap();
    let leaders = leaders_of(&first, topic, partitions).expect("leaders");
    for (p, leader) in leaders.iter().enumerate() {
        let at = cluster.broker_ref(*leader);
        wait_for("an acks=all produce", Duration::from_secs(20), || {
            (produce(&at.bootstrap(), topic, p as i32, -1, value).0 == 0).then_some(())
        });
    }
}
