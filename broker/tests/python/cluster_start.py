"""confluent-kafka AdminClients against a Ferrite cluster that has just
started, driven by `tests/cluster_start.rs` (which starts the brokers).

    python cluster_start.py TOPIC BOOTSTRAP...

Creates TOPIC-<i> (3 partitions, replication factor 1) through the i-th
broker, all at once, each AdminClient made as soon as this script runs, and
waits for every creation. Prints `all ok` when each one completed, else the
errors and a non-zero exit.
"""
import sys
import time

TIMEOUT_S = 30


def main():
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, bootstraps = sys.argv[1], sys.argv[2:]
    admins = [AdminClient({"bootstrap.servers": b}) for b in bootstraps]
    futures = []
    for i, admin in enumerate(admins):
        name = f"{topic}-{i}"
        created = admin.create_topics(
            [NewTopic(name, num_partitions=3, replication_factor=1)],
            request_timeout=TIMEOUT_S,
            operation_timeout=TIMEOUT_S,
        )
        futures.append((name, bootstraps[i], created[name]))
    failed = []
    start = time.monotonic()
    for name, bootstrap, future in futures:
        left = max(0.1, TIMEOUT_S - (time.monotonic() - start))
        try:
            future.result(timeout=left)
        except Exception as e:  # a timeout or a KafkaException: both fail
            failed.append(f"{name} through {bootstrap}: {type(e).__name__}: {e}")
    if failed:
        print("\n".join(failed))
        sys.exit(1)
    print("all ok")


if __name__ == "__main__":
    main()
