"""Consumes a topic from the beginning with confluent-kafka, checking CRCs,
for a few seconds; prints each record's offset (after checking its value)
and each error. Used by tests/scrub.rs.

usage: scrub.py BOOTSTRAP TOPIC SECONDS [REPEAT]
(the record at offset n holds "record-<n, 5 digits>-" REPEAT times, 4000
by default)
"""

import sys
import time

from confluent_kafka import Consumer, KafkaError, TopicPartition


def main():
    bootstrap, topic, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    repeat = int(sys.argv[4]) if len(sys.argv) > 4 else 4000
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "scrub-check",
        "enable.auto.commit": False,
        "check.crcs": True,
    })
    c.assign([TopicPartition(topic, 0, 0)])
    deadline = time.time() + seconds
    while time.time() < deadline:
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            code = m.error().code()
            name = "CORRUPT" if code == KafkaError._BAD_MSG else m.error().name()
            print("ERROR", name, m.error().str())
            continue
        expected = ("record-%05d-" % m.offset()).encode() * repeat
        if m.value() != expected:
            print("CORRUPT value at", m.offset())
        print("OFFSET", m.offset())
    c.close()


main()
