#!/bin/bash
# run-n.sh BEFORE AFTER: run N of issue 42, in one script on one private cluster (cluster.sh).
# BEFORE and AFTER are directories holding a release claimd and claimd-bench (the build
# before issue 42 and main). Writes run-n-* files in the current directory:
#  1. PostgreSQL: new, duplicate and hot at 1 and 64 callers, the two builds alternating
#     (BEFORE AFTER BEFORE AFTER), each run's pg_stat_statements (ab.sh, run.sh);
#  2. SQLite: new at 64 callers, the two builds alternating twice;
#  3. perf stat at one caller (system calls, context switches per cycle), each build twice;
#  4. WAL records per new cycle at 64 callers, by relation and record type (AFTER).
set -u
A=$1; B=$2; HERE=$(cd "$(dirname "$0")" && pwd)
"$HERE/ab.sh" "$A" "$B" run-n-pg --workload new,duplicate,hot --callers 1,64 --rounds 3 \
  --seconds 4 > run-n-pg.txt 2>&1
for i in 1 2; do for s in "$A" "$B"; do
  "$s/claimd-bench" --store sqlite --claimd "$s/claimd" --workload new --callers 64 \
    --rounds 3 --seconds 4 --csv "run-n-sqlite-$(basename "$s")-$i.csv" \
    > "run-n-sqlite-$(basename "$s")-$i.out" 2>&1
done; done
for i in 1 2; do for s in "$A" "$B"; do
  echo "== $s #$i"; "$HERE/pstat.sh" "$s"
done; done > run-n-pstat.txt 2>&1
"$HERE/wal.sh" "$B" > run-n-wal.txt 2>&1
