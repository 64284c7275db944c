"""Config changes through confluent-kafka's AdminClient on a ZooKeeper
cluster of ferrite brokers (driven by broker/tests/cluster_configs.rs,
which checks what each broker does with them).

usage: cluster_configs.py BOOTSTRAP MODE ARGS...

fetchers ID COUNT: through BOOTSTRAP, num.replica.fetchers set to 17 (more
than Ferrite's 16) is refused with INVALID_CONFIG, then set to COUNT for
broker ID, and described back from broker ID as its own dynamic value.

topic TOPIC KEY VALUE: sets one config of TOPIC through BOOTSTRAP.

Prints `all ok` at the end; exits non-zero on the first mismatch.
"""
import sys

# The helpers of admin.py, beside this script (on sys.path as its folder).
from admin import TIMEOUT_S, admin, alter_error, expect


def set_one(a, rtype, name, key, value):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    entry = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
    res = ConfigResource(rtype, name, incremental_configs=[entry])
    return alter_error(a.incremental_alter_configs([res]))


def fetchers(bootstrap, broker, count):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

    a = admin(bootstrap)
    err = set_one(a, ResourceType.BROKER, broker, "num.replica.fetchers", "17")
    expect(err is not None and err.code() == KafkaError.INVALID_CONFIG, f"17 fetchers: {err}")
    err = set_one(a, ResourceType.BROKER, broker, "num.replica.fetchers", count)
    expect(err is None, f"{count} fetchers on broker {broker}: {err}")
    r = ConfigResource(ResourceType.BROKER, broker)
    got = a.describe_configs([r], request_timeout=TIMEOUT_S)[r].result(TIMEOUT_S)["num.replica.fetchers"]
    expect(got.value == count and got.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value,
           f"broker {broker} describes num.replica.fetchers={got.value} from {got.source}")
    expect(not got.is_read_only, "num.replica.fetchers is dynamic")
    print(f"ok fetchers {broker}={count}", flush=True)


def topic(bootstrap, name, key, value):
    from confluent_kafka.admin import ResourceType

    err = set_one(admin(bootstrap), ResourceType.TOPIC, name, key, value)
    expect(err is None, f"{name} {key}={value}: {err}")
    print(f"ok topic {name} {key}={value}", flush=True)


def main():
    bootstrap, mode, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    {"fetchers": fetchers, "topic": topic}[mode](bootstrap, *args)
    print("all ok", flush=True)


if __name__ == "__main__":
    main()
