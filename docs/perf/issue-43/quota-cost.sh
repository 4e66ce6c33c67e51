#!/bin/bash
# quota-cost.sh BINDIR URL: what the tenant quota check costs claimd per cycle (issue 43).
# The same release claimd started by the bench with a policy file without quotas and with
# one that gives every tenant Claims and writes buckets it never empties (a token taken on
# every Claim and every Complete), alternating twice, `new` and `duplicate` at 64 callers.
# Prints each run's claimd rows; compare claimd CPU µs per cycle (the column after RSS and
# CPU %). Writes quota-{none,quota}-{1,2}.{out,csv} in the current directory.
B=$1; URL=$2
printf '# no quotas\n' > none.toml
printf '[tenants.default]\nclaims_per_second = 1000000000\nwrites_per_second = 1000000000\n' > quota.toml
for i in 1 2; do for c in none quota; do
  CLAIMD_CONFIG=$PWD/$c.toml "$B/claimd-bench" --database-url "$URL" --claimd "$B/claimd" \
    --workload new,duplicate --callers 64 --rounds 3 --seconds 4 --csv "quota-$c-$i.csv" \
    > "quota-$c-$i.out" 2>&1
done; done
for c in none quota; do for i in 1 2; do
  echo "== $c #$i"; grep -E "^postgres .* claimd " "quota-$c-$i.out"
done; done
