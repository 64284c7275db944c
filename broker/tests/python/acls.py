"""ACLs against a real client: a table of APIs × how the caller stands.

    python acls.py ADMIN_BOOTSTRAP ALICE_BOOTSTRAP

ADMIN_BOOTSTRAP is a listener whose clients are super users (the broker
lists User:ANONYMOUS in super.users, the PLAINTEXT listener's principal);
ALICE_BOOTSTRAP a SASL_PLAINTEXT listener where User:alice (password
alice-secret) authenticates with SCRAM-SHA-512. For every case — an API,
the resource and operation Kafka checks for it — alice is:

  none     without any ACL on the resource: refused with Kafka's error;
  allow    with an ALLOW for exactly that operation: served;
  denied   with that ALLOW and a DENY for User:* on the resource: refused;
  prefix   with a PREFIXED ALLOW naming the start of the resource: served;
  super    (the admin connection, a super user): served.

Each mode works on a fresh resource name, so no ACL of one mode leaks into
another. Prints "all ok" or exits non-zero at the first surprise.
"""
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

REFUSALS = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
}
RUN = uuid.uuid4().hex[:6]
# What a served request may still answer about a group that was never made.
NOT_THERE = {KafkaError.GROUP_ID_NOT_FOUND}


def expect(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        sys.exit(1)


def code_of(e):
    if isinstance(e, KafkaException):
        return e.args[0].code()
    if isinstance(e, KafkaError):
        return e.code()
    return None


def outcome(action):
    """The Kafka error code `action` ended with (None: served)."""
    try:
        action()
        return None
    except (KafkaException, KafkaError) as e:
        return code_of(e)


def wait(futures):
    for f in futures.values():
        f.result(30)


# ---- the actions, each on a resource name ----

def create_topic(admin):
    return lambda name: wait(admin.create_topics([NewTopic(name, 1, 1)]))


def delete_topic(admin):
    return lambda name: wait(admin.delete_topics([name]))


def add_partitions(admin):
    return lambda name: wait(admin.create_partitions([NewPartitions(name, 2)]))


def describe_configs(admin):
    return lambda name: wait(admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name)]))


def alter_configs(admin):
    def act(name):
        entry = ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
        res = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[entry])
        wait(admin.incremental_alter_configs([res]))
    return act


def produce(conf):
    def act(name):
        p = Producer({**conf, "message.timeout.ms": 10000, "acks": "all"})
        errors = []
        p.produce(name, b"x", on_delivery=lambda e, m: e and errors.append(e))
        p.flush(15)
        if errors:
            raise errors[0]
    return act


def consume(conf):
    def act(name):
        c = Consumer({**conf, "group.id": "unused-" + RUN, "enable.auto.commit": False})
        try:
            c.assign([TopicPartition(name, 0, 0)])
            deadline = time.time() + 5
            while time.time() < deadline:
                m = c.poll(0.5)
                # Only the topic's answer counts: the client's group (for
                # offsets it does not use here) is not the case's.
                if m is not None and m.error() and m.error().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    raise m.error()
                if m is not None and not m.error():
                    return
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "no record read"))
        finally:
            c.close()
    return act


def join_group(conf, topic):
    def act(name):
        c = Consumer({**conf, "group.id": name, "auto.offset.reset": "earliest"})
        try:
            c.subscribe([topic])
            deadline = time.time() + 15
            while time.time() < deadline:
                m = c.poll(0.5)
                if m is not None and m.error() and m.error().code() in REFUSALS:
                    raise m.error()
                if c.assignment():
                    return
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "no assignment"))
        finally:
            c.close()
    return act


def delete_group(admin):
    return lambda name: [f.result(30) for f in admin.delete_consumer_groups([name]).values()]


def describe_group(admin):
    return lambda name: [f.result(30) for f in admin.describe_consumer_groups([name]).values()]


def describe_acls(admin):
    def act(_name):
        found = admin.describe_acls(
            AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)).result(30)
        # librdkafka drops DescribeAcls' error code (a refusal reads as an
        # empty list: acls.rs checks the code itself); the baseline ACLs are
        # always there, so an empty answer is the refusal.
        if not found:
            raise KafkaException(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED))
    return act


def create_acls(admin):
    return lambda name: wait(admin.create_acls([AclBinding(
        ResourceType.TOPIC, name, ResourcePatternType.LITERAL, "User:nobody", "*",
        AclOperation.READ, AclPermissionType.ALLOW)]))


def main():
    admin_bootstrap, alice_bootstrap = sys.argv[1], sys.argv[2]
    admin_conf = {"bootstrap.servers": admin_bootstrap}
    alice_conf = {
        "bootstrap.servers": alice_bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    admin = AdminClient(admin_conf)
    alice = AdminClient(alice_conf)
    T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.BROKER
    existing = "exists-" + RUN
    wait(admin.create_topics([NewTopic(existing, 1, 1)]))
    # (case, resource type, operation, the topic must exist first, action as alice, action as admin);
    # served means no error, or one of NOT_THERE for the cases on things that need not exist
    cases = [
        ("CreateTopics", T, AclOperation.CREATE, False, create_topic(alice), create_topic(admin)),
        ("DeleteTopics", T, AclOperation.DELETE, True, delete_topic(alice), delete_topic(admin)),
        ("CreatePartitions", T, AclOperation.ALTER, True, add_partitions(alice), add_partitions(admin)),
        ("DescribeConfigs", T, AclOperation.DESCRIBE_CONFIGS, True, describe_configs(alice), describe_configs(admin)),
        ("IncrementalAlterConfigs", T, AclOperation.ALTER_CONFIGS, True, alter_configs(alice), alter_configs(admin)),
        ("Produce", T, AclOperation.WRITE, True, produce(alice_conf), produce(admin_conf)),
        ("Fetch", T, AclOperation.READ, True, consume(alice_conf), consume(admin_conf)),
        ("JoinGroup", G, AclOperation.READ, False, join_group(alice_conf, existing), join_group(admin_conf, existing)),
        ("DescribeGroups", G, AclOperation.DESCRIBE, False, describe_group(alice), describe_group(admin)),
        ("DeleteGroups", G, AclOperation.DELETE, False, delete_group(alice), delete_group(admin)),
        ("DescribeAcls", C, AclOperation.DESCRIBE, False, describe_acls(alice), describe_acls(admin)),
        ("CreateAcls", C, AclOperation.ALTER, False, create_acls(alice), create_acls(admin)),
    ]
    # Alice may read the topic her group consumes, and use the group her
    # Fetch case's consumer names (so that only the topic's answer counts).
    baseline(admin, existing)
    for case, rtype, op, needs_topic, as_alice, as_admin in cases:
        for mode in ("none", "allow", "denied", "prefix", "super"):
            name = f"{case.lower()}-{mode}-{RUN}"
            resource = "kafka-cluster" if rtype == C else name
            if needs_topic:
                wait(admin.create_topics([NewTopic(name, 1, 1)]))
                produce(admin_conf)(name)
            if case == "Fetch":
                # A consumer that may not describe the topic never gets as far
                # as fetching it (Metadata leaves it out): Describe, always.
                grant(admin, T, name, ResourcePatternType.LITERAL, "User:alice", AclOperation.DESCRIBE,
                      AclPermissionType.ALLOW)
            if mode in ("allow", "denied"):
                grant(admin, rtype, resource, ResourcePatternType.LITERAL, "User:alice", op, AclPermissionType.ALLOW)
            if mode == "denied":
                grant(admin, rtype, resource, ResourcePatternType.LITERAL, "User:*", op, AclPermissionType.DENY)
            if mode == "prefix":
                prefix = "kafka-" if rtype == C else name[: len(case) + 2]
                pattern = ResourcePatternType.LITERAL if rtype == C else ResourcePatternType.PREFIXED
                grant(admin, rtype, resource if rtype == C else prefix, pattern, "User:alice", op,
                      AclPermissionType.ALLOW)
            time.sleep(0.2)
            got = outcome(lambda: (as_admin if mode == "super" else as_alice)(name))
            refused = mode in ("none", "denied")
            if refused:
                expect(got in REFUSALS, f"{case} {mode}: expected an authorization error, got {got}")
            else:
                expect(got is None or got in NOT_THERE, f"{case} {mode}: not served ({got})")
            revoke_all(admin)
            baseline(admin, existing)
        print(f"{case}: ok", flush=True)
    # Metadata lists only the topics alice may describe.
    listed = set(AdminClient(alice_conf).list_topics(timeout=10).topics)
    expect(existing in listed, f"{existing} (alice may read it) is listed: {sorted(listed)}")
    expect(not any(t.startswith("deletetopics-") or t.startswith("createpartitions-") for t in listed),
           f"topics alice may not describe are hidden: {sorted(listed)}")
    print("all ok", flush=True)


def grant(admin, rtype, name, pattern, principal, op, permission):
    wait(admin.create_acls([AclBinding(rtype, name, pattern, principal, "*", op, permission)]))


def baseline(admin, existing):
    grant(admin, ResourceType.TOPIC, existing, ResourcePatternType.LITERAL, "User:alice", AclOperation.READ,
          AclPermissionType.ALLOW)
    grant(admin, ResourceType.GROUP, "unused-" + RUN, ResourcePatternType.LITERAL, "User:alice", AclOperation.READ,
          AclPermissionType.ALLOW)


def revoke_all(admin):
    wait(admin.delete_acls([AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                              AclOperation.ANY, AclPermissionType.ANY)]))


if __name__ == "__main__":
    main()
