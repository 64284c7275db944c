//! Replica assignments listed by hand in a three-broker cluster.

mod common;

use common::cluster::{partitions_of, serial, wait_brokers, wait_for, Cluster};
use common::{s, Client};
use kafka_protocol::messages::{self as km, BrokerId, TopicName};

/// CreateTopics and CreatePartitions with replica lists given by hand, in
/// a three-broker cluster: each partition's replicas are those listed, in
/// their order (the first is the preferred leader).
#[test]
fn a_topic_is_placed_on_the_brokers_its_assignment_lists() {
    let _serial = serial();
    let cluster = Cluster::start(3, &[]);
    // Listening is not yet registered: a list naming a broker the
    // controller has not seen is refused.
    wait_brokers(&cluster, 3);
    let lists = [vec![3, 1], vec![2, 3], vec![1, 2]];
    let assignments = lists
        .iter()
        .enumerate()
        .map(|(p, brokers)| {
            km::create_topics_request::CreatableReplicaAssignment::default()
                .with_partition_index(p as i32)
                .with_broker_ids(brokers.iter().copied().map(BrokerId).collect())
        })
        .collect();
    let req = km::CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![km::create_topics_request::CreatableTopic::default()
            .with_name(TopicName(s("placed")))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(assignments)]);
    let mut c = Client::connect(cluster.brokers[0].addr());
    let r = c.call(&req, 7);
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
    assert_eq!((r.topics[0].num_partitions, r.topics[0].replication_factor), (3, 2));
    let grow = km::CreatePartitionsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![km::create_partitions_request::CreatePartitionsTopic::default()
            .with_name(TopicName(s("placed")))
            .with_count(4)
            .with_assignments(Some(vec![
                km::create_partitions_request::CreatePartitionsAssignment::default()
                    .with_broker_ids(vec![BrokerId(2), BrokerId(1)]),
            ]))]);
    let r = c.call(&grow, 3);
    assert_eq!(r.results[0].error_code, 0, "{:?}", r.results[0].error_message);
    let bootstrap = cluster.brokers[1].bootstrap();
    let placed = wait_for(
        "the partitions to have leaders",
        std::time::Duration::from_secs(20),
        || {
            partitions_of(&bootstrap, "placed", 4)?;
            let m = common::cluster::metadata(&bootstrap, "placed")?;
            let t = m.topics.into_iter().find(|t| t.name == "placed")?;
            let mut replicas: Vec<(i32, Vec<i32>)> =
                t.partitions.into_iter().map(|p| (p.partition, p.replicas)).collect();
            replicas.sort();
            Some(replicas.into_iter().map(|(_, r)| r).collect::<Vec<_>>())
        },
    );
    assert_eq!(placed, vec![vec![3, 1], vec![2, 3], vec![1, 2], vec![2, 1]]);
}
