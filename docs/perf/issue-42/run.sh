#!/bin/bash
# run.sh OUT BINDIR [claimd-bench flags]: one bench run of BINDIR's claimd-bench and claimd,
# pg_stat_statements reset before it and dumped after it (OUT.out, OUT.csv, OUT.pgss:
# calls, rows, executor µs per row and per call, WAL bytes per row, the statement's start).
OUT=$1; B=$2; shift 2
DIR=${DIR:-/tmp/claimd-perf}; PORT=${PORT:-5499}
URL="postgres://postgres@localhost:$PORT/bench?host=$DIR"
P="psql -h $DIR -p $PORT -U postgres -d bench -qAt"
$P -c 'select pg_stat_statements_reset()' >/dev/null
"$B/claimd-bench" --database-url "$URL" --claimd "$B/claimd" --csv "$OUT.csv" "$@" > "$OUT.out" 2>&1
$P -F'|' -c "select calls, rows, round((total_exec_time*1000/greatest(rows,1))::numeric,1),
  round((total_exec_time*1000/greatest(calls,1))::numeric,1), round(wal_bytes/greatest(rows,1)),
  left(regexp_replace(query,'\s+',' ','g'),70) from pg_stat_statements
  where calls > 50 order by total_exec_time desc limit 14" > "$OUT.pgss"
