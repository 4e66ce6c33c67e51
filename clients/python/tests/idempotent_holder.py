"""A `claimd.idempotent` call in a process of its own, for test_idempotent's takeover test.

    python idempotent_holder.py NAMESPACE KEY

Runs a decorated function on KEY with a 1 s lease; the function prints `running <attempt>`
and blocks until the test kills this process (SIGKILL), so the lease runs out unsettled.
"""

from __future__ import annotations

import sys
import threading

import _settings
import claimd
from claimd import Claims


def main(namespace: str, key: str) -> None:
    with Claims(**_settings.client_kwargs()) as claims:

        @claimd.idempotent(claims, namespace, key=lambda k: k, lease=1)
        def work(k: str) -> int:
            print(f"running {claimd.current_lease().attempt}", flush=True)
            threading.Event().wait()  # until killed
            return 0

        work(key)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
