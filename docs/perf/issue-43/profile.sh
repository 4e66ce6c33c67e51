#!/bin/bash
# profile.sh OLD NEW URL: the storage check's share of claimd's CPU (issue 43), three arms
# alternating twice in one script: `none` (NEW's claimd, no quotas: the unchecked batch),
# `old` and `new` (OLD's and NEW's claimd with storage.toml: every write of the one tenant
# counted, every batch checked, no limit reached). Each run: the database DB (default bench)
# of URL dropped and made again (where --tenants keys exist, this bench would send no key
# and be refused), the bench starts the arm's release claimd and runs `new` at 64 callers,
# and after 8 s `perf record --call-graph dwarf,32768 -F 299` samples that claimd for 20 s.
# profile-share.py counts, of claimd's samples, those in the batch write outside its write
# statement and outside taking and giving back the pool's connection: the check's round
# trips and arithmetic (a `none` run's figure there is what any batch spends; the check costs
# the difference). Run as root (perf); OLD and NEW are directories holding `claimd` and
# `claimd-bench`. Writes profile-ARM-I.{out,txt} here.
set -e
OLD=$1; NEW=$2; URL=$3; HERE=$(cd "$(dirname "$0")" && pwd)
DB=${DB:-bench}; ADMIN=${URL/\/$DB\?/\/postgres?}
for i in 1 2; do for arm in none old new; do
  B=$NEW; CONFIG=$HERE/storage.toml
  [ "$arm" = old ] && B=$OLD
  [ "$arm" = none ] && CONFIG=$HERE/none.toml
  psql "$ADMIN" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
  "$B/claimd-bench" --database-url "$URL" --claimd "$B/claimd" --claimd-config "$CONFIG" \
    --workload new --callers 64 --rounds 1 --seconds 40 > "profile-$arm-$i.out" 2>&1 &
  BENCH=$!
  sleep 8
  PID=$(pgrep -n -f "^$B/claimd serve")
  perf record -q --call-graph dwarf,32768 -F 299 -p "$PID" -o "profile-$arm-$i.data" -- sleep 20 2>/dev/null
  wait $BENCH
  perf script -i "profile-$arm-$i.data" 2>/dev/null | python3 "$HERE/profile-share.py" > "profile-$arm-$i.txt"
  rm -f "profile-$arm-$i.data"
  echo "== $arm #$i: $(grep -E '^postgres .* claimd ' "profile-$arm-$i.out" | head -1)"
  cat "profile-$arm-$i.txt"
done; done
