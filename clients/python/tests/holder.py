"""A lease holder in a process of its own, for test_sync's takeover test.

    python holder.py NAMESPACE KEY

Claims KEY with a 1 s lease and prints `claimed <attempt>`. The test then stops this
process (SIGSTOP), so its heartbeat thread cannot run, takes the work over once the lease
ran out, and lets it go on (SIGCONT). The next heartbeat is refused; this prints
`lost <code>` once `lease.lost` is set, then tries to complete and prints
`complete <code>` (or `complete OK`). Connection settings come from _settings.
"""

from __future__ import annotations

import sys

import _settings
from claimd import ClaimdError, Claims, Lease


def main(namespace: str, key: str) -> int:
    with Claims(**_settings.client_kwargs()) as claims:
        lease = claims.claim(namespace, key, _settings.FINGERPRINT, lease=1)
        if not isinstance(lease, Lease):
            print(f"not claimed {lease.decision.name}", flush=True)
            return 1
        print(f"claimed {lease.attempt}", flush=True)
        if not lease.lost.wait(timeout=20):
            print("lost never set", flush=True)
            return 1
        code = lease.lost_error.code.name if lease.lost_error else "?"
        print(f"lost {code}", flush=True)
        try:
            lease.complete(b"too late")
            print("complete OK", flush=True)
        except ClaimdError as error:
            print(f"complete {error.code.name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
