"""Transactional produce throughput against idempotent produce at the same
shape, in the same run (Kafka's own comparison: 100 ms transactions).

    python bench/python/txn_produce.py BOOTSTRAP [SECONDS] [VALUE_BYTES]

confluent-kafka (librdkafka) producers at their defaults plus
`linger.ms=5`, one partition-spread topic per mode, each run for SECONDS
(default 10) with VALUE_BYTES values (default 512): first idempotent
(`enable.idempotence=true`), then transactional with a commit every
100 ms, then idempotent again (the two idempotent runs bound the drift of
the machine). Prints one JSON line with records/s of each and the ratio of
transactional to the mean of the idempotent runs.
"""
import json
import sys
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def topic(bootstrap, name):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, 6, 1)]).values():
        f.result(30)


def run(bootstrap, name, seconds, value, transactional):
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True}
    if transactional:
        conf["transactional.id"] = f"bench-{name}"
    p = Producer(conf)
    if transactional:
        p.init_transactions(30)
        p.begin_transaction()
    sent = 0
    start = time.time()
    last_commit = start
    while time.time() - start < seconds:
        for _ in range(1000):
            try:
                p.produce(name, value=value)
                sent += 1
            except BufferError:
                p.poll(0.01)
        p.poll(0)
        if transactional and time.time() - last_commit >= 0.1:
            p.commit_transaction(30)
            p.begin_transaction()
            last_commit = time.time()
    if transactional:
        p.commit_transaction(30)
    else:
        p.flush(30)
    return sent / (time.time() - start)


def main():
    bootstrap = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    value = b"x" * (int(sys.argv[3]) if len(sys.argv) > 3 else 512)
    stamp = int(time.time())
    results = {}
    for label, txn in (("idempotent_1", False), ("transactional", True), ("idempotent_2", False)):
        name = f"bench-{label}-{stamp}"
        topic(bootstrap, name)
        results[label] = round(run(bootstrap, name, seconds, value, txn))
    base = (results["idempotent_1"] + results["idempotent_2"]) / 2
    results["ratio"] = round(results["transactional"] / base, 3)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
