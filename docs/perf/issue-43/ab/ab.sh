#!/bin/bash
# ab.sh OLD NEW URL: the default path (no quotas) before and after the checked batch's
# change, each against the lean SQL in the same invocation: OLD's and NEW's release claimd
# (directories holding `claimd` and `claimd-bench`), alternating twice, a fresh database DB
# (default bench) of URL each time, `new` and `duplicate` at 1 and 64 callers. Writes
# ab-ARM-I.out here and prints the rows.
OLD=$1; NEW=$2; URL=$3; DB=${DB:-bench}; ADMIN=${URL/\/$DB\?/\/postgres?}
for i in 1 2; do for arm in old new; do
  B=$OLD; [ "$arm" = new ] && B=$NEW
  psql "$ADMIN" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
  "$B/claimd-bench" --database-url "$URL" --claimd "$B/claimd" --workload new,duplicate \
    --callers 1,64 --rounds 2 --seconds 4 > "ab-$arm-$i.out" 2>&1
  echo "== $arm #$i"; grep -E "^postgres " "ab-$arm-$i.out"
done; done
