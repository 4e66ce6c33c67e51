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
B=$1; URL=$2
printf '# no quotas\n' > none.toml
printf '[tenants.default]\nclaims_per_second = 1000000000\nwrites_per_second = 1000000000\n' > rate.toml
{ cat rate.toml; printf 'max_receipts = 1000000000000\nmax_stored_bytes = 1000000000000000\n'; } > storage.toml
for i in 1 2; do for c in none rate storage; do
  "$B/claimd-bench" --database-url "$URL" --claimd "$B/claimd" --claimd-config "$PWD/$c.toml" \
    --workload new,duplicate --callers 64 --rounds 3 --seconds 4 --csv "quota-$c-$i.csv" \
    > "quota-$c-$i.out" 2>&1
done; done
for c in none rate storage; do for i in 1 2; do
  echo "== $c #$i"; grep -E "^postgres .* claimd " "quota-$c-$i.out"
done; done
