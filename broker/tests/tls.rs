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
use std::time::{Duration, Instant};

use common::secure::{kcat, lines, metric_with, python, Secured};
use common::Broker;
use ferrite_testkit::certs::TlsFiles;

/// A standalone broker with a PLAINTEXT listener (its `port`) and an SSL
/// one (the returned port), metrics on the third; `extra` settings on top
/// (`{SSL}` in them is the SSL port).
fn start(tls: &TlsFiles, extra: &[&str]) -> (Broker, u16, u16) {
    let ssl_port = ferrite_testkit::free_port();
    let metrics_port = ferrite_testkit::free_port();
    let mut overrides = vec![
        format!("listeners=PLAINTEXT://127.0.0.1:{{PORT}},SSL://127.0.0.1:{ssl_port}"),
        format!("ssl.keystore.location={}", tls.keystore.display()),
        format!("ferrite.metrics.listen=127.0.0.1:{metrics_port}"),
    ];
    overrides.extend(extra.iter().map(|e| e.replace("{SSL}", &ssl_port.to_string())));
    let overrides: Vec<&str> = overrides.iter().map(String::as_str).collect();
    (Broker::start(&overrides), ssl_port, metrics_port)
}

fn ssl(tls: &TlsFiles) -> Secured<'_> {
    Secured {
        ca: Some(&tls.ca),
        ..Secured::default()
    }
}

#[test]
fn kcat_round_trips_over_ssl_and_each_listener_advertises_itself() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls = TlsFiles::write(dir.path());
    let (b, ssl_port, metrics_port) = start(&tls, &["advertised.listeners=SSL://localhost:{SSL}"]);
    let sent = lines(3000);
    let (ok, _, err) = kcat(&ssl(&tls), ssl_port, &["-P", "-t", "tls-kcat"], sent.as_bytes());
    assert!(ok, "kcat -P over SSL: {err}");
    let (ok, got, err) = kcat(
        &ssl(&tls),
        ssl_port,
        &["-C", "-t", "tls-kcat", "-o", "beginning", "-e", "-q"],
        b"",
    );
    assert!(ok, "kcat -C over SSL: {err}");
    assert!(got == sent, "read back {} bytes of {}", got.len(), sent.len());

    let (ok, listed, err) = kcat(&ssl(&tls), ssl_port, &["-L"], b"");
    assert!(ok, "{err}");
    assert!(
        listed.contains(&format!("broker 0 at localhost:{ssl_port}")),
        "a client on the SSL listener is sent to its advertised address: {listed}"
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
    let ok = metric_with(metrics_port, "ferrite_tls_handshakes_total", "outcome=\"ok\"").unwrap_or(0.0);
    assert!(ok >= 3.0, "{ok} handshakes counted");
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
    let (ok, _, err) = kcat(&ssl(&tls), ssl_port, &["-P", "-t", "backlog"], sent.as_bytes());
    assert!(ok, "kcat -P over SSL: {err}");
    b.stop();
    b.spawn();
    let (ok, got, err) = kcat(
        &ssl(&tls),
        ssl_port,
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

/// The clients in groups over a TLS 1.3-only listener; a TLS 1.2-only
/// client is refused there.
#[test]
fn python_clients_produce_and_consume_in_groups_over_tls_1_3() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls = TlsFiles::write(dir.path());
    let (_b, ssl_port, _) = start(&tls, &["ssl.enabled.protocols=TLSv1.3"]);
    let bootstrap = format!("127.0.0.1:{ssl_port}");
    let ca = tls.ca.display().to_string();
    python(&[&bootstrap, "confluent", "--ca", &ca]);
    python(&[&bootstrap, "kafka-python", "--ca", &ca]);
    let handshake = |version: &str| {
        let out = Command::new("openssl")
            .args(["s_client", version, "-connect", &bootstrap, "-CAfile", &ca])
            .stdin(Stdio::null())
            .output()
            .expect("openssl (scripts/test.sh installs it)");
        // "New, TLSv1.3, Cipher is …" once agreed; "New, (NONE), …" when refused.
        String::from_utf8_lossy(&out.stdout).contains("New, TLSv1.")
    };
    assert!(handshake("-tls1_3"), "a TLS 1.3 client is served");
    assert!(!handshake("-tls1_2"), "a TLS 1.2 client is refused");
}

#[test]
fn a_required_client_certificate_must_come_from_the_trusted_ca() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls = TlsFiles::write(dir.path());
    let truststore = format!("ssl.truststore.location={}", tls.ca.display());
    let (_b, ssl_port, metrics_port) = start(&tls, &["ssl.client.auth=required", &truststore]);
    let failed = || metric_with(metrics_port, "ferrite_tls_handshakes_total", "outcome=\"failed\"").unwrap_or(0.0);
    let meta = ["-L", "-m", "5"];
    let good = Secured {
        ca: Some(&tls.ca),
        cert: Some((&tls.client_cert, &tls.client_key)),
        ..Secured::default()
    };
    let stranger = Secured {
        ca: Some(&tls.ca),
        cert: Some((&tls.stranger_cert, &tls.stranger_key)),
        ..Secured::default()
    };
    let (ok, _, err) = kcat(&ssl(&tls), ssl_port, &meta, b"");
    assert!(!ok, "a client without a certificate was served: {err}");
    let after_none = failed();
    assert!(after_none >= 1.0, "the refused handshake is counted ({after_none})");
    let (ok, _, _) = kcat(&stranger, ssl_port, &meta, b"");
    assert!(!ok, "a certificate from another CA was taken");
    assert!(failed() > after_none, "the stranger's handshake is counted");
    let sent = lines(500);
    let (ok, _, err) = kcat(&good, ssl_port, &["-P", "-t", "mtls"], sent.as_bytes());
    assert!(ok, "the trusted client's produce: {err}");
    let (ok, got, err) = kcat(
        &good,
        ssl_port,
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
    python(&[&bootstrap, "confluent", "--ca", &ca, "--cert", &cert, "--key", &key]);
}

/// `requested`: a client without a certificate is served, one with an
/// untrusted certificate is not.
#[test]
fn a_requested_client_certificate_is_checked_when_sent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls = TlsFiles::write(dir.path());
    let truststore = format!("ssl.truststore.location={}", tls.ca.display());
    let (_b, ssl_port, _) = start(&tls, &["ssl.client.auth=requested", &truststore]);
    let (ok, _, err) = kcat(&ssl(&tls), ssl_port, &["-L", "-m", "5"], b"");
    assert!(ok, "a client without a certificate: {err}");
    let stranger = Secured {
        ca: Some(&tls.ca),
        cert: Some((&tls.stranger_cert, &tls.stranger_key)),
        ..Secured::default()
    };
    let (ok, _, _) = kcat(&stranger, ssl_port, &["-L", "-m", "5"], b"");
    assert!(!ok, "an untrusted certificate was taken");
}

/// Whether the broker closes the connection within `within` of `bytes`.
fn closes_after(port: u16, bytes: &[u8], within: Duration) -> bool {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(within)).expect("timeout");
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
fn the_wrong_protocol_on_either_listener_or_silence_is_closed_and_the_broker_serves_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls = TlsFiles::write(dir.path());
    let (mut b, ssl_port, metrics_port) = start(&tls, &[]);
    let five = Duration::from_secs(5);
    // A Kafka ApiVersions v0 request in the clear, to the SSL port.
    let api_versions: &[u8] = &[0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0, 0];
    assert!(
        closes_after(ssl_port, api_versions, five),
        "plaintext on the SSL listener"
    );
    // The start of a TLS ClientHello, to the PLAINTEXT port.
    let hello: &[u8] = &[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03];
    assert!(closes_after(b.port, hello, five), "TLS on the PLAINTEXT listener");
    // Nothing at all, on the SSL port: dropped at the handshake's limit.
    let start = Instant::now();
    assert!(closes_after(ssl_port, b"", Duration::from_secs(20)), "a silent client");
    assert!(
        start.elapsed() >= Duration::from_secs(9),
        "dropped after {:?}",
        start.elapsed()
    );
    let timed_out = metric_with(metrics_port, "ferrite_tls_handshakes_total", "outcome=\"timed_out\"");
    assert_eq!(timed_out, Some(1.0));
    let (ok, _, err) = kcat(&ssl(&tls), ssl_port, &["-L"], b"");
    assert!(ok, "the broker still serves SSL: {err}");
    assert!(b.is_running(), "{}", b.log_text());
    let log = b.log_text();
    assert!(log.contains("TLS handshake failed"), "{log}");
    assert!(log.contains("a TLS handshake on a PLAINTEXT listener"), "{log}");
}

/// The keystore given inline, on one line as a Kafka properties file may
/// hold it (and continued over lines with `\`), serves as the file does.
#[test]
fn an_inline_keystore_on_one_line_serves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls = TlsFiles::write(dir.path());
    let pem = std::fs::read_to_string(&tls.keystore).expect("keystore");
    let key_end = pem.find("-----END PRIVATE KEY-----").expect("a PKCS#8 key") + "-----END PRIVATE KEY-----".len();
    let (key, chain) = pem.split_at(key_end);
    let one_line = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let ssl_port = ferrite_testkit::free_port();
    let props = format!(
        "broker.id=0\nlog.dirs={}\nlisteners=SSL://127.0.0.1:{ssl_port}\nssl.keystore.key={}\nssl.keystore.certificate.chain={} \\\n    \n",
        dir.path().join("data").display(),
        one_line(key),
        one_line(chain),
    );
    let path = dir.path().join("server.properties");
    std::fs::write(&path, props).expect("properties");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(["broker", "--config"])
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ferrite");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut served = false;
    while Instant::now() < deadline && child.try_wait().expect("wait").is_none() {
        if kcat(&ssl(&tls), ssl_port, &["-L", "-m", "2"], b"").0 {
            served = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = child.kill();
    let out = child.wait_with_output().expect("output");
    assert!(served, "not served: {}", String::from_utf8_lossy(&out.stderr));
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
        (
            vec![
                format!("ssl.keystore.location={}", tls.keystore.display()),
                "ssl.keystore.type=JKS".into(),
            ],
            "only PEM".into(),
        ),
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
