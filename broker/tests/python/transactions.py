"""Transactions through confluent-kafka (librdkafka) at its defaults.

    python transactions.py BOOTSTRAP basic
    python transactions.py BOOTSTRAP zombie
    python transactions.py BOOTSTRAP timeout
    python transactions.py BOOTSTRAP offsets_order STEP   # STEP: write, or check
    python transactions.py BOOTSTRAP setup N [RF]     # topics "in" and "out", N keyed records in "in"
    python transactions.py BOOTSTRAP copy N DIE_AFTER # one consume-transform-produce run
    python transactions.py BOOTSTRAP verify N

basic: a committed transaction is seen by read_committed consumers, an
aborted one only by read_uncommitted ones (the negative control), and an
open one hides what follows it from read_committed consumers until it
commits. zombie: a second producer with the same transactional.id fences
the first, whose writes and commit are refused. timeout: a transaction left
open past transaction.timeout.ms is aborted by the coordinator, and
read_committed consumers read on past it. offsets_order write: a
transaction's offset commit (send_offsets_to_transaction) is followed by a
plain commit of the same partition before the transaction commits: the
plain one, written later, stands (Kafka orders them by log position); a
later transaction's offset then does replace it. offsets_order check: the
group's committed offsets are still those (after a restart).

copy: a consume-transform-produce loop from "in" to "out" (a consumer
group, send_offsets_to_transaction, one transaction per poll batch); with
DIE_AFTER > 0 it kills itself (os._exit, no cleanup: as kill -9) after that
many transactions, half of the time with a transaction open. It exits 0
("copied") once "out" holds N records for the group's committed offsets,
or 3 when a broker-side failure made the producer fatal (the caller runs it
again). verify: a read_committed consumer of "out" finds every input value
exactly once; a read_uncommitted one finds at least as many records.
Prints "all ok" when its checks pass; exits non-zero on the first failure.
"""
import os
import random
import sys
import time

# Topic and transactional id names of this run: a rerun against the same
# broker starts clean.
RUN = str(int(time.time() * 1000))
T_BASIC, T_ZOMBIE, T_TIMEOUT = (f"tx-{k}-{RUN}" for k in ("basic", "zombie", "timeout"))


def expect(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        sys.exit(1)


def read_all(bootstrap, topic, isolation, settle_s=4.0, until=None):
    """Every value of `topic` a consumer with `isolation` reads, from the
    beginning, until nothing new came for `settle_s` (or `until` values)."""
    from confluent_kafka import Consumer

    from confluent_kafka import TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}",
                  "isolation.level": isolation, "enable.auto.commit": False})
    # Assigned, not subscribed: no group join to wait for.
    started = time.time()
    partitions = c.list_topics(topic, timeout=30).topics[topic].partitions
    c.assign([TopicPartition(topic, q, -2) for q in partitions])  # OFFSET_BEGINNING
    got = []
    errors = []
    first_at = None
    last_new = time.time()
    deadline = time.time() + 120
    while time.time() - last_new < settle_s and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error() is not None:
            errors.append(str(m.error()))
            continue
        got.append(m.value().decode())
        first_at = first_at or time.time()
        last_new = time.time()
        if until is not None and len(got) >= until:
            break
    c.close()
    first = f"{first_at - started:.1f} s" if first_at else "never"
    print(f"reader ({isolation}): {len(partitions)} partitions, first record after {first}, "
          f"{len(got)} records, errors {errors[:3]}", flush=True)
    return got


def create(bootstrap, names, partitions=2, rf=1):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(n, partitions, rf) for n in names]).values():
        try:
            f.result(30)
        except Exception as e:  # already there (a rerun)
            expect("TOPIC_ALREADY_EXISTS" in str(e), f"create: {e}")


def producer(bootstrap, tid, **extra):
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": bootstrap, "transactional.id": tid}
    conf.update(extra)
    return Producer(conf)


def basic(bootstrap):
    create(bootstrap, [T_BASIC])
    p = producer(bootstrap, "tx-basic-" + RUN)
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(20):
        p.produce(T_BASIC, key=str(i), value=f"committed-{i}")
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(T_BASIC, key=str(i), value=f"aborted-{i}")
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(T_BASIC, key=str(i), value=f"open-{i}")
    p.flush(30)
    # A plain producer's records after the open transaction.
    from confluent_kafka import Producer
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(4):
        plain.produce(T_BASIC, key=str(i), value=f"plain-{i}")
    expect(plain.flush(30) == 0, "plain produce")

    committed = read_all(bootstrap, T_BASIC, "read_committed")
    expect(sorted(committed) == sorted(f"committed-{i}" for i in range(20)),
           f"read_committed sees exactly the committed records while one is open: {sorted(committed)}")
    uncommitted = read_all(bootstrap, T_BASIC, "read_uncommitted")
    for want in ("aborted-0", "open-0", "plain-0", "committed-0"):
        expect(want in uncommitted, f"read_uncommitted sees {want}: {sorted(uncommitted)}")
    p.commit_transaction(30)
    committed = read_all(bootstrap, T_BASIC, "read_committed")
    want = [f"committed-{i}" for i in range(20)] + [f"open-{i}" for i in range(5)] + [f"plain-{i}" for i in range(4)]
    expect(sorted(committed) == sorted(want), f"after the commit: {sorted(committed)}")
    expect(not any(v.startswith("aborted") for v in committed), "no aborted record")


def kafka_python(bootstrap):
    """kafka-python's transactional producer at its defaults: a commit, an
    abort and a commit; read_committed consumers (confluent-kafka's and
    kafka-python's) see the committed records only."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = "tx-kafka-python-" + RUN
    create(bootstrap, [topic], partitions=3)
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="tx-kp-" + RUN)
    p.init_transactions()
    for value, n, commit in (("committed", 30, True), ("aborted", 30, False), ("committed2", 5, True)):
        p.begin_transaction()
        for i in range(n):
            p.send(topic, key=str(i).encode(), value=value.encode())
        p.flush()
        if commit:
            p.commit_transaction()
        else:
            p.abort_transaction()
    p.close()
    seen = read_all(bootstrap, topic, "read_committed")
    expect(sorted(set(seen)) == ["committed", "committed2"] and len(seen) == 35,
           f"read_committed (confluent-kafka) sees the 35 committed: {len(seen)} {sorted(set(seen))}")
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                      auto_offset_reset="earliest", consumer_timeout_ms=4000)
    c.assign([TopicPartition(topic, q) for q in range(3)])
    c.seek_to_beginning()
    theirs = [m.value.decode() for m in c]
    c.close()
    expect(sorted(theirs) == sorted(seen), f"kafka-python's read_committed agrees: {len(theirs)}")
    everything = read_all(bootstrap, topic, "read_uncommitted")
    expect(len(everything) == 65, f"read_uncommitted sees all 65: {len(everything)}")


def zombie(bootstrap):
    from confluent_kafka import KafkaException

    create(bootstrap, [T_ZOMBIE])
    old = producer(bootstrap, "tx-zombie-" + RUN)
    old.init_transactions(30)
    old.begin_transaction()
    for i in range(5):
        old.produce(T_ZOMBIE, key=str(i), value=f"zombie-{i}")
    old.flush(30)
    new = producer(bootstrap, "tx-zombie-" + RUN)
    new.init_transactions(30)
    new.begin_transaction()
    for i in range(5):
        new.produce(T_ZOMBIE, key=str(i), value=f"new-{i}")
    new.commit_transaction(30)
    # The old instance: its writes and its commit are refused.
    refused = None
    try:
        old.produce(T_ZOMBIE, key="z", value="zombie-late")
        old.flush(10)
        old.commit_transaction(10)
    except KafkaException as e:
        refused = e.args[0]
    expect(refused is not None, "the fenced producer's commit is refused")
    expect(refused.fatal() or "fenced" in str(refused).lower() or "epoch" in str(refused).lower(),
           f"refused as fenced: {refused}")
    committed = read_all(bootstrap, T_ZOMBIE, "read_committed")
    expect(sorted(committed) == sorted(f"new-{i}" for i in range(5)),
           f"only the new instance's records are committed: {sorted(committed)}")


def timeout(bootstrap):
    from confluent_kafka import KafkaException, Producer

    create(bootstrap, [T_TIMEOUT], partitions=1)
    p = producer(bootstrap, "tx-timeout-" + RUN, **{"transaction.timeout.ms": 2000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(T_TIMEOUT, key="a", value="left-open")
    p.flush(30)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(T_TIMEOUT, key="b", value="after")
    expect(plain.flush(30) == 0, "plain produce")
    # The coordinator aborts it; the LSO moves past it.
    got = read_all(bootstrap, T_TIMEOUT, "read_committed", settle_s=12.0, until=1)
    expect(got == ["after"], f"read_committed reads on after the abort: {got}")
    failed = False
    try:
        p.commit_transaction(10)
    except KafkaException:
        failed = True
    expect(failed, "the timed-out transaction cannot commit")


def setup(bootstrap, n, rf):
    from confluent_kafka import Producer

    create(bootstrap, ["in", "out"], partitions=3, rf=rf)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    for i in range(n):
        p.produce("in", key=str(i), value=str(i))
        if i % 10000 == 0:
            p.poll(0)
    expect(p.flush(60) == 0, "input produced")


def copy(bootstrap, n, die_after):
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    # A short session: a killed instance's membership ends soon, so the
    # next one's join does not wait long for it.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "copier", "isolation.level": "read_committed",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})
    # RDDEBUG=eos,protocol (say) turns librdkafka's debug log on.
    p = producer(bootstrap, "copier-1", **({"debug": os.environ["RDDEBUG"]} if os.environ.get("RDDEBUG") else {}))
    watchdog = Watchdog(WATCHDOG_S)
    try:
        p.init_transactions(60)
    except KafkaException as e:
        print("init failed:", e, flush=True)
        sys.exit(3)
    c.subscribe(["in"])
    rng = random.Random()
    txns = 0
    idle_since = time.time()
    while True:
        msgs = c.consume(500, 1.0)
        msgs = [m for m in msgs if m.error() is None]
        if not msgs:
            if done(c, n):
                print("copied", flush=True)
                return
            if time.time() - idle_since > 60:
                print("FAIL: nothing to copy for 60 s", flush=True)
                sys.exit(1)
            continue
        idle_since = time.time()
        watchdog.arm()
        try:
            p.begin_transaction()
            for m in msgs:
                p.produce("out", key=m.key(), value=m.value())
            if die_after and txns + 1 >= die_after and rng.random() < 0.5:
                p.flush(10)
                os._exit(9)  # a transaction open, records written
            p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 15)
            p.commit_transaction(60)
            watchdog.disarm()
        except KafkaException as e:
            err = e.args[0]
            print("transaction failed:", err, flush=True)
            if err.txn_requires_abort():
                p.abort_transaction(60)
                rewind(c)
                continue
            sys.exit(3)
        txns += 1
        print(f"committed {txns}", flush=True)
        if die_after and txns >= die_after:
            os._exit(9)  # just after a commit


# librdkafka's send_offsets_to_transaction can hang past its timeout when
# the group coordinator it cached went down (librdkafka issues #5456,
# #5511): a transaction that takes longer than this ends the process, as
# an operator's restart would, and the next instance takes over.
WATCHDOG_S = 45


class Watchdog:
    def __init__(self, seconds):
        import threading

        self.seconds = seconds
        self.deadline = None
        t = threading.Thread(target=self.run, daemon=True)
        t.start()

    def arm(self):
        self.deadline = time.time() + self.seconds

    def disarm(self):
        self.deadline = None

    def run(self):
        while True:
            time.sleep(1)
            if self.deadline is not None and time.time() > self.deadline:
                try:
                    print("transaction hung: exiting for a new instance", flush=True)
                finally:  # even when nobody reads the output any more
                    os._exit(3)


def rewind(c):
    """After an abort, read again from the committed offsets."""
    from confluent_kafka import TopicPartition

    committed = c.committed(c.assignment(), 30)
    for tp in committed:
        c.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))


def done(c, n):
    committed = c.committed(c.assignment(), 30)
    total = sum(max(tp.offset, 0) for tp in committed)
    return len(c.assignment()) == 3 and total >= n


def verify(bootstrap, n):
    committed = read_all(bootstrap, "out", "read_committed", settle_s=6.0)
    counts = {}
    for v in committed:
        counts[v] = counts.get(v, 0) + 1
    missing = [i for i in range(n) if str(i) not in counts]
    twice = [v for v, k in counts.items() if k > 1]
    expect(not missing, f"{len(missing)} input records missing from out, e.g. {missing[:10]}")
    expect(not twice, f"{len(twice)} records copied more than once, e.g. {twice[:10]}")
    expect(len(committed) == n, f"out holds {len(committed)} committed records, not {n}")
    uncommitted = read_all(bootstrap, "out", "read_uncommitted", settle_s=6.0)
    expect(len(uncommitted) >= n, f"read_uncommitted sees {len(uncommitted)} < {n}")
    print(f"verified: {n} exactly once; read_uncommitted sees {len(uncommitted)}", flush=True)


T_ORDER, G_ORDER = "tx-order", "tx-order-group"


def committed_offsets(bootstrap):
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": G_ORDER, "enable.auto.commit": False})
    got = c.committed([TopicPartition(T_ORDER, 0), TopicPartition(T_ORDER, 1)], timeout=30)
    c.close()
    return [tp.offset for tp in got]


def offsets_order(bootstrap, step):
    from confluent_kafka import Consumer, TopicPartition

    if step == "check":
        got = committed_offsets(bootstrap)
        expect(got == [5, 9], f"committed offsets after the restart: {got}")
        return
    create(bootstrap, [T_ORDER])
    p = producer(bootstrap, "tx-order-" + RUN)
    p.init_transactions(30)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": G_ORDER, "enable.auto.commit": False})
    meta = c.consumer_group_metadata()
    p.begin_transaction()
    p.produce(T_ORDER, key="k", value="v")
    p.send_offsets_to_transaction([TopicPartition(T_ORDER, 0, 7), TopicPartition(T_ORDER, 1, 7)], meta, 30)
    # A plain commit of partition 0 while the transaction is open.
    c.commit(offsets=[TopicPartition(T_ORDER, 0, 5)], asynchronous=False)
    p.commit_transaction(30)
    got = committed_offsets(bootstrap)
    expect(got == [5, 7], f"the plain commit written after the transaction's stands: {got}")
    p.begin_transaction()
    p.produce(T_ORDER, key="k", value="w")
    p.send_offsets_to_transaction([TopicPartition(T_ORDER, 1, 9)], meta, 30)
    p.commit_transaction(30)
    got = committed_offsets(bootstrap)
    expect(got == [5, 9], f"a later transaction's offset replaces the plain one: {got}")
    c.close()


def main():
    bootstrap, mode = sys.argv[1], sys.argv[2]
    if mode == "basic":
        basic(bootstrap)
    elif mode == "kafka_python":
        kafka_python(bootstrap)
    elif mode == "zombie":
        zombie(bootstrap)
    elif mode == "timeout":
        timeout(bootstrap)
    elif mode == "offsets_order":
        offsets_order(bootstrap, sys.argv[3])
    elif mode == "setup":
        setup(bootstrap, int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    elif mode == "copy":
        copy(bootstrap, int(sys.argv[3]), int(sys.argv[4]))
    elif mode == "verify":
        verify(bootstrap, int(sys.argv[3]))
    else:
        expect(False, f"unknown mode {mode}")
    print("all ok", flush=True)


if __name__ == "__main__":
    main()
