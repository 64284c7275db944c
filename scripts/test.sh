#!/usr/bin/env bash
# Ferrite's test command (README.md): installs what the tests need on a fresh
# machine, then checks formatting and lints, runs every test, smoke-runs the
# benchmarks, and fuzzes each target briefly when a nightly toolchain is
# present. Exits non-zero on the first failure.
#
#   FUZZ_SECONDS   seconds per fuzz target (default 20; 0 skips fuzzing)
set -euo pipefail
cd "$(dirname "$0")/.."

section() { printf '\n== %s (%s)\n' "$*" "$(date +%T)"; }

section "toolchain and test dependencies"
cargo --version
rustc --version
df -h . | tail -n 1
# Real Kafka clients the tests drive (kcat), and the ZooKeeper servers the
# cluster tests start themselves (Debian's zookeeper package; the tests run
# it as their own child processes, the system service is not used).
missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
# The fault suite (chaos/) cuts nodes apart with nftables in its own
# network namespace.
command -v nft >/dev/null 2>&1 || missing+=(nftables)
# ...and steps the brokers' wall clocks with libfaketime (`skew-clocks`).
[ -f "/usr/lib/$(uname -m)-linux-gnu/faketime/libfaketimeMT.so.1" ] || missing+=(faketime)
# The TLS tests hold a TLS 1.2-only client against a TLS 1.3-only listener.
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi
kcat -V | head -n 1
java -version 2>&1 | head -n 1
# Python clients, in a virtualenv under target/ (no system packages touched).
if [ ! -x target/pyenv/bin/python ]; then
  python3 -m venv target/pyenv
fi
# Within the major versions the tests were written against: loggers.py
# needs kafka-python 3's admin API, admin.py confluent-kafka 2's.
target/pyenv/bin/pip install -q --disable-pip-version-check 'confluent-kafka>=2.16,<3' 'kafka-python>=3.0,<4'
export FERRITE_PYTHON="$PWD/target/pyenv/bin/python"
"$FERRITE_PYTHON" -c 'import confluent_kafka, kafka; print("confluent-kafka", confluent_kafka.version()[0], "/ librdkafka", confluent_kafka.libversion()[0], "/ kafka-python", kafka.__version__)'

section "format"
cargo fmt --all --check

section "clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo clippy --workspace --all-targets --locked --features ferrite-broker/fault-injection -- -D warnings

section "tests"
cargo test --workspace --locked --features ferrite-broker/fault-injection

if [ "${FERRITE_CI_FREE_DISK:-0}" = 1 ]; then
  section "freeing the debug build (FERRITE_CI_FREE_DISK=1)"
  du -sh target/debug 2>/dev/null || true
  rm -rf target/debug
fi

section "the deterministic simulations, 10,000 seeds each (release build)"
FERRITE_SIM_SEEDS=10000 cargo test --release --locked -q -p ferrite-replication --test sim
FERRITE_SIM_SEEDS=10000 cargo test --release --locked -q -p ferrite-controller --test control_random

section "a short engine benchmark run (clippy above already checked the criterion benches)"
smoke_dir=$(mktemp -d "${TMPDIR:-/tmp}/ferrite-bench-smoke.XXXXXX")
trap 'rm -rf "$smoke_dir"' EXIT
last=$(cargo run --release --locked -q -p ferrite-bench -- engine --bytes 64MiB --dir "$smoke_dir" | tail -n 1)
echo "$last"
for key in append_mb_s raw_write_mb_s ratio recovery_mb_s; do
  case "$last" in
    *"\"$key\""*) ;;
    *) echo "ferrite-bench engine: last line lacks $key" >&2; exit 1 ;;
  esac
done

section "load generator smoke run against a standalone broker"
cargo build --release --locked -q -p ferrite-broker -p ferrite-bench
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
broker_dir="$smoke_dir/broker"
target/release/ferrite standalone --listen "127.0.0.1:$port" --data-dir "$broker_dir" --shards 2 \
  2> "$smoke_dir/broker.log" &
broker_pid=$!
trap 'kill $broker_pid 2>/dev/null || true; rm -rf "$smoke_dir"' EXIT
for _ in $(seq 1 100); do
  kcat -b "127.0.0.1:$port" -L -m 1 >/dev/null 2>&1 && break
  sleep 0.1
done
produced=$(target/release/ferrite-bench produce --bootstrap "127.0.0.1:$port" --topic smoke --partitions 4 \
  --connections 2 --count 200000 --duration 60 --loopback-seconds 1 | tail -n 1)
echo "$produced"
consumed=$(target/release/ferrite-bench consume --bootstrap "127.0.0.1:$port" --topic smoke --partitions 4 \
  --duration 60 | tail -n 1)
echo "$consumed"
python3 - "$produced" "$consumed" <<'PY'
import json, sys
p, c = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for key in ("records_per_sec", "mb_per_sec", "p50_ms", "p99_ms", "p999_ms", "max_ms", "loopback_mb_s"):
    assert key in p, f"produce output lacks {key}"
assert p["errors"] == 0 and p["records"] >= 200000, p
# Two connections serve two of the four partitions each: two batches a request.
assert p["batches_per_request"] == 2.0, p
# The topic also holds the produce run's unmeasured warm-up records.
expected = p["records"] + p["warm_up_records"]
assert p["warm_up_records"] == 4, p
assert c["records"] == expected, f"consumed {c['records']} of {expected}"
PY
# A fixed rate: an open-loop schedule per record, batches closed by a linger.
paced=$(target/release/ferrite-bench produce --bootstrap "127.0.0.1:$port" --topic smoke-rate --partitions 4 \
  --connections 2 --rate 20000 --linger-ms 1 --duration 3 --loopback-seconds 0 | tail -n 1)
echo "$paced"
python3 - "$paced" <<'PY'
import json, sys
p = json.loads(sys.argv[1])
assert p["errors"] == 0 and p["rate"] == 20000, p
# Loose bounds: a smoke run, not a timing. Two batches of 5 records a
# request (the 11 records intended within 1 ms of the first at 10,000/s a
# connection, over its two partitions), each record waiting 0.45 ms on
# average for its batch to close.
assert p["records"] >= 20000, p
assert 0.3 <= p["linger_ms_mean"] <= 1.0, p
assert p["p50_ms"] >= 0.3, p
PY
# acks=0: no answers, so what the broker appended is read back from it.
unanswered=$(target/release/ferrite-bench produce --bootstrap "127.0.0.1:$port" --topic smoke-acks0 --partitions 4 \
  --connections 2 --acks 0 --count 100000 --duration 60 --loopback-seconds 0 | tail -n 1)
echo "$unanswered"
python3 - "$unanswered" <<'PY'
import json, sys
p = json.loads(sys.argv[1])
assert p["sent_records"] >= 100000, p
assert p["records"] == p["sent_records"], f"the broker appended {p['records']} of {p['sent_records']} sent"
PY
kill -TERM $broker_pid
wait $broker_pid
trap 'rm -rf "$smoke_dir"' EXIT

section "README's broker command, as written, in this checkout"
# A new user clones, runs README's first command here (relative --data-dir
# and all) and points kcat at it; CI's checkout is a fresh clone.
readme_cmd=$(grep -m1 '^cargo run --release --bin ferrite -- standalone' README.md | sed 's/ *#.*$//')
[ -n "$readme_cmd" ] || { echo "README.md lacks its broker command" >&2; exit 1; }
[ ! -e ferrite-data ] || { echo "./ferrite-data exists already: move it away to run this" >&2; exit 1; }
readme_port=9092
if ! python3 -c 'import socket; socket.create_server(("127.0.0.1", 9092)).close()' 2>/dev/null; then
  readme_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  echo "port 9092 is taken here: the command runs on $readme_port"
  readme_cmd=${readme_cmd//127.0.0.1:9092/127.0.0.1:$readme_port}
fi
echo "$readme_cmd"
# cargo run replaces itself with the broker: the pid is the broker's.
$readme_cmd 2> "$smoke_dir/readme.log" &
readme_pid=$!
trap 'kill $readme_pid 2>/dev/null || true; rm -rf "$smoke_dir" ferrite-data' EXIT
for _ in $(seq 1 9000); do
  grep -q "ferrite is serving" "$smoke_dir/readme.log" && break
  kill -0 $readme_pid 2>/dev/null || break
  sleep 0.1
done
echo "quick start" | kcat -b "127.0.0.1:$readme_port" -P -t first
got=$(kcat -b "127.0.0.1:$readme_port" -C -t first -o beginning -e -q)
kill -TERM $readme_pid
wait $readme_pid || true
if [ "$got" != "quick start" ] || [ ! -d ferrite-data/first-0 ]; then
  echo "README's broker command did not serve kcat: got '$got'" >&2
  cat "$smoke_dir/readme.log" >&2
  exit 1
fi
if grep -q $'\e\[' "$smoke_dir/readme.log"; then
  echo "the broker's log to a file carries colour codes" >&2
  exit 1
fi
echo "a record went in and came back; its partition is in ./ferrite-data"
rm -rf ferrite-data
trap 'rm -rf "$smoke_dir"' EXIT

section "fuzz"
fuzz_seconds=${FUZZ_SECONDS:-20}
if [ "$fuzz_seconds" = 0 ]; then
  echo "FUZZ_SECONDS=0: skipping"
elif ! cargo +nightly --version >/dev/null 2>&1; then
  echo "no nightly toolchain: skipping fuzzing"
else
  command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
  (
    cd fuzz
    for target in batch_header segment_recovery index_files request_frame dispatch; do
      mkdir -p "corpus/$target"
      # dispatch keeps one broker for the whole run, on purpose never freed.
      if [ "$target" = dispatch ]; then export ASAN_OPTIONS=detect_leaks=0; else unset ASAN_OPTIONS; fi
      cargo +nightly fuzz run "$target" "corpus/$target" "seeds/$target" -- \
        -max_total_time="$fuzz_seconds" -malloc_limit_mb=256 -rss_limit_mb=1024 -print_final_stats=0
    done
  )
fi

section "done"
df -h . | tail -n 1
