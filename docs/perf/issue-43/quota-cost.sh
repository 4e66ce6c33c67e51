#!/bin/bash
# quota-cost.sh BINDIR URL: what the tenant quota checks cost per cycle (issue 43).
# The same release claimd started by the bench (`--claimd-config`) with three policy files,
# alternating twice, `new` and `duplicate` at 64 callers:
#   none    - no quotas;
#   rate    - Claims and writes buckets never emptied (a token taken on every Claim and every
#             Complete);
#   storage - the same buckets plus max_receipts and max_stored_bytes never reached (every
#             batch write of the tenant counted and checked in the store).
# Prints each run's claimd rows; compare claimd CPU µs per cycle (the column after RSS and
# CPU %) and throughput. Writes quota-{none,rate,storage}-{1,2}.{out,csv} here.
# An optional third argument N spreads the calls over N tenants (`--tenants N`, each with the
# policy's [tenants.default]) and names the files quota-ARM-tN-I.{out,csv}.
B=$1; URL=$2; T=${3:-}
TENANTS=(); SUFFIX=""
if [ -n "$T" ]; then TENANTS=(--tenants "$T"); SUFFIX="-t$T"; fi
printf '# no quotas\n' > none.toml
printf '[tenants.default]\nclaims_per_second = 1000000000\nwrites_per_second = 1000000000\n' > rate.toml
{ cat rate.toml; printf 'max_receipts = 1000000000000\nmax_stored_bytes = 1000000000000000\n'; } > storage.toml
for i in 1 2; do for c in none rate storage; do
  "$B/claimd-bench" --database-url "$URL" --claimd "$B/claimd" --claimd-config "$PWD/$c.toml" \
    "${TENANTS[@]}" --workload new,duplicate --callers 64 --rounds 3 --seconds 4 \
    --csv "quota-$c$SUFFIX-$i.csv" > "quota-$c$SUFFIX-$i.out" 2>&1
done; done
for c in none rate storage; do for i in 1 2; do
  echo "== $c$SUFFIX #$i"; grep -E "^postgres .* claimd " "quota-$c$SUFFIX-$i.out"
done; done
