"""A confluent-kafka consumer group against a Ferrite cluster, driven by
`tests/cluster_groups.rs` (which starts the brokers and kills them).

    python cluster_groups.py BOOTSTRAP produce TOPIC START COUNT
    python cluster_groups.py BOOTSTRAP member GROUP TOPIC OUTFILE
    python cluster_groups.py BOOTSTRAP committed GROUP TOPIC PARTITIONS

produce: records v<START>..v<START+COUNT-1> with acks=all; prints the time
it took.

member: a group member that consumes (a little slowly, so the group is busy
when a broker dies), commits synchronously every EVERY records and whenever
it is idle with something uncommitted, until SIGTERM; then it commits what
is left and closes. Everything goes to OUTFILE, one line each:

    A <time> <partition>...                   the assignment changed
    R <value>                                 a record consumed
    C <start> <end> <partition>=<offset>...   a commit that succeeded
    E <start> <end> <error>                   a commit that failed
    CLOSED <time>

(times are Unix seconds; a commit's map is exactly what it committed).

committed: prints `COMMITTED <json>` (a fresh consumer's `committed()`, -1
where nothing is committed) and `ENDS <json>` (the log end offsets).
"""
import json
import signal
import sys
import time

SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 1000
EVERY = 50
RECORD_PAUSE_S = 0.002


def produce(bootstrap, topic, start, count):
    from confluent_kafka import Producer

    start, count = int(start), int(count)
    failed = []
    t0 = time.time()
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000})

    def delivered(err, _msg):
        if err is not None:
            failed.append(err)

    for i in range(start, start + count):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), on_delivery=delivered)
        p.poll(0)
    left = p.flush(90)
    if left or failed:
        print(f"FAIL: {left} undelivered, {len(failed)} failed, e.g. {failed[:3]}", flush=True)
        sys.exit(1)
    print(f"produced {count} records (acks=all) in {time.time() - t0:.2f} s", flush=True)


def member(bootstrap, group, topic, outfile):
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    out = open(outfile, "ab", buffering=0)

    def log(line):
        out.write((line + "\n").encode())

    consumed = {}  # partition -> next offset to commit
    committed = {}  # partition -> last offset committed

    def on_assign(c, parts):
        log(f"A {time.time():.6f} " + " ".join(str(tp.partition) for tp in sorted(parts, key=lambda t: t.partition)))

    def on_revoke(c, parts):
        for tp in parts:
            consumed.pop(tp.partition, None)
            committed.pop(tp.partition, None)
        log(f"A {time.time():.6f}")

    def commit():
        todo = {p: o for p, o in consumed.items() if committed.get(p) != o}
        if not todo:
            return
        start = time.time()
        try:
            res = c.commit(offsets=[TopicPartition(topic, p, o) for p, o in sorted(todo.items())], asynchronous=False)
            errors = [f"{tp.partition}:{tp.error}" for tp in res if tp.error is not None]
        except KafkaException as e:
            errors = [str(e.args[0])]
        end = time.time()
        if errors:
            log(f"E {start:.6f} {end:.6f} " + " ".join(errors).replace("\n", " "))
            return
        committed.update(todo)
        log(f"C {start:.6f} {end:.6f} " + " ".join(f"{p}={o}" for p, o in sorted(todo.items())))

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
        }
    )
    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    since = 0
    while not stop:
        m = c.poll(0.2)
        if m is not None and not m.error():
            log("R " + m.value().decode())
            consumed[m.partition()] = m.offset() + 1
            since += 1
            time.sleep(RECORD_PAUSE_S)
        if since >= EVERY or (m is None and consumed):
            commit()
            since = 0
    commit()
    c.close()
    log(f"CLOSED {time.time():.6f}")
    out.close()


def committed(bootstrap, group, topic, partitions):
    from confluent_kafka import Consumer, TopicPartition

    tps = [TopicPartition(topic, p) for p in range(int(partitions))]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    got = c.committed(tps, timeout=30)
    ends = [c.get_watermark_offsets(tp, timeout=30)[1] for tp in tps]
    c.close()
    errors = [f"{tp.partition}:{tp.error}" for tp in got if tp.error is not None]
    if errors:
        print("FAIL: committed()", errors, flush=True)
        sys.exit(1)
    print("COMMITTED", json.dumps([max(tp.offset, -1) for tp in got]), flush=True)
    print("ENDS", json.dumps(ends), flush=True)


if __name__ == "__main__":
    bootstrap, mode, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    {"produce": produce, "member": member, "committed": committed}[mode](bootstrap, *args)
    if mode != "member":
        print("all ok", flush=True)
