"""Real Python Kafka clients over a Ferrite SSL listener.

    python tls.py BOOTSTRAP CA_PEM confluent|kafka-python [CERT KEY]

confluent-kafka (librdkafka, its own defaults: the broker's certificate is
checked, host name included): a producer writes N records to a 4-partition
topic; a consumer in a group (subscribe, FindCoordinator through the SSL
listener, commits) reads every one back, byte for byte, and its committed
offsets are the ends. With CERT and KEY the client presents a certificate
(the broker requires one). kafka-python: the same with its own SSL
settings (ssl_cafile; ssl_certfile and ssl_keyfile with a certificate).
Prints "all ok", or exits non-zero on the first mismatch.
"""
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


def confluent(bootstrap, ca, cert, key):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    ssl = {"bootstrap.servers": bootstrap, "security.protocol": "ssl", "ssl.ca.location": ca}
    if cert:
        ssl.update({"ssl.certificate.location": cert, "ssl.key.location": key})
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


def kafka_python(bootstrap, ca, cert, key):
    from kafka import KafkaConsumer, KafkaProducer

    ssl = {"bootstrap_servers": bootstrap, "security_protocol": "SSL", "ssl_cafile": ca}
    if cert:
        ssl.update({"ssl_certfile": cert, "ssl_keyfile": key})
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
    bootstrap, ca, which = sys.argv[1], sys.argv[2], sys.argv[3]
    cert, key = (sys.argv[4], sys.argv[5]) if len(sys.argv) > 5 else (None, None)
    {"confluent": confluent, "kafka-python": kafka_python}[which](bootstrap, ca, cert, key)
    print("all ok", flush=True)


if __name__ == "__main__":
    main()
