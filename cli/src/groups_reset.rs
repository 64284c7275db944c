//! `ferrite groups reset-offsets`: each selected partition's new offset,
//! clamped to the log's bounds, printed, and committed with `--execute`
//! while the group has no members (the parent module's doc has the
//! command's whole contract).

use super::*;
use ferrite_ids::{LeaderEpoch, Offset, TimestampMs};
/// `T` (every partition: `None`) or `T:P1,P2`.
fn parse_topic(spec: &str) -> Result<(String, Option<Vec<i32>>), ClientError> {
    let bad = || fail(format!("--topic {spec}: expected TOPIC or TOPIC:P1,P2"));
    match spec.split_once(':') {
        None if !spec.is_empty() => Ok((spec.to_string(), None)),
        None => Err(bad()),
        Some((t, ps)) if !t.is_empty() => {
            let ps = ps
                .split(',')
                .map(|p| p.trim().parse::<i32>().map_err(|_| bad()))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((t.to_string(), Some(ps)))
        }
        Some(_) => Err(bad()),
    }
}

/// The partitions the specs name, each checked to exist.
fn select_partitions(meta: &MetadataInfo, specs: &[(String, Option<Vec<i32>>)]) -> Result<BTreeSet<Tp>, ClientError> {
    let mut out = BTreeSet::new();
    for (name, wanted) in specs {
        let t = meta
            .topics
            .iter()
            .find(|t| &t.name == name)
            .ok_or_else(|| fail(format!("topic {name}: not in the metadata")))?;
        if t.error != 0 {
            return Err(kafka_error(&format!("topic {name}"), t.error, None));
        }
        let all: BTreeSet<i32> = t.partitions.iter().map(|p| p.partition).collect();
        let chosen = wanted.clone().unwrap_or_else(|| all.iter().copied().collect());
        if let Some(p) = chosen.iter().find(|p| !all.contains(p)) {
            return Err(fail(format!("topic {name} has no partition {p}")));
        }
        out.extend(chosen.into_iter().map(|p| (name.clone(), p)));
    }
    Ok(out)
}

/// The new offset of one partition whose log spans [start, end].
pub(super) fn new_offset(
    target: &ResetTarget,
    tp: &Tp,
    start: i64,
    end: i64,
    current: Option<i64>,
) -> Result<i64, ClientError> {
    let want = if target.to_earliest {
        start
    } else if target.to_latest {
        end
    } else if let Some(o) = target.to_offset {
        o
    } else {
        let n = target.shift_by.unwrap_or(0);
        let c = current.ok_or_else(|| {
            fail(format!(
                "cannot shift {}-{}: the group has no committed offset there",
                tp.0, tp.1
            ))
        })?;
        c.saturating_add(n)
    };
    Ok(want.min(end).max(start))
}

/// The log start and end of each partition, failing on any error.
fn log_bounds(meta: &MetadataInfo, tps: &BTreeSet<Tp>) -> Result<BTreeMap<Tp, (i64, i64)>, ClientError> {
    let starts = log_offsets(meta, tps, EARLIEST);
    let ends = log_offsets(meta, tps, LATEST);
    let mut out = BTreeMap::new();
    for tp in tps {
        let get = |m: &BTreeMap<Tp, Result<i64, String>>, what: &str| match m.get(tp) {
            Some(Ok(o)) => Ok(*o),
            Some(Err(e)) => Err(fail(format!("the {what} offset of {}-{}: {e}", tp.0, tp.1))),
            None => Err(fail(format!("the {what} offset of {}-{}: no answer", tp.0, tp.1))),
        };
        out.insert(tp.clone(), (get(&starts, "earliest")?, get(&ends, "latest")?));
    }
    Ok(out)
}

/// Refuses to commit for a group with members, as Kafka's tool does.
fn ensure_inactive(boot: &mut Connection, group: &str) -> Result<(), ClientError> {
    let g = describe_group(boot, group)?;
    if g.group_state == "Empty" || g.group_state == "Dead" {
        return Ok(());
    }
    Err(fail(format!(
        "group '{group}' has active members (state {}, {} member(s)): offsets can only be reset \
         while the group has no members; stop its consumers first",
        g.group_state,
        g.members.len()
    )))
}

pub(super) fn reset_offsets(boot: &mut Connection, args: &ResetArgs, out: &mut dyn Write) -> Result<(), ClientError> {
    let specs = args
        .topics
        .iter()
        .map(|s| parse_topic(s))
        .collect::<Result<Vec<_>, _>>()?;
    let mut names: Vec<String> = specs.iter().map(|(t, _)| t.clone()).collect();
    names.sort();
    names.dedup();
    let meta = metadata(boot, &names)?;
    let tps = select_partitions(&meta, &specs)?;
    if args.execute {
        ensure_inactive(boot, &args.group)?;
    }
    let current = match args.target.shift_by {
        Some(_) => fetch_offsets(boot, &args.group)?,
        None => BTreeMap::new(),
    };
    let bounds = log_bounds(&meta, &tps)?;
    let mut plan = BTreeMap::new();
    for tp in &tps {
        let (start, end) = bounds[tp];
        let o = new_offset(&args.target, tp, start, end, current.get(tp).copied())?;
        plan.insert(tp.clone(), o);
    }
    if args.execute {
        commit(boot, &args.group, &plan)?;
    }
    let rows: Vec<Vec<String>> = plan
        .iter()
        .map(|((t, p), o)| vec![t.clone(), p.to_string(), o.to_string()])
        .collect();
    table(out, "TOPIC|PARTITION|NEW-OFFSET", &rows)?;
    if !args.execute {
        writeln!(out, "(dry run: nothing committed; add --execute to commit)").map_err(io)?;
    }
    Ok(())
}

/// OffsetCommit as an administrator: generation -1 and no member id.
fn commit(boot: &mut Connection, group: &str, plan: &BTreeMap<Tp, i64>) -> Result<(), ClientError> {
    let mut topics = Vec::new();
    for (name, ps) in by_topic(plan.keys()) {
        let partitions = ps
            .iter()
            .map(|p| go::OffsetCommitPartition {
                partition_index: *p,
                committed_offset: Offset(plan[&(name.clone(), *p)]),
                committed_leader_epoch: LeaderEpoch::NONE,
                commit_timestamp: TimestampMs::NONE,
                committed_metadata: Some(String::new()),
            })
            .collect();
        topics.push(go::OffsetCommitTopic {
            topic: name,
            partitions,
        });
    }
    let req = go::OffsetCommitRequest {
        group_id: group.to_string(),
        generation_id: go::UNSET,
        member_id: String::new(),
        group_instance_id: None,
        retention_time_ms: i64::from(go::UNSET),
        topics,
    };
    let resp = at_coordinator(boot, group, &req)?;
    let failed: Vec<&go::OffsetPartitionResult> = resp
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .filter(|p| p.error_code != 0)
        .collect();
    let Some(first) = failed.first().map(|p| p.error_code) else {
        return Ok(());
    };
    let what = format!(
        "committing offsets of group '{group}' ({} partition(s) failed)",
        failed.len()
    );
    let busy = [
        ErrorCode::UnknownMemberId,
        ErrorCode::IllegalGeneration,
        ErrorCode::RebalanceInProgress,
    ];
    let hint = busy.iter().any(|e| e.code() == first).then_some(
        "the group has active members: offsets can only be reset while it has none (stop its consumers first)",
    );
    Err(kafka_error(&what, first, hint))
}
