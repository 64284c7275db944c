//! `ferrite-bench matrix`: throughput and latency by ack mode on a 3-broker
//! loopback cluster this command starts itself (a ZooKeeper server and three
//! `ferrite broker` processes), over acks 0/1/all × replication factor 1/3
//! × 100 B/1 KiB records × flush policy none/group commit (`flush.messages=1`:
//! every append waits for an fdatasync, which concurrent appends share).
//!
//! Writes `DIR/matrix.md` (the table), `DIR/matrix.json` (every cell) and
//! `DIR/matrix.svg` (throughput and p99 by ack mode), and prints the table
//! and the ratio the replication issue targets: RF 3 acks=all over RF 1
//! acks=1 (1 KiB records, no flush policy).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferrite_testkit::zookeeper::ZooKeeper;

use crate::load::{self, LoadConfig};
use crate::procs::{wait_for_brokers, BrokerProcess, Role};

#[derive(Clone, Debug)]
pub struct MatrixConfig {
    pub out: PathBuf,
    /// The `ferrite` binary.
    pub ferrite: PathBuf,
    /// Seconds of load per cell.
    pub seconds: f64,
    pub partitions: i32,
    pub connections: usize,
    pub inflight: usize,
    pub cells: CellSet,
    /// Records per second per cell, all connections together (0: as fast
    /// as the brokers take them).
    pub rate: u64,
    /// Extra `server.properties` lines (`key=value`) for the three brokers.
    pub broker_config: Vec<String>,
}

/// Which cells a run measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CellSet {
    /// Every combination of record size, flush policy, RF and acks.
    All,
    /// The two cells of the target ratio: 1 KiB records, no flush policy,
    /// RF 1 acks=1 and RF 3 acks=all.
    Target,
}

impl CellSet {
    fn includes(self, record_bytes: usize, flush: Flush, rf: i16, acks: i16) -> bool {
        match self {
            CellSet::All => true,
            CellSet::Target => record_bytes == 1024 && flush == Flush::None && matches!((rf, acks), (1, 1) | (3, -1)),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Cell {
    pub acks: i16,
    pub rf: i16,
    pub record_bytes: usize,
    pub flush: Flush,
    pub records_per_sec: f64,
    pub mb_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub errors: u64,
    pub error_codes: std::collections::BTreeMap<i16, u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flush {
    None,
    GroupCommit,
}

impl Flush {
    fn name(self) -> &'static str {
        match self {
            Flush::None => "none",
            Flush::GroupCommit => "group-commit",
        }
    }
}

fn acks_name(acks: i16) -> &'static str {
    match acks {
        0 => "0",
        1 => "1",
        _ => "all",
    }
}

fn start_broker(cfg: &MatrixConfig, id: i32, port: u16, zk: &str, dir: &Path) -> std::io::Result<BrokerProcess> {
    let mut extra = vec!["ferrite.shards=1".to_string()];
    extra.extend(cfg.broker_config.iter().cloned());
    let role = Role::Clustered {
        id,
        zookeeper: zk.to_string(),
    };
    BrokerProcess::start(&cfg.ferrite, &role, port, dir, &extra)
}

/// Runs the whole matrix; returns its cells.
pub fn run(cfg: &MatrixConfig) -> Result<Vec<Cell>, String> {
    if let Some(bad) = cfg.broker_config.iter().find(|l| !l.contains('=') || l.contains('\n')) {
        return Err(format!("broker config {bad:?}: expected one KEY=VALUE"));
    }
    std::fs::create_dir_all(&cfg.out).map_err(|e| format!("{}: {e}", cfg.out.display()))?;
    // The brokers' data and logs, removed after a run that succeeded and
    // kept (named in the error) after one that did not.
    let work = tempfile::Builder::new()
        .prefix("cluster-")
        .tempdir_in(&cfg.out)
        .map_err(|e| e.to_string())?;
    let kept = work.path().display().to_string();
    run_in(cfg, work.path()).map_err(|e| {
        let _ = work.keep();
        format!("{e} (broker data and logs kept in {kept})")
    })
}

fn run_in(cfg: &MatrixConfig, work: &Path) -> Result<Vec<Cell>, String> {
    let zk = ZooKeeper::standalone();
    let ports: Vec<u16> = (0..3).map(|_| ferrite_testkit::free_port()).collect();
    let mut brokers = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let dir = work.join(format!("broker-{}", i + 1));
        brokers.push(start_broker(cfg, i as i32 + 1, *port, &zk.connect_string(), &dir).map_err(|e| e.to_string())?);
    }
    let bootstrap = format!("127.0.0.1:{}", ports[0]);
    wait_for_brokers(&bootstrap, 3)?;
    let mut cells = Vec::new();
    for record_bytes in [100usize, 1024] {
        for flush in [Flush::None, Flush::GroupCommit] {
            for rf in [1i16, 3] {
                for acks in [0i16, 1, -1] {
                    if !cfg.cells.includes(record_bytes, flush, rf, acks) {
                        continue;
                    }
                    let cell = run_cell(cfg, &bootstrap, acks, rf, record_bytes, flush)?;
                    println!(
                        "acks={} rf={} record={}B flush={}: {:.0} records/s, {:.1} MB/s, p50 {:.2} ms, p99 {:.2} ms",
                        acks_name(acks),
                        rf,
                        record_bytes,
                        flush.name(),
                        cell.records_per_sec,
                        cell.mb_per_sec,
                        cell.p50_ms,
                        cell.p99_ms
                    );
                    if !cell.error_codes.is_empty() {
                        println!("  errors by Kafka code: {:?}", cell.error_codes);
                    }
                    cells.push(cell);
                }
            }
        }
    }
    drop(brokers);
    write_outputs(cfg, &cells)?;
    Ok(cells)
}

fn run_cell(
    cfg: &MatrixConfig,
    bootstrap: &str,
    acks: i16,
    rf: i16,
    record_bytes: usize,
    flush: Flush,
) -> Result<Cell, String> {
    let topic = format!("matrix-rf{rf}-{record_bytes}b-{}-acks{}", flush.name(), acks_name(acks));
    let mut configs = vec![(
        "min.insync.replicas".to_string(),
        if rf == 3 { "2" } else { "1" }.to_string(),
    )];
    if flush == Flush::GroupCommit {
        configs.push(("flush.messages".to_string(), "1".to_string()));
    }
    // About 16 KiB per batch either way.
    let batch_records = (16 * 1024 / record_bytes).max(1);
    let load = LoadConfig {
        bootstrap: bootstrap.to_string(),
        topic,
        partitions: cfg.partitions,
        record_bytes,
        batch_records,
        // One batch per request, as in every matrix recorded so far.
        request_partitions: 1,
        acks,
        inflight: cfg.inflight,
        connections: cfg.connections,
        duration: Duration::from_secs_f64(cfg.seconds),
        count: 0,
        rate: cfg.rate,
        linger: None,
        fetch_max_bytes: 1 << 20,
        replication_factor: rf,
        topic_configs: configs,
    };
    let result = load::produce(&load).map_err(|e| format!("{}: {e}", load.topic))?;
    // Each cell writes gigabytes (three copies at RF 3): its topic goes once
    // measured, so that the whole matrix needs the disk of one cell only.
    delete_topic(bootstrap, &load.topic)?;
    Ok(Cell {
        acks,
        rf,
        record_bytes,
        flush,
        records_per_sec: result.records_per_sec(),
        mb_per_sec: result.mb_per_sec(),
        p50_ms: result.ms(0.5),
        p99_ms: result.ms(0.99),
        errors: result.errors,
        error_codes: result.error_codes,
    })
}

fn delete_topic(bootstrap: &str, topic: &str) -> Result<(), String> {
    use ferrite_client::codec;
    let fail = |e: &dyn std::fmt::Display| format!("deleting {topic}: {e}");
    let mut c = ferrite_client::Connection::connect(bootstrap, "ferrite-bench").map_err(|e| fail(&e))?;
    let names = [topic.to_string()];
    let mut r = c
        .call(20, codec::DELETE_TOPICS_V, |w| codec::delete_topics(w, &names))
        .map_err(|e| fail(&e))?;
    for (name, code) in codec::decode_delete_topics(&mut r).map_err(|e| fail(&e))? {
        if code != 0 {
            return Err(format!("deleting {name}: error code {code}"));
        }
    }
    Ok(())
}

/// RF 3 acks=all throughput over RF 1 acks=1 (1 KiB records, no flush).
pub fn target_ratio(cells: &[Cell]) -> Option<f64> {
    let find = |acks: i16, rf: i16| {
        cells
            .iter()
            .find(|c| c.acks == acks && c.rf == rf && c.record_bytes == 1024 && c.flush == Flush::None)
    };
    let (all3, one1) = (find(-1, 3)?, find(1, 1)?);
    (one1.mb_per_sec > 0.0).then(|| all3.mb_per_sec / one1.mb_per_sec)
}

pub fn table(cells: &[Cell]) -> String {
    let mut t = String::from("| record | flush | RF | acks | records/s | MB/s | p50 ms | p99 ms | errors |\n|---|---|---|---|---|---|---|---|---|\n");
    for c in cells {
        let _ = writeln!(
            t,
            "| {} B | {} | {} | {} | {:.0} | {:.1} | {:.2} | {:.2} | {} |",
            c.record_bytes,
            c.flush.name(),
            c.rf,
            acks_name(c.acks),
            c.records_per_sec,
            c.mb_per_sec,
            c.p50_ms,
            c.p99_ms,
            c.errors
        );
    }
    t
}

fn write_outputs(cfg: &MatrixConfig, cells: &[Cell]) -> Result<(), String> {
    let write = |name: &str, text: String| {
        let path = cfg.out.join(name);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
    };
    let ratio = target_ratio(cells);
    let mut md = table(cells);
    if let Some(r) = ratio {
        let _ = writeln!(
            md,
            "\nRF 3 acks=all / RF 1 acks=1 (1 KiB records, no flush policy): {r:.2}"
        );
    }
    write("matrix.md", md)?;
    let json: Vec<serde_json::Value> = cells
        .iter()
        .map(|c| {
            serde_json::json!({
                "acks": acks_name(c.acks), "replication_factor": c.rf, "record_bytes": c.record_bytes,
                "flush": c.flush.name(), "records_per_sec": c.records_per_sec.round(),
                "mb_per_sec": (c.mb_per_sec * 10.0).round() / 10.0, "p50_ms": c.p50_ms, "p99_ms": c.p99_ms,
                "errors": c.errors, "error_codes": load::codes_json(&c.error_codes),
            })
        })
        .collect();
    let doc = serde_json::json!({"cells": json, "rf3_all_over_rf1_one": ratio});
    write("matrix.json", format!("{doc:#}\n"))?;
    write("matrix.svg", svg(cells))
}

/// Two bar charts side by side: MB/s and p99 ms of every cell, grouped by
/// (record size, flush, RF), one bar per ack mode.
pub fn svg(cells: &[Cell]) -> String {
    const BAR: f64 = 14.0;
    const GAP: f64 = 18.0;
    const CHART_H: f64 = 220.0;
    const TOP: f64 = 40.0;
    let colors = [(0i16, "#9ecae1"), (1, "#4292c6"), (-1, "#08519c")];
    let groups: Vec<(usize, Flush, i16)> = {
        let mut g = Vec::new();
        for c in cells {
            let k = (c.record_bytes, c.flush, c.rf);
            if !g.contains(&k) {
                g.push(k);
            }
        }
        g
    };
    let group_w = 3.0 * BAR + GAP;
    let chart_w = groups.len() as f64 * group_w + GAP;
    let width = 2.0 * chart_w + 80.0;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{:.0}\" font-family=\"sans-serif\" font-size=\"10\">\n",
        TOP + CHART_H + 110.0
    );
    for (chart, (title, value)) in [
        ("MB/s (record payload)", (|c: &Cell| c.mb_per_sec) as fn(&Cell) -> f64),
        ("p99 latency, ms", |c: &Cell| c.p99_ms),
    ]
    .into_iter()
    .enumerate()
    {
        let x0 = 40.0 + chart as f64 * (chart_w + 40.0);
        let max = cells.iter().map(value).fold(0.0f64, f64::max).max(1e-9);
        let _ = writeln!(s, "<text x=\"{x0:.0}\" y=\"20\" font-size=\"13\">{title}</text>");
        let _ = writeln!(
            s,
            "<line x1=\"{x0:.0}\" y1=\"{:.0}\" x2=\"{:.0}\" y2=\"{:.0}\" stroke=\"black\"/>",
            TOP + CHART_H,
            x0 + chart_w,
            TOP + CHART_H
        );
        let _ = writeln!(s, "<text x=\"{:.0}\" y=\"{:.0}\">{max:.1}</text>", x0 - 35.0, TOP + 4.0);
        for (gi, (bytes, flush, rf)) in groups.iter().enumerate() {
            let gx = x0 + GAP + gi as f64 * group_w;
            for (bi, (acks, color)) in colors.iter().enumerate() {
                let Some(c) = cells
                    .iter()
                    .find(|c| c.record_bytes == *bytes && c.flush == *flush && c.rf == *rf && c.acks == *acks)
                else {
                    continue;
                };
                let h = value(c) / max * CHART_H;
                let _ = writeln!(
                    s,
                    "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{BAR}\" height=\"{h:.1}\" fill=\"{color}\"/>",
                    gx + bi as f64 * BAR,
                    TOP + CHART_H - h
                );
            }
            let label = format!("{bytes}B {} RF{rf}", if *flush == Flush::None { "nf" } else { "gc" });
            let _ = writeln!(
                s,
                "<text transform=\"translate({:.1},{:.1}) rotate(45)\">{label}</text>",
                gx,
                TOP + CHART_H + 12.0
            );
        }
    }
    for (i, (acks, color)) in colors.iter().enumerate() {
        let y = TOP + CHART_H + 75.0;
        let x = 40.0 + i as f64 * 90.0;
        let _ = writeln!(
            s,
            "<rect x=\"{x:.0}\" y=\"{:.0}\" width=\"10\" height=\"10\" fill=\"{color}\"/>",
            y - 9.0
        );
        let _ = writeln!(
            s,
            "<text x=\"{:.0}\" y=\"{y:.0}\">acks={}</text>",
            x + 14.0,
            acks_name(*acks)
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"40\" y=\"{:.0}\">nf: no flush policy, gc: flush.messages=1 (group commit)</text>",
        TOP + CHART_H + 100.0
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(acks: i16, rf: i16, mb: f64) -> Cell {
        Cell {
            acks,
            rf,
            record_bytes: 1024,
            flush: Flush::None,
            records_per_sec: mb * 1000.0,
            mb_per_sec: mb,
            p50_ms: 1.0,
            p99_ms: 2.0,
            errors: 0,
            error_codes: Default::default(),
        }
    }

    #[test]
    fn the_ratio_and_the_outputs_name_every_cell() {
        let cells = vec![cell(1, 1, 200.0), cell(-1, 3, 90.0), cell(0, 3, 300.0)];
        assert_eq!(target_ratio(&cells), Some(0.45));
        let t = table(&cells);
        assert_eq!(t.lines().count(), 2 + 3);
        assert!(t.contains("| 1024 B | none | 3 | all | 90000 | 90.0 |"));
        let svg = svg(&cells);
        assert_eq!(svg.matches("<rect").count(), 3 + 3 * 2);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    }
}
