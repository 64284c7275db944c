"""kafka-python's KafkaAdminClient on a running Ferrite broker's loggers
(BROKER_LOGGER, KIP-412), driven by `tests/admin_clients.rs`.

    python loggers.py BOOTSTRAP MODE

set: the loggers are described (root and the workspace's crates, each with
its level); ferrite_broker::net is set to DEBUG; a bad level is refused with
INVALID_CONFIG, deleting the root with INVALID_REQUEST; APPEND is refused.

reset: ferrite_broker::net is deleted (back to the root's INFO) and
described so.

Prints `all ok` at the end; exits non-zero on the first mismatch.
"""
import sys

LOGGER = "ferrite_broker::net"


def expect(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        sys.exit(1)


def loggers(a):
    from kafka.admin import ConfigResource, ConfigResourceType

    r = a.describe_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, "0")], config_filter="all")
    return {k: v["value"] for k, v in r["broker_logger"]["0"].items()}


def alter(a, configs):
    from kafka.admin import ConfigResource, ConfigResourceType

    res = ConfigResource(ConfigResourceType.BROKER_LOGGER, "0", configs=configs)
    return a.alter_configs([res], raise_on_unknown=False)["broker_logger"]["0"]


def set_level(a):
    before = loggers(a)
    expect(before.get("root") == "INFO", f"root {before}")
    expect(before.get("ferrite_engine") == "INFO", f"crates listed with the root's level: {before}")
    expect(alter(a, {LOGGER: "DEBUG"}) == "OK", "set DEBUG")
    expect(loggers(a).get(LOGGER) == "DEBUG", f"described after the set: {loggers(a)}")
    got = str(alter(a, {LOGGER: "LOUD"}))
    expect("Error 40" in got, f"a bad level: {got}")
    got = str(alter(a, {"root": ("DELETE", None)}))
    expect("Error 42" in got, f"deleting the root: {got}")
    got = str(alter(a, {LOGGER: ("APPEND", "DEBUG")}))
    expect("Error 42" in got, f"APPEND: {got}")
    expect(loggers(a).get(LOGGER) == "DEBUG", "refusals changed nothing")
    print("ok set", flush=True)


def reset(a):
    expect(alter(a, {LOGGER: ("DELETE", None)}) == "OK", "delete")
    expect(loggers(a).get(LOGGER, "INFO") == "INFO", f"back to the root's level: {loggers(a)}")
    print("ok reset", flush=True)


if __name__ == "__main__":
    from kafka.admin import KafkaAdminClient

    bootstrap, which = sys.argv[1], sys.argv[2]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    {"set": set_level, "reset": reset}[which](admin)
    admin.close()
    print("all ok", flush=True)
