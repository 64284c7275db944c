//! The seeds' controller sequences, step by step, on the deterministic
//! harness: topic creation, broker failover, controller failover, offline
//! partitions and unclean election, controlled shutdown, preferred and
//! automatic leader balance, deletion, reassignment, and a leader changing
//! the ISR under the controller's feet.

mod sim;

use ferrite_controller::control::*;
use ferrite_controller::election::UncleanElection;
use ferrite_controller::metadata::BrokerId;
use ferrite_controller::partition_state::{ControllerEpoch, Versioned, ZkVersion};
use sim::*;

fn cluster_with_topic() -> Cluster {
    let mut c = Cluster::new(3, ControllerConfig::default());
    c.create_topic("t", 12, 3, 1);
    c.check_invariants();
    c
}

#[test]
fn creation_spreads_twelve_leaders_evenly_and_every_broker_knows_them() {
    let c = cluster_with_topic();
    let leaders = c.leaders_per_broker("t");
    assert_eq!(
        leaders.values().copied().collect::<Vec<_>>(),
        vec![4, 4, 4],
        "{leaders:?}"
    );
    for p in 0..12 {
        let s = c.state("t", p);
        assert_eq!(s.isr.len(), 3);
        assert_eq!(s.leader_epoch.0, 0);
        assert_eq!(s.controller_epoch, ControllerEpoch(1));
        let preferred = c.zk.topics["t"].replicas[p as usize][0];
        assert_eq!(s.leader, Some(preferred));
    }
    for b in c.brokers.values() {
        assert_eq!(b.metadata.len(), 12);
        assert_eq!(b.brokers.len(), 3);
        assert_eq!(
            b.replicas.len(),
            12,
            "RF 3 on 3 brokers: every broker holds every partition"
        );
    }
}

#[test]
fn broker_failover_elects_from_the_isr_and_bumps_epochs() {
    let mut c = cluster_with_topic();
    let victim = BrokerId(2);
    let led: Vec<i32> = (0..12).filter(|&p| c.state("t", p).leader == Some(victim)).collect();
    let epochs: Vec<i32> = (0..12).map(|p| c.leader_epoch("t", p).0).collect();
    c.kill(victim);
    c.check_invariants();
    for p in 0..12 {
        let s = c.state("t", p);
        assert!(!s.isr.contains(&victim), "dead broker left in ISR of {p}");
        assert_ne!(s.leader, Some(victim));
        assert_eq!(
            s.leader_epoch.0,
            epochs[p as usize] + 1,
            "partition {p}: every state changed once"
        );
    }
    for &p in &led {
        let new = c.state("t", p).leader.expect("a new leader");
        let replicas = &c.zk.topics["t"].replicas[p as usize];
        let expected = replicas.iter().copied().find(|b| *b != victim).unwrap();
        assert_eq!(new, expected, "first live ISR member in assignment order");
    }
    assert_eq!(c.leaders_per_broker("t").values().sum::<usize>(), 12);
}

#[test]
fn controller_failover_reloads_and_resends_without_changing_anything() {
    let mut c = cluster_with_topic();
    let before = c.zk.states.clone();
    c.kill(BrokerId(1));
    assert_eq!(c.zk.controller_epoch, ControllerEpoch(2));
    assert_eq!(c.controller_id, BrokerId(2));
    c.check_invariants();
    // The old controller's partitions got new leaders; nothing else moved.
    for (tp, s) in &c.zk.states {
        let old = &before[tp];
        if old.value.leader == Some(BrokerId(1)) {
            assert_eq!(s.value.controller_epoch, ControllerEpoch(2));
        }
        assert!(!s.value.isr.contains(&BrokerId(1)));
    }
    for b in [BrokerId(2), BrokerId(3)] {
        let broker = &c.brokers[&b];
        assert_eq!(broker.controller_epoch, ControllerEpoch(2));
        assert_eq!(broker.metadata.len(), 12);
    }
    // A second failover with nothing to repair writes nothing.
    let writes_before = c.zk.states.clone();
    c.elect(BrokerId(3));
    assert_eq!(c.zk.states, writes_before);
    assert!(c.controller.is_idle());
}

#[test]
fn stale_controller_requests_are_rejected_by_brokers() {
    let mut c = cluster_with_topic();
    c.elect(BrokerId(2));
    // The deposed controller still believes it rules, and acts.
    let mut old = Controller::new(ControllerConfig::default());
    let snapshot = c.snapshot();
    let actions = old.handle(Event::Elected {
        epoch: ControllerEpoch(1),
        snapshot,
    });
    let mut delivered = 0;
    for a in actions {
        if let Action::Send {
            to,
            controller_epoch,
            request,
        } = a
        {
            assert_eq!(controller_epoch, ControllerEpoch(1));
            let broker = c.brokers.get_mut(&to).unwrap();
            let (replicas, metadata) = (broker.replicas.clone(), broker.metadata.clone());
            broker.apply(to, controller_epoch, &request);
            assert_eq!(broker.replicas, replicas);
            assert_eq!(broker.metadata, metadata);
            delivered += 1;
        }
    }
    assert!(delivered >= 3);
    assert!(c.brokers.values().all(|b| b.stale_rejected >= 1));
}

#[test]
fn offline_partition_waits_for_an_isr_member_unless_unclean() {
    let mut c = Cluster::new(3, ControllerConfig::default());
    c.create_topic("t", 1, 2, 0);
    let replicas = c.zk.topics["t"].replicas[0].clone();
    let (first, second) = (replicas[0], replicas[1]);
    c.leaders_expand_isr = false;
    // The follower dies: the ISR is the leader alone.
    c.kill(second);
    assert_eq!(c.state("t", 0).isr, vec![first]);
    c.restart(second);
    assert_eq!(c.state("t", 0).isr, vec![first], "not caught up: stays out");
    // The leader dies: no ISR member left, the partition goes offline.
    c.kill(first);
    let s = c.state("t", 0).clone();
    assert_eq!(s.leader, None);
    assert_eq!(s.isr, vec![first], "the last ISR member stays recorded");
    c.check_invariants();
    // Turning unclean election on for the topic elects the stale replica.
    let mut configs = std::collections::BTreeMap::new();
    configs.insert("unclean.leader.election.enable".to_string(), "true".to_string());
    c.run(Event::TopicConfigChanged {
        topic: "t".into(),
        configs,
    });
    let s = c.state("t", 0);
    assert_eq!(s.leader, Some(second));
    assert_eq!(s.isr, vec![second]);
}

#[test]
fn the_broker_wide_unclean_setting_elects_unless_the_topic_says_otherwise() {
    let mut c = Cluster::new(3, ControllerConfig::default());
    c.create_topic("t", 1, 2, 0);
    let mut configs = std::collections::BTreeMap::new();
    configs.insert("unclean.leader.election.enable".to_string(), "false".to_string());
    c.create_topic("keep", 1, 2, 0);
    let replicas = c.zk.topics["t"].replicas[0].clone();
    let keep = c.zk.topics["keep"].replicas[0].clone();
    assert_eq!(replicas, keep, "both topics on the same brokers");
    // In ZooKeeper (a controller elected later reads it there) and told.
    c.zk.topics.get_mut("keep").expect("keep").configs = configs.clone();
    c.run(Event::TopicConfigChanged {
        topic: "keep".into(),
        configs,
    });
    let (first, second) = (replicas[0], replicas[1]);
    c.leaders_expand_isr = false;
    c.kill(second);
    c.restart(second);
    c.kill(first);
    assert_eq!(c.state("t", 0).leader, None);
    assert_eq!(
        c.state("keep", 0).leader,
        None,
        "keep offline: {:?}",
        c.state("keep", 0)
    );
    // Off again, explicitly: nothing moves.
    c.run(Event::BrokerUncleanChanged {
        unclean: Some(UncleanElection::Disabled),
    });
    assert_eq!(c.state("t", 0).leader, None);
    c.run(Event::BrokerUncleanChanged {
        unclean: Some(UncleanElection::Enabled),
    });
    assert_eq!(c.state("t", 0).leader, Some(second), "the broker-wide setting elects");
    assert_eq!(c.state("keep", 0).leader, None, "the topic's own false wins");
}

#[test]
fn offline_partition_comes_back_with_its_last_isr_member() {
    let mut c = Cluster::new(3, ControllerConfig::default());
    c.create_topic("t", 1, 2, 0);
    let replicas = c.zk.topics["t"].replicas[0].clone();
    c.leaders_expand_isr = false;
    c.kill(replicas[1]);
    c.kill(replicas[0]);
    assert_eq!(c.state("t", 0).leader, None);
    c.restart(replicas[1]);
    assert_eq!(c.state("t", 0).leader, None, "an out-of-sync replica may not lead");
    c.restart(replicas[0]);
    assert_eq!(c.state("t", 0).leader, Some(replicas[0]));
    c.leaders_expand_isr = true;
    c.expand_isrs();
    let q: Vec<Event> = c.queue.drain(..).collect();
    for e in q {
        c.run(e);
    }
    c.check_invariants();
}

#[test]
fn controlled_shutdown_moves_leaders_then_replies_empty() {
    let mut c = cluster_with_topic();
    let b = BrokerId(3);
    c.run(Event::ControlledShutdown { broker: b });
    assert_eq!(c.shutdown_replies, vec![(b, vec![])]);
    for p in 0..12 {
        let s = c.state("t", p);
        assert_ne!(s.leader, Some(b));
        assert!(!s.isr.contains(&b));
    }
    // The broker then goes; nothing more to elect.
    let states = c.zk.states.clone();
    c.kill(b);
    assert_eq!(c.zk.states, states);
    c.check_invariants();
}

#[test]
fn preferred_election_and_auto_rebalance_give_leaders_back() {
    let mut c = cluster_with_topic();
    c.kill(BrokerId(3));
    assert_eq!(c.leaders_per_broker("t").get(&BrokerId(3)), None);
    c.restart(BrokerId(3));
    c.check_invariants();
    assert!(
        c.zk.states.values().all(|s| s.value.isr.len() == 3),
        "leaders let it back in"
    );
    c.run(Event::PreferredElection {
        partitions: None,
        origin: ElectionOrigin::Request(9),
    });
    let counts = c.leaders_per_broker("t");
    assert_eq!(counts.values().copied().collect::<Vec<_>>(), vec![4, 4, 4]);
    let (id, results) = &c.election_replies[0];
    assert_eq!(*id, 9);
    assert_eq!(results.iter().filter(|(_, r)| *r == ElectionResult::Elected).count(), 4);
    assert_eq!(
        results.iter().filter(|(_, r)| *r == ElectionResult::NotNeeded).count(),
        8
    );

    // The automatic check does the same after another failure.
    c.kill(BrokerId(2));
    c.restart(BrokerId(2));
    c.run(Event::RebalanceTick);
    let counts = c.leaders_per_broker("t");
    assert_eq!(counts.values().copied().collect::<Vec<_>>(), vec![4, 4, 4]);
    c.check_invariants();
}

#[test]
fn admin_preferred_election_znode_is_removed_when_done() {
    let mut c = cluster_with_topic();
    c.kill(BrokerId(1));
    c.restart(BrokerId(1));
    let parts = vec![tp("t", 0), tp("nope", 0)];
    c.zk.preferred = Some(parts.clone());
    c.run(Event::PreferredElection {
        partitions: Some(parts),
        origin: ElectionOrigin::AdminZnode,
    });
    assert_eq!(c.zk.preferred, None);
    let preferred = c.zk.topics["t"].replicas[0][0];
    assert_eq!(c.state("t", 0).leader, Some(preferred));
}

#[test]
fn deletion_waits_for_every_replica_then_removes_the_znodes() {
    let mut c = cluster_with_topic();
    c.create_topic("keep", 2, 1, 0);
    c.kill(BrokerId(3));
    c.zk.deletions.insert("t".into());
    c.run(Event::DeletionsRequested {
        topics: vec!["t".into()],
    });
    assert!(
        c.zk.topics.contains_key("t"),
        "broker 3 has not deleted its replicas yet"
    );
    for b in [BrokerId(1), BrokerId(2)] {
        assert_eq!(c.brokers[&b].deleted.iter().filter(|x| x.topic == "t").count(), 12);
        assert!(c.brokers[&b].metadata.keys().all(|x| x.topic != "t"));
    }
    c.restart(BrokerId(3));
    assert_eq!(
        c.brokers[&BrokerId(3)]
            .deleted
            .iter()
            .filter(|x| x.topic == "t")
            .count(),
        12
    );
    assert!(!c.zk.topics.contains_key("t"));
    assert!(c.zk.states.keys().all(|x| x.topic != "t"));
    assert!(c.zk.deletions.is_empty());
    assert!(c.zk.topics.contains_key("keep"));
    // Unknown topics' requests are dropped.
    c.zk.deletions.insert("ghost".into());
    c.run(Event::DeletionsRequested {
        topics: vec!["ghost".into()],
    });
    assert!(c.zk.deletions.is_empty());
    c.check_invariants();
}

#[test]
fn reassignment_moves_replicas_and_leadership() {
    let mut c = Cluster::new(4, ControllerConfig::default());
    let t = TopicAssignment {
        name: "r".into(),
        id: [1; 16],
        replicas: vec![ids(&[1, 2, 3])],
        configs: Default::default(),
    };
    c.zk.topics.insert("r".into(), t.clone());
    c.run(Event::TopicsChanged { topics: vec![t] });
    assert_eq!(c.state("r", 0).leader, Some(BrokerId(1)));
    let target = ids(&[2, 3, 4]);
    c.zk.reassignments = vec![(tp("r", 0), target.clone())];
    c.run(Event::ReassignmentRequested {
        moves: vec![(tp("r", 0), target.clone())],
    });
    assert_eq!(c.zk.topics["r"].replicas[0], target);
    let s = c.state("r", 0);
    assert_eq!(s.leader, Some(BrokerId(2)));
    assert!(s.isr.iter().all(|b| target.contains(b)) && s.isr.len() == 3);
    assert!(c.zk.reassignments.is_empty());
    assert!(c.brokers[&BrokerId(1)].deleted.contains(&tp("r", 0)));
    assert!(c.brokers[&BrokerId(4)].replicas.contains_key(&tp("r", 0)));
    c.check_invariants();
}

#[test]
fn reassignment_waits_for_new_replicas_to_catch_up_and_survives_failover() {
    let mut c = Cluster::new(4, ControllerConfig::default());
    let t = TopicAssignment {
        name: "r".into(),
        id: [1; 16],
        replicas: vec![ids(&[1, 2, 3])],
        configs: Default::default(),
    };
    c.zk.topics.insert("r".into(), t.clone());
    c.run(Event::TopicsChanged { topics: vec![t] });
    c.leaders_expand_isr = false;
    let target = ids(&[2, 3, 4]);
    c.zk.reassignments = vec![(tp("r", 0), target.clone())];
    c.run(Event::ReassignmentRequested {
        moves: vec![(tp("r", 0), target.clone())],
    });
    assert_eq!(
        c.zk.topics["r"].replicas[0],
        ids(&[2, 3, 4, 1]),
        "union while catching up"
    );
    assert_eq!(c.state("r", 0).leader, Some(BrokerId(1)));
    assert_eq!(c.zk.reassignments.len(), 1);
    // The controller moves; the new one resumes from the znodes.
    c.elect(BrokerId(3));
    c.leaders_expand_isr = true;
    c.expand_isrs();
    let q: Vec<Event> = c.queue.drain(..).collect();
    for e in q {
        c.run(e);
    }
    assert_eq!(c.zk.topics["r"].replicas[0], target);
    assert_eq!(c.state("r", 0).leader, Some(BrokerId(2)));
    assert!(c.zk.reassignments.is_empty());
    c.check_invariants();
}

#[test]
fn a_concurrent_isr_change_makes_the_controller_decide_again() {
    let mut c = cluster_with_topic();
    let p = (0..12).find(|&p| c.state("t", p).leader == Some(BrokerId(1))).unwrap();
    // The leader shrinks the ISR in ZooKeeper; the controller has not heard yet.
    let mut s = c.zk.states[&tp("t", p)].clone();
    s.value.isr.retain(|b| *b != BrokerId(2));
    s.version = ZkVersion(s.version.0 + 1);
    c.zk.states.insert(tp("t", p), s.clone());
    c.leaders_expand_isr = false;
    c.kill(BrokerId(1));
    let now = c.state("t", p);
    assert_eq!(
        now.leader,
        Some(BrokerId(3)),
        "elected from the ISR found in ZooKeeper: {now:?}"
    );
    assert!(!now.isr.contains(&BrokerId(2)));
    let v: &Versioned<_> = &c.zk.states[&tp("t", p)];
    assert!(v.version > s.version);
}

#[test]
fn new_partitions_of_a_known_topic_get_states() {
    let mut c = cluster_with_topic();
    let mut t = c.zk.topics["t"].clone();
    let more = ferrite_controller::assignment::assign("t", &ids(&[1, 2, 3]), 12, 3, 3, 0, 0).unwrap();
    t.replicas.extend(more);
    c.zk.topics.insert("t".into(), t.clone());
    c.run(Event::TopicsChanged { topics: vec![t] });
    assert_eq!(c.zk.states.len(), 15);
    c.check_invariants();
}

#[test]
fn a_broker_restarting_unnoticed_gets_its_state_again() {
    let mut c = cluster_with_topic();
    // Broker 2 restarts between two watch notifications: same id, new epoch.
    c.brokers.insert(BrokerId(2), FakeBroker::default());
    c.restart(BrokerId(2));
    c.check_invariants();
    assert_eq!(c.brokers[&BrokerId(2)].replicas.len(), 12);
}

/// A damaged replica leaves the ISR in a new epoch (the LeaderAndIsr that
/// lets it cut its log below the high watermark); a damaged leader hands
/// leadership to the first in-sync replica first.
#[test]
fn a_damaged_replica_leaves_the_isr_and_a_damaged_leader_hands_over() {
    let mut c = cluster_with_topic();
    c.create_topic("solo", 1, 1, 1);
    // Followers here are caught up at once; the damaged one is not.
    c.leaders_expand_isr = false;
    let tp = |t: &str, p: i32| ferrite_ids::TopicPartition::new(t, p);
    let damaged = c.state("t", 0).leader.expect("a leader");
    let follower = c.zk.topics["t"].replicas[1]
        .iter()
        .copied()
        .find(|b| Some(*b) != c.state("t", 1).leader)
        .expect("a follower");
    let (epoch0, state1) = (c.leader_epoch("t", 0), c.state("t", 1).clone());
    let epoch1 = state1.leader_epoch;
    let solo = c.state("solo", 0).clone();
    c.run(Event::ReplicasDamaged {
        replicas: vec![
            (damaged, tp("t", 0)),
            (follower, tp("t", 1)),
            (solo.leader.expect("a leader"), tp("solo", 0)),
        ],
    });
    let s = c.state("t", 0).clone();
    assert_ne!(s.leader, Some(damaged));
    assert!(!s.isr.contains(&damaged), "{s:?}");
    assert_eq!(s.isr.len(), 2);
    assert_eq!(s.leader_epoch.0, epoch0.0 + 1);
    let replicas = &c.zk.topics["t"].replicas[0];
    assert_eq!(s.leader, replicas.iter().copied().find(|b| *b != damaged));
    let s1 = c.state("t", 1).clone();
    assert_eq!(s1.leader, state1.leader, "a follower's damage moves no leadership");
    assert!(!s1.isr.contains(&follower), "{s1:?}");
    assert_eq!(s1.isr.len(), 2);
    assert_eq!(s1.leader_epoch.0, epoch1.0 + 1, "a new epoch tells the follower");
    assert_eq!(*c.state("solo", 0), solo, "no other replica to lead: nothing moves");
    c.check_invariants();
    // Reported again (a notice left over, or its damage found again):
    // already out of the ISR, it still gets a new epoch to cut on.
    c.run(Event::ReplicasDamaged {
        replicas: vec![(damaged, tp("t", 0))],
    });
    let again = c.state("t", 0);
    assert_eq!((again.leader, &again.isr), (s.leader, &s.isr));
    assert_eq!(again.leader_epoch.0, s.leader_epoch.0 + 1);
    c.check_invariants();
}
