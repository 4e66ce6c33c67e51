#!/bin/bash
# hot-path-ab.sh BEFORE_BIN AFTER_BIN: claimd on plain PostgreSQL before and after a change,
# against the lean SQL baseline in the same invocation. One private cluster
# (docs/perf/issue-42/cluster.sh), a fresh database per invocation, the two builds in turn
# twice (before, after, after, before), each `claimd-bench --workload new,duplicate
# --callers 1,64 --rounds 3 --seconds 4` driven by AFTER's bench. Prints the claimd rows
# (thr/SQL is claimd's throughput over the SQL's in that invocation).
set -u
B=$1; A=$2; DIR=${DIR:-/tmp/claimd-perf}; PORT=${PORT:-5499}
DIR=$DIR PORT=$PORT bash "$(dirname "$0")/../issue-42/cluster.sh" > /dev/null
n=0
for side in before after after before; do
  n=$((n + 1)); db=ab_$n
  psql -h "$DIR" -p "$PORT" -U postgres -qc "create database $db"
  case $side in before) bin=$B ;; *) bin=$A ;; esac
  "$A/claimd-bench" --database-url "postgres://postgres@localhost:$PORT/$db?host=$DIR" \
    --claimd "$bin/claimd" --workload new,duplicate --callers 1,64 --rounds 3 --seconds 4 \
    > "ab-$n-$side.out" 2>&1
  echo "== $n $side (load $(cut -d' ' -f1-3 /proc/loadavg))"
  grep -E "^postgres .* claimd " "ab-$n-$side.out"
done
