"""`IdempotencyMiddleware` for WSGI apps (Flask, Django, …): the Idempotency-Key header on
claimd, pure WSGI (no framework import).

    app.wsgi_app = IdempotencyMiddleware(app.wsgi_app, claims=Claims(target),
                                         namespace="orders-api")

The behaviour of `claimd.asgi.IdempotencyMiddleware` (its options, and its default scope:
the Authorization header's digest, else the named session cookie's, else `anonymous`), on
a blocking `Claims`: the first
request with a key runs the app, whose whole response is captured, stored with Complete
(every status) and sent; retries get it replayed with `Idempotent-Replayed: true`. The app
raising before its response gives the key back with Retry and the exception propagates.
The running handler's lease: `claimd.current_lease()`.
"""

from __future__ import annotations

import io
from http import HTTPStatus
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote

from claimd import _http
from claimd._common import Answer, Seconds, settle_error_text
from claimd._errors import ClaimdError
from claimd._idempotent import reset_lease, set_lease
from claimd._sync import Claims, Lease

__all__ = ["IdempotencyMiddleware"]

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]


class IdempotencyMiddleware:
    """The Idempotency-Key middleware; the options of `claimd.asgi.IdempotencyMiddleware`,
    with `claims` a `Claims` and `client_of(environ)`. The default scope reads
    `HTTP_AUTHORIZATION`: a server that hides it from the app (Apache mod_wsgi without
    `WSGIPassAuthorization On`) makes every such request `anonymous`."""

    def __init__(
        self,
        app: WSGIApp,
        claims: Claims,
        namespace: str,
        *,
        client_of: Callable[[Environ], str] | None = None,
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
        if not isinstance(claims, Claims):
            raise TypeError("claims must be a claimd.Claims")
        self.app = app
        self.claims = claims
        self.options = _http.Options.make(
            namespace, methods, paths, required, wait, lease, max_response_bytes,
            retry_server_errors, canonical_json, docs_url, session_cookie)
        self._client_of = client_of or self._default_client

    def _default_client(self, environ: Environ) -> str:
        return environ_client(environ, self.options.session_cookie)

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        options = self.options
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
        if not options.covers(method, path):
            return self.app(environ, start_response)
        header = environ.get("HTTP_IDEMPOTENCY_KEY")
        if header is None:
            if options.required:
                return _send(start_response, _http.missing(options))
            return self.app(environ, start_response)
        value = _http.parse_key(header)
        if value is None:
            return _send(start_response, _http.invalid(options))
        body = _read_body(environ)
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        fingerprint = _http.fingerprint(method, path_qs(environ), body,
                                        environ.get("CONTENT_TYPE"), options.canonical_json)
        key = _http.claim_key(self._client_of(environ), value)
        try:
            result = self.claims.claim(options.namespace, key, fingerprint,
                                       lease=options.lease, wait=options.wait)
        except ClaimdError as error:
            failed = _http.claim_failed(options, error)
            if failed is None:
                raise
            return _send(start_response, failed)
        if isinstance(result, Answer):
            return _send(start_response, _http.answer(options, result))
        return _send(start_response, self._run(result, environ))

    def _run(self, lease: Lease, environ: Environ) -> _http.Response:
        """Runs the app under `lease`, captures its response and settles the lease."""
        captured = _http.Response(0)
        chunks: list[bytes] = []

        def start_response(status: str, headers: list[tuple[str, str]],
                           exc_info: Any = None) -> Callable[[bytes], None]:
            captured.status = int(status.split(" ", 1)[0])
            captured.headers = list(headers)
            return chunks.append

        token = set_lease(lease)
        try:
            result = self.app(environ, start_response)
            try:
                for chunk in result:
                    chunks.append(chunk)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
            if not captured.status:
                raise RuntimeError("the WSGI app returned without calling start_response")
        except BaseException as error:
            give_back(lease, error)
            raise
        finally:
            reset_lease(token)
        captured.body = b"".join(chunks)
        settle(lease, self.options, captured)
        return captured


def settle(lease: Lease, options: _http.Options, captured: _http.Response) -> None:
    """Completes `lease` with the captured response (Retry for a 5xx when asked to)."""
    try:
        if _http.settle_as_retry(options, captured.status):
            lease.retry(f"HTTP {captured.status}")
        else:
            lease.complete(_http.encode(
                captured.status, _http.safe_headers(captured.headers), captured.body,
                options.max_response_bytes))
    except ClaimdError:
        pass  # the handler ran: its client gets its answer all the same


def path_qs(environ: Environ) -> str:
    """The request's path (percent-encoded as sent) and query, for the fingerprint."""
    path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
    quoted = quote(path, safe="/:@!$&'()*+,;=-._~%", encoding="latin-1")
    query = environ.get("QUERY_STRING")
    return f"{quoted}?{query}" if query else quoted


def environ_client(environ: Environ, session_cookie: str | None) -> str:
    """The default scope of a WSGI request (`claimd._http.default_client`): PEP 3333's
    strings are the bytes as received, decoded as latin-1."""
    authorization = environ.get("HTTP_AUTHORIZATION")
    cookie = environ.get("HTTP_COOKIE")
    return _http.default_client(
        [] if authorization is None else [authorization.encode("latin-1", "replace")],
        [] if cookie is None else [cookie.encode("latin-1", "replace")], session_cookie)


def give_back(lease: Lease, error: BaseException) -> None:
    """Retry for an Exception (its type name only); only stop heartbeats for the rest."""
    if lease.settled:
        return
    if not isinstance(error, Exception) or lease.lost.is_set():
        lease.stop()
        return
    try:
        lease.retry(settle_error_text(error))
    except ClaimdError:
        lease.stop()


def _read_body(environ: Environ) -> bytes:
    """The whole request body (CONTENT_LENGTH bytes, or to the end when the server says
    the input is terminated)."""
    stream = environ.get("wsgi.input")
    if stream is None:
        return b""
    length = environ.get("CONTENT_LENGTH") or ""
    if length.strip().isdigit():
        return bytes(stream.read(int(length)))
    if environ.get("wsgi.input_terminated"):
        return bytes(stream.read())
    return b""


def _send(start_response: StartResponse, response: _http.Response) -> list[bytes]:
    headers = [(n, v) for n, v in response.headers if n.lower() != "content-length"]
    headers.append(("Content-Length", str(len(response.body))))
    start_response(f"{response.status} {_reason(response.status)}", headers)
    return [response.body]


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"
