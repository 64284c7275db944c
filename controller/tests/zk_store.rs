//! The ZooKeeper store against a real ZooKeeper server: Kafka's znodes and
//! shapes, the controller election and its epoch guard, conditional state
//! writes, admin requests, ISR change notifications.

use std::collections::BTreeMap;
use std::time::Duration;

use ferrite_controller::control::{StateWrite, WriteOutcome, ZkChange};
use ferrite_controller::metadata::{BrokerId, BrokerMeta};
use ferrite_controller::partition_state::{ControllerEpoch, PartitionState, ZkVersion};
use ferrite_controller::zk::{IsrWrite, ZkStore};
use ferrite_controller::ControllerError;
use ferrite_ids::{LeaderEpoch, TopicPartition};
use ferrite_testkit::zookeeper::ZooKeeper;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn meta(id: i32) -> BrokerMeta {
    BrokerMeta {
        id: BrokerId(id),
        host: "127.0.0.1".into(),
        port: 9000 + id as u16,
        rack: Some("r1".into()),
    }
}

async fn store(zk: &ZooKeeper) -> ZkStore {
    let s = ZkStore::connect(&zk.connect_string(), Duration::from_secs(6))
        .await
        .unwrap();
    s.ensure_paths().await.unwrap();
    s
}

#[test]
fn election_epoch_guard_and_conditional_state_writes() {
    let zk = ZooKeeper::standalone();
    runtime().block_on(async {
        let a = store(&zk).await;
        let b = store(&zk).await;
        assert_eq!(a.cluster_id("first".into()).await.unwrap(), "first");
        assert_eq!(b.cluster_id("second".into()).await.unwrap(), "first");
        let epoch_a = a.register_broker(&meta(1), Duration::ZERO).await.unwrap();
        let epoch_b = b.register_broker(&meta(2), Duration::ZERO).await.unwrap();
        assert_ne!(epoch_a, epoch_b);
        let live = a.live_brokers().await.unwrap();
        assert_eq!(live.len(), 2);
        assert_eq!(live[0].meta, meta(1));

        let guard_a = a.try_elect(BrokerId(1)).await.unwrap().expect("first controller");
        assert_eq!(guard_a.epoch, ControllerEpoch(1));
        assert_eq!(
            a.controller_epoch().await.unwrap(),
            Some((ControllerEpoch(1), guard_a.version)),
            "the guard holds the epoch znode's version"
        );
        assert!(b.try_elect(BrokerId(2)).await.unwrap().is_none());
        assert_eq!(b.controller().await.unwrap(), Some(BrokerId(1)));
        assert_eq!(
            b.controller_epoch().await.unwrap(),
            Some((ControllerEpoch(1), guard_a.version)),
            "a lost election moves no epoch"
        );

        let tp = TopicPartition::new("t", 0);
        let state = PartitionState::initial(Some(BrokerId(1)), vec![BrokerId(1), BrokerId(2)], guard_a.epoch);
        let create = StateWrite {
            partition: tp.clone(),
            state: state.clone(),
            expected: None,
        };
        let r = a.write_states(guard_a, std::slice::from_ref(&create)).await.unwrap();
        assert_eq!(r[0].1, WriteOutcome::Written(ZkVersion(0)));
        // Creating again, or writing at a stale version, conflicts and
        // reports what is there.
        let r = a.write_states(guard_a, &[create]).await.unwrap();
        let WriteOutcome::Conflict(Some(found)) = &r[0].1 else {
            panic!("{r:?}")
        };
        assert_eq!(found.value, state);
        let next = state.next(Some(BrokerId(2)), vec![BrokerId(2)], guard_a.epoch);
        let stale = StateWrite {
            partition: tp.clone(),
            state: next.clone(),
            expected: Some(ZkVersion(5)),
        };
        let r = a.write_states(guard_a, &[stale]).await.unwrap();
        assert!(matches!(r[0].1, WriteOutcome::Conflict(Some(_))));

        // A leader's ISR change, then the controller's write at the old
        // version conflicts.
        let shrunk = PartitionState {
            isr: vec![BrokerId(1)],
            ..state.clone()
        };
        assert_eq!(
            b.update_isr(&tp, &shrunk, ZkVersion(0)).await.unwrap(),
            IsrWrite::Written(ZkVersion(1))
        );
        assert!(matches!(
            b.update_isr(&tp, &shrunk, ZkVersion(0)).await.unwrap(),
            IsrWrite::Stale(Some(_))
        ));
        b.notify_isr_change(std::slice::from_ref(&tp)).await.unwrap();
        let (children, _w) = a.watch_children("/isr_change_notification").await.unwrap();
        assert_eq!(children.len(), 1);
        assert_eq!(a.take_isr_changes(&children).await.unwrap(), vec![tp.clone()]);
        assert!(a.watch_children("/isr_change_notification").await.unwrap().0.is_empty());

        // Broker 1 resigns; broker 2 wins with epoch 2; broker 1's writes
        // now fail as a whole.
        a.resign(BrokerId(1)).await.unwrap();
        let guard_b = b.try_elect(BrokerId(2)).await.unwrap().expect("second controller");
        assert_eq!(guard_b.epoch, ControllerEpoch(2));
        let w = StateWrite {
            partition: tp.clone(),
            state: next.clone(),
            expected: Some(ZkVersion(1)),
        };
        let err = a.write_states(guard_a, std::slice::from_ref(&w)).await.unwrap_err();
        assert!(matches!(err, ControllerError::NotController), "{err}");
        let err = a.apply(guard_a, &ZkChange::PreferredElectionDone).await.unwrap_err();
        assert!(matches!(err, ControllerError::NotController), "{err}");
        let r = b.write_states(guard_b, &[w]).await.unwrap();
        assert_eq!(r[0].1, WriteOutcome::Written(ZkVersion(2)));
        let now = b.partition_state(&tp).await.unwrap().unwrap();
        assert_eq!(now.value.leader_epoch, LeaderEpoch(1));
    });
}

#[test]
fn topics_admin_requests_snapshot_and_deletion() {
    let zk = ZooKeeper::standalone();
    runtime().block_on(async {
        let s = store(&zk).await;
        s.register_broker(&meta(1), Duration::ZERO).await.unwrap();
        let guard = s.try_elect(BrokerId(1)).await.unwrap().unwrap();
        let replicas = vec![vec![BrokerId(1), BrokerId(2)], vec![BrokerId(2), BrokerId(1)]];
        let mut configs = BTreeMap::new();
        configs.insert("retention.ms".to_string(), "1000".to_string());
        s.create_topic("t", &[3; 16], &replicas, &configs).await.unwrap();
        let err = s.create_topic("t", &[4; 16], &replicas, &configs).await.unwrap_err();
        assert!(matches!(err, ControllerError::TopicExists { .. }));
        let (t, version) = s.topic("t").await.unwrap().unwrap();
        assert_eq!((t.id, &t.replicas, &t.configs), ([3; 16], &replicas, &configs));
        let mut more = replicas.clone();
        more.push(vec![BrokerId(1)]);
        s.add_partitions("t", &t.id, &more, version).await.unwrap();
        assert!(
            s.add_partitions("t", &t.id, &more, version).await.is_err(),
            "stale version"
        );
        assert_eq!(s.topic("t").await.unwrap().unwrap().0.replicas.len(), 3);

        let tp0 = TopicPartition::new("t", 0);
        let st = PartitionState::initial(Some(BrokerId(1)), vec![BrokerId(1)], guard.epoch);
        let w = StateWrite {
            partition: tp0.clone(),
            state: st,
            expected: None,
        };
        s.write_states(guard, &[w]).await.unwrap();

        let moves = vec![(tp0.clone(), vec![BrokerId(2), BrokerId(3)])];
        s.request_reassignment(&moves).await.unwrap();
        let more_moves = vec![(TopicPartition::new("t", 1), vec![BrokerId(3)])];
        s.request_reassignment(&more_moves).await.unwrap();
        assert!(s.request_preferred_election(std::slice::from_ref(&tp0)).await.unwrap());
        assert!(!s.request_preferred_election(std::slice::from_ref(&tp0)).await.unwrap());
        s.request_deletion("t").await.unwrap();
        assert!(s.deletion_pending("t").await.unwrap());

        let snap = s.snapshot("cid").await.unwrap();
        assert_eq!(snap.brokers.len(), 1);
        assert_eq!(snap.topics.len(), 1);
        assert_eq!(snap.states.len(), 1);
        assert_eq!(snap.deletions, vec!["t".to_string()]);
        assert_eq!(snap.reassignments.len(), 2);
        assert_eq!(snap.preferred_election, Some(vec![tp0.clone()]));

        s.apply(guard, &ZkChange::ReassignmentsLeft { moves: moves.clone() })
            .await
            .unwrap();
        assert_eq!(s.reassignments().await.unwrap(), moves);
        s.apply(guard, &ZkChange::ReassignmentsLeft { moves: vec![] })
            .await
            .unwrap();
        assert!(s.reassignments().await.unwrap().is_empty());
        s.apply(guard, &ZkChange::PreferredElectionDone).await.unwrap();
        s.apply(guard, &ZkChange::PreferredElectionDone).await.unwrap();
        assert_eq!(s.preferred_election().await.unwrap(), None);
        s.apply(guard, &ZkChange::DeleteTopic { topic: "t".into() })
            .await
            .unwrap();
        assert!(s.topic("t").await.unwrap().is_none());
        assert!(s.topic_names().await.unwrap().is_empty());
        assert!(!s.deletion_pending("t").await.unwrap());
        assert!(s.topic_config("t").await.unwrap().is_empty());
    });
}

#[test]
fn a_closed_session_takes_its_registration_and_controllership_with_it() {
    let zk = ZooKeeper::standalone();
    runtime().block_on(async {
        let a = store(&zk).await;
        let b = store(&zk).await;
        a.register_broker(&meta(1), Duration::ZERO).await.unwrap();
        a.try_elect(BrokerId(1)).await.unwrap().unwrap();
        let (_, watch) = b.watch_data("/controller").await.unwrap();
        drop(a);
        let fired = tokio::time::timeout(Duration::from_secs(20), watch.changed())
            .await
            .expect("watch fires");
        assert_eq!(fired.path, "/controller");
        assert!(b.live_brokers().await.unwrap().is_empty());
        let guard = b.try_elect(BrokerId(2)).await.unwrap().unwrap();
        assert_eq!(guard.epoch, ControllerEpoch(2));
        // A broker id re-registered while the old session lingers waits for it.
        let c = store(&zk).await;
        c.register_broker(&meta(3), Duration::ZERO).await.unwrap();
        let again = b.register_broker(&meta(3), Duration::from_millis(500)).await;
        assert!(again.is_err(), "NodeExists while the other session holds it");
    });
}
