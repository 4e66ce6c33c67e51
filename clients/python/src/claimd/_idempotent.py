"""`claimd.idempotent`, the decorator, and `current_lease` / `current_async_lease`.

    @claimd.idempotent(claims, "payments", key=lambda order, amount: order.id,
                       fingerprint=lambda order, amount: {"amount": amount})
    def charge(order: Order, amount: int) -> dict[str, str]:
        lease = claimd.current_lease()
        return psp.charge(order.id, amount, fence=lease.attempt)

Each call claims `key(*args, **kwargs)` in the namespace. CLAIMED: the function runs
(its lease heartbeating, reachable through `current_lease()`), its return value is stored
with Complete and returned. COMPLETED: the stored value is returned and the function is
not called. The function raising an Exception gives the key back with Retry (its error
text: the exception's type name only), `PermanentError` quarantines it; the exception
propagates. A return value the serializer cannot write quarantines the key (the function
ran; it must not run again) and the serializer's exception propagates. IN_FLIGHT (after `wait`), RETRY_SCHEDULED, QUARANTINED and CONFLICT raise
`InFlight`, `RetryScheduled`, `Quarantined` and `Conflict` (all `NotClaimed`); a failed
Claim raises its `ClaimdError` and the function is not called.

A stored value is one byte of kind, then: `v` the serializer's bytes; `n` the decimal
length of a result too large to store (claimd keeps at most 64 KiB), which settles the key
all the same: a duplicate raises `NotClaimed` (COMPLETED) instead of running it again.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import json
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, Union, cast

from claimd._aio import AsyncClaims, AsyncLease
from claimd._common import Answer, Decision, Seconds, settle_error_text
from claimd._errors import (
    ClaimdError,
    Conflict,
    InFlight,
    NotClaimed,
    PermanentError,
    Quarantined,
    RetryScheduled,
)
from claimd._fingerprint import fingerprint_of
from claimd._sync import Claims, Lease

__all__ = ["Serializer", "current_async_lease", "current_lease", "idempotent"]

F = TypeVar("F", bound=Callable[..., Any])
#: A client, or a function making one on first use (an AsyncClaims is made in a loop).
ClaimsSource = Union[Claims, AsyncClaims, Callable[[], Union[Claims, AsyncClaims]]]

#: claimd's limit for a stored response, in bytes.
MAX_STORED = 65_536
#: How long a call waits for another caller running the same key, unless told.
DEFAULT_WAIT = 10.0

_lease: contextvars.ContextVar[Lease | AsyncLease | None] = contextvars.ContextVar(
    "claimd_lease", default=None
)


class Serializer(Protocol):
    """What `serializer=` takes: `dumps(value) -> bytes` and `loads(bytes) -> value`
    (e.g. for dataclasses, pydantic models or bytes); JSON by default."""

    def dumps(self, value: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


class _Json:
    """The default serializer: compact JSON in UTF-8."""

    def dumps(self, value: Any) -> bytes:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def loads(self, data: bytes) -> Any:
        return json.loads(data)


def current_lease() -> Lease:
    """The lease of the `claimd.idempotent` function (or WSGI handler) running now: pass
    `lease.attempt` to the downstream write as a fence, or `lease.checkpoint(...)` right
    before a side effect. RuntimeError outside one."""
    lease = _lease.get()
    if not isinstance(lease, Lease):
        raise RuntimeError("no claimd lease here: not inside a sync idempotent call")
    return lease


def current_async_lease() -> AsyncLease:
    """`current_lease` for `async def` functions and ASGI handlers."""
    lease = _lease.get()
    if not isinstance(lease, AsyncLease):
        raise RuntimeError("no claimd lease here: not inside an async idempotent call")
    return lease


def set_lease(lease: Lease | AsyncLease | None) -> contextvars.Token[Lease | AsyncLease | None]:
    """Makes `lease` the current one (for the middleware); reset with the token."""
    return _lease.set(lease)


def reset_lease(token: contextvars.Token[Lease | AsyncLease | None]) -> None:
    _lease.reset(token)


def not_claimed(answer: Answer) -> NotClaimed:
    """The exception for an answer that lets nothing run (not COMPLETED with a value)."""
    receipt = answer.receipt
    if answer.decision is Decision.IN_FLIGHT:
        return InFlight(receipt)
    if answer.decision is Decision.RETRY_SCHEDULED:
        return RetryScheduled(receipt)
    if answer.decision is Decision.QUARANTINED:
        return Quarantined(receipt)
    if answer.decision is Decision.CONFLICT:
        return Conflict(receipt)
    return NotClaimed(answer.decision, receipt, f"{answer.decision}: nothing to return")


def stored(value: bytes) -> bytes:
    """What Complete stores for a serialized result (`n<length>` when it is too large)."""
    if len(value) + 1 <= MAX_STORED:
        return b"v" + value
    return b"n" + str(len(value)).encode("ascii")


def replayed(answer: Answer, serializer: Serializer) -> Any:
    """The stored value of a COMPLETED answer; NotClaimed when it is not kept."""
    data = answer.response
    if answer.receipt.HasField("response_pruned_at") or not data:
        raise NotClaimed(Decision.COMPLETED, answer.receipt,
                         "COMPLETED: this call ran; its result is no longer kept")
    if data[:1] == b"v":
        return serializer.loads(data[1:])
    if data[:1] == b"n":
        raise NotClaimed(Decision.COMPLETED, answer.receipt,
                         f"COMPLETED: this call ran; its result ({data[1:].decode()} bytes) "
                         "was too large to keep")
    raise NotClaimed(Decision.COMPLETED, answer.receipt,
                     "COMPLETED: the stored result is not one claimd.idempotent wrote")


def idempotent(
    claims: ClaimsSource,
    namespace: str,
    *,
    key: Callable[..., str],
    fingerprint: Callable[..., Any] | None = None,
    lease: Seconds | None = None,
    wait: Seconds | None = None,
    serializer: Serializer | None = None,
) -> Callable[[F], F]:
    """Runs the decorated function once per key (see the module's docstring).

    `claims`: a `Claims` for plain functions, an `AsyncClaims` for `async def` ones (or a
    function returning one, called on first use). `key(*args, **kwargs)` is the claim key
    (a str). `fingerprint(*args, **kwargs)` is given to `fingerprint_of`: the same key
    with another fingerprint raises `Conflict`; without it, calls are told apart by their
    key only (every fingerprint is `fingerprint_of(b"")`). `lease`: the lease's length (None: the namespace's).
    `wait`: how long a call waits for another caller of the same key (default 10 s, at
    most 60; 0: raise `InFlight` at once). `serializer`: how return values are stored.
    """
    codec: Serializer = serializer if serializer is not None else _Json()
    waiting: Seconds = DEFAULT_WAIT if wait is None else wait

    def decorate(fn: F) -> F:
        default_fp = fingerprint_of(b"")
        client: list[Claims | AsyncClaims] = []

        def source() -> Claims | AsyncClaims:
            if not client:
                made = claims if isinstance(claims, (Claims, AsyncClaims)) else claims()
                client.append(made)
            return client[0]

        def request(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, bytes]:
            claim_key = key(*args, **kwargs)
            if not isinstance(claim_key, str):
                raise TypeError(f"key must return a str, not {type(claim_key).__name__}")
            if fingerprint is None:
                return claim_key, default_fp
            return claim_key, fingerprint_of(fingerprint(*args, **kwargs))

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                aclaims = source()
                if not isinstance(aclaims, AsyncClaims):
                    raise TypeError("an async def function needs claims=AsyncClaims")
                claim_key, fp = request(args, kwargs)
                result = await aclaims.claim(namespace, claim_key, fp, lease=lease, wait=waiting)
                if isinstance(result, Answer):
                    if result.decision is Decision.COMPLETED:
                        return replayed(result, codec)
                    raise not_claimed(result)
                token = _lease.set(result)
                try:
                    value = await fn(*args, **kwargs)
                except BaseException as error:
                    await _give_back_async(result, error)
                    raise
                finally:
                    _lease.reset(token)
                try:
                    data = stored(codec.dumps(value))
                except Exception as error:  # it ran, but its value cannot be stored
                    await _give_back_async(result, PermanentError(), settle_error_text(error))
                    raise
                try:
                    await result.complete(data)
                except ClaimdError:
                    pass  # it ran: the caller gets its result (see the README)
                return value

            return cast(F, run_async)

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            sclaims = source()
            if not isinstance(sclaims, Claims):
                raise TypeError("a plain function needs claims=Claims (AsyncClaims: async def)")
            claim_key, fp = request(args, kwargs)
            result = sclaims.claim(namespace, claim_key, fp, lease=lease, wait=waiting)
            if isinstance(result, Answer):
                if result.decision is Decision.COMPLETED:
                    return replayed(result, codec)
                raise not_claimed(result)
            token = _lease.set(result)
            try:
                value = fn(*args, **kwargs)
            except BaseException as error:
                _give_back(result, error)
                raise
            finally:
                _lease.reset(token)
            try:
                data = stored(codec.dumps(value))
            except Exception as error:  # it ran, but its value cannot be stored
                _give_back(result, PermanentError(), settle_error_text(error))
                raise
            try:
                result.complete(data)
            except ClaimdError:
                pass  # it ran: the caller gets its result (see the README)
            return value

        return cast(F, run)

    return decorate


def _give_back(lease: Lease, error: BaseException, text: str | None = None) -> None:
    """Retry (PermanentError: Quarantine) for an Exception; only stop for the rest.
    `text`: the error to store, if not the exception's type name."""
    if lease.settled:
        return
    if not isinstance(error, Exception) or lease.lost.is_set():
        lease.stop()
        return
    try:
        if isinstance(error, PermanentError):
            lease.quarantine(text or settle_error_text(error))
        else:
            lease.retry(text or settle_error_text(error))
    except ClaimdError:
        lease.stop()  # the lease runs out; the function's exception propagates


async def _give_back_async(
    lease: AsyncLease, error: BaseException, text: str | None = None
) -> None:
    """`_give_back` for an AsyncLease."""
    if lease.settled:
        return
    if not isinstance(error, Exception) or lease.lost.is_set():
        await lease.stop()
        return
    try:
        if isinstance(error, PermanentError):
            await lease.quarantine(text or settle_error_text(error))
        else:
            await lease.retry(text or settle_error_text(error))
    except ClaimdError:
        await lease.stop()
