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
# Real Kafka clients the tests drive.
if ! command -v kcat >/dev/null 2>&1; then
  echo "installing kcat"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q kcat
fi
kcat -V | head -n 1
# Python clients, in a virtualenv under target/ (no system packages touched).
if [ ! -x target/pyenv/bin/python ]; then
  python3 -m venv target/pyenv
fi
target/pyenv/bin/pip install -q --disable-pip-version-check confluent-kafka kafka-python
export FERRITE_PYTHON="$PWD/target/pyenv/bin/python"
"$FERRITE_PYTHON" -c 'import confluent_kafka, kafka; print("confluent-kafka", confluent_kafka.version()[0], "/ librdkafka", confluent_kafka.libversion()[0], "/ kafka-python", kafka.__version__)'

section "format"
cargo fmt --all --check

section "clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

section "tests"
cargo test --workspace --locked

section "benchmarks build, and a short engine run"
cargo bench --workspace --locked --no-run
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
    for target in batch_header segment_recovery index_files request_frame; do
      mkdir -p "corpus/$target"
      cargo +nightly fuzz run "$target" "corpus/$target" "seeds/$target" -- \
        -max_total_time="$fuzz_seconds" -malloc_limit_mb=256 -rss_limit_mb=1024 -print_final_stats=0
    done
  )
fi

section "done"
