"""Real Python Kafka clients over Ferrite's secured listeners.

    python tls.py BOOTSTRAP confluent|kafka-python [--ca CA_PEM] [--cert CERT --key KEY]
                  [--sasl MECHANISM:USER:PASSWORD]

confluent-kafka (librdkafka, its own defaults: the broker's certificate is
checked, host name included): a producer writes N records to a 4-partition
topic; a consumer in a group (subscribe, FindCoordinator through the same
listener, commits) reads every one back, byte for byte, and its committed
offsets are the ends. With --cert and --key the client presents a
certificate; with --sasl it authenticates (SASL_SSL with --ca, else
SASL_PLAINTEXT). kafka-python: the same with its own settings. Prints
"all ok", or exits non-zero on the first mismatch.
"""
import argparse
import sys
import time
import uuid

N = 2000
PARTITIONS = 4


def expect(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        sys.exit(1)


def values(tag):
    return {f"{tag}-{i}-".encode() * (1 + i % 7) for i in range(N)}


def protocol(a):
    if a.sasl:
        return "SASL_SSL" if a.ca else "SASL_PLAINTEXT"
    return "SSL"


def confluent(a):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    ssl = {"bootstrap.servers": a.bootstrap, "security.protocol": protocol(a)}
    if a.ca:
        ssl["ssl.ca.location"] = a.ca
    if a.cert:
        ssl.update({"ssl.certificate.location": a.cert, "ssl.key.location": a.key})
    if a.sasl:
        mechanism, user, password = a.sasl.split(":", 2)
        ssl.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    topic = "tls-ck-" + uuid.uuid4().hex[:8]
    admin = AdminClient(dict(ssl))
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        f.result(30)
    sent = values(topic)
    p = Producer({**ssl, "linger.ms": 5, "acks": "all"})
    errors = []
    for i, v in enumerate(sorted(sent)):
        p.produce(topic, key=str(i).encode(), value=v, on_delivery=lambda e, m: e and errors.append(e))
    expect(p.flush(30) == 0, "producer flushed")
    expect(not errors, f"delivery errors: {errors[:3]}")
    c = Consumer({**ssl, "group.id": topic, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = set()
    deadline = time.time() + 60
    while len(got) < N and time.time() < deadline:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        got.add(m.value())
    expect(got == sent, f"read {len(got)} of {N} records back")
    c.commit(asynchronous=False)
    committed = c.committed([TopicPartition(topic, i) for i in range(PARTITIONS)], timeout=10)
    ends = [c.get_watermark_offsets(TopicPartition(topic, i), timeout=10)[1] for i in range(PARTITIONS)]
    expect([tp.offset for tp in committed] == ends, f"committed {committed} against ends {ends}")
    expect(sum(ends) == N, f"ends {ends}")
    c.close()


def kafka_python(a):
    from kafka import KafkaConsumer, KafkaProducer

    ssl = {"bootstrap_servers": a.bootstrap, "security_protocol": protocol(a)}
    if a.ca:
        ssl["ssl_cafile"] = a.ca
    if a.cert:
        ssl.update({"ssl_certfile": a.cert, "ssl_keyfile": a.key})
    if a.sasl:
        mechanism, user, password = a.sasl.split(":", 2)
        ssl.update({"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password})
    topic = "tls-kp-" + uuid.uuid4().hex[:8]
    sent = values(topic)
    p = KafkaProducer(acks="all", linger_ms=5, **ssl)
    for v in sorted(sent):
        p.send(topic, v)
    p.flush(30)
    p.close()
    c = KafkaConsumer(topic, group_id=topic, auto_offset_reset="earliest", enable_auto_commit=False,
                      consumer_timeout_ms=20000, **ssl)
    got = set()
    for m in c:
        got.add(m.value)
        if len(got) == N:
            break
    expect(got == sent, f"read {len(got)} of {N} records back")
    c.commit()
    c.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("bootstrap")
    p.add_argument("which", choices=["confluent", "kafka-python"])
    p.add_argument("--ca")
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--sasl")
    a = p.parse_args()
    {"confluent": confluent, "kafka-python": kafka_python}[a.which](a)
    print("all ok", flush=True)


if __name__ == "__main__":
    main()
