#!/usr/bin/env bash
# The one-off run behind docs/RELIABILITY.md's row "notification queue full": PostgreSQL 15's
# notification queue (8 GB per cluster, not configurable) filled to the last page while a
# session listens on claimd's database without reading, then claimd-bench's `mixed` workload
# (every answer checked) against a claimd on that database. Before the guard of
# docs/DESIGN.md §2.9 every write statement that settles receipts failed at commit ("too
# many notifications in the NOTIFY queue"); with it, every write succeeds. Too slow and too
# heavy (8 GB written, about two minutes on two cores) for the test suite, which checks the
# guard at a small `--notify-queue-max-usage` instead (tests/it/faults_notify.rs).
#
# Usage: scripts/notify-queue-full.sh [--claimd PATH]... [--bench PATH] [--seconds S]
#
#   --claimd PATH   a claimd binary to try, each on a database of its own against the same
#                   full queue; may be repeated (default: target/release/claimd)
#   --bench PATH    claimd-bench (default: target/release/claimd-bench)
#   --seconds S     length of the workload's round (default 5)
#
# A throwaway cluster in a temporary directory (unix socket only, fsync off), removed at
# the end. Needs the PostgreSQL 15 server binaries (CLAIMD_PG_BIN) and 9 GB of free disk.
# Exit status: 0 when claimd-bench got only right answers from every claimd tried.
set -euo pipefail
cd "$(dirname "$0")/.."

claimds=()
bench=target/release/claimd-bench
seconds=5
while [ $# -gt 0 ]; do
  case "$1" in
    --claimd) claimds+=("${2:?--claimd needs a path}"); shift ;;
    --bench) bench="${2:?--bench needs a path}"; shift ;;
    --seconds) seconds="${2:?--seconds needs a number}"; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
[ ${#claimds[@]} -gt 0 ] || claimds=(target/release/claimd)
pg_bin="${CLAIMD_PG_BIN:-/usr/lib/postgresql/15/bin}"

dir=$(mktemp -d /tmp/claimd-notify-XXXXXX)
as_pg=()
if [ "$(id -u)" = 0 ]; then
  chown postgres "$dir"
  as_pg=(runuser -u postgres --)
fi
port=5439
psql_() { psql -h "$dir" -p "$port" -U postgres -qAtX "$@"; }
latch=
cleanup() {
  [ -n "$latch" ] && { exec 3>&-; wait "$latch" 2>/dev/null || true; }
  "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

"${as_pg[@]}" "$pg_bin/initdb" --auth=trust -U postgres --no-sync -E UTF8 -D "$dir/data" >/dev/null
"${as_pg[@]}" "$pg_bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start \
  -o "-k $dir -c listen_addresses= -c port=$port -c fsync=off" >/dev/null
psql_ -c "CREATE DATABASE claimd" -c "CREATE DATABASE fill"

# The latch: listens on claimd's channel in claimd's database and never reads (its stdin
# is a FIFO this script holds open). 32 MB fill its socket, and its backend blocks there.
mkfifo "$dir/latch.in"
psql_ -d claimd < "$dir/latch.in" > /dev/null 2>&1 &
latch=$!
exec 3> "$dir/latch.in"
echo "LISTEN claimd_settled;" >&3
sleep 1
psql_ -d claimd -c "SELECT count(pg_notify('claimd_settled', lpad(g::text, 7990, '.'))) \
  FROM generate_series(1, 4000) g" > /dev/null

# The rest in another database (nobody there listens), two sessions, until PostgreSQL
# refuses.
pump() {
  local n=0
  while :; do
    n=$((n + 1))
    if ! out=$(psql_ -d fill -c "SELECT count(pg_notify('c', lpad(g::text || '-$1-$n', 7990, '.'))) \
        FROM generate_series(1, 12500) g" 2>&1); then
      grep -q "too many notifications" <<< "$out" && return 0
      echo "$out" >&2; return 1
    fi
  done
}
start=$(date +%s)
pump a & a=$!
pump b & b=$!
wait "$a" "$b"
echo "queue full after $(( $(date +%s) - start )) s: usage $(psql_ -c 'SELECT pg_notification_queue_usage()'), \
$(du -sh "$dir/data/pg_notify" | cut -f1) in pg_notify"
if psql_ -d claimd -c "SELECT pg_notify('claimd_settled', 'x')" > /dev/null 2>&1; then
  echo "a NOTIFY still succeeds: the queue is not full" >&2; exit 1
fi

status=0
n=0
for claimd in "${claimds[@]}"; do
  n=$((n + 1))
  psql_ -c "CREATE DATABASE claimd_$n"
  echo "== $claimd (database claimd_$n)"
  set +e
  "$bench" --store postgres --database-url "postgres://postgres@localhost:$port/claimd_$n?host=$dir" \
    --claimd "$claimd" --workload mixed --callers 1,16 --rounds 1 --seconds "$seconds"
  ran=$?
  set -e
  echo "== $claimd: claimd-bench exit status $ran; queue usage now \
$(psql_ -c 'SELECT pg_notification_queue_usage()')"
  [ "$ran" = 0 ] || status=1
done
exit "$status"
