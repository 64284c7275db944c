//! The znodes' contents, in Kafka's JSON shapes so that Kafka-literate tools
//! and people can read them. Decoding ignores fields it does not know and
//! checks what it uses: broker ids and partition numbers in range, partition
//! maps dense from 0, lists bounded.
//!
//! | znode | content |
//! |---|---|
//! | `/brokers/ids/<id>` | `{"version":5,"host":h,"port":p,"endpoints":["PLAINTEXT://h:p"],"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"jmx_port":-1,"timestamp":"<ms>","rack":r?}` |
//! | `/brokers/topics/<t>` | `{"version":3,"topic_id":"<base64url uuid>","partitions":{"0":[1,2]},"adding_replicas":{},"removing_replicas":{}}` |
//! | `/brokers/topics/<t>/partitions/<p>/state` | `{"version":1,"leader":1,"leader_epoch":0,"isr":[1,2],"controller_epoch":1}` |
//! | `/controller` | `{"version":1,"brokerid":1,"timestamp":"<ms>"}` |
//! | `/controller_epoch` | the epoch as decimal text |
//! | `/admin/reassign_partitions` | `{"version":1,"partitions":[{"topic":t,"partition":0,"replicas":[2,3,4]}]}` |
//! | `/admin/preferred_replica_election`, `/isr_change_notification/isr_change_<n>` | `{"version":1,"partitions":[{"topic":t,"partition":0}]}` |
//! | `/replica_damage_notification/damage_<n>` (Ferrite) | `{"version":1,"broker":1,"partitions":[{"topic":t,"partition":0}]}` |
//! | `/config/topics/<t>` | `{"version":1,"config":{"retention.ms":"1000"}}` |
//! | `/config/changes/config_change_<n>` | `{"version":2,"entity_path":"topics/<t>"}` |
//! | `/cluster/id` | `{"version":"1","id":"<cluster id>"}` |

use std::collections::BTreeMap;

use base64::Engine as _;
use ferrite_ids::{LeaderEpoch, TopicPartition};
use serde::{Deserialize, Serialize};

use crate::assignment::TOPIC_PARTITIONS_MAX;
use crate::metadata::{BrokerId, BrokerMeta};
use crate::partition_state::{ControllerEpoch, PartitionState};

/// Most replicas a partition may list (Kafka allows up to `i16::MAX`; no
/// deployment comes near this).
pub const REPLICAS_MAX: usize = 1024;
/// Most partitions one admin or notification znode may list.
pub const LISTED_PARTITIONS_MAX: usize = 100_000;

/// Why a znode's content was refused.
pub type DecodeError = String;
type Decoded<T> = Result<T, DecodeError>;

fn parse<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Decoded<T> {
    serde_json::from_slice(bytes).map_err(|e| e.to_string())
}

fn to_vec<T: Serialize>(value: &T) -> Vec<u8> {
    // Serialising plain maps, strings and integers cannot fail.
    serde_json::to_vec(value).unwrap_or_default()
}

fn broker_id(id: i32) -> Decoded<BrokerId> {
    if id < 0 {
        return Err(format!("broker id {id} is negative"));
    }
    Ok(BrokerId(id))
}

fn replica_list(ids: &[i32]) -> Decoded<Vec<BrokerId>> {
    if ids.len() > REPLICAS_MAX {
        return Err(format!("{} replicas, more than {REPLICAS_MAX}", ids.len()));
    }
    ids.iter().map(|&i| broker_id(i)).collect()
}

fn ids(list: &[BrokerId]) -> Vec<i32> {
    list.iter().map(|b| b.0).collect()
}

fn now_ms() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    ms.to_string()
}

#[derive(Serialize, Deserialize)]
struct BrokerJson {
    version: i32,
    host: String,
    port: i32,
    #[serde(default)]
    endpoints: Vec<String>,
    #[serde(default)]
    listener_security_protocol_map: BTreeMap<String, String>,
    #[serde(default = "no_jmx")]
    jmx_port: i32,
    #[serde(default)]
    timestamp: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rack: Option<String>,
}

fn no_jmx() -> i32 {
    -1
}

pub fn encode_broker(b: &BrokerMeta) -> Vec<u8> {
    let mut protocols = BTreeMap::new();
    protocols.insert("PLAINTEXT".to_string(), "PLAINTEXT".to_string());
    to_vec(&BrokerJson {
        version: 5,
        host: b.host.clone(),
        port: i32::from(b.port),
        endpoints: vec![format!("PLAINTEXT://{}:{}", b.host, b.port)],
        listener_security_protocol_map: protocols,
        jmx_port: -1,
        timestamp: now_ms(),
        rack: b.rack.clone(),
    })
}

/// The `PLAINTEXT` endpoint (or `host`/`port` when there is none).
pub fn decode_broker(id: BrokerId, bytes: &[u8]) -> Decoded<BrokerMeta> {
    let j: BrokerJson = parse(bytes)?;
    let from_endpoint = j.endpoints.iter().find_map(|e| {
        let rest = e.strip_prefix("PLAINTEXT://")?;
        let (host, port) = rest.rsplit_once(':')?;
        Some((host.trim_matches(['[', ']']).to_string(), port.parse::<u16>().ok()?))
    });
    let (host, port) = match from_endpoint {
        Some(hp) => hp,
        None => (
            j.host,
            u16::try_from(j.port).map_err(|_| format!("port {} out of range", j.port))?,
        ),
    };
    Ok(BrokerMeta {
        id,
        host,
        port,
        rack: j.rack,
    })
}

#[derive(Serialize, Deserialize)]
struct TopicJson {
    version: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    topic_id: Option<String>,
    partitions: BTreeMap<String, Vec<i32>>,
    #[serde(default)]
    adding_replicas: BTreeMap<String, Vec<i32>>,
    #[serde(default)]
    removing_replicas: BTreeMap<String, Vec<i32>>,
}

/// A topic id as Kafka prints it: URL-safe base64 without padding.
pub fn encode_topic_id(id: &[u8; 16]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id)
}

pub fn decode_topic_id(s: &str) -> Decoded<[u8; 16]> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .map_err(|e| format!("topic id {s:?}: {e}"))?;
    bytes.try_into().map_err(|_| format!("topic id {s:?} is not 16 bytes"))
}

pub fn encode_assignment(id: &[u8; 16], replicas: &[Vec<BrokerId>]) -> Vec<u8> {
    let partitions = replicas
        .iter()
        .enumerate()
        .map(|(p, r)| (p.to_string(), ids(r)))
        .collect();
    to_vec(&TopicJson {
        version: 3,
        topic_id: Some(encode_topic_id(id)),
        partitions,
        adding_replicas: BTreeMap::new(),
        removing_replicas: BTreeMap::new(),
    })
}

/// A topic znode: its id (`None` if it has none, as Kafka before 2.8 wrote
/// them) and `replicas[p]` for partitions `0..n`.
pub type AssignmentZnode = (Option<[u8; 16]>, Vec<Vec<BrokerId>>);

pub fn decode_assignment(bytes: &[u8]) -> Decoded<AssignmentZnode> {
    let j: TopicJson = parse(bytes)?;
    let count = j.partitions.len();
    if count > TOPIC_PARTITIONS_MAX as usize {
        return Err(format!("{count} partitions, more than {TOPIC_PARTITIONS_MAX}"));
    }
    let mut replicas = vec![Vec::new(); count];
    for (key, list) in &j.partitions {
        let p: usize = key.parse().map_err(|_| format!("partition {key:?} is not a number"))?;
        let slot = replicas
            .get_mut(p)
            .ok_or_else(|| format!("partitions are not numbered 0..{count}"))?;
        *slot = replica_list(list)?;
    }
    let id = j.topic_id.as_deref().map(decode_topic_id).transpose()?;
    Ok((id, replicas))
}

#[derive(Serialize, Deserialize)]
struct StateJson {
    version: i32,
    leader: i32,
    leader_epoch: i32,
    isr: Vec<i32>,
    controller_epoch: i32,
}

pub fn encode_state(s: &PartitionState) -> Vec<u8> {
    to_vec(&StateJson {
        version: 1,
        leader: s.leader.map_or(-1, |b| b.0),
        leader_epoch: s.leader_epoch.0,
        isr: ids(&s.isr),
        controller_epoch: s.controller_epoch.0,
    })
}

pub fn decode_state(bytes: &[u8]) -> Decoded<PartitionState> {
    let j: StateJson = parse(bytes)?;
    let leader = if j.leader < 0 { None } else { Some(BrokerId(j.leader)) };
    if j.leader_epoch < 0 {
        return Err(format!("leader epoch {} is negative", j.leader_epoch));
    }
    Ok(PartitionState {
        leader,
        leader_epoch: LeaderEpoch(j.leader_epoch),
        isr: replica_list(&j.isr)?,
        controller_epoch: ControllerEpoch(j.controller_epoch),
    })
}

#[derive(Serialize, Deserialize)]
struct ControllerJson {
    version: i32,
    brokerid: i32,
    #[serde(default)]
    timestamp: String,
}

pub fn encode_controller(id: BrokerId) -> Vec<u8> {
    to_vec(&ControllerJson {
        version: 1,
        brokerid: id.0,
        timestamp: now_ms(),
    })
}

pub fn decode_controller(bytes: &[u8]) -> Decoded<BrokerId> {
    let j: ControllerJson = parse(bytes)?;
    broker_id(j.brokerid)
}

pub fn encode_controller_epoch(e: ControllerEpoch) -> Vec<u8> {
    e.0.to_string().into_bytes()
}

pub fn decode_controller_epoch(bytes: &[u8]) -> Decoded<ControllerEpoch> {
    let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
    let epoch: i32 = text
        .trim()
        .parse()
        .map_err(|_| format!("controller epoch {text:?} is not a number"))?;
    Ok(ControllerEpoch(epoch))
}

#[derive(Serialize, Deserialize)]
struct PartitionRef {
    topic: String,
    partition: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    replicas: Option<Vec<i32>>,
}

#[derive(Serialize, Deserialize)]
struct PartitionListJson {
    version: i32,
    partitions: Vec<PartitionRef>,
}

fn decode_refs(bytes: &[u8]) -> Decoded<Vec<PartitionRef>> {
    let j: PartitionListJson = parse(bytes)?;
    if j.partitions.len() > LISTED_PARTITIONS_MAX {
        return Err(format!(
            "{} partitions listed, more than {LISTED_PARTITIONS_MAX}",
            j.partitions.len()
        ));
    }
    if let Some(bad) = j.partitions.iter().find(|r| r.partition < 0) {
        return Err(format!("partition {} of {} is negative", bad.partition, bad.topic));
    }
    Ok(j.partitions)
}

/// Partitions named without their replicas.
fn partition_refs(parts: &[TopicPartition]) -> Vec<PartitionRef> {
    parts
        .iter()
        .map(|tp| PartitionRef {
            topic: tp.topic.clone(),
            partition: tp.partition,
            replicas: None,
        })
        .collect()
}

/// `/admin/preferred_replica_election` and ISR change notifications.
pub fn encode_partition_list(parts: &[TopicPartition]) -> Vec<u8> {
    to_vec(&PartitionListJson {
        version: 1,
        partitions: partition_refs(parts),
    })
}

pub fn decode_partition_list(bytes: &[u8]) -> Decoded<Vec<TopicPartition>> {
    let refs = decode_refs(bytes)?;
    Ok(refs
        .into_iter()
        .map(|r| TopicPartition::new(r.topic, r.partition))
        .collect())
}

#[derive(Serialize, Deserialize)]
struct DamageJson {
    version: i32,
    broker: i32,
    partitions: Vec<PartitionRef>,
}

/// A replica damage notification: `broker`'s logs of `parts` are damaged.
pub fn encode_damage(broker: BrokerId, parts: &[TopicPartition]) -> Vec<u8> {
    to_vec(&DamageJson {
        version: 1,
        broker: broker.0,
        partitions: partition_refs(parts),
    })
}

pub fn decode_damage(bytes: &[u8]) -> Decoded<(BrokerId, Vec<TopicPartition>)> {
    let j: DamageJson = parse(bytes)?;
    let broker = broker_id(j.broker)?;
    let list = to_vec(&PartitionListJson {
        version: j.version,
        partitions: j.partitions,
    });
    Ok((broker, decode_partition_list(&list)?))
}

/// `/admin/reassign_partitions`.
pub fn encode_reassignment(moves: &[(TopicPartition, Vec<BrokerId>)]) -> Vec<u8> {
    let partitions = moves
        .iter()
        .map(|(tp, r)| PartitionRef {
            topic: tp.topic.clone(),
            partition: tp.partition,
            replicas: Some(ids(r)),
        })
        .collect();
    to_vec(&PartitionListJson { version: 1, partitions })
}

pub fn decode_reassignment(bytes: &[u8]) -> Decoded<Vec<(TopicPartition, Vec<BrokerId>)>> {
    let refs = decode_refs(bytes)?;
    let mut out = Vec::with_capacity(refs.len());
    for r in refs {
        let list = r
            .replicas
            .ok_or_else(|| format!("{}-{} has no replicas", r.topic, r.partition))?;
        out.push((TopicPartition::new(r.topic, r.partition), replica_list(&list)?));
    }
    Ok(out)
}

#[derive(Serialize, Deserialize)]
struct ConfigJson {
    version: i32,
    config: BTreeMap<String, String>,
}

pub fn encode_config(config: &BTreeMap<String, String>) -> Vec<u8> {
    to_vec(&ConfigJson {
        version: 1,
        config: config.clone(),
    })
}

pub fn decode_config(bytes: &[u8]) -> Decoded<BTreeMap<String, String>> {
    let j: ConfigJson = parse(bytes)?;
    Ok(j.config)
}

#[derive(Serialize, Deserialize)]
struct ConfigChangeJson {
    version: i32,
    entity_path: String,
}

/// A config change notification naming `entity_path` (`topics/<t>`).
pub fn encode_config_change(entity_path: &str) -> Vec<u8> {
    to_vec(&ConfigChangeJson {
        version: 2,
        entity_path: entity_path.to_string(),
    })
}

pub fn decode_config_change(bytes: &[u8]) -> Decoded<String> {
    let j: ConfigChangeJson = parse(bytes)?;
    if j.entity_path.len() > 512 {
        return Err("entity path longer than 512 bytes".into());
    }
    Ok(j.entity_path)
}

#[derive(Serialize, Deserialize)]
struct ClusterIdJson {
    version: String,
    id: String,
}

pub fn encode_cluster_id(id: &str) -> Vec<u8> {
    to_vec(&ClusterIdJson {
        version: "1".into(),
        id: id.into(),
    })
}

pub fn decode_cluster_id(bytes: &[u8]) -> Decoded<String> {
    let j: ClusterIdJson = parse(bytes)?;
    Ok(j.id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_what_kafka_writes() {
        let broker = br#"{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://kafka-1:9092"],"jmx_port":-1,"features":{},"host":"kafka-1","timestamp":"1700000000000","port":9092,"version":5}"#;
        let b = decode_broker(BrokerId(1), broker).unwrap();
        assert_eq!((b.host.as_str(), b.port, b.rack), ("kafka-1", 9092, None));
        let topic = br#"{"partitions":{"1":[2,3],"0":[1,2]},"topic_id":"AAAAAAAAAAAAAAAAAAAAAQ","adding_replicas":{},"removing_replicas":{},"version":3}"#;
        let (id, replicas) = decode_assignment(topic).unwrap();
        assert_eq!(id.unwrap()[15], 1);
        assert_eq!(
            replicas,
            vec![vec![BrokerId(1), BrokerId(2)], vec![BrokerId(2), BrokerId(3)]]
        );
        let state = br#"{"controller_epoch":3,"leader":-1,"version":1,"leader_epoch":7,"isr":[2]}"#;
        let s = decode_state(state).unwrap();
        assert_eq!(
            (s.leader, s.leader_epoch, s.controller_epoch),
            (None, LeaderEpoch(7), ControllerEpoch(3))
        );
        assert_eq!(
            decode_controller(br#"{"version":1,"brokerid":2,"timestamp":"1"}"#).unwrap(),
            BrokerId(2)
        );
        assert_eq!(decode_controller_epoch(b"12").unwrap(), ControllerEpoch(12));
        let moves = br#"{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3,4]}]}"#;
        assert_eq!(
            decode_reassignment(moves).unwrap()[0].1,
            vec![BrokerId(2), BrokerId(3), BrokerId(4)]
        );
        assert_eq!(decode_cluster_id(br#"{"version":"1","id":"abc"}"#).unwrap(), "abc");
    }

    #[test]
    fn damage_notices_round_trip_and_refuse_bad_ids() {
        let parts = vec![TopicPartition::new("t", 0), TopicPartition::new("u", 3)];
        let bytes = encode_damage(BrokerId(2), &parts);
        assert_eq!(decode_damage(&bytes).unwrap(), (BrokerId(2), parts));
        assert!(decode_damage(br#"{"version":1,"broker":-1,"partitions":[]}"#).is_err());
        assert!(decode_damage(br#"{"version":1,"broker":1,"partitions":[{"topic":"t","partition":-2}]}"#).is_err());
    }

    #[test]
    fn refuses_malformed_content() {
        assert!(decode_assignment(br#"{"version":3,"partitions":{"0":[1],"2":[1]}}"#).is_err());
        assert!(decode_assignment(br#"{"version":3,"partitions":{"x":[1]}}"#).is_err());
        assert!(decode_assignment(br#"{"version":3,"partitions":{"0":[-4]}}"#).is_err());
        assert!(decode_state(br#"{"version":1,"leader":1,"leader_epoch":-2,"isr":[1],"controller_epoch":1}"#).is_err());
        assert!(decode_partition_list(br#"{"version":1,"partitions":[{"topic":"t","partition":-1}]}"#).is_err());
        assert!(decode_reassignment(br#"{"version":1,"partitions":[{"topic":"t","partition":0}]}"#).is_err());
        assert!(decode_controller_epoch(b"x").is_err());
        assert!(decode_topic_id("short").is_err());
        let many: Vec<i32> = (0..=REPLICAS_MAX as i32).collect();
        let big = format!(r#"{{"version":3,"partitions":{{"0":{many:?}}}}}"#);
        assert!(decode_assignment(big.as_bytes()).is_err());
    }

    proptest! {
        #[test]
        fn round_trips(
            id in any::<[u8; 16]>(),
            replicas in prop::collection::vec(prop::collection::vec(0i32..100, 1..5), 0..20),
            leader in prop::option::of(0i32..100),
            epoch in 0i32..1000,
            port in any::<u16>(),
            rack in prop::option::of("[a-z]{1,8}"),
        ) {
            let replicas: Vec<Vec<BrokerId>> = replicas.iter().map(|r| r.iter().map(|&b| BrokerId(b)).collect()).collect();
            let (got_id, got) = decode_assignment(&encode_assignment(&id, &replicas)).unwrap();
            prop_assert_eq!(got_id, Some(id));
            prop_assert_eq!(got, replicas);
            let isr: Vec<BrokerId> = leader.into_iter().map(BrokerId).collect();
            let s = PartitionState { leader: leader.map(BrokerId), leader_epoch: LeaderEpoch(epoch), isr, controller_epoch: ControllerEpoch(epoch) };
            prop_assert_eq!(decode_state(&encode_state(&s)).unwrap(), s);
            let b = BrokerMeta { id: BrokerId(3), host: "h".into(), port, rack };
            prop_assert_eq!(decode_broker(BrokerId(3), &encode_broker(&b)).unwrap(), b);
            let tps = vec![TopicPartition::new("a", 1), TopicPartition::new("b.c", 0)];
            prop_assert_eq!(decode_partition_list(&encode_partition_list(&tps)).unwrap(), tps);
        }
    }
}
