"""The Idempotency-Key rules as a Django middleware, configured in settings:

    MIDDLEWARE = [
        ...,
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "claimd.django.IdempotencyMiddleware",      # after authentication
        ...,
    ]
    CLAIMD_IDEMPOTENCY = {"target": "claimd.internal:50051", "namespace": "orders-api"}

`CLAIMD_IDEMPOTENCY` holds the options of `claimd.wsgi.IdempotencyMiddleware` (namespace,
client_of, session_cookie, methods, paths, required, wait, lease, max_response_bytes,
retry_server_errors, canonical_json, docs_url) and how to reach claimd: `target` (with
`api_key`, `tls`), or `claims` (a `claimd.Claims`, or the dotted path of one or of a
function making one). `client_of` is a function of the request or its dotted path. A
misconfiguration raises ImproperlyConfigured when Django loads its middleware (at start).

Whose key it is, without `client_of`: the signed-in user (`user:` + `request.user.pk`,
so one user's retries match across sessions and token refreshes), else the default scope
of the other middleware (the Authorization header's digest, the named session cookie's,
or `anonymous`). The view's response, whatever its status, is stored and replayed; a view
that raised gives the key back with Retry and Django answers its 500 — except Http404,
PermissionDenied, BadRequest and SuspiciousOperation, which Django answers with a 4xx: that
answer is stored. The middleware is synchronous (a blocking `claimd.Claims`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import (
    BadRequest,
    ImproperlyConfigured,
    PermissionDenied,
    SuspiciousOperation,
)
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.utils.module_loading import import_string

from claimd import _http
from claimd._common import Answer, settle_error_text
from claimd._errors import ClaimdError
from claimd._idempotent import reset_lease, set_lease
from claimd._sync import Claims, Lease
from claimd.wsgi import environ_client, give_back, path_qs, settle

__all__ = ["IdempotencyMiddleware", "SETTING"]

SETTING = "CLAIMD_IDEMPOTENCY"
_OPTIONS = ("methods", "paths", "required", "wait", "lease", "max_response_bytes",
            "retry_server_errors", "canonical_json", "docs_url", "session_cookie")
_KNOWN = frozenset(_OPTIONS) | {"namespace", "client_of", "target", "api_key", "tls",
                                "claims"}
#: What a view raises that Django answers with a 4xx: an answer, stored.
_ANSWERS = (Http404, PermissionDenied, BadRequest, SuspiciousOperation)
_RAISED = "_claimd_raised"


def _improper(message: str) -> ImproperlyConfigured:
    return ImproperlyConfigured(f"settings.{SETTING}: {message}")


def _loaded(value: Any, what: str) -> Any:
    """`value`, or what its dotted path names."""
    if isinstance(value, str):
        try:
            return import_string(value)
        except ImportError as error:
            raise _improper(f"{what} {value!r} cannot be imported ({error})") from None
    return value


def _claims(config: dict[str, Any]) -> Claims:
    if "claims" in config:
        claims = _loaded(config["claims"], "claims")
        if not isinstance(claims, Claims) and callable(claims):
            claims = claims()
        if not isinstance(claims, Claims):
            raise _improper("claims must be a claimd.Claims, or the dotted path of one or of "
                            "a function returning one")
        return claims
    if not isinstance(config.get("target"), str) or not config["target"]:
        raise _improper("give target ('host:port' of claimd) or claims")
    return Claims(config["target"], api_key=config.get("api_key"), tls=config.get("tls"))


class IdempotencyMiddleware:
    """`claimd.django.IdempotencyMiddleware`: put it in MIDDLEWARE after
    AuthenticationMiddleware; configured by `settings.CLAIMD_IDEMPOTENCY`."""

    sync_capable = True
    async_capable = False

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response
        config = getattr(settings, SETTING, None)
        if not isinstance(config, dict):
            raise _improper("missing: a dict such as {'target': 'localhost:50051', "
                            "'namespace': 'orders-api'}")
        unknown = sorted(set(config) - _KNOWN)
        if unknown:
            raise _improper(f"unknown keys {unknown}; known: {sorted(_KNOWN)}")
        try:
            self.options = _http.Options.make(
                config.get("namespace", ""),
                config.get("methods", _http.DEFAULT_METHODS), config.get("paths"),
                config.get("required", True), config.get("wait", 10.0),
                config.get("lease", 30.0),
                config.get("max_response_bytes", _http.MAX_RESPONSE_BYTES),
                config.get("retry_server_errors", False), config.get("canonical_json", True),
                config.get("docs_url"), config.get("session_cookie"))
        except (TypeError, ValueError) as error:
            raise _improper(str(error)) from None
        client_of = _loaded(config.get("client_of"), "client_of")
        if client_of is not None and not callable(client_of):
            raise _improper("client_of must be a function of the request, or its dotted path")
        self.client_of: Callable[[HttpRequest], str] | None = client_of
        self.claims = _claims(config)

    def client(self, request: HttpRequest) -> str:
        """`client_of(request)`; else the signed-in user; else the default scope."""
        if self.client_of is not None:
            return self.client_of(request)
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            return f"user:{user.pk}"
        return environ_client(request.META, self.options.session_cookie)

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        options = self.options
        method = request.method or "GET"
        if not options.covers(method, request.path):
            return self.get_response(request)
        header = request.META.get("HTTP_IDEMPOTENCY_KEY")
        if header is None:
            if options.required:
                return _django(_http.missing(options))
            return self.get_response(request)
        value = _http.parse_key(header)
        if value is None:
            return _django(_http.invalid(options))
        fingerprint = _http.fingerprint(method, path_qs(request.META), request.body,
                                        request.META.get("CONTENT_TYPE"),
                                        options.canonical_json)
        key = _http.claim_key(self.client(request), value)
        try:
            result = self.claims.claim(options.namespace, key, fingerprint,
                                       lease=options.lease, wait=options.wait)
        except ClaimdError as error:
            failed = _http.claim_failed(options, error)
            if failed is None:
                raise
            return _django(failed)
        if isinstance(result, Answer):
            return _django(_http.answer(options, result))
        return self._run(result, request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> None:
        """Notes that the view raised (Django turns it into a response afterwards)."""
        setattr(request, _RAISED, exception)

    def _run(self, lease: Lease, request: HttpRequest) -> HttpResponseBase:
        token = set_lease(lease)
        try:
            response = self.get_response(request)
        except BaseException as error:
            give_back(lease, error)
            raise
        finally:
            reset_lease(token)
        raised = request.__dict__.pop(_RAISED, None)
        if raised is not None and not isinstance(raised, _ANSWERS):
            try:
                lease.retry(settle_error_text(raised))
            except ClaimdError:
                lease.stop()
            return response
        if response.streaming:
            body = b"".join(response)
            response.streaming_content = [body]
        else:
            body = response.content
        settle(lease, self.options, _http.Response(response.status_code,
                                                   list(response.items()), body))
        return response


def _django(response: _http.Response) -> HttpResponse:
    """An `_http.Response` as Django's: repeated headers joined with ", "."""
    out = HttpResponse(response.body, status=response.status)
    del out["Content-Type"]
    for name, value in response.headers:
        if name.lower() == "content-length":
            continue
        out[name] = f"{out[name]}, {value}" if name in out else value
    out["Content-Length"] = str(len(response.body))
    return out
