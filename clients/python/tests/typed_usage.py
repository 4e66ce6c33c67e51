"""A typed usage of the decorator, the middleware and fingerprint_of, as a user writes it:
checked by `mypy --strict` (pyproject's `files`), never run by pytest."""

from __future__ import annotations

import datetime
from typing import Any

from fastapi import APIRouter, Depends, Request
from typing_extensions import assert_type

import claimd

from claimd import AsyncClaims, AsyncLease, Claims, Lease, asgi, wsgi
from claimd.fastapi import IdempotentRoute, idempotency


def decorated(claims: Claims) -> None:
    @claimd.idempotent(claims, "payments", key=lambda order_id, cents: order_id,
                       fingerprint=lambda order_id, cents: {"cents": cents}, lease=30, wait=5)
    def charge(order_id: str, cents: int) -> dict[str, int]:
        lease = claimd.current_lease()
        assert_type(lease, Lease)
        lease.checkpoint(b"about to charge")  # the fence before the side effect
        return {"cents": cents, "fence": lease.attempt}

    assert_type(charge("o-1", 500), dict[str, int])
    try:
        charge("o-1", 500)
    except claimd.RetryScheduled as later:
        assert_type(later.next_attempt_at, datetime.datetime | None)
    except claimd.InFlight as busy:
        assert_type(busy.lease_expires_at, datetime.datetime | None)
    except claimd.NotClaimed as other:
        assert_type(other.decision, claimd.Decision)


async def decorated_async(claims: AsyncClaims) -> None:
    @claimd.idempotent(claims, "payments", key=lambda order_id: order_id)
    async def refund(order_id: str) -> str:
        lease = claimd.current_async_lease()
        assert_type(lease, AsyncLease)
        await lease.checkpoint(b"refunding")
        if not order_id:
            raise claimd.PermanentError("no such order")
        return order_id

    assert_type(await refund("o-1"), str)


def fingerprints() -> None:
    assert_type(claimd.fingerprint_of({"a": 1}), bytes)
    assert_type(claimd.fingerprint_of(b"raw"), bytes)
    assert_type(claimd.canonical_json([1, 2]), bytes)


def middleware(asgi_app: Any, wsgi_app: Any, target: str) -> None:
    asgi.IdempotencyMiddleware(asgi_app, claims=lambda: AsyncClaims(target),
                               namespace="orders-api", paths=["/orders"],
                               client_of=lambda scope: str(scope.get("user", "")),
                               retry_server_errors=False, max_response_bytes=32_768)
    wsgi.IdempotencyMiddleware(wsgi_app, claims=Claims(target), namespace="orders-api",
                               client_of=lambda environ: environ.get("REMOTE_USER", ""),
                               wait=datetime.timedelta(seconds=5), canonical_json=True)


def fastapi_dependency(target: str) -> None:
    def user_of(request: Request) -> str:
        return str(request.state.user_id)

    orders = idempotency(lambda: AsyncClaims(target), "orders-api", client_of=user_of,
                         session_cookie="sid", wait=5)
    router = APIRouter(route_class=IdempotentRoute)

    @router.post("/orders", status_code=201, dependencies=[Depends(orders)])
    async def create() -> dict[str, int]:
        return {"attempt": claimd.current_async_lease().attempt}
