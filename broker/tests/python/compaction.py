"""A compacted topic through real clients (confluent-kafka, at its defaults
but for the codec).

    python compaction.py BOOTSTRAP CODEC

Creates a topic with cleanup.policy=compact and small segments, produces
in small batches
many values over few keys (some keys end with a tombstone), then reads the
topic from the start with a CRC-checking consumer until the broker's
cleaner has compacted it: every record read is the one produced at that
offset, offsets only increase, each key's latest record is there at its
own offset, and most obsolete records are gone. A record without a key is
refused with INVALID_RECORD. Exits non-zero on the first mismatch.
"""
import sys
import time

KEYS = 40
VALUES = 4000
TOMBSTONED = 5


def expect(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        sys.exit(1)


def read_all(bootstrap, topic):
    """Every record from offset 0 to the end: [(offset, key, value)]."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "compaction-reader",
        "enable.auto.commit": False,
        "check.crcs": True,
        "enable.partition.eof": True,
    })
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.time() + 30
    while time.time() < deadline:
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error() is not None:
            if m.error().code() == KafkaError._PARTITION_EOF:
                break
            expect(False, f"consumer error {m.error()}")
        out.append((m.offset(), m.key(), m.value()))
    c.close()
    return out


def main(bootstrap, codec):
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"compacted-{codec}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": "4096",
        "min.cleanable.dirty.ratio": "0.01",
    }
    fs = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1, config=configs)])
    fs[topic].result(30)

    # Small batches, so that segments roll and the cleaner (which never
    # touches the active segment) has something to clean.
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "batch.size": 4096})
    produced = {}
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(err)
        else:
            produced[msg.offset()] = (msg.key(), msg.value())

    for i in range(VALUES):
        key = f"key-{i % KEYS}".encode()
        p.produce(topic, key=key, value=f"value-{i}-".encode() * 3, on_delivery=report)
        p.poll(0)
    for k in range(TOMBSTONED):
        p.produce(topic, key=f"key-{k}".encode(), value=None, on_delivery=report)
    expect(p.flush(30) == 0 and not errors, f"produce: errors {errors[:3]}")
    expect(len(produced) == VALUES + TOMBSTONED, f"{len(produced)} acknowledged")

    keyless = []
    p.produce(topic, key=None, value=b"no key", on_delivery=lambda err, msg: keyless.append(err))
    p.flush(30)
    expect(len(keyless) == 1 and keyless[0] is not None, f"a keyless record was taken: {keyless}")
    expect(keyless[0].code() == KafkaError.INVALID_RECORD, f"keyless record refused with {keyless[0]}")

    latest = {}
    for offset, (key, _) in sorted(produced.items()):
        latest[key] = offset
    deadline = time.time() + 60
    while True:
        got = read_all(bootstrap, topic)
        if len(got) < VALUES // 4 or time.time() > deadline:
            break
        time.sleep(0.5)
    expect(len(got) < VALUES // 4, f"not compacted: {len(got)} records read")
    last = -1
    for offset, key, value in got:
        expect(offset > last, f"offset {offset} after {last}")
        last = offset
        expect(produced.get(offset) == (key, value), f"offset {offset} holds {(key, value)}, produced {produced.get(offset)}")
    offsets = {o for o, _, _ in got}
    for key, offset in latest.items():
        expect(offset in offsets, f"{key}'s latest record at {offset} is gone")
    print(f"ok {topic}: {len(got)} of {len(produced)} records after compaction", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    print("all ok", flush=True)
