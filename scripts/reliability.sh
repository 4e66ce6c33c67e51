#!/usr/bin/env bash
# The long reliability runs of docs/RELIABILITY.md, behind one command: a soak of the
# `mixed` workload (claimd-bench --soak: open loop at a fixed rate, every answer checked,
# claimd's RSS, open files, TCP connections, CPU and the period's p50/p99/p99.9 sampled
# every 10 s) on the embedded SQLite store and on PostgreSQL, each writing
# soak-<store>.csv and soak-<store>.png into the output directory and printing a verdict
# on flatness. The test suite runs the same mode for 3 s per store (tests/it/bench_soak.rs).
#
# Usage: scripts/reliability.sh [--bounded] [--out DIR] [--database-url URL]
#                               [--rate N] [--callers N] [--seconds S] [--sample-every S]
#
#   --bounded         ~20 s per store with a sample every 2 s, instead of 600 s and 10 s
#   --out DIR         where the CSV and PNG files go (default: target/reliability)
#   --database-url    a PostgreSQL database for the PostgreSQL soak (or the environment
#                     variable CLAIMD_RELIABILITY_DATABASE_URL); without one that soak is
#                     skipped, and the script says so. The SQLite soak always runs.
#   --rate N          cycles per second (default 2000; pick ~50-70 % of what the machine
#                     does: claimd-bench --workload mixed --callers 64 measures it)
#   --callers N       the callers' pool (default 64)
#   --seconds S, --sample-every S   override the length and the sample period
#
# Exit status: 0 when every soak ran and got only right answers; 1 otherwise. The verdict
# lines are reported, not judged: timings on a shared machine are no pass/fail criterion.
set -euo pipefail
cd "$(dirname "$0")/.."

out=target/reliability
url="${CLAIMD_RELIABILITY_DATABASE_URL:-}"
rate=2000
callers=64
seconds=
sample=
bounded=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bounded) bounded=1 ;;
    --out) out="${2:?--out needs a directory}"; shift ;;
    --database-url) url="${2:?--database-url needs a URL}"; shift ;;
    --rate) rate="${2:?--rate needs a number}"; shift ;;
    --callers) callers="${2:?--callers needs a number}"; shift ;;
    --seconds) seconds="${2:?--seconds needs a number}"; shift ;;
    --sample-every) sample="${2:?--sample-every needs a number}"; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "reliability.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$bounded" = 1 ]; then
  seconds="${seconds:-20}"
  sample="${sample:-2}"
else
  seconds="${seconds:-600}"
  sample="${sample:-10}"
fi

cargo build --release -p claimd -p claimd-bench
bench=./target/release/claimd-bench
mkdir -p "$out"

failed=0
soak() { # store, then extra flags
  local store="$1"
  shift
  echo "== soak on $store: ${seconds} s at ${rate} cycles/s, ${callers} callers =="
  if ! "$bench" --store "$store" "$@" --soak "$seconds" --rate "$rate" \
      --sample-every "$sample" --callers "$callers" \
      --csv "$out/soak-$store.csv" --plot "$out/soak-$store.png"; then
    echo "== soak on $store FAILED ==" >&2
    failed=1
  fi
}

soak sqlite
if [ -n "$url" ]; then
  soak postgres --database-url "$url"
else
  echo "== soak on postgres skipped: no --database-url (or CLAIMD_RELIABILITY_DATABASE_URL) given =="
fi

echo "results in $out/"
exit "$failed"
