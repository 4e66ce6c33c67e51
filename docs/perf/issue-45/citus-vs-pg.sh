#!/bin/bash
# citus-vs-pg.sh BINDIR: claimd on Citus (a coordinator and two workers) against claimd on one
# PostgreSQL, in one run on this machine (issue 45 item 5). Run as root; BINDIR holds a
# release claimd and claimd-bench. Starts (or reuses) four private PostgreSQL 15 servers
# under BASE (default /tmp/claimd-citus45), on 127.0.0.1 ports PORT..PORT+3 (default 5551):
#   pg       plain PostgreSQL (pg_stat_statements);
#   coord    the Citus coordinator (shared_preload_libraries citus, pg_stat_statements);
#   w1, w2   the Citus workers, added with citus_add_node;
# every node with citus.node_conninfo 'sslmode=disable' and max_connections 300, everything
# else default. claimd connects to the coordinator only; `claimd migrate` (which the bench
# runs for --tenants) distributes `receipts` by tenant_id and makes `api_keys` a reference
# table. The two take turns twice, the second time in reverse (pg citus citus pg), each one
# invocation of `claimd-bench --workload new,duplicate --callers 1,64 --tenants $TENANTS
# --rounds $ROUNDS --seconds $SECS` (default 16 tenants, 2 rounds of 4 s) on a fresh
# database: claimd's calls spread over 16 tenants (each receipt key's tenant a hash of the
# key), so on Citus over the shards of both workers. The bench's PostgreSQL CPU per cycle is
# the coordinator's alone on Citus (the server the bench connects to); the SQL baseline's
# table `bench_receipts` is a plain local table of the coordinator and ignores tenants, so
# it is the machine's drift control, not a Citus figure. Every node shares this machine's
# cores: this measures what Citus's routing adds per event (more round trips, each
# statement planned), not scale-out. Writes citus-{pg,citus}-{1,2}.{out,csv},
# citus-load.txt and citus-shards.txt in the current directory and prints the claimd rows
# and the ratios CITUS/PG.
set -u
B=$(cd "$1" && pwd); BASE=${BASE:-/tmp/claimd-citus45}; PORT=${PORT:-5551}
TENANTS=${TENANTS:-16}; ROUNDS=${ROUNDS:-2}; SECS=${SECS:-4}; BIN=/usr/lib/postgresql/15/bin
WORKLOADS=${WORKLOADS:-new,duplicate}; RUNS=${RUNS:-1 2} # e.g. RUNS=2 WORKLOADS=new: the second turn only
node() { # node NAME PORT LIBS: initdb and start one server, unless it runs
  local d=$BASE/$1
  mkdir -p "$d"; chown postgres "$d"
  [ -d "$d/data" ] || su postgres -c "$BIN/initdb -U postgres --auth=trust -D $d/data" >/dev/null
  su postgres -c "$BIN/pg_ctl -D $d/data status" >/dev/null 2>&1 && return
  su postgres -c "$BIN/pg_ctl -D $d/data -l $d/log -w start -o '-c listen_addresses=127.0.0.1 \
    -c port=$2 -k $d -c max_connections=300 -c shared_preload_libraries=$3 \
    -c citus.node_conninfo=sslmode=disable'" >/dev/null
}
mkdir -p "$BASE"
node pg "$PORT" pg_stat_statements
node coord $((PORT + 1)) citus,pg_stat_statements
node w1 $((PORT + 2)) citus,pg_stat_statements
node w2 $((PORT + 3)) citus,pg_stat_statements
q() { psql -h 127.0.0.1 -p "$1" -U postgres -qAt -d "$2" -c "$3"; }
url() { echo "postgres://postgres@127.0.0.1:$1/$2"; }
setup() { # setup SETTING DB: a fresh database
  case $1 in
  pg) q "$PORT" postgres "create database $2" >/dev/null ;;
  citus)
    for p in $((PORT + 1)) $((PORT + 2)) $((PORT + 3)); do
      q "$p" postgres "create database $2" >/dev/null; q "$p" "$2" 'create extension citus'
    done
    q $((PORT + 1)) "$2" "select citus_set_coordinator_host('127.0.0.1', $((PORT + 1)))" >/dev/null
    q $((PORT + 1)) "$2" "select citus_add_node('127.0.0.1', $((PORT + 2)))" >/dev/null
    q $((PORT + 1)) "$2" "select citus_add_node('127.0.0.1', $((PORT + 3)))" >/dev/null ;;
  esac
}
for i in $RUNS; do
  case $i in 1) order="pg citus" ;; *) order="citus pg" ;; esac
  for s in $order; do
    N=citus-$s-$i; D=bench_${s}_$i
    setup "$s" "$D"
    case $s in pg) u=$(url "$PORT" "$D") ;; *) u=$(url $((PORT + 1)) "$D") ;; esac
    echo "$N before: load $(cut -d' ' -f1-3 /proc/loadavg)" >> citus-load.txt
    "$B/claimd-bench" --database-url "$u" --claimd "$B/claimd" --tenants "$TENANTS" \
      --workload "$WORKLOADS" --callers 1,64 --rounds "$ROUNDS" --seconds "$SECS" \
      --csv "$N.csv" > "$N.out" 2>&1
    rc=$?
    echo "$N after:  load $(cut -d' ' -f1-3 /proc/loadavg), bench exit $rc" >> citus-load.txt
  done
done
q $((PORT + 1)) bench_citus_2 "select s.nodeport, count(distinct r.tenant_id), count(*)
  from receipts r join citus_shards s
  on s.shardid = get_shard_id_for_distribution_column('receipts', r.tenant_id)
  group by 1 order by 1" > citus-shards.txt 2>&1

echo "claimd rows, medians over rounds (sql/s: the lean SQL's cycles/s in the same"
echo "invocation, the machine's drift; pg µs: on Citus the coordinator's only)"
awk -F, 'FNR == 1 { split(FILENAME, f, /[-.]/); s = f[2]; i = f[3] }
  $4 == "sql" { sql[s, i, $2, $3] = $6 }
  $4 == "claimd" { k[++n] = s SUBSEP i SUBSEP $2 SUBSEP $3; row[s, i, $2, $3] = $0 }
  END {
    printf "%-7s %2s %-9s %3s %9s %7s %7s %9s %8s %7s %6s %9s\n", "setting", "#",
      "workload", "c", "cycles/s", "p50 ms", "p99 ms", "claimd µs", "pg µs", "WAL B",
      "errors", "sql/s"
    for (j = 1; j <= n; j++) { split(k[j], x, SUBSEP); split(row[k[j]], c, ",")
      printf "%-7s %2s %-9s %3s %9.0f %7.2f %7.2f %9.0f %8.0f %7.0f %6s %9.0f\n", x[1],
        x[2], x[3], x[4], c[6], c[7], c[8], c[16], c[17], c[12], c[15], sql[k[j]] }
  }' citus-pg-1.csv citus-pg-2.csv citus-citus-1.csv citus-citus-2.csv
echo; echo "CITUS/PG: mean of two over mean of two [invocation 1, 2]"
awk -F, 'FNR == 1 { split(FILENAME, f, /[-.]/); s = f[2]; i = f[3] }
  $4 == "claimd" { if (!(($2, $3) in seen)) { seen[$2, $3] = 1; w[++n] = $2 SUBSEP $3 }
    for (m = 1; m <= 5; m++) v[s, i, $2, $3, m] = $(col[m]) }
  BEGIN { split("6 7 8 16 17", col, " "); split("cycles/s p50 p99 claimd-µs pg-µs", name, " ") }
  END { for (j = 1; j <= n; j++) { split(w[j], x, SUBSEP); line = sprintf("%-9s %3s", x[1], x[2])
      for (m = 1; m <= 5; m++) {
        a1 = v["citus", 1, x[1], x[2], m]; a2 = v["citus", 2, x[1], x[2], m]
        b1 = v["pg", 1, x[1], x[2], m]; b2 = v["pg", 2, x[1], x[2], m]
        if (b1 > 0 && b2 > 0)
          line = line sprintf("  %s %.3f [%.3f %.3f]", name[m], (a1 + a2) / (b1 + b2), a1 / b1, a2 / b2)
        else line = line sprintf("  %s -", name[m]) }
      print line } }' citus-citus-1.csv citus-citus-2.csv citus-pg-1.csv citus-pg-2.csv
echo; echo "the machine's load average around each invocation"; sed 's/^/  /' citus-load.txt
echo; echo "receipts by worker port after citus #2 (port, tenants, rows)"; sed 's/^/  /' citus-shards.txt
