use super::*;

const SESSION_MS: u64 = 10_000;
const REBALANCE_MS: u64 = 30_000;

fn cfg(delay_ms: u64) -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: delay_ms,
        ..GroupConfig::default()
    }
}

fn join_req(member_id: &str, protocols: &[&str]) -> JoinRequest {
    JoinRequest {
        member_id: member_id.to_string(),
        instance_id: None,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: SESSION_MS,
        rebalance_timeout_ms: REBALANCE_MS,
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|p| (p.to_string(), Bytes::from(format!("meta-{member_id}-{p}"))))
            .collect(),
        policy: MemberIdPolicy::AssignedOnJoin,
    }
}

fn later(o: Outcome<JoinAnswer>) -> String {
    match o {
        Outcome::Later { member_id } => member_id,
        Outcome::Now(a) => panic!("expected to wait, got {a:?}"),
    }
}

fn joins(g: &mut Group) -> BTreeMap<String, JoinAnswer> {
    g.take_deliveries()
        .into_iter()
        .filter_map(|d| match d {
            Delivery::Join { member_id, answer } => Some((member_id, answer)),
            Delivery::Sync { .. } => None,
        })
        .collect()
}

fn syncs(g: &mut Group) -> BTreeMap<String, SyncAnswer> {
    g.take_deliveries()
        .into_iter()
        .filter_map(|d| match d {
            Delivery::Sync { member_id, answer } => Some((member_id, answer)),
            Delivery::Join { .. } => None,
        })
        .collect()
}

fn sync_req(g: &Group, id: &str, assignments: Vec<(String, Bytes)>) -> SyncRequest {
    SyncRequest {
        member_id: id.to_string(),
        instance_id: None,
        generation: g.generation(),
        protocol_type: None,
        protocol: None,
        assignments,
    }
}

/// Three members joined within the initial delay, then synced: returns the
/// group at generation 1, Stable, and the member ids (leader first).
fn stable_three(c: &GroupConfig) -> (Group, Vec<String>) {
    let mut g = Group::new("g");
    let a = later(g.join(join_req("", &["range"]), "a".into(), MonoMs(0), c));
    let b = later(g.join(join_req("", &["range"]), "b".into(), MonoMs(10), c));
    let cc = later(g.join(join_req("", &["range"]), "c".into(), MonoMs(20), c));
    g.tick(MonoMs(20 + c.initial_rebalance_delay_ms), c);
    let answers = joins(&mut g);
    assert_eq!(answers.len(), 3);
    assert_eq!(g.state(), GroupState::CompletingRebalance);
    let leader = g.leader().unwrap_or_default().to_string();
    let assignments = vec![
        (a.clone(), Bytes::from_static(b"A")),
        (b.clone(), Bytes::from_static(b"B")),
        (cc.clone(), Bytes::from_static(b"C")),
    ];
    assert!(matches!(
        g.sync(sync_req(&g, &leader, assignments), MonoMs(3_100)),
        Outcome::Later { .. }
    ));
    assert_eq!(g.state(), GroupState::Stable);
    let mut ids = vec![leader.clone()];
    ids.extend([a, b, cc].into_iter().filter(|x| *x != leader));
    (g, ids)
}

#[test]
fn initial_delay_gathers_one_rebalance_for_members_starting_together() {
    let c = cfg(3_000);
    let mut g = Group::new("g");
    for (i, id) in ["a", "b", "c"].iter().enumerate() {
        later(g.join(join_req("", &["range"]), id.to_string(), MonoMs(i as u64 * 10), &c));
    }
    g.tick(MonoMs(3_019), &c);
    assert!(g.take_deliveries().is_empty(), "the delay runs from the last join");
    assert_eq!(g.state(), GroupState::PreparingRebalance);
    g.tick(MonoMs(3_020), &c);
    let answers = joins(&mut g);
    assert_eq!(answers.len(), 3);
    assert_eq!(g.generation(), 1);
    let leader = g.leader().unwrap_or_default().to_string();
    for (id, a) in &answers {
        assert_eq!(a.error, None);
        assert_eq!(a.generation, 1);
        assert_eq!(a.protocol.as_deref(), Some("range"));
        assert_eq!(a.leader, leader);
        let expected = if *id == leader { 3 } else { 0 };
        assert_eq!(a.members.len(), expected, "only the leader gets the members");
    }
}

#[test]
fn leader_sync_hands_out_assignments() {
    let c = cfg(3_000);
    let (mut g, ids) = stable_three(&c);
    let leader_answer = syncs(&mut g);
    assert_eq!(leader_answer.len(), 1, "the leader waited for its own assignment");
    assert!(g.take_persist(), "the assignment is written");
    for id in &ids[1..] {
        match g.sync(sync_req(&g, id, Vec::new()), MonoMs(3_200)) {
            Outcome::Now(a) => {
                assert_eq!(a.error, None);
                assert_eq!(a.assignment.as_ref(), id.to_uppercase().as_bytes());
            }
            Outcome::Later { .. } => panic!("stable group answers at once"),
        }
    }
}

#[test]
fn follower_sync_waits_for_the_leader() {
    let c = cfg(0);
    let mut g = Group::new("g");
    let a = later(g.join(join_req("", &["range"]), "a".into(), MonoMs(0), &c));
    joins(&mut g);
    assert_eq!(g.generation(), 1);
    // b joins: a must rejoin.
    let b = later(g.join(join_req("", &["range"]), "b".into(), MonoMs(5), &c));
    assert_eq!(g.state(), GroupState::PreparingRebalance);
    assert_eq!(
        g.heartbeat(&a, None, 1, MonoMs(6)),
        Err(GroupError::RebalanceInProgress)
    );
    later(g.join(join_req(&a, &["range"]), String::new(), MonoMs(7), &c));
    assert_eq!(joins(&mut g).len(), 2);
    assert_eq!(g.generation(), 2);
    let follower = if g.leader() == Some(a.as_str()) {
        b.clone()
    } else {
        a.clone()
    };
    let leader = g.leader().unwrap_or_default().to_string();
    assert!(matches!(
        g.sync(sync_req(&g, &follower, Vec::new()), MonoMs(8)),
        Outcome::Later { .. }
    ));
    assert!(g.take_deliveries().is_empty());
    let assignment = vec![(follower.clone(), Bytes::from_static(b"F"))];
    later_sync(g.sync(sync_req(&g, &leader, assignment), MonoMs(9)));
    let answers = syncs(&mut g);
    assert_eq!(answers.len(), 2);
    assert_eq!(answers[&follower].assignment.as_ref(), b"F");
    assert_eq!(answers[&leader].assignment.len(), 0, "the leader gave itself nothing");
}

fn later_sync(o: Outcome<SyncAnswer>) {
    assert!(matches!(o, Outcome::Later { .. }), "{o:?}");
}

#[test]
fn heartbeats_fence_unknown_members_and_old_generations() {
    let c = cfg(3_000);
    let (mut g, ids) = stable_three(&c);
    assert_eq!(g.heartbeat(&ids[0], None, 1, MonoMs(3_300)), Ok(()));
    assert_eq!(
        g.heartbeat(&ids[0], None, 0, MonoMs(3_300)),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        g.heartbeat("nobody", None, 1, MonoMs(3_300)),
        Err(GroupError::UnknownMemberId)
    );
    match g.sync(sync_req(&g, "nobody", Vec::new()), MonoMs(3_300)) {
        Outcome::Now(a) => assert_eq!(a.error, Some(GroupError::UnknownMemberId)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_expired_session_removes_the_member_and_rebalances_the_rest() {
    let c = cfg(3_000);
    let (mut g, ids) = stable_three(&c);
    g.take_deliveries();
    let dead = ids[2].clone();
    // The other two heartbeat; the third goes quiet.
    let mut t = 3_100;
    while t < 3_100 + SESSION_MS + 500 {
        t += 1_000;
        for id in &ids[..2] {
            let r = g.heartbeat(id, None, g.generation(), MonoMs(t));
            if r.is_err() {
                assert_eq!(r, Err(GroupError::RebalanceInProgress));
            }
        }
        g.tick(MonoMs(t), &c);
    }
    assert_eq!(g.state(), GroupState::PreparingRebalance);
    assert!(!g.members().any(|m| m.member_id == dead));
    for id in &ids[..2] {
        later(g.join(join_req(id, &["range"]), String::new(), MonoMs(t), &c));
    }
    assert_eq!(joins(&mut g).len(), 2);
    assert_eq!(g.generation(), 2);
}

#[test]
fn a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() {
    let c = cfg(3_000);
    let (mut g, ids) = stable_three(&c);
    g.take_deliveries();
    // A fourth member joins; two of the three rejoin, one keeps
    // heartbeating without rejoining.
    later(g.join(join_req("", &["range"]), "d".into(), MonoMs(4_000), &c));
    later(g.join(join_req(&ids[0], &["range"]), String::new(), MonoMs(4_001), &c));
    later(g.join(join_req(&ids[1], &["range"]), String::new(), MonoMs(4_002), &c));
    let mut t = 4_002;
    while t < 4_000 + REBALANCE_MS {
        t += 1_000;
        assert_eq!(
            g.heartbeat(&ids[2], None, 1, MonoMs(t)),
            Err(GroupError::RebalanceInProgress)
        );
        g.tick(MonoMs(t), &c);
    }
    let answers = joins(&mut g);
    assert_eq!(answers.len(), 3, "{answers:?}");
    assert!(!answers.contains_key(&ids[2]));
    assert_eq!(g.member_count(), 3);
    assert_eq!(
        g.heartbeat(&ids[2], None, 2, MonoMs(t)),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn member_id_required_then_join_with_it() {
    let c = cfg(0);
    let mut g = Group::new("g");
    let mut req = join_req("", &["range"]);
    req.policy = MemberIdPolicy::Required;
    let given = match g.join(req, "m-1".into(), MonoMs(0), &c) {
        Outcome::Now(a) => {
            assert_eq!(a.error, Some(GroupError::MemberIdRequired));
            a.member_id
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(given, "m-1");
    assert_eq!(g.member_count(), 0);
    later(g.join(join_req(&given, &["range"]), "unused".into(), MonoMs(1), &c));
    assert_eq!(joins(&mut g)[&given].generation, 1);
    // An id nobody handed out is refused.
    match g.join(join_req("made-up", &["range"]), String::new(), MonoMs(2), &c) {
        Outcome::Now(a) => assert_eq!(a.error, Some(GroupError::UnknownMemberId)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_static_member_rejoining_keeps_its_assignment_and_fences_its_old_id() {
    let c = cfg(0);
    let mut g = Group::new("g");
    let mut s = join_req("", &["range"]);
    s.instance_id = Some("inst-1".into());
    let leader = later(g.join(join_req("", &["range"]), "lead".into(), MonoMs(0), &c));
    joins(&mut g);
    let old = later(g.join(s.clone(), "s-old".into(), MonoMs(1), &c));
    later(g.join(join_req(&leader, &["range"]), String::new(), MonoMs(2), &c));
    joins(&mut g);
    let assignments = vec![(old.clone(), Bytes::from_static(b"S"))];
    later_sync(g.sync(sync_req(&g, &leader, assignments), MonoMs(3)));
    g.take_deliveries();
    assert_eq!(g.state(), GroupState::Stable);
    let generation = g.generation();
    // The static member restarts and joins with no member id.
    let new = match g.join(s, "s-new".into(), MonoMs(4), &c) {
        Outcome::Now(a) => {
            assert_eq!(a.error, None);
            assert_eq!(a.generation, generation, "no rebalance");
            a.member_id
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(new, "s-new");
    assert_eq!(g.state(), GroupState::Stable);
    let mut req = sync_req(&g, &new, Vec::new());
    req.instance_id = Some("inst-1".into());
    match g.sync(req, MonoMs(5)) {
        Outcome::Now(a) => assert_eq!(a.assignment.as_ref(), b"S"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        g.heartbeat(&old, Some("inst-1"), generation, MonoMs(6)),
        Err(GroupError::FencedInstanceId)
    );
}

#[test]
fn leaving_rebalances_and_the_last_one_out_empties_the_group() {
    let c = cfg(3_000);
    let (mut g, ids) = stable_three(&c);
    g.take_deliveries();
    g.take_persist();
    let r = g.leave(&[(ids[2].clone(), None), ("ghost".into(), None)], MonoMs(4_000), &c);
    assert_eq!(r, vec![Ok(()), Err(GroupError::UnknownMemberId)]);
    assert_eq!(g.state(), GroupState::PreparingRebalance);
    let r = g.leave(&[(ids[0].clone(), None), (ids[1].clone(), None)], MonoMs(4_001), &c);
    assert_eq!(r, vec![Ok(()), Ok(())]);
    assert_eq!(g.state(), GroupState::Empty);
    assert!(g.take_persist());
    assert_eq!(g.generation(), 2);
}

#[test]
fn commits_need_the_current_generation_unless_the_group_is_empty() {
    let c = cfg(3_000);
    let mut empty = Group::new("e");
    assert_eq!(empty.check_commit("", None, -1, MonoMs(0)), Ok(()));
    let (mut g, ids) = stable_three(&c);
    assert_eq!(g.check_commit(&ids[0], None, 1, MonoMs(3_200)), Ok(()));
    assert_eq!(
        g.check_commit(&ids[0], None, 0, MonoMs(3_200)),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        g.check_commit("", None, -1, MonoMs(3_200)),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn the_protocol_chosen_is_common_to_all_and_most_preferred() {
    let c = cfg(0);
    let mut g = Group::new("g");
    later(g.join(join_req("", &["range", "roundrobin"]), "a".into(), MonoMs(0), &c));
    joins(&mut g);
    later(g.join(join_req("", &["roundrobin", "range"]), "b".into(), MonoMs(1), &c));
    later(g.join(join_req("a", &["range", "roundrobin"]), String::new(), MonoMs(2), &c));
    joins(&mut g);
    later(g.join(join_req("", &["roundrobin"]), "c".into(), MonoMs(3), &c));
    later(g.join(join_req("a", &["range", "roundrobin"]), String::new(), MonoMs(4), &c));
    later(g.join(join_req("b", &["roundrobin", "range"]), String::new(), MonoMs(5), &c));
    joins(&mut g);
    assert_eq!(g.protocol(), Some("roundrobin"));
    match g.join(join_req("", &["sticky"]), "d".into(), MonoMs(6), &c) {
        Outcome::Now(a) => assert_eq!(a.error, Some(GroupError::InconsistentGroupProtocol)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_leader_that_never_syncs_is_dropped_at_the_rebalance_timeout() {
    let c = cfg(0);
    let mut g = Group::new("g");
    let a = later(g.join(join_req("", &["range"]), "a".into(), MonoMs(0), &c));
    joins(&mut g);
    let b = later(g.join(join_req("", &["range"]), "b".into(), MonoMs(1), &c));
    later(g.join(join_req(&a, &["range"]), String::new(), MonoMs(2), &c));
    joins(&mut g);
    let follower = if g.leader() == Some(a.as_str()) { b } else { a };
    later_sync(g.sync(sync_req(&g, &follower, Vec::new()), MonoMs(3)));
    g.tick(MonoMs(3 + REBALANCE_MS), &c);
    let answers = syncs(&mut g);
    assert_eq!(answers[&follower].error, Some(GroupError::RebalanceInProgress));
    assert_eq!(g.member_count(), 1);
}

#[test]
fn session_timeouts_outside_the_bounds_are_refused() {
    let c = cfg(0);
    let mut g = Group::new("g");
    let mut req = join_req("", &["range"]);
    req.session_timeout_ms = 100;
    match g.join(req, "x".into(), MonoMs(0), &c) {
        Outcome::Now(a) => assert_eq!(a.error, Some(GroupError::InvalidSessionTimeout)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_snapshot_loads_as_a_stable_group() {
    let c = cfg(3_000);
    let (g, ids) = stable_three(&c);
    let loaded = Group::from_snapshot("g", g.snapshot(), MonoMs(50_000));
    assert_eq!(loaded.state(), GroupState::Stable);
    assert_eq!(loaded.generation(), 1);
    assert_eq!(loaded.member_count(), 3);
    let mut loaded = loaded;
    assert_eq!(loaded.heartbeat(&ids[1], None, 1, MonoMs(50_001)), Ok(()));
}

#[test]
fn a_static_leader_rejoining_keeps_the_generation_and_gets_the_members() {
    let c = cfg(0);
    let mut g = Group::new("g");
    let mut s = join_req("", &["range"]);
    s.instance_id = Some("lead".into());
    let old = later(g.join(s.clone(), "a-old".into(), MonoMs(0), &c));
    joins(&mut g);
    later(g.join(join_req("", &["range"]), "z".into(), MonoMs(1), &c));
    let mut again = s.clone();
    again.member_id = old.clone();
    later(g.join(again, String::new(), MonoMs(2), &c));
    joins(&mut g);
    assert_eq!(g.leader(), Some(old.as_str()), "a-old sorts first");
    later_sync(g.sync(
        sync_req(&g, &old, vec![("z".into(), Bytes::from_static(b"Z"))]),
        MonoMs(3),
    ));
    g.take_deliveries();
    let generation = g.generation();
    match g.join(s, "a-new".into(), MonoMs(4), &c) {
        Outcome::Now(a) => {
            assert_eq!(a.generation, generation);
            assert_eq!(a.leader, "a-new");
            assert_eq!(a.members.len(), 2, "the leader gets the members");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(g.state(), GroupState::Stable);
    // Its new assignment is ignored: the group is stable.
    let mut req = sync_req(&g, "a-new", vec![("z".into(), Bytes::from_static(b"other"))]);
    req.instance_id = Some("lead".into());
    assert!(matches!(g.sync(req, MonoMs(5)), Outcome::Now(_)));
    match g.sync(sync_req(&g, "z", Vec::new()), MonoMs(6)) {
        Outcome::Now(a) => assert_eq!(a.assignment.as_ref(), b"Z"),
        other => panic!("{other:?}"),
    }
}
