"""What the test apps (_app_fastapi.py, _app_flask.py, _app_django.py) share: the namespace,
the count of handler runs per Idempotency-Key, the serial order numbers, the exception
/raise raises.

Every app has the same routes (POST): /orders and /payments answer 201 with a serial number,
the lease's attempt and the body's `amount` (after `?delay=` seconds), `x-order: <n>` and
`set-cookie: seen=<n>`; /fail answers 500; /big answers 200 with 100 KiB; /raise raises;
GET /orders answers 200 (not covered).
"""

from __future__ import annotations

import collections
import itertools
import threading

NAMESPACE = "py-http-tests"
BIG = 100 * 1024

runs: collections.Counter[str] = collections.Counter()
_serial = itertools.count(1)
_lock = threading.Lock()


class Boom(RuntimeError):
    """What /raise raises (its message must never reach claimd)."""


def ran(key: str | None) -> int:
    """Counts a handler run for `key`; returns the next order number."""
    with _lock:
        runs[key or ""] += 1
        return next(_serial)


def announce(block: bool) -> None:
    """Tells the parent test process that a blocking handler started."""
    if block:
        print("handling", flush=True)
