"""Reads `perf script` (DWARF call graphs) of claimd on stdin and prints the share of its
samples in the batch write (`write_many`, into which the release build inlines `write_rows`
and the checked batch's `checked_on`) outside the write statement (`statement_on`) and
outside taking and giving back a pool connection: what the storage check adds to a batch
(its statements' round trips, `usage::tenants`/`admit`), with the binomial standard error.
`usage::` samples are shown apart as well, and the samples in `api::quota` (the rate check,
`Limiter::take`, and finding a tenant's quota)."""
import math
import sys

counts = {"samples": 0, "batch write": 0, "statement": 0, "pool": 0, "check": 0, "usage": 0,
          "rate (api::quota)": 0}
frames = []


def close():
    if not frames:
        return
    stack = "\n".join(frames)
    counts["samples"] += 1
    if "api::quota::" in stack:
        counts["rate (api::quota)"] += 1
    if "write_many" not in stack:
        return
    counts["batch write"] += 1
    if "statement_on" in stack:
        counts["statement"] += 1
    elif "Pool<DB>::acquire" in stack or "drop_in_place<sqlx_core::pool::connection" in stack \
            or "PoolConnection<DB> as core::ops::drop::Drop" in stack:
        counts["pool"] += 1
    else:
        counts["check"] += 1
        if "usage::" in stack:
            counts["usage"] += 1


for line in sys.stdin:
    if line.strip() == "":
        close()
        frames = []
    elif line.startswith((" ", "\t")):
        frames.append(line.strip())
    else:
        frames = []
close()

n = counts["samples"]
for name, k in counts.items():
    if name == "samples":
        print(f"samples {n}")
        continue
    p = k / n if n else 0.0
    se = math.sqrt(p * (1 - p) / n) if n else 0.0
    print(f"{name}: {k}, {100 * p:.2f} % ± {100 * se:.2f}")
