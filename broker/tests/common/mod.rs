//! A `ferrite standalone` process for tests, and a raw Kafka client built on
//! the `kafka-protocol` crate (encoding requests, decoding responses).
#![allow(dead_code)]

pub mod cluster;
pub mod secure;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

pub struct Broker {
    pub child: Option<Child>,
    pub port: u16,
    pub dir: tempfile::TempDir,
    pub overrides: Vec<String>,
    pub log: PathBuf,
}

impl Broker {
    pub fn start(overrides: &[&str]) -> Broker {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut b = Broker {
            child: None,
            port: ferrite_testkit::free_port(),
            log: dir.path().join("broker.log"),
            dir,
            overrides: overrides.iter().map(|s| s.to_string()).collect(),
        };
        // A port handed out by free_port can be taken again before the
        // broker binds it (another test's broker or client): the broker
        // then refuses to start, and another port is tried.
        for _ in 0..5 {
            match b.try_spawn() {
                Ok(()) => return b,
                Err(log) if log.contains("is another broker running there") => {
                    b.port = ferrite_testkit::free_port();
                }
                Err(log) => panic!("ferrite exited: {log}"),
            }
        }
        panic!("no free port for ferrite in 5 tries: {}", b.log_text())
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn spawn(&mut self) {
        if let Err(log) = self.try_spawn() {
            panic!("ferrite exited: {log}");
        }
    }

    /// Starts the broker and waits until it answers; `Err` with its log if
    /// it exited instead.
    fn try_spawn(&mut self) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferrite"));
        cmd.arg("standalone")
            .arg("--listen")
            .arg(self.bootstrap())
            .arg("--data-dir")
            .arg(self.data_dir())
            .arg("--shards")
            .arg("2");
        // `{PORT}` in an override is the broker's (primary) port.
        for o in &self.overrides {
            cmd.arg("--override").arg(o.replace("{PORT}", &self.port.to_string()));
        }
        let child = cmd.stdout(Stdio::null()).stderr(log).spawn().expect("spawn ferrite");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            // Ready means answering a request, not only accepting a
            // connection (connections made during start-up were seen reset).
            if let Ok(probe) = TcpStream::connect(self.addr()) {
                let mut c = Client {
                    stream: probe,
                    correlation: 0,
                    awaiting: Default::default(),
                };
                c.stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
                let probe = c.frame(&kafka_protocol::messages::ApiVersionsRequest::default(), 0);
                if c.send_raw(&probe).is_ok() {
                    c.awaiting.push_back(c.correlation);
                    if c.response::<kafka_protocol::messages::ApiVersionsRequest>(0).is_some() {
                        return Ok(());
                    }
                }
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                self.child = None;
                return Err(format!("{status}: {}", self.log_text()));
            }
            assert!(
                Instant::now() < deadline,
                "ferrite did not listen in time: {}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait for a clean exit.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let status = c.wait().expect("wait");
            assert!(status.success(), "ferrite exited with {status}: {}", self.log_text());
        }
    }

    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill9();
        if std::thread::panicking() {
            eprintln!("--- ferrite log ---\n{}", self.log_text());
        }
    }
}

pub fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

/// A blocking Kafka connection.
pub struct Client {
    pub stream: TcpStream,
    correlation: i32,
    /// Correlation ids sent and not yet answered, oldest first: responses
    /// must come back in this order.
    awaiting: std::collections::VecDeque<i32>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        Client {
            stream,
            correlation: 0,
            awaiting: Default::default(),
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Reads one response frame; `None` if the broker closed the connection.
    pub fn read_frame(&mut self) -> Option<Bytes> {
        let mut size = [0u8; 4];
        if let Err(e) = self.stream.read_exact(&mut size) {
            eprintln!("reading a response size: {e}");
            return None;
        }
        let mut buf = vec![0u8; i32::from_be_bytes(size) as usize];
        if let Err(e) = self.stream.read_exact(&mut buf) {
            eprintln!("reading a {}-byte response: {e}", buf.len());
            return None;
        }
        Some(Bytes::from(buf))
    }

    /// True when the broker has closed the connection.
    pub fn is_closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.stream.read(&mut b), Ok(0) | Err(_))
    }

    pub fn frame<R: Encodable + HeaderVersion + Request>(&mut self, req: &R, version: i16) -> Vec<u8> {
        self.correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(s("ferrite-test")));
        let mut body = BytesMut::new();
        header.encode(&mut body, R::header_version(version)).expect("header");
        req.encode(&mut body, version).expect("body");
        let mut out = (body.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&body);
        out
    }

    pub fn send<R: Encodable + HeaderVersion + Request>(&mut self, req: &R, version: i16) {
        let f = self.frame(req, version);
        self.send_raw(&f).expect("send");
        self.awaiting.push_back(self.correlation);
    }

    pub fn call<R>(&mut self, req: &R, version: i16) -> R::Response
    where
        R: Encodable + HeaderVersion + Request,
        R::Response: Decodable + HeaderVersion,
    {
        self.send(req, version);
        self.response::<R>(version).expect("response")
    }

    pub fn response<R>(&mut self, version: i16) -> Option<R::Response>
    where
        R: Request,
        R::Response: Decodable + HeaderVersion,
    {
        let mut frame = self.read_frame()?;
        let header = ResponseHeader::decode(&mut frame, R::Response::header_version(version)).expect("header");
        let expected = self.awaiting.pop_front().unwrap_or(self.correlation);
        assert_eq!(header.correlation_id, expected, "responses out of order");
        Some(R::Response::decode(&mut frame, version).expect("decode response"))
    }
}

/// A partition directory's segment files, oldest first.
pub fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("partition dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    files
}

/// Runs one of `tests/python/`'s scripts with `args` under `FERRITE_PYTHON`
/// (set by `scripts/test.sh`); fails the test, with its output and the
/// broker's log, unless it exits 0 having printed "all ok". Returns its
/// standard output.
pub fn run_python_script(b: &Broker, script: &str, args: &[&str]) -> String {
    let python = std::env::var("FERRITE_PYTHON").unwrap_or_else(|_| "python3".into());
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python").join(script);
    let out = Command::new(&python)
        .arg(&path)
        .arg(b.bootstrap())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e} (run scripts/test.sh, or set FERRITE_PYTHON)"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("all ok"),
        "{script} {args:?} failed ({}):\n{stdout}\n{}\nbroker log:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        b.log_text()
    );
    stdout.into_owned()
}
