"""The Idempotency-Key rules as a FastAPI dependency, for the routes that want them:

    from fastapi import APIRouter, Depends
    from claimd import AsyncClaims
    from claimd.fastapi import IdempotentRoute, idempotency

    orders = idempotency(lambda: AsyncClaims(target), namespace="orders-api",
                         client_of=lambda request: request.state.user_id)
    router = APIRouter(route_class=IdempotentRoute)

    @router.post("/orders", status_code=201, dependencies=[Depends(orders)])
    async def create_order(order: Order) -> dict[str, str]: ...

A dependency runs before the handler but never sees the response it returns, so the two
halves live apart: the dependency claims the key (and for any decision but CLAIMED raises
`Decided`, carrying the replay or the problem answer), and `IdempotentRoute`, the route
class, captures the route's whole response as the server would send it (exception
handlers' answers included), completes the lease with it and sends it, or gives the key
back with Retry when the handler raised before answering. The rules are those of
`claimd.asgi.IdempotencyMiddleware` (its options; the README).

Mounted anywhere else — a route of another class, an endpoint parameter, `include_router`'s
dependencies — the dependency could not store the response: FastAPI inspects it when it
builds the route, and it refuses there (at import, not per request) naming the fix.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable
from contextvars import Token
from typing import Any, Union

from fastapi import params
from fastapi.routing import APIRoute
from starlette.requests import Request

from claimd import _http
from claimd._aio import AsyncClaims, AsyncLease
from claimd._common import Answer, Seconds
from claimd._errors import ClaimdError
from claimd._idempotent import reset_lease, set_lease
from claimd.asgi import Message, Receive, Scope, Send, _give_back, _path_qs, _send, _settle

__all__ = ["Decided", "Idempotency", "IdempotentRoute", "idempotency"]

#: The key of a request's `_Slot` in its ASGI scope.
_SLOT = "claimd.idempotency"

MOUNT_FIX = (
    "Depends(idempotency(...)) stores the handler's response through its route class: "
    "create the router with APIRouter(route_class=claimd.fastapi.IdempotentRoute) (or set "
    "app.router.route_class = claimd.fastapi.IdempotentRoute before adding routes) and give "
    "the dependency to that router or its routes in dependencies=[...] (not as an endpoint "
    "parameter, nor to include_router); claimd.current_async_lease() is the lease"
)


class Decided(Exception):
    """What the dependency raises for a request the handler must not run for: a replay,
    or a problem answer (400, 409, 422, 503); `IdempotentRoute` sends its `response`."""

    def __init__(self, response: _http.Response) -> None:
        super().__init__(f"idempotency: answered {response.status}")
        self.response = response


@dataclasses.dataclass
class _Slot:
    """One request's state, shared by the route class and the dependency."""

    chunks: list[bytes] = dataclasses.field(default_factory=list)
    whole: bool = False
    lease: AsyncLease | None = None
    options: _http.Options | None = None
    token: Token[Any] | None = None


class Idempotency:
    """The dependency `idempotency(...)` makes; pass it to `Depends` on routes of an
    `IdempotentRoute` router."""

    def __init__(
        self,
        claims: Union[AsyncClaims, Callable[[], AsyncClaims]],
        namespace: str,
        *,
        client_of: Callable[[Request], str] | None = None,
        session_cookie: str | None = None,
        methods: Iterable[str] = _http.DEFAULT_METHODS,
        paths: Iterable[str] | None = None,
        required: bool = True,
        wait: Seconds = 10.0,
        lease: Seconds | None = 30.0,
        max_response_bytes: int = _http.MAX_RESPONSE_BYTES,
        retry_server_errors: bool = False,
        canonical_json: bool = True,
        docs_url: str | None = None,
    ) -> None:
        self.options = _http.Options.make(
            namespace, methods, paths, required, wait, lease, max_response_bytes,
            retry_server_errors, canonical_json, docs_url, session_cookie)
        self._claims = claims
        self._client: AsyncClaims | None = claims if isinstance(claims, AsyncClaims) else None
        self._client_of = client_of

    @property
    def __signature__(self) -> inspect.Signature:
        # FastAPI asks for it only when the dependency is mounted where IdempotentRoute
        # does not replace it with `self.dependency` (another route class, a parameter).
        raise RuntimeError(MOUNT_FIX)

    async def __call__(self, request: Request) -> None:
        raise RuntimeError(MOUNT_FIX)

    def _claims_client(self) -> AsyncClaims:
        if self._client is None:
            assert not isinstance(self._claims, AsyncClaims)
            self._client = self._claims()
        return self._client

    def client(self, request: Request) -> str:
        """The client a request's key belongs to: `client_of(request)`, else the default
        scope (the Authorization header's digest, the session cookie's, or anonymous)."""
        if self._client_of is not None:
            return self._client_of(request)
        headers = request.scope["headers"]
        return _http.default_client(
            [v for n, v in headers if n.lower() == b"authorization"],
            [v for n, v in headers if n.lower() == b"cookie"], self.options.session_cookie)

    async def dependency(self, request: Request) -> None:
        """Claims the request's key: returns with the lease held (the handler runs), or
        raises `Decided` with the answer."""
        slot = request.scope.get(_SLOT)
        if not isinstance(slot, _Slot):
            raise RuntimeError(MOUNT_FIX)
        options = self.options
        if slot.lease is not None or not options.covers(request.method, request.url.path):
            return
        values = [v for n, v in request.scope["headers"] if n.lower() == b"idempotency-key"]
        if not values:
            if options.required:
                raise Decided(_http.missing(options))
            return
        value = _http.parse_key(values[0].decode("latin-1")) if len(values) == 1 else None
        if value is None:
            raise Decided(_http.invalid(options))
        # FastAPI may have parsed a form already: then the recorded chunks are the body.
        body = b"".join(slot.chunks) if slot.whole else await request.body()
        fingerprint = _http.fingerprint(request.method, _path_qs(request.scope), body,
                                        request.headers.get("content-type"),
                                        options.canonical_json)
        key = _http.claim_key(self.client(request), value)
        try:
            result = await self._claims_client().claim(
                options.namespace, key, fingerprint, lease=options.lease, wait=options.wait)
        except ClaimdError as error:
            failed = _http.claim_failed(options, error)
            if failed is None:
                raise
            raise Decided(failed) from None
        if isinstance(result, Answer):
            raise Decided(_http.answer(options, result))
        slot.lease, slot.options = result, options
        slot.token = set_lease(result)


#: `Depends(idempotency(claims, namespace, ...))` on routes of an `IdempotentRoute` router.
#: `claims`: an `AsyncClaims` or a function making one (called on first use, inside the
#: loop); the options of `claimd.asgi.IdempotencyMiddleware`, with `client_of(request)`.
idempotency = Idempotency


def _swapped(depends: params.Depends) -> params.Depends:
    """`Depends(idempotency(...))` as `Depends(<its dependency method>)`."""
    call = depends.dependency
    if not isinstance(call, Idempotency):
        return depends
    if dataclasses.is_dataclass(depends):
        return dataclasses.replace(depends, dependency=call.dependency)
    return params.Depends(call.dependency, use_cache=depends.use_cache)


class IdempotentRoute(APIRoute):
    """The route class of routes with `Depends(idempotency(...))`: captures, stores and
    sends their responses. Routes without the dependency pass through untouched."""

    def __init__(self, path: str, endpoint: Callable[..., Any], *,
                 dependencies: Iterable[params.Depends] | None = None, **kwargs: Any) -> None:
        given = list(dependencies or [])
        self.idempotent = any(isinstance(d.dependency, Idempotency) for d in given)
        super().__init__(path, endpoint, dependencies=[_swapped(d) for d in given], **kwargs)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.idempotent:
            await super().handle(scope, receive, send)
            return
        slot = _Slot()
        scope[_SLOT] = slot
        captured = _http.Response(0)
        started = done = False

        async def recording() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                slot.chunks.append(message.get("body", b""))
                slot.whole = not message.get("more_body", False)
            return message

        async def capture(message: Message) -> None:
            nonlocal started, done
            started = True
            if slot.lease is None:
                await send(message)  # not claimed (not covered, or no key and not required)
            elif message["type"] == "http.response.start":
                captured.status = message["status"]
                captured.headers = [(n.decode("latin-1"), v.decode("latin-1"))
                                    for n, v in message.get("headers", [])]
            elif message["type"] == "http.response.body" and not done:
                captured.body += message.get("body", b"")
                done = not message.get("more_body", False)

        try:
            await super().handle(scope, recording, capture)
        except Decided as decided:
            if started:
                raise
            await _send(send, decided.response)
            return
        except BaseException as error:
            # It answered, then raised an Exception: the answer stands (stored below).
            if slot.lease is None or not done or not isinstance(error, Exception):
                if slot.lease is not None:
                    await _give_back(slot.lease, error)
                raise
        finally:
            if slot.token is not None:
                _reset(slot.token)
        if slot.lease is None or slot.options is None:
            return
        if not done:
            await _give_back(slot.lease, RuntimeError("no response"))
            raise RuntimeError("the route returned without a complete response")
        await _settle(slot.lease, slot.options, captured)
        await _send(send, captured)


def _reset(token: Token[Any]) -> None:
    try:
        reset_lease(token)
    except ValueError:
        pass  # set in another context (a dependency run apart): nothing of ours to undo
