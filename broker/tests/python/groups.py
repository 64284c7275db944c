"""Consumer groups with real Python clients against a running Ferrite broker.

    python groups.py BOOTSTRAP members STRATEGY WORKDIR
    python groups.py BOOTSTRAP committed GROUP TOPIC WORKDIR/committed.json
    python groups.py BOOTSTRAP kafka-python-resume
    python groups.py BOOTSTRAP member GROUP TOPIC STRATEGY OUTFILE   (internal)

members: three confluent-kafka consumers (each its own process) in one group
on a 6-partition topic. Each partition is owned by exactly one member; after
one member is killed (SIGKILL) the other two own all six partitions within
the session timeout (plus the heartbeat and rebalance that follow); every
record produced, before and after the kill, is consumed at least once; the
survivors commit on close, and the committed offsets are written to
WORKDIR/committed.json for the check after a broker restart.

committed: the group's committed offsets equal those in the file.

kafka-python-resume: a kafka-python group consumer commits after 40 of 100
records; a second consumer of the group starts at offset 40.
"""
import json
import os
import signal
import subprocess
import sys
import time

PARTITIONS = 6
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 1000
# Measured bound for the partitions of a killed member to move: its session
# runs out, the survivors learn of the rebalance at their next heartbeat,
# rejoin and sync.
MOVE_BOUND_S = (SESSION_TIMEOUT_MS + 2 * HEARTBEAT_MS) / 1000 + 3


def expect(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        sys.exit(1)


def consumer_config(bootstrap, group, strategy):
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "heartbeat.interval.ms": HEARTBEAT_MS,
        "partition.assignment.strategy": strategy,
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 500,
        # An offset is stored only once its record is written down, so a
        # killed member cannot commit what it never reported.
        "enable.auto.offset.store": False,
    }


def member(bootstrap, group, topic, strategy, outfile, instance=None):
    from confluent_kafka import Consumer

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    fd = os.open(outfile, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    config = consumer_config(bootstrap, group, strategy)
    if instance:
        config["group.instance.id"] = instance

    def revoked(_consumer, partitions):
        if partitions:
            os.write(fd, b"REVOKED\n")

    c = Consumer(config)
    c.subscribe([topic], on_revoke=revoked)
    seen = None
    while not stop:
        m = c.poll(0.2)
        owned = sorted(tp.partition for tp in c.assignment())
        if owned != seen:
            seen = owned
            os.write(fd, ("A " + " ".join(map(str, owned)) + "\n").encode())
        if m is None or m.error():
            continue
        os.write(fd, b"R " + m.value() + b"\n")
        c.store_offsets(m)
    c.close()
    os.write(fd, b"CLOSED\n")
    os.close(fd)


def revocations(path):
    with open(path, "rb") as f:
        return f.read().count(b"REVOKED\n")


def read_member(path):
    owned, values, closed = [], set(), False
    try:
        with open(path, "rb") as f:
            for line in f.read().split(b"\n"):
                if line.startswith(b"A"):
                    owned = [int(x) for x in line[1:].split()]
                elif line.startswith(b"R "):
                    values.add(line[2:])
                elif line == b"CLOSED":
                    closed = True
    except FileNotFoundError:
        pass
    return owned, values, closed


def wait_exclusive(files, deadline, what, partitions=PARTITIONS):
    """Waits until the members in `files` own every partition exactly once,
    each at least one; returns the assignment."""
    while time.time() < deadline:
        owned = [read_member(f)[0] for f in files]
        flat = sorted(p for o in owned for p in o)
        if flat == list(range(partitions)) and all(owned):
            return owned
        time.sleep(0.1)
    expect(False, f"{what}: assignments never became exclusive: {[read_member(f)[0] for f in files]}")


def produce(bootstrap, topic, start, count):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
        p.poll(0)
    expect(p.flush(30) == 0, "produce did not finish")
    return {f"v{i}".encode() for i in range(start, start + count)}


def members(bootstrap, strategy, workdir):
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"groups-{strategy}"
    group = f"group-{strategy}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    files = [os.path.join(workdir, f"member-{i}.log") for i in range(3)]
    procs = [
        subprocess.Popen([sys.executable, __file__, bootstrap, "member", group, topic, strategy, f])
        for f in files
    ]
    try:
        produced = produce(bootstrap, topic, 0, 3000)
        owned = wait_exclusive(files, time.time() + 60, "three members")
        print("assigned", owned, flush=True)
        # Wait until the first member has consumed something, then kill it.
        deadline = time.time() + 30
        while not read_member(files[0])[1] and time.time() < deadline:
            time.sleep(0.1)
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait()
        killed_at = time.time()
        produced |= produce(bootstrap, topic, 3000, 3000)
        owned = wait_exclusive(files[1:], killed_at + 60, "two members after the kill")
        moved_s = time.time() - killed_at
        print(f"after the kill: {owned} in {moved_s:.1f} s", flush=True)
        expect(moved_s <= MOVE_BOUND_S, f"partitions moved in {moved_s:.1f} s, bound {MOVE_BOUND_S} s")
        deadline = time.time() + 60
        while time.time() < deadline:
            consumed = set().union(*(read_member(f)[1] for f in files))
            if produced <= consumed:
                break
            time.sleep(0.2)
        missing = produced - consumed
        expect(not missing, f"{len(missing)} records never consumed, e.g. {sorted(missing)[:5]}")
        print(f"consumed all {len(produced)} records at least once", flush=True)
    finally:
        for p in procs[1:]:
            p.send_signal(signal.SIGTERM)
        for p in procs[1:]:
            p.wait(30)
    expect(all(read_member(f)[2] for f in files[1:]), "survivors did not close cleanly")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    committed = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    ends = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)]
    c.close()
    offsets = [tp.offset for tp in committed]
    expect(offsets == ends, f"committed {offsets}, log ends {ends}")
    with open(os.path.join(workdir, "committed.json"), "w") as f:
        json.dump({"group": group, "topic": topic, "offsets": offsets}, f)
    print("committed", offsets, flush=True)


def static(bootstrap, workdir):
    """Two static members (group.instance.id); one is killed and restarted
    with the same instance id within its session: it gets its partitions
    back and the other member's are never revoked (no rebalance)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = "static-topic", "static-group"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(30)
    files = [os.path.join(workdir, f"static-{i}.log") for i in range(3)]

    def start(i, instance):
        return subprocess.Popen([sys.executable, __file__, bootstrap, "member", group, topic, "range", files[i], instance])

    a, b = start(0, "inst-a"), start(1, "inst-b")
    restarted = None
    try:
        owned = wait_exclusive(files[:2], time.time() + 60, "two static members", partitions=4)
        time.sleep(2)
        revoked_before = revocations(files[1])
        a.send_signal(signal.SIGKILL)
        a.wait()
        restarted = start(2, "inst-a")
        deadline = time.time() + SESSION_TIMEOUT_MS / 1000
        while read_member(files[2])[0] != owned[0] and time.time() < deadline:
            time.sleep(0.1)
        expect(read_member(files[2])[0] == owned[0], f"restarted member owns {read_member(files[2])[0]}, had {owned[0]}")
        time.sleep(2)
        expect(revocations(files[1]) == revoked_before, "the other member's partitions were revoked: a rebalance")
        expect(read_member(files[1])[0] == owned[1], "the other member's assignment changed")
        print(f"static member came back to {owned[0]} without a rebalance", flush=True)
    finally:
        for p in (b, restarted):
            if p:
                p.send_signal(signal.SIGTERM)
        for p in (b, restarted):
            if p:
                p.wait(30)


def committed(bootstrap, group, topic, path):
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    with open(path) as f:
        saved = json.load(f)
    # Nothing has touched the group since the restart: ListGroups must
    # already show it (the broker loads its groups at start).
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.time() + 10
    listed = []
    while time.time() < deadline:
        listed = [g.group_id for g in admin.list_consumer_groups().result(10).valid]
        if group in listed:
            break
        time.sleep(0.2)
    expect(group in listed, f"ListGroups after restart: {listed}")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    got = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    c.close()
    offsets = [tp.offset for tp in got]
    expect(offsets == saved["offsets"], f"after restart committed {offsets}, before {saved['offsets']}")
    print("committed offsets intact", offsets, flush=True)


def kafka_python_resume(bootstrap):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    topic, group = "kp-resume", "kp-group"
    p = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False)
    for i in range(100):
        p.send(topic, value=f"r{i}".encode(), partition=0)
    p.flush(30)
    p.close()

    def consumer():
        return KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=20000,
                             session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_MS)

    c = consumer()
    got = []
    for m in c:
        got.append(m.offset)
        if len(got) == 40:
            break
    expect(got == list(range(40)), f"first consumer read {got[:5]}...")
    c.commit({TopicPartition(topic, 0): OffsetAndMetadata(40, "", -1)})
    c.close()
    c = consumer()
    first = next(iter(c), None)
    expect(first is not None and first.offset == 40, f"resumed at {first and first.offset}, not 40")
    expect(c.committed(TopicPartition(topic, 0)) == 40, "committed offset is not 40")
    c.close()
    print("kafka-python resumed at the committed offset", flush=True)


if __name__ == "__main__":
    bootstrap, mode, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    if mode == "member":
        member(bootstrap, *args)
        sys.exit(0)
    modes = {"members": members, "committed": committed, "kafka-python-resume": kafka_python_resume, "static": static}
    modes[mode](bootstrap, *args)
    print("all ok", flush=True)
