"""claimd: durable claims for webhook handlers and HTTP APIs, a Python client.

    from claimd import Claims, Lease

    with Claims("localhost:50051", api_key=key) as claims:
        result = claims.claim("slack-events", event_id, sha256(body).digest(), lease=30)
        if isinstance(result, Lease):
            with result as lease:          # heartbeats every 10 s meanwhile
                lease.response = do_the_work(body)
        else:
            print(result.decision.name)    # IN_FLIGHT, COMPLETED (result.response), ...

`AsyncClaims` is the same on asyncio. Failed calls raise `ClaimdError` (`QuotaError`, with
the quota and its retry delay, when a tenant quota of claimd refused the call). `idempotent` is a
decorator that runs a function once per key; `claimd.asgi` and `claimd.wsgi` hold the
Idempotency-Key middleware for HTTP APIs. The generated
messages and stub are `claimd.v1.claims_pb2` and `claimd.v1.claims_pb2_grpc`; the
package's version is the version of the proto it was generated from (proto/VERSION).
"""

from claimd._aio import AsyncClaims, AsyncLease
from claimd._common import TLS, Answer, Decision, OrphanReason, State
from claimd._errors import (
    ClaimdError,
    Conflict,
    FieldViolation,
    InFlight,
    NotClaimed,
    PermanentError,
    Quarantined,
    QuotaError,
    RetryScheduled,
)
from claimd._fingerprint import canonical_json, fingerprint_of
from claimd._idempotent import Serializer, current_async_lease, current_lease, idempotent
from claimd._sync import Claims, Lease
from claimd.v1.claims_pb2 import Orphan, Receipt

__version__ = "1.1.0"

__all__ = [
    "TLS",
    "Answer",
    "AsyncClaims",
    "AsyncLease",
    "ClaimdError",
    "Claims",
    "Conflict",
    "Decision",
    "FieldViolation",
    "InFlight",
    "Lease",
    "NotClaimed",
    "Orphan",
    "OrphanReason",
    "PermanentError",
    "Quarantined",
    "QuotaError",
    "Receipt",
    "RetryScheduled",
    "Serializer",
    "State",
    "__version__",
    "canonical_json",
    "current_async_lease",
    "current_lease",
    "fingerprint_of",
    "idempotent",
]
