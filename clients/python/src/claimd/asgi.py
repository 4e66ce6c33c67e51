"""`IdempotencyMiddleware` for ASGI apps (FastAPI, Starlette, …): the Idempotency-Key
header on claimd, pure ASGI (no framework import).

    app = FastAPI()
    app.add_middleware(IdempotencyMiddleware, claims=lambda: AsyncClaims(target),
                       namespace="orders-api")

Each key is scoped by its client: `client_of(scope)` when given (the authenticated user,
never a header the caller sets), else a digest of the request's Authorization header, else
of the `session_cookie` named, else `anonymous` (`claimd._http.default_client`).

A covered request (POST and PATCH by default, the methods HTTP does not make idempotent;
`paths` prefixes) needs the header. The first request with a key runs the app, whose whole response is captured,
stored with Complete (every status: 2xx, 4xx and 5xx) and then sent; every retry gets it
replayed with `Idempotent-Replayed: true` and the app does not run again. The app raising
before its response gives the key back with Retry (the exception's type name) and the
exception propagates. The running handler's lease: `claimd.current_async_lease()`.
See claimd._http for the claim key, fingerprint, stored form and problem answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, Union

from claimd import _http
from claimd._aio import AsyncClaims, AsyncLease
from claimd._common import Answer, Seconds, settle_error_text
from claimd._errors import ClaimdError
from claimd._idempotent import reset_lease, set_lease

__all__ = ["IdempotencyMiddleware"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class IdempotencyMiddleware:
    """The Idempotency-Key middleware (module docstring; the rules in the README).

    `claims`: an `AsyncClaims`, or a function making one (called once, on the first
    request, inside the server's loop). `client_of(scope)`: the authenticated user or
    tenant the key belongs to (default: `auth:` + SHA-256 of the Authorization header,
    else `cookie:` + SHA-256 of the `session_cookie` named, else `anonymous`).
    `methods`, `paths` (path prefixes; None: all): the covered routes. `required=False`
    lets a covered request without the header through. `wait`: how long a retry waits for
    the first request (default 10 s); then 409. `lease`: the running request's lease,
    heartbeated. `max_response_bytes`: the largest response stored (64 KiB); a larger one
    settles the key with its status and headers only. `retry_server_errors=True` gives a
    5xx back with Retry instead of storing it. `canonical_json=False` fingerprints JSON
    bodies byte for byte. `docs_url` is linked from problem bodies.
    """

    def __init__(
        self,
        app: ASGIApp,
        claims: Union[AsyncClaims, Callable[[], AsyncClaims]],
        namespace: str,
        *,
        client_of: Callable[[Scope], str] | None = None,
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
        self.app = app
        self.options = _http.Options.make(
            namespace, methods, paths, required, wait, lease, max_response_bytes,
            retry_server_errors, canonical_json, docs_url, session_cookie)
        self._claims = claims
        self._client: AsyncClaims | None = claims if isinstance(claims, AsyncClaims) else None
        self._client_of = client_of or self._default_client

    def _default_client(self, scope: Scope) -> str:
        headers = scope["headers"]
        return _http.default_client(
            [v for n, v in headers if n.lower() == b"authorization"],
            [v for n, v in headers if n.lower() == b"cookie"], self.options.session_cookie)

    def _claims_client(self) -> AsyncClaims:
        if self._client is None:
            assert not isinstance(self._claims, AsyncClaims)
            self._client = self._claims()
        return self._client

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.options.covers(scope["method"], scope["path"]):
            await self.app(scope, receive, send)
            return
        options = self.options
        values = [v for n, v in scope["headers"] if n.lower() == b"idempotency-key"]
        if not values:
            if options.required:
                await _send(send, _http.missing(options))
            else:
                await self.app(scope, receive, send)
            return
        value = _http.parse_key(values[0].decode("latin-1")) if len(values) == 1 else None
        if value is None:
            await _send(send, _http.invalid(options))
            return
        body, more = await _read_body(receive)
        content_type = next((v.decode("latin-1") for n, v in scope["headers"]
                             if n.lower() == b"content-type"), None)
        fingerprint = _http.fingerprint(scope["method"], _path_qs(scope), body, content_type,
                                        options.canonical_json)
        key = _http.claim_key(self._client_of(scope), value)
        try:
            result = await self._claims_client().claim(
                options.namespace, key, fingerprint, lease=options.lease, wait=options.wait)
        except ClaimdError as error:
            failed = _http.claim_failed(options, error)
            if failed is None:
                raise
            await _send(send, failed)
            return
        if isinstance(result, Answer):
            await _send(send, _http.answer(options, result))
            return
        response = await self._run(result, scope, _replay_body(body, more, receive))
        await _send(send, response)

    async def _run(self, lease: AsyncLease, scope: Scope, receive: Receive) -> _http.Response:
        """Runs the app under `lease`, captures its response and settles the lease."""
        captured = _http.Response(0)
        done = asyncio.Event()

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                captured.status = message["status"]
                captured.headers = [(n.decode("latin-1"), v.decode("latin-1"))
                                    for n, v in message.get("headers", [])]
            elif message["type"] == "http.response.body" and not done.is_set():
                captured.body += message.get("body", b"")
                if not message.get("more_body", False):
                    done.set()

        token = set_lease(lease)
        try:
            await self.app(scope, receive, capture)
        except BaseException as error:
            if not done.is_set() or not isinstance(error, Exception):
                await _give_back(lease, error)
                raise
            # It answered, then raised: the answer stands (stored below).
        finally:
            reset_lease(token)
        if not done.is_set():
            await _give_back(lease, RuntimeError("no response"))
            raise RuntimeError("the ASGI app returned without a complete response")
        await _settle(lease, self.options, captured)
        return captured


async def _settle(lease: AsyncLease, options: _http.Options, captured: _http.Response) -> None:
    """Completes `lease` with the captured response (Retry for a 5xx when asked to)."""
    try:
        if _http.settle_as_retry(options, captured.status):
            await lease.retry(f"HTTP {captured.status}")
        else:
            await lease.complete(_http.encode(
                captured.status, _http.safe_headers(captured.headers), captured.body,
                options.max_response_bytes))
    except ClaimdError:
        pass  # the handler ran: its client gets its answer all the same


async def _give_back(lease: AsyncLease, error: BaseException) -> None:
    """Retry for an Exception (its type name only); only stop heartbeats for the rest."""
    if lease.settled:
        return
    if not isinstance(error, Exception) or lease.lost.is_set():
        await lease.stop()
        return
    try:
        await lease.retry(settle_error_text(error))
    except ClaimdError:
        await lease.stop()


def _path_qs(scope: Scope) -> str:
    """The request's path (as sent) and query."""
    raw = scope.get("raw_path")
    path = raw.decode("latin-1").split("?", 1)[0] if raw else scope["path"]
    query = scope.get("query_string", b"").decode("latin-1")
    return f"{path}?{query}" if query else path


async def _read_body(receive: Receive) -> tuple[bytes, list[Message]]:
    """The whole request body, and the messages after it (a disconnect) to pass on."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), [message]
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), []


def _replay_body(body: bytes, more: list[Message], receive: Receive) -> Receive:
    """A receive() that gives the app the body read already, then the real receive."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]
    pending += more

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


async def _send(send: Send, response: _http.Response) -> None:
    await send({
        "type": "http.response.start",
        "status": response.status,
        "headers": [(n.lower().encode("latin-1"), v.encode("latin-1"))
                    for n, v in response.headers],
    })
    await send({"type": "http.response.body", "body": response.body})
