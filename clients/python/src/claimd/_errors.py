"""`ClaimdError`, the one exception the client raises for a failed call (`QuotaError`,
its subclass, when a tenant quota refused it); and the exceptions of `claimd.idempotent`: `NotClaimed` (`InFlight`, `RetryScheduled`,
`Quarantined`, `Conflict`) when claimd did not let the function run, and
`PermanentError`, which a function raises to quarantine its key.

It carries the gRPC status code, claimd's message and, for INVALID_ARGUMENT, the request
fields claimd named in its `google.rpc.BadRequest` detail. That detail travels in the
`grpc-status-details-bin` trailer as a serialized `google.rpc.Status`; it is decoded with
the package's own wire-compatible copies of those messages (`claimd._rpc.status_pb2`), so
no package besides grpcio and protobuf is needed. A tenant quota's refusal
(RESOURCE_EXHAUSTED with a `google.rpc.RetryInfo` and a `google.rpc.QuotaFailure`,
docs/DESIGN.md §5.15) is read from the same trailer with the copies of those two.

claimd's messages never echo a claim token, an API key or a payload (docs/DESIGN.md §2.7),
and this module adds none: a `ClaimdError` is safe to log.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any, NamedTuple

import grpc
from google.protobuf.message import DecodeError

from claimd._common import Decision
from claimd._rpc import status_pb2
from claimd.v1 import claims_pb2

STATUS_DETAILS_KEY = "grpc-status-details-bin"
BAD_REQUEST_TYPE = "google.rpc.BadRequest"
RETRY_INFO_TYPE = "google.rpc.RetryInfo"
QUOTA_FAILURE_TYPE = "google.rpc.QuotaFailure"


class FieldViolation(NamedTuple):
    """One request field claimd refused: its proto name (`key`, `lease_ttl`, …) and why."""

    field: str
    description: str


class ClaimdError(Exception):
    """A call to claimd failed with a gRPC status.

    `code` is the `grpc.StatusCode`, `details` claimd's message, `violations` the fields
    named by a BadRequest detail (INVALID_ARGUMENT), and `field` the first of them, or None.
    ABORTED from a holder call means the lease was lost: stop the work.
    """

    code: grpc.StatusCode
    details: str
    violations: tuple[FieldViolation, ...]

    def __init__(
        self,
        code: grpc.StatusCode,
        details: str = "",
        violations: Iterable[FieldViolation] = (),
    ) -> None:
        self.code = code
        self.details = details
        self.violations = tuple(violations)
        super().__init__(code, details, self.violations)

    @property
    def field(self) -> str | None:
        """The first request field claimd named as invalid, or None."""
        return self.violations[0].field if self.violations else None

    def __str__(self) -> str:
        text = f"{self.code.name}: {self.details}" if self.details else self.code.name
        if self.field and self.field not in self.details:
            text += f" (field {self.field})"
        return text

    def __repr__(self) -> str:
        return f"ClaimdError({self.code.name}, {self.details!r}, field={self.field!r})"

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> ClaimdError:
        """The ClaimdError for a grpc.RpcError (sync) or grpc.aio.AioRpcError: a
        `QuotaError` when it is a tenant quota's refusal."""
        code = _call(error, "code") or grpc.StatusCode.UNKNOWN
        details = _call(error, "details") or ""
        metadata = _call(error, "trailing_metadata")
        violations = field_violations(metadata)
        refusal = quota_refusal(metadata) if code == grpc.StatusCode.RESOURCE_EXHAUSTED else None
        if refusal is not None:
            return QuotaError(refusal[0], refusal[1], details)
        return cls(code, details, violations)


class QuotaError(ClaimdError):
    """claimd refused the call because the tenant is over one of its quotas
    (docs/DESIGN.md §5.15): RESOURCE_EXHAUSTED with a `google.rpc.RetryInfo` and a
    `google.rpc.QuotaFailure`. Nothing was written and no attempt was spent.

    `quota` is the quota's key (`claims_per_second`, `writes_per_second`, `max_waiting`) and
    `retry_after` the RetryInfo's delay in seconds: when claimd expects to take the call. A
    RESOURCE_EXHAUSTED without both details stays a plain `ClaimdError`.
    """

    quota: str
    retry_after: float

    def __init__(self, quota: str, retry_after: float, details: str = "") -> None:
        self.quota = quota
        self.retry_after = retry_after
        super().__init__(grpc.StatusCode.RESOURCE_EXHAUSTED, details)
        self.args = (quota, retry_after, details)

    def __repr__(self) -> str:
        return f"QuotaError({self.quota!r}, retry_after={self.retry_after!r})"


def quota_refusal(metadata: Iterable[Any] | None) -> tuple[str, float] | None:
    """`(quota, retry_after seconds)` when the google.rpc.Status in trailing `metadata` holds
    both a RetryInfo with a delay and a QuotaFailure naming a quota; None otherwise, or when
    the trailer does not decode."""
    if not metadata:
        return None
    quota: str | None = None
    retry_after: float | None = None
    for item in metadata:
        key, value = item[0], item[1]
        if key != STATUS_DETAILS_KEY or not isinstance(value, bytes):
            continue
        try:
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                kind = detail.type_url.rsplit("/", 1)[-1]
                if kind == RETRY_INFO_TYPE:
                    info = status_pb2.RetryInfo.FromString(detail.value)
                    if info.HasField("retry_delay"):
                        retry_after = info.retry_delay.ToTimedelta().total_seconds()
                elif kind == QUOTA_FAILURE_TYPE:
                    failure = status_pb2.QuotaFailure.FromString(detail.value)
                    quota = next((v.subject for v in failure.violations if v.subject), quota)
        except DecodeError:
            return None
    if quota is None or retry_after is None:
        return None
    return quota, retry_after


def _call(error: grpc.RpcError, name: str) -> Any:
    """`error.<name>()`, or None where the error has no such method (a bare RpcError)."""
    method = getattr(error, name, None)
    return method() if callable(method) else None


def field_violations(metadata: Iterable[Any] | None) -> tuple[FieldViolation, ...]:
    """The BadRequest field violations in trailing metadata; () when there are none or the
    trailer does not decode."""
    if not metadata:
        return ()
    violations: list[FieldViolation] = []
    for item in metadata:
        key, value = item[0], item[1]
        if key != STATUS_DETAILS_KEY or not isinstance(value, bytes):
            continue
        try:
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                if detail.type_url.rsplit("/", 1)[-1] != BAD_REQUEST_TYPE:
                    continue
                bad_request = status_pb2.BadRequest.FromString(detail.value)
                violations.extend(
                    FieldViolation(v.field, v.description) for v in bad_request.field_violations
                )
        except DecodeError:
            return ()
    return tuple(violations)


class NotClaimed(Exception):
    """`claimd.idempotent` did not run the function: claimd answered `decision` (see the
    subclasses) and `receipt`. The message names the decision, never the key."""

    def __init__(self, decision: Decision, receipt: claims_pb2.Receipt, message: str) -> None:
        self.decision = decision
        self.receipt = receipt
        super().__init__(message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.decision.name}, attempt={self.receipt.attempt})"


def _when(timestamp: Any, present: bool) -> datetime.datetime | None:
    return timestamp.ToDatetime(tzinfo=datetime.timezone.utc) if present else None


class InFlight(NotClaimed):
    """Another caller holds the key's lease (after `wait`); `lease_expires_at` (UTC) is
    when it runs out unless renewed."""

    def __init__(self, receipt: claims_pb2.Receipt) -> None:
        self.lease_expires_at = _when(receipt.lease_expires_at, receipt.HasField("lease_expires_at"))
        super().__init__(Decision.IN_FLIGHT, receipt,
                         "IN_FLIGHT: another caller is running this call now")


class RetryScheduled(NotClaimed):
    """The last attempt failed; the next may start at `next_attempt_at` (UTC)."""

    def __init__(self, receipt: claims_pb2.Receipt) -> None:
        self.next_attempt_at = _when(receipt.next_attempt_at, receipt.HasField("next_attempt_at"))
        when = f" at {self.next_attempt_at.isoformat()}" if self.next_attempt_at else ""
        super().__init__(Decision.RETRY_SCHEDULED, receipt,
                         f"RETRY_SCHEDULED: the last attempt failed; the next may start{when}")


class Quarantined(NotClaimed):
    """The key is a dead letter: every attempt failed, or one raised PermanentError.
    `last_error` is what the last one stored (an exception's type name)."""

    def __init__(self, receipt: claims_pb2.Receipt) -> None:
        self.last_error = receipt.last_error
        super().__init__(Decision.QUARANTINED, receipt,
                         f"QUARANTINED: this call is used up (last error: {receipt.last_error})")


class Conflict(NotClaimed):
    """The key was used with another fingerprint: a different call under the same key."""

    def __init__(self, receipt: claims_pb2.Receipt) -> None:
        super().__init__(Decision.CONFLICT, receipt,
                         "CONFLICT: this key was used with other arguments")


class PermanentError(Exception):
    """Raised by a function under `claimd.idempotent`: a failure retrying cannot fix, so
    the key is quarantined (a dead letter) rather than retried. It propagates as raised."""
