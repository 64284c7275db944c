//! Listener settings a broker cannot serve are refused at start, with the
//! reason, before anything listens: an SSL port without its key, two
//! listeners on one port, or a cluster's second or secured listener (the
//! brokers' own connections are PLAINTEXT so far, issue #21) would be the
//! silent surprise. SSL and SASL listeners are tested in `tls.rs` and
//! `sasl.rs`.

use std::process::{Command, Stdio};

/// Starts `ferrite broker` on a properties file holding `lines` (`PORT`
/// in them replaced by a free port) in `dir`; returns the process and the
/// port.
fn spawn_with(dir: &std::path::Path, lines: &[&str]) -> (std::process::Child, u16) {
    let port = ferrite_testkit::free_port();
    let mut props = format!("broker.id=1\nlog.dirs={}\n", dir.join("data").display());
    for l in lines {
        props.push_str(&l.replace("PORT", &port.to_string()));
        props.push('\n');
    }
    let path = dir.join("server.properties");
    std::fs::write(&path, props).expect("write server.properties");
    let child = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .arg("broker")
        .arg("--config")
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ferrite");
    (child, port)
}

/// Runs `ferrite broker` on a properties file holding `lines`; returns
/// whether it failed to start and what it said.
fn start_with(lines: &[&str]) -> (bool, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut child, _) = spawn_with(dir.path(), lines);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            return (false, String::from_utf8_lossy(&out.stderr).into_owned());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    (!out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn listeners_that_cannot_be_served_are_refused_with_the_reason() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["listeners=SSL://127.0.0.1:PORT"],
            "an SSL listener needs its key and certificate",
        ),
        (
            &["listeners=SASL_SSL://127.0.0.1:PORT"],
            "an SSL listener needs its key and certificate",
        ),
        (
            &[
                "listeners=EXTERNAL://127.0.0.1:PORT",
                "listener.security.protocol.map=EXTERNAL:SASL_PLAINTEXT",
                "zookeeper.connect=127.0.0.1:1",
            ],
            "a cluster needs a PLAINTEXT listener",
        ),
        (
            &["listeners=PLAINTEXT://127.0.0.1:PORT,SSL://127.0.0.1:PORT"],
            "two listeners on port",
        ),
        (
            &[
                "listeners=PLAINTEXT://127.0.0.1:PORT,SSL://127.0.0.1:1",
                "zookeeper.connect=127.0.0.1:1",
            ],
            "a cluster broker serves one listener so far",
        ),
        (
            &["listeners=INTERNAL://127.0.0.1:PORT"],
            "INTERNAL has no security protocol",
        ),
    ];
    for (lines, why) in cases {
        let (refused, said) = start_with(lines);
        assert!(refused, "{lines:?} started: {said}");
        assert!(said.contains(why), "{lines:?}: expected '{why}' in: {said}");
        assert!(!said.contains("ferrite is serving"), "{said}");
    }
}

#[test]
fn a_named_listener_mapped_to_plaintext_is_served() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut child, port) = spawn_with(
        dir.path(),
        &[
            "listeners=INTERNAL://127.0.0.1:PORT",
            "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SSL",
            "inter.broker.listener.name=INTERNAL",
        ],
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let served = loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break true;
        }
        if std::time::Instant::now() > deadline || child.try_wait().expect("wait").is_some() {
            break false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(served, "the INTERNAL listener was not served");
}
