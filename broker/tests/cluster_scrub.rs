//! Bit rot in a cluster (RF 3, acks=all): a byte changed in a closed
//! segment of a follower, then of the leader, is found by the scrubber;
//! the follower cuts its log at the damage and fetches the range again;
//! the leader hands leadership to an in-sync replica and heals the same
//! way as a follower. Every replica ends identical, nothing acknowledged
//! is lost, and a CRC-checking consumer (confluent-kafka, `check.crcs`)
//! reads every record intact.

mod common;

use std::os::unix::fs::FileExt;
use std::process::Command;
use std::time::Duration;

use common::cluster::*;
use common::segment_files;

const TOPIC: &str = "rotting";
const RECORDS: i64 = 200;
const REPEAT: usize = 150;

fn value(n: i64) -> Vec<u8> {
    format!("record-{n:05}-").repeat(REPEAT).into_bytes()
}

/// Changes a record byte of the first batch of the `nth` segment of broker
/// `id`'s replica; returns that batch's base offset.
fn rot(cluster: &Cluster, id: i32, nth: usize) -> i64 {
    let dir = cluster.broker_ref(id).data_dir().join(format!("{TOPIC}-0"));
    let files = segment_files(&dir);
    assert!(files.len() > nth + 1, "broker {id}: {files:?}");
    let file = &files[nth];
    let head = std::fs::read(file).expect("segment");
    let info = ferrite_engine::batch::peek(&head).expect("batch");
    let at = ferrite_engine::batch::HEADER_BYTES as u64 + 300;
    let f = std::fs::OpenOptions::new().write(true).open(file).expect("open");
    f.write_all_at(&[head[at as usize] ^ 0x04], at).expect("rot");
    f.sync_all().expect("sync");
    info.base_offset.0
}

/// Broker `id`'s replica: its valid batches' bytes, and the offset after
/// the last.
fn replica(cluster: &Cluster, id: i32) -> (Vec<u8>, i64) {
    let mut bytes = cluster.broker_ref(id).log_bytes(TOPIC, 0);
    let (batches, valid_end, _) = ferrite_engine::scan::scan_bytes(&bytes, ferrite_engine::Offset(0));
    bytes.truncate(valid_end as usize);
    (bytes, batches.last().map_or(0, |(_, i)| i.next_offset().0))
}

/// Waits until broker `id` logged finding damage, then until its replica
/// holds every record again, byte for byte as `reference`'s (healed).
fn wait_healed(cluster: &Cluster, id: i32, reference: i32) {
    wait_for(
        &format!("broker {id} to find the damage"),
        Duration::from_secs(30),
        || {
            cluster
                .broker_ref(id)
                .log_text()
                .contains("scrub found damage")
                .then_some(())
        },
    );
    wait_for(&format!("broker {id} to heal"), Duration::from_secs(60), || {
        let (ours, end) = replica(cluster, id);
        (end == RECORDS && ours == replica(cluster, reference).0).then_some(())
    });
}

fn in_sync(bootstrap: &str) -> Option<(i32, usize)> {
    partitions_of(bootstrap, TOPIC, 1).map(|p| p[0])
}

#[test]
fn damaged_replicas_are_found_and_healed_from_the_isr_leader_included() {
    let _one = serial();
    let cluster = Cluster::start(
        3,
        &[
            "min.insync.replicas=2",
            "log.segment.bytes=65536",
            "ferrite.scrub.interval.ms=300",
        ],
    );
    wait_brokers(&cluster, 3);
    let first = cluster.brokers[0].bootstrap();
    assert_eq!(create_topic(&first, TOPIC, 1, 3, &[]), 0);
    let leader = wait_for("a leader", Duration::from_secs(20), || leaders_of(&first, TOPIC, 1))[0];
    let at_leader = cluster.broker_ref(leader).bootstrap();
    for n in 0..RECORDS {
        assert_eq!(produce(&at_leader, TOPIC, 0, -1, &value(n)), (0, n), "record {n}");
    }
    let ids = [1, 2, 3];
    wait_replicas_reach(&cluster, &ids, TOPIC, 0, RECORDS);

    // A follower's closed segment.
    let follower = *ids.iter().find(|&&b| b != leader).expect("a follower");
    let rotted = rot(&cluster, follower, 1);
    wait_healed(&cluster, follower, leader);
    assert!(rotted > 0);
    assert_eq!(
        in_sync(&first).map(|(l, _)| l),
        Some(leader),
        "a follower's damage moves nothing"
    );

    // The leader's: leadership moves to an in-sync replica, and the old
    // leader heals as its follower and rejoins the ISR.
    rot(&cluster, leader, 2);
    let new_leader = wait_for("leadership to move", Duration::from_secs(30), || {
        in_sync(&first).map(|(l, _)| l).filter(|l| *l != leader && *l > 0)
    });
    wait_healed(&cluster, leader, new_leader);
    wait_for("the old leader back in the ISR", Duration::from_secs(30), || {
        in_sync(&first).filter(|(_, isr)| *isr == 3)
    });
    for id in ids {
        assert_eq!(
            replica(&cluster, id),
            replica(&cluster, new_leader),
            "broker {id}'s replica"
        );
    }

    // Nothing lost, nothing damaged handed out.
    let records = consume_all(&cluster.broker_ref(new_leader).bootstrap(), TOPIC, 0);
    assert_eq!(records.len() as i64, RECORDS);
    for (offset, v) in &records {
        assert_eq!(*v, value(*offset), "record {offset}");
    }
    let python = std::env::var("FERRITE_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/scrub.py");
    let out = Command::new(&python)
        .args([script, &cluster.bootstrap(), TOPIC, "6", &REPEAT.to_string()])
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e} (run scripts/test.sh, or set FERRITE_PYTHON)"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let received: Vec<i64> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("OFFSET "))
        .map(|o| o.parse().expect("offset"))
        .collect();
    assert_eq!(
        received,
        (0..RECORDS).collect::<Vec<_>>(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("CORRUPT"), "{stdout}");
}
