//! Per-partition gauges, read from the logs and replicas when `/metrics`
//! is scraped rather than pushed into the recorder on a timer: a broker of
//! tens of thousands of idle partitions then spends nothing on them
//! between scrapes, and keeps no registry entry per partition and gauge.
//!
//! Each shard writes the lines of the partitions it owns; the scraping
//! shard gathers them (one message per other shard per scrape) and prints
//! each gauge's `# TYPE` line once, followed by every shard's lines.

use std::fmt::Write as _;
use std::rc::Rc;

use ferrite_engine::ShardId;

use crate::shard::BrokerShard;

/// The gauges, in the order they are printed.
const GAUGES: [&str; 7] = [
    "ferrite_log_size_bytes",
    "ferrite_log_end_offset",
    "ferrite_log_durable_offset",
    "ferrite_log_start_offset",
    // In a cluster: the high watermark beside the durable offset, whether
    // this broker leads, and the ISR size as the leader sees it.
    "ferrite_partition_high_watermark",
    "ferrite_partition_leader",
    "ferrite_partition_isr_size",
];

/// One text block per gauge, of this shard's partitions.
type Lines = Vec<String>;

/// The Prometheus text of every partition gauge of every shard.
pub async fn render(shard: &Rc<BrokerShard>) -> String {
    let mut per_gauge: Lines = vec![String::new(); GAUGES.len()];
    for s in 0..shard.shard_count() {
        let lines = if ShardId(s) == shard.id {
            shard_lines(shard)
        } else {
            // A shard that is stopping has nothing to add.
            shard
                .handle
                .submit(ShardId(s), |other: Rc<BrokerShard>| async move { shard_lines(&other) })
                .await
                .unwrap_or_default()
        };
        for (block, more) in per_gauge.iter_mut().zip(lines) {
            block.push_str(&more);
        }
    }
    let mut out = String::new();
    for (name, block) in GAUGES.iter().zip(per_gauge) {
        if !block.is_empty() {
            let _ = writeln!(out, "# TYPE {name} gauge");
            out.push_str(&block);
        }
    }
    out
}

/// This shard's partitions' lines, one block per gauge.
fn shard_lines(shard: &BrokerShard) -> Lines {
    let mut lines: Lines = vec![String::new(); GAUGES.len()];
    for tp in shard.logs.partitions() {
        let Some(log) = shard.logs.get(&tp) else { continue };
        let mut values = [None; GAUGES.len()];
        values[0] = Some(log.size_bytes() as i64);
        values[1] = Some(log.log_end_offset().0);
        values[2] = Some(log.durable_offset().0);
        values[3] = Some(log.log_start_offset().0);
        if let Some(r) = shard.replicas.as_ref().and_then(|r| r.get(&tp)) {
            values[4] = Some(r.hw().0);
            values[5] = Some(i64::from(r.role() == ferrite_replication::RoleKind::Leader));
            values[6] = Some(r.isr().map_or(0, |i| i.len()) as i64);
        }
        for ((block, name), value) in lines.iter_mut().zip(GAUGES).zip(values) {
            if let Some(v) = value {
                // Topic names are [a-zA-Z0-9._-]: nothing to escape.
                let _ = writeln!(
                    block,
                    "{name}{{topic=\"{}\",partition=\"{}\"}} {v}",
                    tp.topic, tp.partition
                );
            }
        }
    }
    lines
}
