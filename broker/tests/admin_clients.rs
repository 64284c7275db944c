//! What Kafka's admin clients send, from confluent-kafka's AdminClient
//! (`tests/python/admin.py`) and kafka-python's KafkaAdminClient
//! (`tests/python/loggers.py`) against `ferrite standalone`.

mod common;

use std::process::Command;

use common::Broker;

fn run(b: &Broker, mode: &str) -> String {
    run_script(b, concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/admin.py"), mode)
}

fn run_script(b: &Broker, script: &str, mode: &str) -> String {
    let python = std::env::var("FERRITE_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&python)
        .env("FERRITE_BIN", env!("CARGO_BIN_EXE_ferrite"))
        .arg(script)
        .arg(b.bootstrap())
        .arg(mode)
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e} (run scripts/test.sh, or set FERRITE_PYTHON)"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("all ok"),
        "{mode} failed ({}):\n{stdout}\n{stderr}\n(needs confluent-kafka: run scripts/test.sh)",
        out.status
    );
    stdout.into_owned()
}

#[test]
fn list_offsets_max_timestamp_answers_the_record_not_its_batch() {
    run(&Broker::start(&[]), "max-timestamp");
}

#[test]
fn topic_configs_are_described_altered_and_appended_to_as_kafka_does() {
    run(&Broker::start(&[]), "configs");
}

#[test]
fn topics_and_partitions_are_placed_as_their_replica_assignment_lists() {
    run(&Broker::start(&[]), "assignment");
}

/// Static members that close without leaving keep their group until their
/// sessions expire, and no longer: DeleteGroups is refused until then and
/// succeeds within half a second of `session.timeout.ms` after the close
/// (the last heartbeat came before the close; the group clock ticks every
/// 100 ms).
#[test]
fn static_members_expire_on_time_and_their_group_can_then_be_deleted() {
    let out = run(&Broker::start(&[]), "static-expiry");
    let took: f64 = out
        .lines()
        .find_map(|l| l.strip_prefix("EXPIRED_AFTER_S "))
        .and_then(|v| v.trim().parse().ok())
        .expect("EXPIRED_AFTER_S line");
    let session_s = 6.0;
    assert!(
        took <= session_s + 0.5,
        "the sessions expired {took:.3} s after the close"
    );
}

#[test]
fn groups_are_listed_by_type_and_state_and_operations_described_when_asked() {
    run(&Broker::start(&[]), "groups-and-operations");
}

/// Dynamic broker configs through confluent-kafka's AdminClient: set,
/// described, in force on the next produce, refused where Kafka refuses
/// them, and kept across a restart (the embedded store has them).
#[test]
fn dynamic_broker_configs_take_effect_at_once_and_survive_a_restart() {
    let mut b = Broker::start(&[]);
    run(&b, "broker-configs");
    b.stop();
    b.spawn();
    run(&b, "broker-configs-kept");
}

/// Dynamic `log.segment.bytes` and `log.retention.ms` set for the broker
/// with confluent-kafka's AdminClient act on a topic that exists: its log
/// rolls at the new size, and its old segments are deleted.
#[test]
fn dynamic_segment_size_and_retention_act_on_existing_logs() {
    let b = Broker::start(&["log.retention.check.interval.ms=200"]);
    let segments = || {
        std::fs::read_dir(b.data_dir().join("rolled-0"))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
                    .count()
            })
            .unwrap_or(0)
    };
    run(&b, "log-roll");
    // 200 batches of about 1.1 KiB at 16 KiB a segment.
    let rolled = segments();
    assert!(rolled >= 10, "{rolled} segments after 200 KiB at 16 KiB each");
    run(&b, "log-retention");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while segments() > 1 {
        assert!(std::time::Instant::now() < deadline, "{} segments left", segments());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A logger's level changed while running (BROKER_LOGGER, through
/// kafka-python): its debug lines appear in the broker's log from then on,
/// and stop once the level is deleted.
#[test]
fn log_levels_change_while_the_broker_runs() {
    let b = Broker::start(&[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/loggers.py");
    let debug_lines = |log: &str| log.lines().filter(|l| l.contains("DEBUG ferrite_broker::net")).count();
    assert_eq!(debug_lines(&b.log_text()), 0, "INFO at start");
    run_script(&b, script, "set");
    // The script's own connections closed at DEBUG.
    let set = b.log_text();
    assert!(debug_lines(&set) > 0, "no DEBUG line after the set:\n{set}");
    run_script(&b, script, "reset");
    let log = b.log_text();
    let reset_at = log.rfind("log levels changed").expect("the reset logged");
    let after = &log[reset_at..];
    // The reset's own connection is the only one open when it applies, and
    // it closes after: nothing at DEBUG follows.
    std::thread::sleep(std::time::Duration::from_millis(300));
    run(&b, "max-timestamp");
    let later = b.log_text();
    assert_eq!(debug_lines(&later[reset_at..]), 0, "DEBUG after the reset:\n{after}");
}
