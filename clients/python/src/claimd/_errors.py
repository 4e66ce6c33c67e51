"""`ClaimdError`, the one exception the client raises for a failed call.

It carries the gRPC status code, claimd's message and, for INVALID_ARGUMENT, the request
fields claimd named in its `google.rpc.BadRequest` detail. That detail travels in the
`grpc-status-details-bin` trailer as a serialized `google.rpc.Status`; it is decoded with
the package's own wire-compatible copies of those messages (`claimd._rpc.status_pb2`), so
no package besides grpcio and protobuf is needed.

claimd's messages never echo a claim token, an API key or a payload (docs/DESIGN.md §2.7),
and this module adds none: a `ClaimdError` is safe to log.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

import grpc
from google.protobuf.message import DecodeError

from claimd._rpc import status_pb2

STATUS_DETAILS_KEY = "grpc-status-details-bin"
BAD_REQUEST_TYPE = "google.rpc.BadRequest"


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
        """The ClaimdError for a grpc.RpcError (sync) or grpc.aio.AioRpcError."""
        code = _call(error, "code") or grpc.StatusCode.UNKNOWN
        details = _call(error, "details") or ""
        return cls(code, details, field_violations(_call(error, "trailing_metadata")))


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
