#!/bin/bash
# storage-cost.sh BEFORE AFTER: what the tenant storage quotas (max_receipts,
# max_stored_bytes; issue 43) cost on PostgreSQL, in one run on one private cluster
# (docs/perf/issue-42/cluster.sh; DIR and PORT as there). BEFORE and AFTER are directories
# holding a release claimd and claimd-bench: main before the storage quotas (03f45ec) and
# the build with them. Three settings, each on a database of its own (bench_before,
# bench_after, bench_quota: BEFORE's migrations refuse a database AFTER migrated, and each
# receipts table grows by the same runs):
#   before  BEFORE, a policy file without quotas;
#   after   AFTER, the same file: every batch write also upserts its tenant's tenant_usage
#           row of the connection's slot, in the same statement;
#   quota   AFTER with [tenants.default] max_receipts = 10^12 and max_stored_bytes = 10^15
#           (never reached): every Claim of a new key and every Complete is checked, its
#           batch a transaction (the tenant's advisory lock, its figures read, the write
#           statement, COMMIT).
# The three take turns twice, the second time in reverse (before after quota quota after
# before: a load that rises or falls steadily weighs on each alike), each one invocation of
# `claimd-bench --workload new,duplicate --callers 1,64 --rounds $ROUNDS --seconds $SECS`
# (default 2 rounds of 4 s) with pg_stat_statements reset before it and dumped after it;
# then wal.sh's WAL records of a `new` round at 64 callers by relation, once per setting.
# Writes storage-{before,after,quota}-{1,2}.{out,csv,pgss}, storage-wal-*.txt and
# storage-load.txt (the load average around each invocation) in the
# current directory and prints the claimd rows (medians over rounds) and the ratios
# AFTER/BEFORE and QUOTA/AFTER: the mean of the two invocations of each setting divided by
# the other's, and in brackets the two invocations' ratios taken in turn (1/1, 2/2); vs-sql
# is the ratio of claimd/SQL throughput, each from its own invocation (the machine's drift
# between invocations taken out); WAL only where a cycle writes (new).
# Run as: nice -n 10 docs/perf/issue-43/storage-cost.sh BEFORE AFTER > storage-cost.txt
set -u
A=$1; B=$2; HERE=$(cd "$(dirname "$0")" && pwd)
DIR=${DIR:-/tmp/claimd-perf}; PORT=${PORT:-5499}; ROUNDS=${ROUNDS:-2}; SECS=${SECS:-4}
P="psql -h $DIR -p $PORT -U postgres -qAt"
rm -f storage-load.txt
printf '# no quotas\n' > none.toml
printf '[tenants.default]\nmax_receipts = 1000000000000\nmax_stored_bytes = 1000000000000000\n' \
  > storage.toml
for s in before after quota; do
  $P -d postgres -c "create database bench_$s" >/dev/null 2>&1
  $P -d "bench_$s" -c 'create extension if not exists pg_stat_statements' \
    -c 'create extension if not exists pg_walinspect' >/dev/null
done
# The bench starts claimd with every CLAIMD_* variable removed, so the policy file goes in
# through a wrapper: storage-bin-SETTING/claimd sets CLAIMD_CONFIG and execs the build's
# claimd (same process, so its CPU is still measured), next to a link to its claimd-bench.
for s in before after quota; do
  case $s in before) b=$A ;; *) b=$B ;; esac; b=$(cd "$b" && pwd)
  case $s in quota) t=storage ;; *) t=none ;; esac
  mkdir -p "storage-bin-$s"; ln -sf "$b/claimd-bench" "storage-bin-$s/claimd-bench"
  printf '#!/bin/sh\nCLAIMD_CONFIG=%s exec %s "$@"\n' "$PWD/$t.toml" "$b/claimd" \
    > "storage-bin-$s/claimd"
  chmod +x "storage-bin-$s/claimd"
done
bin() { echo "$PWD/storage-bin-$1"; }
for i in 1 2; do
  case $i in 1) order="before after quota" ;; *) order="quota after before" ;; esac
  for s in $order; do
  N=storage-$s-$i; D=bench_$s
  echo "$N before: load $(cut -d' ' -f1-3 /proc/loadavg)" >> storage-load.txt
  $P -d "$D" -c 'select pg_stat_statements_reset()' >/dev/null
  "$(bin $s)/claimd-bench" \
    --database-url "postgres://postgres@localhost:$PORT/$D?host=$DIR" --claimd "$(bin $s)/claimd" \
    --workload new,duplicate --callers 1,64 --rounds "$ROUNDS" --seconds "$SECS" --csv "$N.csv" \
    > "$N.out" 2>&1
  $P -d "$D" -F'|' -c "select calls, rows, round((total_exec_time*1000/greatest(calls,1))::numeric,1),
    round(wal_bytes/greatest(calls,1)), left(regexp_replace(query,'\s+',' ','g'),70)
    from pg_stat_statements join pg_database d on d.oid = dbid where d.datname = '$D'
    and calls > 50 order by total_exec_time desc limit 30" > "$N.pgss"
  echo "$N after:  load $(cut -d' ' -f1-3 /proc/loadavg)" >> storage-load.txt
done; done
for s in before after quota; do
  DB=bench_$s DIR=$DIR PORT=$PORT "$HERE/../issue-42/wal.sh" "$(bin $s)" \
    > "storage-wal-$s.txt" 2>&1
done

echo "claimd rows, medians over rounds (errors: wrong answers; sql/s: the lean SQL's cycles/s"
echo "in the same invocation, the machine's drift; commits: write transactions per cycle)"
awk -F, 'FNR == 1 { split(FILENAME, f, /[-.]/); s = f[2]; i = f[3] }
  $4 == "sql" { sql[s, i, $2, $3] = $6 }
  $4 == "claimd" { k[++n] = s SUBSEP i SUBSEP $2 SUBSEP $3; row[s, i, $2, $3] = $0 }
  END {
    printf "%-7s %2s %-9s %3s %9s %7s %7s %9s %8s %7s %7s %6s %9s\n", "setting", "#",
      "workload", "c", "cycles/s", "p50 ms", "p99 ms", "claimd µs", "pg µs", "WAL B",
      "commits", "errors", "sql/s"
    for (j = 1; j <= n; j++) { split(k[j], x, SUBSEP); split(row[k[j]], c, ",")
      printf "%-7s %2s %-9s %3s %9.0f %7.2f %7.2f %9.0f %8.0f %7.0f %7.2f %6s %9.0f\n", x[1],
        x[2], x[3], x[4], c[6], c[7], c[8], c[16], c[17], c[12], c[18], c[15], sql[k[j]] }
  }' storage-before-1.csv storage-before-2.csv storage-after-1.csv storage-after-2.csv \
  storage-quota-1.csv storage-quota-2.csv
for pair in "after before" "quota after"; do
  set -- $pair
  echo; echo "$(echo "$1" | tr a-z A-Z)/$(echo "$2" | tr a-z A-Z): mean of two over mean of two [invocation 1, 2]"
  awk -F, -v num="$1" -v den="$2" 'FNR == 1 { split(FILENAME, f, /[-.]/); s = f[2]; i = f[3] }
    $4 == "claimd" { if (!(($2, $3) in seen)) { seen[$2, $3] = 1; w[++n] = $2 SUBSEP $3 }
      for (m = 1; m <= 7; m++) v[s, i, $2, $3, m] = $(col[m]) }
    BEGIN { split("6 13 7 8 16 17 12", col, " ")
      split("cycles/s vs-sql p50 p99 claimd-µs pg-µs WAL-B", name, " ") }
    END { for (j = 1; j <= n; j++) { split(w[j], x, SUBSEP); line = sprintf("%-9s %3s", x[1], x[2])
        for (m = 1; m <= 7; m++) {
          a1 = v[num, 1, x[1], x[2], m]; a2 = v[num, 2, x[1], x[2], m]
          b1 = v[den, 1, x[1], x[2], m]; b2 = v[den, 2, x[1], x[2], m]
          if (b1 > 0 && b2 > 0 && (m < 7 || b1 > 50))
            line = line sprintf("  %s %.2f [%.2f %.2f]", name[m], (a1 + a2) / (b1 + b2), a1 / b1, a2 / b2)
          else line = line sprintf("  %s -", name[m]) }
        print line } }' "storage-$1-1.csv" "storage-$1-2.csv" "storage-$2-1.csv" "storage-$2-2.csv"
done
echo; echo "the machine's load average around each invocation (anything else running shows here)"
sed 's/^/  /' storage-load.txt
echo; echo "the checked path's statements (quota, pg_stat_statements: calls, rows, µs and WAL B per call)"
for i in 1 2; do grep -E "hashtext|sum\(receipts\)|\| (BEGIN|COMMIT)" "storage-quota-$i.pgss" | sed "s/^/  #$i /"; done
echo; echo "WAL of a new round at 64 callers by relation, claimd's side, bytes per cycle without"
echo "full-page images (wal.sh)"
for s in before after quota; do
  echo "== $s: $(grep "^claimd cycles" "storage-wal-$s.txt")"
  awk -F'|' '$1 == "claimd" { r[$2] += $7; t += $7 } END { for (x in r) printf "  %-32s %6d\n", x, r[x]
    printf "  %-32s %6d\n", "all", t }' "storage-wal-$s.txt" | sort -k2 -nr
done
