//! A topic that the broker cannot create whole (here: too few open files
//! left for its partitions' segment files) is refused with
//! KAFKA_STORAGE_ERROR and leaves nothing behind — no partition directory,
//! no metadata — and the broker keeps accepting connections and creating
//! topics that fit.

mod common;

use std::process::Command;

use common::cluster::{create_topic, metadata};
use common::Broker;

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[test]
fn a_topic_that_cannot_be_created_whole_is_refused_and_leaves_nothing() {
    let b = Broker::start(&[]);
    let pid = b.child.as_ref().expect("running").id();
    // Room for about 50 more partitions (two descriptors each).
    let limit = open_fds(pid) + 100;
    let set = Command::new("prlimit")
        .arg("--pid")
        .arg(pid.to_string())
        .arg(format!("--nofile={limit}:{limit}"))
        .status()
        .expect("prlimit (util-linux)");
    assert!(set.success(), "prlimit failed");

    assert_eq!(
        create_topic(&b.bootstrap(), "too-big", 200, 1, &[]),
        56,
        "KAFKA_STORAGE_ERROR"
    );
    let left: Vec<String> = std::fs::read_dir(b.data_dir())
        .expect("data dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("too-big"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let m = metadata(&b.bootstrap(), "too-big").expect("metadata");
    let t = m.topics.iter().find(|t| t.name == "too-big");
    assert!(t.is_none_or(|t| t.error != 0), "the topic is still listed: {t:?}");
    assert!(
        b.log_text().contains("could not all be created"),
        "the refusal is logged"
    );
    // The broker still accepts connections and creates what fits.
    assert_eq!(create_topic(&b.bootstrap(), "fits", 10, 1, &[]), 0);
    assert!(open_fds(pid) < limit, "descriptors released");
}
