//! SSL listeners (issue #21) with real clients: Debian's kcat, and
//! confluent-kafka and kafka-python (`tests/python/tls.py`), at their
//! defaults (they check the broker's certificate and its host). The
//! certificates are made fresh by each run (`ferrite_testkit::certs`).
//!
//! A standalone broker serves a PLAINTEXT and an SSL listener side by
//! side; each answers Metadata and FindCoordinator with its own address.

mod common;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::Broker;
use ferrite_testkit::certs::TlsFiles;

/// A standalone broker with a PLAINTEXT listener (its `port`) and an SSL
/// one (the returned port), metrics on the third; `extra` settings on top.
fn start(tls: &TlsFiles, extra: &[&str]) -> (Broker, u16, u16) {
    let ssl_port = ferrite_testkit::free_port();
    let metrics_port = ferrite_testkit::free_port();
    let listeners = format!("listeners=PLAINTEXT://127.0.0.1:{{PORT}},SSL://127.0.0.1:{ssl_port}");
    let keystore = format!("ssl.keystore.location={}", tls.keystore.display());
    let metrics = format!("ferrite.metrics.listen=127.0.0.1:{metrics_port}");
    let mut overrides = vec![listeners.as_str(), keystore.as_str(), metrics.as_str()];
    overrides.extend_from_slice(extra);
    (Broker::start(&overrides), ssl_port, metrics_port)
}

/// kcat over SSL to `port`, trusting the test CA, with `args`; `input` on
/// its stdin. Returns whether it succeeded, and its stdout and stderr.
fn kcat(
    tls: &TlsFiles,
    port: u16,
    client: Option<(&std::path::Path, &std::path::Path)>,
    args: &[&str],
    input: &[u8],
) -> (bool, String, String) {
    let mut cmd = Command::new("kcat");
    cmd.arg("-b")
        .arg(format!("127.0.0.1:{port}"))
        .arg("-X")
        .arg("security.protocol=ssl")
        .arg("-X")
        .arg(format!("ssl.ca.location={}", tls.ca.display()));
    if let Some((cert, key)) = client {
        cmd.arg("-X")
            .arg(format!("ssl.certificate.location={}", cert.display()))
            .arg("-X")
            .arg(format!("ssl.key.location={}", key.display()));
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

fn lines(n: usize) -> String {
    (0..n)
        .map(|i| format!("record-{i}-{}\n", "x".repeat(i % 300)))
        .collect()
}

#[test]
fn kcat_round_trips_over_ssl_and_each_listener_advertises_itself() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls = TlsFiles::write(dir.path());
    let (b, ssl_port, metrics_port) = start(&tls, &[]);
    let sent = lines(3000);
    let (ok, _, err) = kcat(&tls, ssl_port, None, &["-P", "-t", "tls-kcat"], sent.as_bytes());
    assert!(ok, "kcat -P over SSL: {err}");
    let (ok, got, err) = kcat(
        &tls,
        ssl_port,
        None,
        &["-C", "-t", "tls-kcat", "-o", "beginning", "-e", "-q"],
        b"",
    );
    assert!(ok, "kcat -C over SSL: {err}");
    assert!(got == sent, "read back {} bytes of {}", got.len(), sent.len());

    let (ok, listed, err) = kcat(&tls, ssl_port, None, &["-L"], b"");
    assert!(ok, "{err}");
    assert!(
        listed.contains(&format!("broker 0 at 127.0.0.1:{ssl_port}")),
        "a client on the SSL listener is sent to the SSL port: {listed}"
    );
    let plain = Command::new("kcat")
        .args(["-L", "-b", &b.bootstrap()])
        .output()
        .expect("kcat");
    let plain = String::from_utf8_lossy(&plain.stdout);
    assert!(
        plain.contains(&format!("broker 0 at {}", b.bootstrap())),
        "a client on the PLAINTEXT listener is sent to the PLAINTEXT port: {plain}"
    );
    let handshakes = common::cluster::metric_sum(metrics_port, "ferrite_tls_handshakes_total").unwrap_or(0.0);
    assert!(handshakes >= 3.0, "{handshakes} handshakes counted");
}

/// A consumer that reads what is no longer in the broker's memory (after a
/// restart) is sent the segment files' bytes through its TLS session,
/// whole and in order.
#[test]
fn a_backlog_read_from_the_segment_files_goes_through_the_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls = TlsFiles::write(dir.path());
    let (mut b, ssl_port, metrics_port) = start(&tls, &[]);
    let sent = lines(20_000);
    let (ok, _, err) = kcat(&tls, ssl_port, None, &["-P", "-t", "backlog"], sent.as_bytes());
    assert!(ok, "kcat -P over SSL: {err}");
    b.stop();
    b.spawn();
    let (ok, got, err) = kcat(
        &tls,
        ssl_port,
        None,
        &["-C", "-t", "backlog", "-o", "beginning", "-e", "-q"],
        b"",
    );
    assert!(ok, "kcat -C over SSL: {err}");
    assert!(got == sent, "read back {} bytes of {}", got.len(), sent.len());
    let through_tls = metric_with(metrics_port, "ferrite_fetch_file_sent_bytes_total", "path=\"tls\"").unwrap_or(0.0);
    assert!(
        through_tls as usize >= sent.len(),
        "{through_tls} file bytes went through TLS"
    );
    for plain in ["sendfile", "direct", "inline"] {
        let label = format!("path=\"{plain}\"");
        let n = metric_with(metrics_port, "ferrite_fetch_file_sent_bytes_total", &label).unwrap_or(0.0);
        assert!(n == 0.0, "{n} bytes sent by {plain} to a TLS client: in the clear");
    }
}

fn python(args: &[&str]) {
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

#[test]
fn python_clients_produce_and_consume_in_groups_over_ssl() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls = TlsFiles::write(dir.path());
    let (_b, ssl_port, _) = start(&tls, &["ssl.enabled.protocols=TLSv1.2,TLSv1.3"]);
    let bootstrap = format!("127.0.0.1:{ssl_port}");
    let ca = tls.ca.display().to_string();
    python(&[&bootstrap, &ca, "confluent"]);
    python(&[&bootstrap, &ca, "kafka-python"]);
}

#[test]
fn a_required_client_certificate_must_come_from_the_trusted_ca() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls = TlsFiles::write(dir.path());
    let truststore = format!("ssl.truststore.location={}", tls.ca.display());
    let (_b, ssl_port, metrics_port) = start(&tls, &["ssl.client.auth=required", &truststore]);
    let failed = || metric_with(metrics_port, "ferrite_tls_handshakes_total", "outcome=\"failed\"").unwrap_or(0.0);
    let meta = ["-L", "-m", "5"];
    let good = Some((tls.client_cert.as_path(), tls.client_key.as_path()));
    let stranger = Some((tls.stranger_cert.as_path(), tls.stranger_key.as_path()));
    let (ok, _, err) = kcat(&tls, ssl_port, None, &meta, b"");
    assert!(!ok, "a client without a certificate was served: {err}");
    let after_none = failed();
    assert!(after_none >= 1.0, "the refused handshake is counted ({after_none})");
    let (ok, _, _) = kcat(&tls, ssl_port, stranger, &meta, b"");
    assert!(!ok, "a certificate from another CA was taken");
    assert!(failed() > after_none, "the stranger's handshake is counted");
    let sent = lines(500);
    let (ok, _, err) = kcat(&tls, ssl_port, good, &["-P", "-t", "mtls"], sent.as_bytes());
    assert!(ok, "the trusted client's produce: {err}");
    let (ok, got, err) = kcat(
        &tls,
        ssl_port,
        good,
        &["-C", "-t", "mtls", "-o", "beginning", "-e", "-q"],
        b"",
    );
    assert!(ok && got == sent, "the trusted client reads its records back: {err}");
    let bootstrap = format!("127.0.0.1:{ssl_port}");
    let (ca, cert, key) = (
        tls.ca.display().to_string(),
        tls.client_cert.display().to_string(),
        tls.client_key.display().to_string(),
    );
    python(&[&bootstrap, &ca, "confluent", &cert, &key]);
}

/// The sum of metric `name`'s series that have `label` (`key="value"`).
fn metric_with(metrics_port: u16, name: &str, label: &str) -> Option<f64> {
    let mut c = std::net::TcpStream::connect(("127.0.0.1", metrics_port)).ok()?;
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut text = String::new();
    c.read_to_string(&mut text).ok()?;
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .reduce(|a, b| a + b)
}

/// Whether the broker closes `stream` within a few seconds of `bytes`.
fn closes_after(port: u16, bytes: &[u8]) -> bool {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    s.write_all(bytes).expect("write");
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn the_wrong_protocol_on_either_listener_is_closed_and_the_broker_serves_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls = TlsFiles::write(dir.path());
    let (mut b, ssl_port, _) = start(&tls, &[]);
    // A Kafka ApiVersions v0 request in the clear, to the SSL port.
    let api_versions: &[u8] = &[0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0, 0];
    assert!(closes_after(ssl_port, api_versions), "plaintext on the SSL listener");
    // The start of a TLS ClientHello, to the PLAINTEXT port.
    let hello: &[u8] = &[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03];
    assert!(closes_after(b.port, hello), "TLS on the PLAINTEXT listener");
    let (ok, _, err) = kcat(&tls, ssl_port, None, &["-L"], b"");
    assert!(ok, "the broker still serves SSL: {err}");
    assert!(b.is_running(), "{}", b.log_text());
    let log = b.log_text();
    assert!(log.contains("TLS handshake failed"), "{log}");
    assert!(log.contains("a TLS handshake on a PLAINTEXT listener"), "{log}");
}

#[test]
fn ssl_listeners_without_usable_key_material_do_not_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls = TlsFiles::write(dir.path());
    let only_cert = dir.path().join("only-cert.pem");
    std::fs::copy(&tls.client_cert, &only_cert).expect("copy");
    let cases: Vec<(Vec<String>, String)> = vec![
        (vec![], "needs its key and certificate".into()),
        (
            vec!["ssl.keystore.location=/no/such/keystore.pem".into()],
            "/no/such/keystore.pem".into(),
        ),
        (
            vec![format!("ssl.keystore.location={}", only_cert.display())],
            "no unencrypted private key".into(),
        ),
        (
            vec![
                format!("ssl.keystore.location={}", tls.keystore.display()),
                "ssl.client.auth=required".into(),
            ],
            "need a truststore".into(),
        ),
        (vec!["ssl.keystore.type=JKS".into()], "only PEM".into()),
    ];
    for (settings, why) in cases {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferrite"));
        cmd.arg("standalone")
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .arg("--override")
            .arg(format!("listeners=SSL://127.0.0.1:{}", ferrite_testkit::free_port()));
        for s in &settings {
            cmd.arg("--override").arg(s);
        }
        let out = cmd.stdin(Stdio::null()).output().expect("ferrite");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{settings:?} started: {said}");
        assert!(said.contains(&why), "{settings:?}: expected '{why}' in: {said}");
        assert!(!said.contains("ferrite is serving"), "{said}");
    }
}
