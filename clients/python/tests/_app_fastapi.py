"""The FastAPI test apps: behind `claimd.asgi.IdempotencyMiddleware` (`asgi_app`), and with
`Depends(claimd.fastapi.idempotency(...))` on an `IdempotentRoute` router included into the
app (`depends_app`). The routes are those of _routes.py; `options` go to the middleware or
the dependency."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response

import _settings
import claimd
from _routes import NAMESPACE, BIG, Boom, announce, ran
from claimd import AsyncClaims, asgi
from claimd.fastapi import IdempotentRoute, idempotency


def _claims(target: str | None) -> Any:
    kwargs = _settings.client_kwargs(target)
    return lambda: AsyncClaims(**kwargs)


def _routes(router: APIRouter, block: bool) -> None:
    async def order(request: Request) -> JSONResponse:
        body = await request.json()
        n = ran(request.headers.get("idempotency-key"))
        announce(block)
        while block:
            await asyncio.sleep(3600)
        await asyncio.sleep(float(request.query_params.get("delay", "0")))
        lease = claimd.current_async_lease()
        response = JSONResponse(
            {"order": n, "attempt": lease.attempt, "amount": body.get("amount")},
            status_code=201, headers={"x-order": str(n)})
        response.set_cookie("seen", str(n))
        return response

    router.post("/orders")(order)
    router.post("/payments")(order)

    @router.post("/fail")
    async def fail(request: Request) -> JSONResponse:
        n = ran(request.headers.get("idempotency-key"))
        return JSONResponse({"failed": n}, status_code=500)

    @router.post("/big")
    async def big(request: Request) -> Response:
        n = ran(request.headers.get("idempotency-key"))
        return Response(b"x" * BIG, media_type="text/plain", headers={"x-order": str(n)})

    @router.post("/raise")
    async def boom(request: Request) -> None:
        ran(request.headers.get("idempotency-key"))
        raise Boom("a secret the error must not carry")

    @router.post("/hop")
    async def hop(request: Request) -> Response:
        """A response naming a header hop-by-hop in its Connection header."""
        n = ran(request.headers.get("idempotency-key"))
        return Response(b"hop", headers={"connection": "x-hop", "x-hop": "1",
                                         "x-order": str(n)})

    @router.get("/orders")
    async def listing() -> dict[str, str]:
        return {"listing": "ok"}


def asgi_app(target: str | None = None, *, block: bool = False, **options: Any) -> Any:
    """The FastAPI app behind `claimd.asgi.IdempotencyMiddleware`."""
    app = FastAPI()
    app.add_middleware(asgi.IdempotencyMiddleware, claims=_claims(target),
                       namespace=NAMESPACE, **options)
    router = APIRouter()
    _routes(router, block)
    app.include_router(router)
    return app


def depends_app(target: str | None = None, *, block: bool = False, **options: Any) -> Any:
    """The FastAPI app whose routes depend on `claimd.fastapi.idempotency(...)`."""
    orders = idempotency(_claims(target), NAMESPACE, **options)
    router = APIRouter(route_class=IdempotentRoute, dependencies=[Depends(orders)])
    _routes(router, block)
    app = FastAPI()
    app.include_router(router)
    return app
