"""Real Python Kafka clients against a running Ferrite broker.

    python clients.py BOOTSTRAP confluent|kafka-python

confluent-kafka (librdkafka): producers with acks 0, 1 and all, each with
compression none, gzip, snappy, lz4 and zstd; a consumer with assign() reads
every record back, in order, byte for byte; offsets_for_times() finds the
right offsets. kafka-python: the same round trip for the codecs it ships
without extra packages. Exits non-zero on the first mismatch.

kafka-python-sessions: a kafka-python consumer of 8 partitions (it fetches
in incremental fetch sessions, KIP-227) reads every record while a producer
writes to a few partitions at a time, in order per partition; then assigned
4 of them (the others leave its session), it reads what is written to
those 4 and nothing else.
"""
import sys
import time

BASE_TS = 1_700_000_000_000
N = 3000


def expect(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        sys.exit(1)


def records(tag):
    return [(f"k{i}".encode(), f"{tag}-value-{i}-".encode() * (1 + i % 5), BASE_TS + i) for i in range(N)]


def confluent(bootstrap):
    from confluent_kafka import Consumer, Producer, TopicPartition

    for acks in ("0", "1", "all"):
        for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
            topic = f"ck-{acks}-{codec}"
            data = records(topic)
            p = Producer({
                "bootstrap.servers": bootstrap,
                "acks": acks,
                "compression.type": codec,
                "linger.ms": 5,
                "enable.idempotence": False,
            })
            errors = []

            def report(err, msg):
                if err is not None:
                    errors.append(err)

            for k, v, ts in data:
                p.produce(topic, key=k, value=v, timestamp=ts, on_delivery=report)
                p.poll(0)
            left = p.flush(30)
            expect(left == 0 and not errors, f"{topic}: {left} unflushed, errors {errors[:3]}")

            c = Consumer({
                "bootstrap.servers": bootstrap,
                "group.id": "unused",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            })
            c.assign([TopicPartition(topic, 0, 0)])
            got = []
            deadline = time.time() + 60
            while len(got) < N and time.time() < deadline:
                m = c.poll(1.0)
                if m is None:
                    continue
                expect(m.error() is None, f"{topic}: consumer error {m.error()}")
                got.append((m.key(), m.value(), m.timestamp()[1], m.offset()))
            expect(len(got) == N, f"{topic}: read {len(got)} of {N}")
            for i, (k, v, ts, off) in enumerate(got):
                expect((k, v, ts) == data[i], f"{topic}: record {i} differs: {(k, v, ts)} != {data[i]}")
                expect(off == i, f"{topic}: record {i} at offset {off}")
            for i in (0, 1, 17, N // 2, N - 1):
                tp = c.offsets_for_times([TopicPartition(topic, 0, BASE_TS + i)], timeout=10)[0]
                expect(tp.error is None and tp.offset == i, f"{topic}: offsets_for_times({i}) = {tp.offset} {tp.error}")
            c.close()
            print("ok", topic, flush=True)


def kafka_python(bootstrap):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    for acks in (1, "all"):
        for codec in (None, "gzip"):
            topic = f"kp-{acks}-{codec or 'none'}"
            data = records(topic)
            # Idempotence (InitProducerId) is the subject of a later issue.
            p = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, compression_type=codec, linger_ms=5,
                              enable_idempotence=False)
            futures = [p.send(topic, key=k, value=v, timestamp_ms=ts) for k, v, ts in data]
            p.flush(30)
            offsets = [f.get(timeout=30).offset for f in futures]
            expect(offsets == list(range(N)), f"{topic}: acknowledged offsets are not 0..{N}")
            p.close()
            c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=10000)
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek_to_beginning(tp)
            got = []
            for m in c:
                got.append((m.key, m.value, m.timestamp))
                if len(got) == N:
                    break
            expect(got == data, f"{topic}: read {len(got)} records, first difference at "
                   f"{next((i for i, (a, b) in enumerate(zip(got, data)) if a != b), len(got))}")
            found = c.offsets_for_times({tp: BASE_TS + N // 3})[tp]
            expect(found is not None and found.offset == N // 3, f"{topic}: offsets_for_times = {found}")
            c.close()
            print("ok", topic, flush=True)


def kafka_python_sessions(bootstrap):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    topic, parts = "kp-sessions", 8
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, parts, 1)])
    admin.close()
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, enable_idempotence=False)
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100)
    tps = [TopicPartition(topic, i) for i in range(parts)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    sent = {i: [] for i in range(parts)}
    got = {i: [] for i in range(parts)}

    def read_until_caught_up(what):
        deadline = time.time() + 20
        while sum(map(len, got.values())) < sum(map(len, sent.values())):
            expect(time.time() < deadline, f"{what}: read {got} of {sent}")
            for tp, msgs in c.poll(timeout_ms=200).items():
                got[tp.partition].extend(m.value for m in msgs)

    for rnd in range(20):
        for i in range(parts):
            # A few partitions have news each round; the others stay quiet.
            if (rnd + i) % 3 == 0:
                v = f"{i}-{rnd}".encode()
                p.send(topic, value=v, partition=i)
                sent[i].append(v)
        p.flush(30)
        read_until_caught_up(f"round {rnd}")
    expect(got == sent, f"read {got}, sent {sent}")
    # Half the partitions leave the session; reading goes on where it was.
    c.assign(tps[:4])
    for tp in tps[:4]:
        c.seek(tp, len(sent[tp.partition]))
    for i in range(parts):
        v = f"{i}-after".encode()
        p.send(topic, value=v, partition=i)
        if i < 4:
            sent[i].append(v)
    p.flush(30)
    read_until_caught_up("after the reassignment")
    time.sleep(0.5)
    for tp, msgs in c.poll(timeout_ms=500).items():
        got[tp.partition].extend(m.value for m in msgs)
    expect(got == sent, f"after the reassignment: read {got}, sent {sent}")
    c.close()
    p.close()
    print("ok kafka-python-sessions", flush=True)


def idempotent(bootstrap):
    """An idempotent confluent-kafka producer against a broker that drops
    some produce answers after appending (the test starts it with
    ferrite.fault.produce.drop.response.every): the retried batches are
    not appended twice, so each record is read exactly once, in order."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, partitions, n = "idempotent", 3, 6000
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 2,
        "batch.num.messages": 50,
        "retry.backoff.ms": 50,
    })
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(err)

    for i in range(n):
        p.produce(topic, key=f"k{i % 97}".encode(), value=f"{i}".encode(), partition=i % partitions,
                  on_delivery=report)
        p.poll(0)
    left = p.flush(60)
    expect(left == 0 and not errors, f"{left} unflushed, errors {errors[:3]}")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "idem-check", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, q, 0) for q in range(partitions)])
    got = {q: [] for q in range(partitions)}
    deadline = time.time() + 60
    while sum(map(len, got.values())) < n and time.time() < deadline:
        m = c.poll(1.0)
        if m is None or m.error():
            continue
        got[m.partition()].append(int(m.value()))
    time.sleep(1)
    while True:
        m = c.poll(0.5)
        if m is None:
            break
        if not m.error():
            got[m.partition()].append(int(m.value()))
    c.close()
    for q in range(partitions):
        want = list(range(q, n, partitions))
        dupes = len(got[q]) - len(set(got[q]))
        expect(got[q] == want, f"partition {q}: {len(got[q])} records ({dupes} duplicates), want {len(want)} in order")
    print(f"idempotent: {n} records, each exactly once and in order", flush=True)


def partitioner(bootstrap):
    """Keyed records through confluent-kafka's Java-compatible partitioner
    (murmur2_random); prints each key and the partition it landed on, read
    back from the broker, as `KEY <key> <partition>` lines."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, partitions, n = "keyed", 7, 200
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    for i in range(n):
        p.produce(topic, key=f"key-{i * 7919}".encode(), value=b"v")
    expect(p.flush(30) == 0, "produce did not finish")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "keyed-check", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, q, 0) for q in range(partitions)])
    seen = 0
    deadline = time.time() + 30
    while seen < n and time.time() < deadline:
        m = c.poll(1.0)
        if m is None or m.error():
            continue
        print("KEY", m.key().decode(), m.partition(), flush=True)
        seen += 1
    c.close()
    expect(seen == n, f"read {seen} of {n}")


if __name__ == "__main__":
    bootstrap, which = sys.argv[1], sys.argv[2]
    modes = {"confluent": confluent, "kafka-python": kafka_python, "kafka-python-sessions": kafka_python_sessions, "idempotent": idempotent, "partitioner": partitioner}
    modes[which](bootstrap)
    print("all ok", flush=True)
