//! Helpers of the secured-listener tests (`tls.rs`, `sasl.rs`): kcat with
//! TLS and SASL settings, the Python clients' script, a metric by label.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// How kcat reaches a secured listener.
#[derive(Default)]
pub struct Secured<'a> {
    /// The CA to trust (the listener speaks TLS).
    pub ca: Option<&'a Path>,
    /// A client certificate and key.
    pub cert: Option<(&'a Path, &'a Path)>,
    /// SASL: (mechanism, user, password).
    pub sasl: Option<(&'a str, &'a str, &'a str)>,
}

impl Secured<'_> {
    fn protocol(&self) -> &'static str {
        match (self.ca.is_some(), self.sasl.is_some()) {
            (true, true) => "sasl_ssl",
            (true, false) => "ssl",
            (false, true) => "sasl_plaintext",
            (false, false) => "plaintext",
        }
    }
}

/// kcat on `port` with `how` and `args`, `input` on its stdin: whether it
/// succeeded, its stdout and its stderr.
pub fn kcat(how: &Secured, port: u16, args: &[&str], input: &[u8]) -> (bool, String, String) {
    let mut cmd = Command::new("kcat");
    cmd.arg("-b")
        .arg(format!("127.0.0.1:{port}"))
        .arg("-X")
        .arg(format!("security.protocol={}", how.protocol()));
    let mut set = |kv: String| {
        cmd.arg("-X").arg(kv);
    };
    if let Some(ca) = how.ca {
        set(format!("ssl.ca.location={}", ca.display()));
    }
    if let Some((cert, key)) = how.cert {
        set(format!("ssl.certificate.location={}", cert.display()));
        set(format!("ssl.key.location={}", key.display()));
    }
    if let Some((mechanism, user, password)) = how.sasl {
        set(format!("sasl.mechanism={mechanism}"));
        set(format!("sasl.username={user}"));
        set(format!("sasl.password={password}"));
    }
    let mut child = cmd
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat (apt install kcat; scripts/test.sh does)");
    child.stdin.take().expect("stdin").write_all(input).expect("kcat stdin");
    let out = child.wait_with_output().expect("kcat");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `tests/python/tls.py` with `args`; panics unless it says "all ok".
pub fn python(args: &[&str]) {
    let python = std::env::var("FERRITE_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/tls.py");
    let out = Command::new(&python)
        .arg(script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e} (run scripts/test.sh, or set FERRITE_PYTHON)"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("all ok"),
        "{args:?} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
}

/// The sum of metric `name`'s series that have `label` (`key="value"`).
pub fn metric_with(metrics_port: u16, name: &str, label: &str) -> Option<f64> {
    let mut c = std::net::TcpStream::connect(("127.0.0.1", metrics_port)).ok()?;
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut text = String::new();
    c.read_to_string(&mut text).ok()?;
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .reduce(|a, b| a + b)
}

/// Lines of text a test produces and reads back.
pub fn lines(n: usize) -> String {
    (0..n)
        .map(|i| format!("record-{i}-{}\n", "x".repeat(i % 300)))
        .collect()
}
