//! The controller driver against a real ZooKeeper: three members in one
//! process (three sessions), fake broker layers applying the controller's
//! requests. Election, topic creation, controller failover (a member's
//! session closes), preferred election back to balance, topic deletion.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferrite_controller::assignment::assign;
use ferrite_controller::control::{ControllerConfig, ControllerRequest, DeleteData, ElectionResult};
use ferrite_controller::driver::{run_member, DriverConfig, Incoming, Outgoing, SessionHandle};
use ferrite_controller::metadata::{BrokerId, BrokerMeta};
use ferrite_controller::partition_state::ControllerEpoch;
use ferrite_controller::zk::ZkStore;
use ferrite_ids::TopicPartition;
use ferrite_testkit::zookeeper::ZooKeeper;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

#[derive(Default)]
struct BrokerView {
    controller_epoch: ControllerEpoch,
    /// partition → (leader, leader epoch) from UpdateMetadata.
    metadata: BTreeMap<TopicPartition, (Option<BrokerId>, i32)>,
    deleted: BTreeSet<TopicPartition>,
    controller: bool,
    session: Option<SessionHandle>,
}

type Views = Arc<Mutex<BTreeMap<BrokerId, BrokerView>>>;

struct Member {
    incoming: mpsc::Sender<Incoming>,
    tasks: Vec<JoinHandle<()>>,
}

fn meta(id: i32) -> BrokerMeta {
    BrokerMeta {
        id: BrokerId(id),
        host: "127.0.0.1".into(),
        port: 9000 + id as u16,
        rack: None,
    }
}

fn start_member(zk: &str, id: i32, views: &Views) -> Member {
    let config = DriverConfig {
        broker: meta(id),
        zk_connect: zk.to_string(),
        session_timeout: Duration::from_secs(4),
        controller: ControllerConfig::default(),
        rebalance_interval: Duration::from_secs(3600),
        fresh_cluster_id: "driver-test".into(),
    };
    let (in_tx, in_rx) = mpsc::channel(64);
    let (out_tx, mut out_rx) = mpsc::channel(64);
    views.lock().unwrap().insert(BrokerId(id), BrokerView::default());
    let member = tokio::spawn(run_member(config, in_rx, out_tx));
    let views = views.clone();
    let reply_to = in_tx.clone();
    let layer = tokio::spawn(async move {
        while let Some(out) = out_rx.recv().await {
            let mut stop_done = None;
            {
                let mut v = views.lock().unwrap();
                match out {
                    Outgoing::Registered(h) => v.get_mut(&BrokerId(id)).unwrap().session = Some(h),
                    Outgoing::BecameController(_) => v.get_mut(&BrokerId(id)).unwrap().controller = true,
                    Outgoing::Resigned => v.get_mut(&BrokerId(id)).unwrap().controller = false,
                    Outgoing::Send {
                        to,
                        controller_epoch,
                        request,
                    } => {
                        let Some(view) = v.get_mut(&to.id) else { continue };
                        if controller_epoch < view.controller_epoch {
                            continue;
                        }
                        view.controller_epoch = controller_epoch;
                        match request {
                            ControllerRequest::UpdateMetadata {
                                partitions,
                                deleted_topics,
                                ..
                            } => {
                                for p in partitions {
                                    view.metadata.insert(p.partition, (p.leader, p.leader_epoch.0));
                                }
                                view.metadata.retain(|tp, _| !deleted_topics.contains(&tp.topic));
                            }
                            ControllerRequest::StopReplica {
                                partitions,
                                delete: DeleteData::Delete,
                            } => {
                                view.deleted.extend(partitions.iter().cloned());
                                stop_done = Some((to.id, partitions));
                            }
                            _ => {}
                        }
                    }
                }
            }
            if let Some((broker, partitions)) = stop_done {
                let _ = reply_to.send(Incoming::StopReplicaDone { broker, partitions }).await;
            }
        }
    });
    Member {
        incoming: in_tx,
        tasks: vec![member, layer],
    }
}

fn kill(m: Member, views: &Views, id: i32) {
    for t in m.tasks {
        t.abort();
    }
    views.lock().unwrap().remove(&BrokerId(id));
}

async fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn controller_of(views: &Views) -> Option<BrokerId> {
    let v = views.lock().unwrap();
    let ids: Vec<BrokerId> = v.iter().filter(|(_, x)| x.controller).map(|(id, _)| *id).collect();
    (ids.len() == 1).then(|| ids[0])
}

async fn leaders(store: &ZkStore) -> BTreeMap<i32, (Option<BrokerId>, i32)> {
    let mut out = BTreeMap::new();
    for p in 0..12 {
        if let Some(s) = store.partition_state(&TopicPartition::new("t", p)).await.unwrap() {
            out.insert(p, (s.value.leader, s.value.leader_epoch.0));
        }
    }
    out
}

fn counts(l: &BTreeMap<i32, (Option<BrokerId>, i32)>) -> BTreeMap<BrokerId, usize> {
    let mut c = BTreeMap::new();
    for (leader, _) in l.values() {
        if let Some(b) = leader {
            *c.entry(*b).or_default() += 1;
        }
    }
    c
}

#[test]
fn members_elect_a_controller_that_fails_over_and_rebalances() {
    let zk = ZooKeeper::standalone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let connect = zk.connect_string();
        let views: Views = Arc::default();
        let mut members: BTreeMap<i32, Member> = (1..=3).map(|i| (i, start_member(&connect, i, &views))).collect();
        wait_for("a controller", || controller_of(&views).is_some()).await;
        let admin = ZkStore::connect(&connect, Duration::from_secs(6)).await.unwrap();
        wait_for("three registrations", || {
            let v = views.lock().unwrap();
            v.values().all(|x| x.session.is_some())
        })
        .await;
        let ids = [BrokerId(1), BrokerId(2), BrokerId(3)];
        let replicas = assign("t", &ids, 0, 12, 3, 1, 0).unwrap();
        admin
            .create_topic("t", &[9; 16], &replicas, &BTreeMap::new())
            .await
            .unwrap();

        let mut l = BTreeMap::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while l.len() < 12 {
            assert!(Instant::now() < deadline, "partition states not created: {l:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
            l = leaders(&admin).await;
        }
        assert_eq!(counts(&l).values().copied().collect::<Vec<_>>(), vec![4, 4, 4]);
        wait_for("metadata on every broker", || {
            let v = views.lock().unwrap();
            v.values().all(|x| x.metadata.len() == 12)
        })
        .await;

        // The controller's session ends: another member takes over with
        // epoch 2 and moves the partitions it led.
        let old = controller_of(&views).unwrap();
        let old_epoch = admin.controller_epoch().await.unwrap().unwrap().0;
        let led: Vec<i32> = l
            .iter()
            .filter(|(_, (ld, _))| *ld == Some(old))
            .map(|(p, _)| *p)
            .collect();
        kill(members.remove(&old.0).unwrap(), &views, old.0);
        wait_for("a new controller", || controller_of(&views).is_some_and(|c| c != old)).await;
        let new_epoch = admin.controller_epoch().await.unwrap().unwrap().0;
        assert_eq!(new_epoch, old_epoch.next());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let now = leaders(&admin).await;
            let moved = led
                .iter()
                .all(|p| now[p].0.is_some_and(|b| b != old) && now[p].1 > l[p].1);
            if moved {
                l = now;
                break;
            }
            assert!(Instant::now() < deadline, "leaders of {old:?} not moved: {now:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        wait_for("brokers learn the new leaders", || {
            let v = views.lock().unwrap();
            v.values().all(|x| {
                led.iter()
                    .all(|p| x.metadata[&TopicPartition::new("t", *p)].0 == l[p].0)
            })
        })
        .await;

        // The member comes back (the test's fake leaders do not restore the
        // ISR, so put it back by hand as its leaders would) and a preferred
        // election gives it its partitions back.
        members.insert(old.0, start_member(&connect, old.0, &views));
        wait_for("re-registration", || views.lock().unwrap()[&old].session.is_some()).await;
        for p in 0..12 {
            let tp = TopicPartition::new("t", p);
            let s = admin.partition_state(&tp).await.unwrap().unwrap();
            let mut v = s.value.clone();
            if !v.isr.contains(&old) {
                v.isr.push(old);
                admin.update_isr(&tp, &v, s.version).await.unwrap();
            }
        }
        admin
            .notify_isr_change(&(0..12).map(|p| TopicPartition::new("t", p)).collect::<Vec<_>>())
            .await
            .unwrap();
        let controller = controller_of(&views).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (tx, rx) = oneshot::channel();
            let req = Incoming::ElectPreferred {
                partitions: None,
                reply: tx,
            };
            members[&controller.0].incoming.send(req).await.unwrap();
            let results = rx.await.unwrap().expect("asked the controller");
            if results.iter().all(|(_, r)| *r != ElectionResult::NotAvailable) {
                break;
            }
            if Instant::now() > deadline {
                let s0 = admin.partition_state(&TopicPartition::new("t", 0)).await.unwrap();
                let live = admin.live_brokers().await.unwrap();
                panic!("preferred election: {results:?}\nstate 0: {s0:?}\nlive: {live:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let l = leaders(&admin).await;
        assert_eq!(counts(&l).values().copied().collect::<Vec<_>>(), vec![4, 4, 4], "{l:?}");

        // A non-controller refuses controller requests.
        let other = [1, 2, 3].into_iter().find(|i| BrokerId(*i) != controller).unwrap();
        let (tx, rx) = oneshot::channel();
        let req = Incoming::ElectPreferred {
            partitions: None,
            reply: tx,
        };
        members[&other].incoming.send(req).await.unwrap();
        assert!(rx.await.unwrap().is_err());

        // Deletion: every replica deletes, then the znodes go.
        admin.request_deletion("t").await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while admin.topic("t").await.unwrap().is_some() || admin.deletion_pending("t").await.unwrap() {
            assert!(Instant::now() < deadline, "topic not deleted");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let v = views.lock().unwrap();
        for (id, x) in v.iter() {
            assert_eq!(x.deleted.len(), 12, "broker {id:?} deleted its replicas");
            assert!(x.metadata.is_empty());
        }
    });
}
