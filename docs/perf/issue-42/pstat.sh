#!/bin/bash
# pstat.sh BINDIR: `perf stat` on claimd over 3 s of a one-caller `new` round; per cycle.
B=$1; DIR=${DIR:-/tmp/claimd-perf}; PORT=${PORT:-5499}
"$B/claimd-bench" --database-url "postgres://postgres@localhost:$PORT/bench?host=$DIR" \
  --claimd "$B/claimd" --workload new --callers 1 --rounds 1 --seconds 8 > pstat.out 2>&1 &
sleep 3
perf stat -e context-switches,raw_syscalls:sys_enter -p "$(pgrep -n -x claimd)" -x, -o pstat.csv -- sleep 3
wait
R=$(grep -E "^postgres +new +1 +claimd" pstat.out | awk '{print $5}')
awk -F, -v r="$R" '$3 != "" {printf "%s per cycle: %.1f\n", $3, $1/(r*3)}' pstat.csv
grep -E "^postgres +new" pstat.out
