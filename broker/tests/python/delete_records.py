"""DeleteRecords through real clients' admin APIs.

    python delete_records.py BOOTSTRAP

confluent-kafka's AdminClient.delete_records moves a partition's log start
to an offset: a consumer from the beginning then starts there, and
ListOffsets(earliest) says so; -1 (OFFSET_END in the client) deletes up to
the high watermark; an offset past it is OFFSET_OUT_OF_RANGE; a compacted
topic answers POLICY_VIOLATION. kafka-python's KafkaAdminClient does the
same through its own encoding. Exits non-zero on the first mismatch.
"""
import sys
import time


def expect(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        sys.exit(1)


def produce(bootstrap, topic, n):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "batch.size": 2048})
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
    expect(p.flush(30) == 0, "produce")


def earliest(bootstrap, topic):
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dr", "enable.auto.commit": False})
    low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.assign([TopicPartition(topic, 0, -2)])  # OFFSET_BEGINNING
    first = None
    deadline = time.time() + 20
    while first is None and time.time() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            first = m.offset()
    c.close()
    return low, high, first


def main(bootstrap):
    from confluent_kafka import KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic("dr", 1, 1, config={"segment.bytes": "4096"}),
              NewTopic("dr-compacted", 1, 1, config={"cleanup.policy": "compact"}),
              NewTopic("dr-kp", 1, 1)]
    for f in admin.create_topics(topics).values():
        f.result(30)
    produce(bootstrap, "dr", 500)
    produce(bootstrap, "dr-compacted", 10)
    produce(bootstrap, "dr-kp", 100)

    result = admin.delete_records([TopicPartition("dr", 0, 137)])
    deleted = list(result.values())[0].result(30)
    expect(deleted.low_watermark == 137, f"low watermark {deleted.low_watermark}")
    low, high, first = earliest(bootstrap, "dr")
    expect((low, high, first) == (137, 500, 137), f"after delete_records(137): {(low, high, first)}")

    result = admin.delete_records([TopicPartition("dr", 0, 100)])
    deleted = list(result.values())[0].result(30)
    expect(deleted.low_watermark == 137, f"never back: {deleted.low_watermark}")

    for offset, code in ((501, KafkaError.OFFSET_OUT_OF_RANGE),):
        f = list(admin.delete_records([TopicPartition("dr", 0, offset)]).values())[0]
        try:
            f.result(30)
            expect(False, f"delete_records({offset}) succeeded")
        except Exception as e:
            err = e.args[0]
            expect(err.code() == code, f"delete_records({offset}): {err}")

    f = list(admin.delete_records([TopicPartition("dr-compacted", 0, 5)]).values())[0]
    try:
        f.result(30)
        expect(False, "delete_records on a compacted topic succeeded")
    except Exception as e:
        expect(e.args[0].code() == KafkaError.POLICY_VIOLATION, f"compacted: {e.args[0]}")

    # -1: everything up to the high watermark.
    deleted = list(admin.delete_records([TopicPartition("dr", 0, -1)]).values())[0].result(30)
    expect(deleted.low_watermark == 500, f"to the high watermark: {deleted.low_watermark}")
    print("ok confluent-kafka", flush=True)

    from kafka import KafkaAdminClient
    from kafka.structs import TopicPartition as KTopicPartition

    kp = KafkaAdminClient(bootstrap_servers=bootstrap)
    answer = kp.delete_records({KTopicPartition("dr-kp", 0): 42})
    low = list(answer.values())[0]["low_watermark"]
    expect(low == 42, f"kafka-python: low watermark {answer}")
    low, high, first = earliest(bootstrap, "dr-kp")
    expect((low, first) == (42, 42), f"kafka-python: after delete_records(42): {(low, high, first)}")
    kp.close()
    print("ok kafka-python", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
    print("all ok", flush=True)
