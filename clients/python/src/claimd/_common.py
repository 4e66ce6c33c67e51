"""What the sync and the asyncio client share: the decision and state enums, the answer
that is not a lease, TLS settings, request building and the lease's timing.

Nothing here talks to claimd; `claimd._sync` and `claimd._aio` do, each on its own gRPC
channel type.
"""

from __future__ import annotations

import datetime
import enum
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Union, cast

import grpc
from google.protobuf import duration_pb2

from claimd.v1 import claims_pb2

#: A length of time: seconds (int or float) or a `datetime.timedelta`.
Seconds = Union[float, datetime.timedelta]
#: What `tls=` accepts: None or False for plaintext, True for TLS trusting the system's
#: roots, a `TLS` for a CA of your own and client certificates, or ready-made credentials.
TLSOption = Union[None, bool, "TLS", grpc.ChannelCredentials]
#: gRPC channel options, passed through to grpc (e.g. `("grpc.keepalive_time_ms", 30000)`).
ChannelOptions = Sequence[tuple[str, Any]]

#: How long a call may take unless the client or the call says otherwise, in seconds.
DEFAULT_TIMEOUT = 5.0
#: The lease assumed when neither the caller nor the receipt tells its length.
FALLBACK_LEASE = 30.0

#: Codes that mean the lease is gone: ABORTED, the token is no longer current (taken over,
#: quarantined by claimd, redriven); NOT_FOUND and FAILED_PRECONDITION, the receipt moved on
#: without this holder (deleted, or settled through another way). The holder must stop.
LOST_CODES = frozenset(
    {grpc.StatusCode.ABORTED, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION}
)


class _Named(enum.IntEnum):
    """An IntEnum shown by its name in messages and f-strings (`IN_FLIGHT`, not `2`)."""

    def __str__(self) -> str:
        return self.name

    def __format__(self, spec: str) -> str:
        return format(self.name, spec)


class Decision(_Named):
    """The answer to a Claim; the numbers are claimd.v1.Decision's."""

    CLAIMED = claims_pb2.DECISION_CLAIMED
    """The caller holds the lease (a `Lease`): do the work, then settle it."""
    IN_FLIGHT = claims_pb2.DECISION_IN_FLIGHT
    """Somebody else holds an unexpired lease; `receipt.lease_expires_at` says until when."""
    COMPLETED = claims_pb2.DECISION_COMPLETED
    """The work is done; `receipt.response` is the stored response to replay."""
    RETRY_SCHEDULED = claims_pb2.DECISION_RETRY_SCHEDULED
    """A retry is scheduled; `receipt.next_attempt_at` says when it may be claimed."""
    QUARANTINED = claims_pb2.DECISION_QUARANTINED
    """The receipt is a dead letter; `receipt.last_error` says why."""
    CONFLICT = claims_pb2.DECISION_CONFLICT
    """The key is known with another fingerprint: a different event under the same key."""


class State(_Named):
    """The durable state of a receipt (`Receipt.state`); the numbers are claimd.v1.State's."""

    PROCESSING = claims_pb2.STATE_PROCESSING
    RETRY_WAIT = claims_pb2.STATE_RETRY_WAIT
    COMPLETED = claims_pb2.STATE_COMPLETED
    QUARANTINED = claims_pb2.STATE_QUARANTINED


class OrphanReason(_Named):
    """Why ListOrphaned lists a receipt (`Orphan.reason`)."""

    LEASE_EXPIRED = claims_pb2.ORPHAN_REASON_LEASE_EXPIRED
    RETRY_DUE = claims_pb2.ORPHAN_REASON_RETRY_DUE


@dataclass(frozen=True)
class Answer:
    """A Claim's answer other than CLAIMED: the decision and the receipt after it."""

    decision: Decision
    receipt: claims_pb2.Receipt

    @property
    def response(self) -> bytes:
        """The stored response (COMPLETED); empty otherwise, or for a pruned tombstone."""
        return self.receipt.response


PEM = Union[bytes, str, "os.PathLike[str]"]


def _pem(value: PEM | None) -> bytes | None:
    """PEM bytes from bytes (as they are), PEM text, or the path of a PEM file."""
    if value is None or isinstance(value, bytes):
        return value
    text = os.fspath(value)
    if text.lstrip().startswith("-----BEGIN"):
        return text.encode("ascii")
    with open(text, "rb") as pem_file:
        return pem_file.read()


@dataclass(frozen=True)
class TLS:
    """TLS settings for the channel to claimd.

    `ca`: the CA certificate(s) to trust; None trusts the system's roots. `cert` and `key`:
    a client certificate and its private key, for a claimd that requires them (mTLS,
    `--tls-client-ca`). Each is PEM bytes, PEM text, or the path of a PEM file.
    `server_name`: the name to check the server's certificate against, when it is not the
    host of the target. The key never shows in a repr.
    """

    ca: PEM | None = None
    cert: PEM | None = None
    key: PEM | None = field(default=None, repr=False)
    server_name: str | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        """The grpc channel credentials these settings describe."""
        if (self.cert is None) != (self.key is None):
            raise ValueError("TLS: a client certificate needs its key, and a key its certificate")
        return grpc.ssl_channel_credentials(
            root_certificates=_pem(self.ca),
            private_key=_pem(self.key),
            certificate_chain=_pem(self.cert),
        )


def channel_credentials(tls: TLSOption) -> grpc.ChannelCredentials | None:
    """The credentials for `tls=`, or None for a plaintext channel."""
    if tls is None or tls is False:
        return None
    if tls is True:
        return grpc.ssl_channel_credentials()
    if isinstance(tls, TLS):
        return tls.credentials()
    if isinstance(tls, grpc.ChannelCredentials):
        return tls
    raise TypeError(f"tls must be None, a bool, claimd.TLS or grpc.ChannelCredentials, "
                    f"not {type(tls).__name__}")


def channel_options(tls: TLSOption, options: ChannelOptions) -> list[tuple[str, Any]]:
    """The channel options, with the TLS server name override if one is set."""
    merged = list(options)
    if isinstance(tls, TLS) and tls.server_name:
        merged.append(("grpc.ssl_target_name_override", tls.server_name))
    return merged


try:  # optional: only when the caller's process has OpenTelemetry
    from opentelemetry import propagate as _propagate
except ImportError:  # pragma: no cover - depends on what is installed
    _propagate = None  # type: ignore[assignment]


def call_metadata(api_key: str | None) -> tuple[tuple[str, str], ...]:
    """The per-call metadata: `authorization: Bearer <key>` when there is a key.

    Per-call metadata works on plaintext loopback channels too, where grpc's call
    credentials would demand TLS.
    """
    if not api_key:
        return ()
    if any(c.isspace() for c in api_key):
        raise ValueError("the API key contains whitespace")  # never the key itself
    return (("authorization", f"Bearer {api_key}"),)


def traced(metadata: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """`metadata` plus the caller's current OpenTelemetry context (`traceparent`,
    `tracestate`), when the OpenTelemetry API is installed in this process and a span is
    current: claimd's spans then join the caller's trace. Nothing else is sent (not
    `baggage`), and nothing without the API.
    """
    if _propagate is None:
        return metadata
    carrier: dict[str, str] = {}
    _propagate.inject(carrier)
    extra = tuple(
        (name.lower(), value)
        for name, value in carrier.items()
        if name.lower() in ("traceparent", "tracestate")
    )
    return metadata + extra if extra else metadata


def to_seconds(value: Seconds) -> float:
    """`value` in seconds."""
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    return float(value)


def duration(value: Seconds | None) -> duration_pb2.Duration | None:
    """A google.protobuf.Duration of `value`, or None (unset) for None."""
    if value is None:
        return None
    message = duration_pb2.Duration()
    message.FromNanoseconds(round(to_seconds(value) * 1e9))
    return message


def claim_request(
    namespace: str,
    key: str,
    fingerprint: bytes,
    lease: Seconds | None,
    recovery_payload: bytes,
    delivery_attempt: int,
    wait: Seconds | None,
) -> claims_pb2.ClaimRequest:
    """The ClaimRequest for `Claims.claim`'s arguments; TypeError naming the field for a
    `str` where bytes belong (a fingerprint is a digest: `claimd.fingerprint_of(body)`)."""
    for name, value in (("fingerprint", fingerprint), ("recovery_payload", recovery_payload)):
        if not isinstance(value, bytes):
            hint = " (claimd.fingerprint_of(value) makes one)" if name == "fingerprint" else ""
            raise TypeError(f"{name} must be bytes{hint}, not {type(value).__name__}")
    request = claims_pb2.ClaimRequest(
        namespace=namespace,
        key=key,
        fingerprint=fingerprint,
        recovery_payload=recovery_payload,
        delivery_attempt=delivery_attempt,
    )
    lease_ttl = duration(lease)
    if lease_ttl is not None:
        request.lease_ttl.CopyFrom(lease_ttl)
    wait_for = duration(wait)
    if wait_for is not None and (wait_for.seconds or wait_for.nanos):
        request.wait.CopyFrom(wait_for)
    return request


def claim_timeout(timeout: float, wait: Seconds | None) -> float:
    """A Claim's deadline: the call's timeout plus its wait, so the wait is not cut short."""
    return timeout + (max(0.0, to_seconds(wait)) if wait is not None else 0.0)


def decision_of(response: claims_pb2.ClaimResponse) -> Decision:
    """The response's decision; ValueError for a number this client does not know."""
    return Decision(response.decision)


def lease_seconds(requested: Seconds | None, receipt: claims_pb2.Receipt) -> float:
    """How long a fresh lease lasts: what the caller asked for, else what the receipt shows
    (lease end minus the claim's time, both on claimd's clock), else FALLBACK_LEASE."""
    if requested is not None:
        return to_seconds(requested)
    if receipt.HasField("lease_expires_at") and receipt.HasField("updated_at"):
        span = (
            receipt.lease_expires_at.ToNanoseconds() - receipt.updated_at.ToNanoseconds()
        ) / 1e9
        if span > 0:
            return span
    return FALLBACK_LEASE


def heartbeat_request(
    namespace: str, key: str, token: str, lease: Seconds | None, checkpoint: bytes | None
) -> claims_pb2.HeartbeatRequest:
    """The HeartbeatRequest renewing a lease for `lease` (unset: the namespace's lease)."""
    request = claims_pb2.HeartbeatRequest(namespace=namespace, key=key, claim_token=token)
    lease_ttl = duration(lease)
    if lease_ttl is not None:
        request.lease_ttl.CopyFrom(lease_ttl)
    if checkpoint is not None:
        request.checkpoint = checkpoint
    return request


def retry_request(
    namespace: str,
    key: str,
    token: str,
    error: str,
    retry_after: Seconds | None,
    count_attempt: bool,
) -> claims_pb2.RetryRequest:
    """The RetryRequest for `Lease.retry`'s arguments."""
    request = claims_pb2.RetryRequest(
        namespace=namespace, key=key, claim_token=token, error=error, count_attempt=count_attempt
    )
    after = duration(retry_after)
    if after is not None:
        request.retry_after.CopyFrom(after)
    return request


def list_request(
    namespace: str, states: Sequence[int], page_size: int, page_token: str
) -> claims_pb2.ListRequest:
    """The ListRequest for `Claims.list`'s arguments."""
    request = claims_pb2.ListRequest(
        namespace=namespace, page_size=page_size, page_token=page_token
    )
    request.states.extend(cast(Any, list(states)))
    return request


def list_orphaned_request(
    namespace: str, page_size: int, page_token: str, overdue_by: Seconds | None
) -> claims_pb2.ListOrphanedRequest:
    """The ListOrphanedRequest for `Claims.list_orphaned`'s arguments."""
    request = claims_pb2.ListOrphanedRequest(
        namespace=namespace, page_size=page_size, page_token=page_token
    )
    overdue = duration(overdue_by)
    if overdue is not None:
        request.overdue_by.CopyFrom(overdue)
    return request


def settle_error_text(error: BaseException) -> str:
    """What the with block stores as last_error for an exception: its type's name only,
    never its message, which could quote a payload."""
    return type(error).__qualname__
