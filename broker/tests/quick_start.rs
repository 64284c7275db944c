//! README's first command as a new user runs it: from a fresh folder, with
//! its relative `--data-dir`, then kcat against it. And what start-up does
//! with paths: a relative `log.dirs` and `--config`, and a data directory
//! that cannot be used (refused at start, with the path in the message).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// README's broker command: the arguments after `cargo run ... --`, up to
/// its comment.
fn readme_broker_args() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).expect("README.md");
    let line = readme
        .lines()
        .find(|l| l.starts_with("cargo run --release --bin ferrite -- standalone"))
        .expect("README starts with the broker command");
    let command = line.split('#').next().unwrap_or(line);
    let (_, args) = command.split_once(" -- ").expect("cargo run ... -- ARGS");
    args.split_whitespace().map(str::to_string).collect()
}

/// What becomes of the broker's log once it serves.
#[derive(Clone, Copy, PartialEq)]
enum Log {
    /// Read to its end.
    Drained,
    /// Its reader goes away: every later write fails (EPIPE).
    Closed,
}

/// Starts `ferrite` with `args` in `cwd`; returns the child once its log
/// says it serves, with every log line read so far.
fn start_in(cwd: &Path, args: &[String]) -> (Child, Vec<String>) {
    start_logging(cwd, args, Log::Drained)
}

fn start_logging(cwd: &Path, args: &[String], log: Log) -> (Child, Vec<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(args)
        .current_dir(cwd)
        .env_remove("NO_COLOR")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ferrite");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Drains the log to the end: a broker whose stderr is closed under
        // it is another test.
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            let serving = line.contains("ferrite is serving");
            let _ = tx.send(line);
            if serving && log == Log::Closed {
                return;
            }
        }
    });
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !lines.iter().any(|l: &String| l.contains("ferrite is serving")) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => lines.push(line),
            Err(_) => {
                let _ = child.kill();
                panic!("ferrite did not serve in time:\n{}", lines.join("\n"));
            }
        }
    }
    (child, lines)
}

fn kcat(args: &[&str], stdin: Option<&[u8]>) -> (bool, String) {
    let mut child = Command::new("kcat")
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat is installed (scripts/test.sh installs it)");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(input).expect("write to kcat");
    }
    let out = child.wait_with_output().expect("kcat");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// A message produced with kcat comes back with kcat.
fn round_trip(bootstrap: &str, topic: &str) {
    let (ok, said) = kcat(
        &["-b", bootstrap, "-P", "-t", topic],
        Some(b"hi from the quick start\n"),
    );
    assert!(ok, "kcat -P: {said}");
    let (ok, said) = kcat(
        &[
            "-b",
            bootstrap,
            "-C",
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-q",
            "-m",
            "10",
        ],
        None,
    );
    assert!(ok, "kcat -C: {said}");
    assert_eq!(said.trim_end(), "hi from the quick start");
}

fn stop(mut child: Child) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().expect("wait");
    assert!(status.success(), "ferrite exited with {status}");
}

#[test]
fn readme_broker_command_serves_kcat_from_a_fresh_folder() {
    let mut args = readme_broker_args();
    assert!(
        args.iter().any(|a| a == "./ferrite-data"),
        "README's command keeps its relative data dir: {args:?}"
    );
    let port = ferrite_testkit::free_port();
    let bootstrap = format!("127.0.0.1:{port}");
    for a in args.iter_mut() {
        *a = a.replace("127.0.0.1:9092", &bootstrap);
    }
    let fresh = tempfile::tempdir().expect("tempdir");
    let (child, log) = start_in(fresh.path(), &args);
    let (ok, said) = kcat(&["-b", &bootstrap, "-L"], None);
    assert!(ok && said.contains("1 brokers"), "kcat -L: {said}");
    round_trip(&bootstrap, "first");
    assert!(
        fresh.path().join("ferrite-data").join("first-0").is_dir(),
        "the partition lives under the folder the broker was started in"
    );
    stop(child);
    assert!(
        log.iter().all(|l| !l.contains('\u{1b}')),
        "a log written to a pipe carries no colour codes: {log:?}"
    );
}

#[test]
fn a_relative_config_and_log_dirs_are_taken_from_the_working_directory() {
    let fresh = tempfile::tempdir().expect("tempdir");
    let port = ferrite_testkit::free_port();
    let bootstrap = format!("127.0.0.1:{port}");
    std::fs::create_dir(fresh.path().join("config")).expect("mkdir");
    std::fs::write(
        fresh.path().join("config/server.properties"),
        format!("listeners=PLAINTEXT://{bootstrap}\nlog.dirs=logs/kafka\n"),
    )
    .expect("write properties");
    let args: Vec<String> = ["broker", "--config", "config/server.properties"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (child, _) = start_in(fresh.path(), &args);
    round_trip(&bootstrap, "relative");
    assert!(fresh.path().join("logs/kafka/relative-0").is_dir());
    stop(child);
}

#[test]
fn a_broker_whose_log_reader_went_away_still_serves() {
    let fresh = tempfile::tempdir().expect("tempdir");
    let bootstrap = format!("127.0.0.1:{}", ferrite_testkit::free_port());
    let args: Vec<String> = ["standalone", "--listen", &bootstrap, "--data-dir", "data"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (child, _) = start_logging(fresh.path(), &args, Log::Closed);
    // Creating a topic logs; each of those writes fails.
    round_trip(&bootstrap, "unlogged");
    round_trip(&bootstrap, "unlogged-too");
    stop(child);
}

#[test]
fn an_unusable_data_dir_stops_the_broker_at_start_with_its_path() {
    let fresh = tempfile::tempdir().expect("tempdir");
    std::fs::write(fresh.path().join("taken"), b"a file, not a directory").expect("write");
    let port = ferrite_testkit::free_port();
    let out = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args([
            "standalone",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
            "taken/data",
        ])
        .current_dir(fresh.path())
        .stdin(Stdio::null())
        .output()
        .expect("run ferrite");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "ferrite started on an unusable data dir: {said}");
    assert!(
        said.contains("taken/data") && said.contains("log.dirs"),
        "the message names the path and the setting: {said}"
    );
    assert!(!said.contains("ferrite is serving"), "{said}");
}

#[test]
fn a_second_broker_on_a_taken_port_refuses_to_start_and_the_first_keeps_every_connection() {
    let fresh = tempfile::tempdir().expect("tempdir");
    let bootstrap = format!("127.0.0.1:{}", ferrite_testkit::free_port());
    let args = |dir: &str| -> Vec<String> {
        ["standalone", "--listen", &bootstrap, "--data-dir", dir]
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    let (first, _) = start_in(fresh.path(), &args("first"));
    let mut second = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(args("second"))
        .current_dir(fresh.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ferrite");
    let deadline = Instant::now() + Duration::from_secs(20);
    while second.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = second.kill();
            stop(first);
            panic!("a second broker started on the first one's port");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = second.wait_with_output().expect("second's output");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains(&bootstrap) && said.contains("in use"), "{said}");
    assert!(!said.contains("ferrite is serving"), "{said}");
    // Every connection reaches the first broker (sharing the port, some
    // would have created their topic in the second one's directory).
    for n in 0..8 {
        let topic = format!("only-first-{n}");
        round_trip(&bootstrap, &topic);
        assert!(
            fresh.path().join("first").join(format!("{topic}-0")).is_dir(),
            "{topic}"
        );
    }
    stop(first);
}

/// Two brokers on one data directory (on different ports) would write the
/// same partition files: the second is refused at start, naming the
/// directory, and the first serves on. A broker killed with SIGKILL leaves
/// no lock behind: a new one starts on its directory at once.
#[test]
fn a_second_broker_on_a_taken_data_dir_refuses_to_start() {
    let fresh = tempfile::tempdir().expect("tempdir");
    let bootstrap = format!("127.0.0.1:{}", ferrite_testkit::free_port());
    let args = |listen: &str| -> Vec<String> {
        ["standalone", "--listen", listen, "--data-dir", "shared"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    let (mut first, _) = start_in(fresh.path(), &args(&bootstrap));
    let other = format!("127.0.0.1:{}", ferrite_testkit::free_port());
    let out = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(args(&other))
        .current_dir(fresh.path())
        .stdin(Stdio::null())
        .output()
        .expect("run ferrite");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a second broker started on a taken data dir: {said}"
    );
    assert!(
        said.contains("shared") && said.contains("in use by another process"),
        "the message names the directory: {said}"
    );
    assert!(!said.contains("ferrite is serving"), "{said}");
    round_trip(&bootstrap, "first-serves");
    first.kill().expect("kill -9");
    first.wait().expect("reaped");
    let (again, _) = start_in(fresh.path(), &args(&other));
    round_trip(&other, "after-kill");
    stop(again);
}
