"""confluent-kafka's AdminClient against a running Ferrite broker, driven
by `tests/admin_clients.rs`.

    python admin.py BOOTSTRAP MODE

max-timestamp: records with out-of-order timestamps in one batch; the
AdminClient's list_offsets(max_timestamp) answers the first record that
carries the largest one, not its batch.

configs: every Kafka 3.9 topic config described, with sources and
synonyms; AlterConfigs replaces a topic's overrides; IncrementalAlterConfigs
APPENDs to and SUBTRACTs from cleanup.policy; Kafka's configs whose
behaviour is not built are accepted (delete.retention.ms), bad values and
APPEND on a non-list config are refused with INVALID_CONFIG.

assignment: CreateTopics and CreatePartitions with a replica assignment
listed by hand; a broker twice, an unknown broker, or a partition count
beside the assignment are refused.

static-expiry: two static members (group.instance.id) close without leaving;
DeleteGroups is refused (NON_EMPTY_GROUP) until their sessions expire and
then succeeds; prints `EXPIRED_AFTER_S <seconds>` from the close.

groups-and-operations: ListGroups filtered by type (v5) and by state; the
operations DescribeGroups, DescribeCluster and Metadata (describe_topics)
say a client may perform when asked (all that apply: no authorizer).

broker-configs: dynamic broker configs on broker 0 (and `ferrite configs`,
from $FERRITE_BIN, for the cluster default): DescribeConfigs of the
broker (every setting, read-only ones marked) and of the cluster default;
message.max.bytes set as the cluster default, then for the broker, takes
effect on the next produce and shows in the topic's description with its
source; AlterConfigs replaces the broker's set; settings read at start
only and bad values are refused.

broker-configs-kept: after a restart, what broker-configs left is in force.

log-roll: log.segment.bytes set to 16384 for broker 0 (the test then counts
the segments), and 200 records of 1 KiB produced to `rolled`, one per
request.

log-retention: log.retention.ms set to 1000 for broker 0; the segments of
`rolled` older than that go (the test watches the files), and the earliest
offset moves up.

Prints `all ok` at the end; exits non-zero on the first mismatch.
"""
import sys

TIMEOUT_S = 30


def expect(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        sys.exit(1)


def admin(bootstrap):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def create(a, name, partitions=1, config=None):
    from confluent_kafka.admin import NewTopic

    t = NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})
    a.create_topics([t])[name].result(TIMEOUT_S)


def max_timestamp(bootstrap):
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    a = admin(bootstrap)
    topic = "max-ts"
    create(a, topic)
    # One batch (a long linger), the largest timestamp at offsets 3 and 6.
    stamps = [1_700_000_000_000 + d for d in (50, 10, 70, 90, 20, 80, 90, 30)]
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 200, "enable.idempotence": False})
    for i, ts in enumerate(stamps):
        p.produce(topic, value=f"v{i}".encode(), timestamp=ts, partition=0)
    expect(p.flush(TIMEOUT_S) == 0, "produce did not finish")
    tp = TopicPartition(topic, 0)
    got = a.list_offsets({tp: OffsetSpec.max_timestamp()}, request_timeout=TIMEOUT_S)[tp].result(TIMEOUT_S)
    expect(got.offset == 3, f"max timestamp at offset {got.offset}, want 3 (first record of timestamp {max(stamps)})")
    expect(got.timestamp == max(stamps), f"max timestamp {got.timestamp}, want {max(stamps)}")
    latest = a.list_offsets({tp: OffsetSpec.latest()})[tp].result(TIMEOUT_S)
    expect(latest.offset == len(stamps), f"latest {latest.offset}")
    print("ok max-timestamp", flush=True)


KAFKA_39_TOPIC_CONFIGS = 36


def describe(a, topic):
    from confluent_kafka.admin import ConfigResource, ResourceType

    r = ConfigResource(ResourceType.TOPIC, topic)
    return a.describe_configs([r], request_timeout=TIMEOUT_S)[r].result(TIMEOUT_S)


def alter_error(futures):
    """The KafkaError of the one resource altered, or None."""
    from confluent_kafka import KafkaException

    (future,) = futures.values()
    try:
        future.result(TIMEOUT_S)
        return None
    except KafkaException as e:
        return e.args[0]


def configs(bootstrap):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType

    a = admin(bootstrap)
    topic = "configured"
    create(a, topic, config={"retention.ms": "3600000"})
    got = describe(a, topic)
    expect(len(got) == KAFKA_39_TOPIC_CONFIGS, f"{len(got)} topic configs described: {sorted(got)}")
    r = got["retention.ms"]
    expect(r.value == "3600000" and r.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
           f"retention.ms {r.value} from {r.source}")
    expect("log.retention.hours" in r.synonyms and r.synonyms["log.retention.hours"].value == "168",
           f"retention.ms synonyms {list(r.synonyms)}: Kafka's default is log.retention.hours=168")
    s = got["segment.bytes"]
    expect(s.value == "1073741824" and s.source == ConfigSource.DEFAULT_CONFIG.value, f"segment.bytes {s.value} {s.source}")
    expect(got["delete.retention.ms"].value == "86400000", "delete.retention.ms default")

    # IncrementalAlterConfigs: APPEND from the default, then SUBTRACT.
    def incremental(*entries):
        res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=list(entries))
        return alter_error(a.incremental_alter_configs([res]))

    err = incremental(ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND))
    expect(err is None, f"append: {err}")
    expect(describe(a, topic)["cleanup.policy"].value == "delete,compact", "append starts from the default")
    err = incremental(ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT))
    expect(err is None, f"subtract: {err}")
    expect(describe(a, topic)["cleanup.policy"].value == "compact", "subtract")
    err = incremental(ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND))
    expect(err is not None and err.code() == KafkaError.INVALID_CONFIG, f"append to a long: {err}")
    err = incremental(ConfigEntry("delete.retention.ms", "1000", incremental_operation=AlterConfigOpType.SET))
    expect(err is None, f"delete.retention.ms is a Kafka topic config: {err}")
    err = incremental(ConfigEntry("min.cleanable.dirty.ratio", "2", incremental_operation=AlterConfigOpType.SET))
    expect(err is not None and err.code() == KafkaError.INVALID_CONFIG, f"a ratio of 2: {err}")
    err = incremental(ConfigEntry("remote.storage.enable", "true", incremental_operation=AlterConfigOpType.SET))
    expect(err is not None and err.code() == KafkaError.INVALID_CONFIG, f"tiered storage: {err}")

    # AlterConfigs: the overrides become exactly those sent.
    res = ConfigResource(ResourceType.TOPIC, topic, set_config={"segment.ms": "600000"})
    err = alter_error(a.alter_configs([res]))
    expect(err is None, f"alter_configs: {err}")
    after = describe(a, topic)
    overridden = sorted(k for k, v in after.items() if v.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    expect(overridden == ["segment.ms"], f"overrides after AlterConfigs: {overridden}")
    expect(after["retention.ms"].value == "604800000", f"retention.ms back to the default: {after['retention.ms'].value}")
    print("ok configs", flush=True)


def assignment(bootstrap):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewPartitions, NewTopic

    a = admin(bootstrap)
    broker = a.list_topics(timeout=TIMEOUT_S).brokers
    expect(len(broker) == 1, f"one broker: {broker}")
    (me,) = broker.keys()

    def created(t):
        try:
            a.create_topics([t], request_timeout=TIMEOUT_S)[t.topic].result(TIMEOUT_S)
            return None
        except KafkaException as e:
            return e.args[0]

    err = created(NewTopic("placed", 3, replica_assignment=[[me], [me], [me]]))
    expect(err is None, f"manual assignment: {err}")
    md = a.list_topics("placed", timeout=TIMEOUT_S).topics["placed"]
    expect(sorted(md.partitions) == [0, 1, 2], f"partitions {sorted(md.partitions)}")
    expect(all(p.replicas == [me] for p in md.partitions.values()), "replicas as listed")
    for bad, what in (([[me, me]], "a broker twice"), ([[me + 7]], "an unknown broker")):
        err = created(NewTopic(f"bad-{len(what)}", len(bad), replica_assignment=bad))
        expect(err is not None and err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT, f"{what}: {err}")
    f = a.create_partitions([NewPartitions("placed", 5, replica_assignment=[[me], [me]])])["placed"]
    f.result(TIMEOUT_S)
    md = a.list_topics("placed", timeout=TIMEOUT_S).topics["placed"]
    expect(sorted(md.partitions) == [0, 1, 2, 3, 4], f"after growing: {sorted(md.partitions)}")
    f = a.create_partitions([NewPartitions("placed", 8, replica_assignment=[[me]])])["placed"]
    try:
        f.result(TIMEOUT_S)
        expect(False, "three new partitions with one replica list were accepted")
    except KafkaException as e:
        expect(e.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT, f"uneven growth: {e}")
    print("ok assignment", flush=True)


STATIC_SESSION_MS = 6000


def static_expiry(bootstrap):
    import time

    from confluent_kafka import Consumer, KafkaError, KafkaException

    a = admin(bootstrap)
    topic, group = "static", "statics"
    create(a, topic, partitions=2)
    members = []
    for i in range(2):
        c = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.instance.id": f"static-{i}",
            "session.timeout.ms": STATIC_SESSION_MS,
            "enable.auto.commit": False,
        })
        c.subscribe([topic])
        members.append(c)
    deadline = time.time() + TIMEOUT_S
    while time.time() < deadline and not all(c.assignment() for c in members):
        for c in members:
            c.poll(0.1)
    expect(all(c.assignment() for c in members), "both static members assigned")
    for c in members:
        c.close()
    closed = time.monotonic()
    refused = 0
    while True:
        try:
            a.delete_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
            break
        except KafkaException as e:
            err = e.args[0]
            expect(err.code() == KafkaError.NON_EMPTY_GROUP, f"delete_groups: {err}")
            refused += 1
            expect(time.monotonic() - closed < 3 * STATIC_SESSION_MS / 1000, "the sessions never expired")
            time.sleep(0.05)
    took = time.monotonic() - closed
    expect(refused > 0, "the group was deleted while its static members' sessions were alive")
    print(f"EXPIRED_AFTER_S {took:.3f}", flush=True)


def groups_and_operations(bootstrap):
    import time

    from confluent_kafka import ConsumerGroupState, ConsumerGroupType, Consumer, TopicCollection
    from confluent_kafka.admin import AclOperation

    a = admin(bootstrap)
    topic, group = "described", "listed"
    create(a, topic)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    c.subscribe([topic])
    deadline = time.time() + TIMEOUT_S
    while time.time() < deadline and not c.assignment():
        c.poll(0.1)
    expect(c.assignment(), "the member was assigned")

    def listed(**filters):
        r = a.list_consumer_groups(request_timeout=TIMEOUT_S, **filters).result(TIMEOUT_S)
        expect(not r.errors, f"list_consumer_groups errors {r.errors}")
        return {g.group_id: g for g in r.valid}

    every = listed()
    expect(group in every, f"{group} listed: {sorted(every)}")
    expect(every[group].type == ConsumerGroupType.CLASSIC, f"type {every[group].type}")
    expect(group in listed(types={ConsumerGroupType.CLASSIC}), "classic groups include it")
    expect(group not in listed(types={ConsumerGroupType.CONSUMER}), "KIP-848 consumer groups do not")
    expect(group in listed(states={ConsumerGroupState.STABLE}), "stable groups include it")
    expect(group not in listed(states={ConsumerGroupState.EMPTY}), "empty groups do not")

    d = a.describe_consumer_groups([group], include_authorized_operations=True)[group].result(TIMEOUT_S)
    ops = set(d.authorized_operations or [])
    expect(ops == {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}, f"group operations {ops}")
    cluster = a.describe_cluster(include_authorized_operations=True).result(TIMEOUT_S)
    ops = set(cluster.authorized_operations or [])
    expect({AclOperation.DESCRIBE, AclOperation.ALTER, AclOperation.CREATE} <= ops, f"cluster operations {ops}")
    t = a.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[topic].result(TIMEOUT_S)
    ops = set(t.authorized_operations or [])
    expect({AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE_CONFIGS} <= ops, f"topic operations {ops}")
    plain = a.describe_consumer_groups([group])[group].result(TIMEOUT_S)
    expect(not plain.authorized_operations, f"not asked for: {plain.authorized_operations}")
    c.close()
    print("ok groups-and-operations", flush=True)


def produce_error(bootstrap, topic, size):
    """The delivery error of one record of `size` bytes, or None."""
    from confluent_kafka import Producer

    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": False,
                  "message.send.max.retries": 0})
    p.produce(topic, value=b"x" * size, partition=0, on_delivery=lambda err, msg: errors.append(err))
    expect(p.flush(TIMEOUT_S) == 0, "produce did not finish")
    return errors[0]


def set_broker(a, name, key, value):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entry = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
    res = ConfigResource(ResourceType.BROKER, name, incremental_configs=[entry])
    err = alter_error(a.incremental_alter_configs([res]))
    expect(err is None, f"{key}={value} on broker {name}: {err}")


def log_roll(bootstrap):
    from confluent_kafka import Producer

    a = admin(bootstrap)
    create(a, "rolled")
    set_broker(a, "0", "log.segment.bytes", "16384")
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": False})
    for i in range(200):
        p.produce("rolled", value=b"r" * 1024, partition=0)
        p.flush(TIMEOUT_S)
    expect(p.flush(TIMEOUT_S) == 0, "produce did not finish")
    print("ok log-roll", flush=True)


def log_retention(bootstrap):
    import time
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    a = admin(bootstrap)
    set_broker(a, "0", "log.retention.ms", "1000")
    tp = TopicPartition("rolled", 0)
    deadline = time.time() + TIMEOUT_S
    while True:
        earliest = a.list_offsets({tp: OffsetSpec.earliest()})[tp].result(TIMEOUT_S).offset
        if earliest > 0:
            break
        expect(time.time() < deadline, "the earliest offset stayed 0")
        time.sleep(0.2)
    latest = a.list_offsets({tp: OffsetSpec.latest()})[tp].result(TIMEOUT_S).offset
    expect(latest == 200, f"latest {latest}")
    print(f"ok log-retention earliest {earliest}", flush=True)


def ferrite_configs(bootstrap, *args):
    """`ferrite configs ARGS` (the binary in $FERRITE_BIN): (exit code, output)."""
    import os
    import subprocess

    r = subprocess.run([os.environ["FERRITE_BIN"], "configs", "--bootstrap", bootstrap, *args],
                       capture_output=True, text=True, timeout=TIMEOUT_S)
    return r.returncode, r.stdout + r.stderr


def describe_broker(a, name):
    from confluent_kafka.admin import ConfigResource, ResourceType

    r = ConfigResource(ResourceType.BROKER, name)
    return a.describe_configs([r], request_timeout=TIMEOUT_S)[r].result(TIMEOUT_S)


def broker_configs(bootstrap):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType

    a = admin(bootstrap)
    topic = "broker-configured"
    create(a, topic)
    mine = describe_broker(a, "0")
    expect(len(mine) > 80, f"{len(mine)} broker settings described")
    expect(mine["broker.id"].is_read_only and not mine["log.retention.ms"].is_read_only, "read-only marks")
    expect(mine["message.max.bytes"].value == "1048588" and mine["message.max.bytes"].source == ConfigSource.DEFAULT_CONFIG.value,
           f"message.max.bytes {mine['message.max.bytes'].value} {mine['message.max.bytes'].source}")
    expect(ferrite_configs(bootstrap, "describe", "--broker-default") == (0, ""), "no cluster default yet")
    expect(produce_error(bootstrap, topic, 3000) is None, "3000 bytes under the default limit")

    def incremental(name, *entries):
        res = ConfigResource(ResourceType.BROKER, name, incremental_configs=list(entries))
        return alter_error(a.incremental_alter_configs([res]))

    def op(k, v, o=AlterConfigOpType.SET):
        return ConfigEntry(k, v, incremental_operation=o)

    # The cluster's default (librdkafka cannot name it: an empty resource
    # name; `ferrite configs` sends it as kafka-configs.sh does): in force
    # on the next produce.
    rc, out = ferrite_configs(bootstrap, "alter", "--broker-default", "--set", "message.max.bytes=2000")
    expect(rc == 0, f"set the default: {out}")
    d = ferrite_configs(bootstrap, "describe", "--broker-default")
    expect(d == (0, "message.max.bytes=2000 (dynamic default)\n"), f"default entity {d}")
    t = describe(a, topic)["max.message.bytes"]
    expect(t.value == "2000" and t.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value, f"topic sees {t.value} {t.source}")
    err = produce_error(bootstrap, topic, 3000)
    expect(err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE, f"3000 bytes over a 2000 default: {err}")

    # The broker's own value wins over the default.
    expect(incremental("0", op("message.max.bytes", "5000")) is None, "set the broker's own")
    m = describe_broker(a, "0")["message.max.bytes"]
    sources = [(s.value, s.source) for s in m.synonyms.values()] if isinstance(m.synonyms, dict) else None
    expect(m.value == "5000" and m.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value, f"own value {m.value} {m.source} {sources}")
    expect(produce_error(bootstrap, topic, 3000) is None, "3000 bytes under the broker's 5000")

    # Refused: a setting read at start only, a bad value, another broker.
    err = incremental("0", op("broker.id", "3"))
    expect(err is not None and err.code() == KafkaError.INVALID_REQUEST, f"broker.id: {err}")
    err = incremental("0", op("log.dirs", "/elsewhere"))
    expect(err is not None and err.code() == KafkaError.INVALID_REQUEST, f"log.dirs: {err}")
    err = incremental("0", op("log.retention.ms", "soon"))
    expect(err is not None and err.code() == KafkaError.INVALID_CONFIG, f"a bad value: {err}")
    rc, out = ferrite_configs(bootstrap, "alter", "--broker-default", "--set", "min.insync.replicas=0")
    expect(rc != 0 and "INVALID_CONFIG" in out, f"a bad default: {out}")
    expect(describe_broker(a, "0")["message.max.bytes"].value == "5000", "refusals changed nothing")

    # AlterConfigs replaces the broker's whole set.
    res = ConfigResource(ResourceType.BROKER, "0", set_config={"log.retention.ms": "3600000"})
    err = alter_error(a.alter_configs([res]))
    expect(err is None, f"alter_configs: {err}")
    t = describe(a, topic)
    expect(t["retention.ms"].value == "3600000" and t["retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value,
           f"retention.ms {t['retention.ms'].value} {t['retention.ms'].source}")
    expect(t["max.message.bytes"].value == "2000", f"back to the default's 2000: {t['max.message.bytes'].value}")
    err = produce_error(bootstrap, topic, 3000)
    expect(err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE, f"3000 bytes over 2000 again: {err}")

    # DELETE the default: the built-in value again.
    rc, out = ferrite_configs(bootstrap, "alter", "--broker-default", "--delete", "message.max.bytes")
    expect(rc == 0, f"delete the default: {out}")
    expect(describe(a, topic)["max.message.bytes"].value == "1048588", "built-in default")
    expect(produce_error(bootstrap, topic, 3000) is None, "3000 bytes under the built-in limit")
    print("ok broker-configs", flush=True)


def broker_configs_kept(bootstrap):
    from confluent_kafka.admin import ConfigSource

    a = admin(bootstrap)
    r = describe_broker(a, "0")["log.retention.ms"]
    expect(r.value == "3600000" and r.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value, f"after restart {r.value} {r.source}")
    t = describe(a, "broker-configured")["retention.ms"]
    expect(t.value == "3600000", f"topic after restart {t.value}")
    expect(ferrite_configs(bootstrap, "describe", "--broker-default") == (0, ""), "the default was deleted")
    print("ok broker-configs-kept", flush=True)


if __name__ == "__main__":
    bootstrap, which = sys.argv[1], sys.argv[2]
    modes = {"log-roll": log_roll, "log-retention": log_retention, "max-timestamp": max_timestamp, "configs": configs, "assignment": assignment, "static-expiry": static_expiry,
             "groups-and-operations": groups_and_operations, "broker-configs": broker_configs,
             "broker-configs-kept": broker_configs_kept}
    modes[which](bootstrap)
    print("all ok", flush=True)
