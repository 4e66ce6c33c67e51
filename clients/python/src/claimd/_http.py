"""What the Idempotency-Key middleware (ASGI, WSGI, the FastAPI dependency, Django) share,
free of any server API: the options, parsing the header, the default scope of a key
(`default_client`), the claim key, the request fingerprint, the headers a stored response
may keep, encoding a response for claimd and reading it back, and the HTTP answer to each
decision (application/problem+json).

A stored response is `IDK2`, the status (u16), flags (u8; 1 = the body was too large to
keep), the number of headers (u16), each header as name length (u8), lowercase name,
value length (u16) and value (latin-1); then the body, or, when it was not kept, its
length (u64): retries get the status and headers with a problem body saying the body was
not kept. The same bytes as `@claimd/client/express` writes, so either package replays
the other's.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import grpc

from claimd._common import Answer, Decision, Seconds, to_seconds
from claimd._errors import ClaimdError, QuotaError
from claimd._fingerprint import canonical_json

#: A response: status, headers (latin-1 text), body.
Headers = list[tuple[str, str]]

HEADER = "idempotency-key"
REPLAYED = "Idempotent-Replayed"
#: claimd's blob limit: the most a stored response may be (and the default).
MAX_RESPONSE_BYTES = 65_536
MAX_CLAIM_KEY_BYTES = 512
MAX_KEY_CHARS = 255
MAX_WAIT = 60.0
DEFAULT_METHODS = ("POST", "PATCH")
MAGIC = b"IDK2"
BODY_NOT_STORED = 1
#: Response headers never stored: hop-by-hop, recomputed, credentials, the replay mark
#: (besides every `proxy-*` header and those the response's Connection header names).
UNSTORED = frozenset({
    "connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade",
    "content-length", "date", "server", "set-cookie", "set-cookie2", REPLAYED.lower(),
})
INVALID_DETAIL = (
    "Idempotency-Key must be 1–255 printable ASCII characters, or a quoted string of them"
)


@dataclass(frozen=True)
class Options:
    """The settings of one middleware (see `claimd.asgi.IdempotencyMiddleware`)."""

    namespace: str
    methods: frozenset[str] = frozenset(DEFAULT_METHODS)
    paths: tuple[str, ...] | None = None
    required: bool = True
    wait: float = 10.0
    lease: Seconds | None = 30.0
    max_response_bytes: int = MAX_RESPONSE_BYTES
    retry_server_errors: bool = False
    canonical_json: bool = True
    docs_url: str | None = None
    session_cookie: str | None = None

    @classmethod
    def make(cls, namespace: str, methods: Iterable[str], paths: Iterable[str] | None,
             required: bool, wait: Seconds, lease: Seconds | None, max_response_bytes: int,
             retry_server_errors: bool, canonical_json: bool, docs_url: str | None,
             session_cookie: str | None = None) -> Options:
        if not isinstance(namespace, str) or not namespace:
            raise TypeError("namespace must be a non-empty str")
        if session_cookie is not None and (
                not isinstance(session_cookie, str) or not session_cookie
                or not session_cookie.isascii() or any(c in session_cookie for c in "=; \t")):
            raise TypeError("session_cookie must be a cookie name (non-empty ASCII without "
                            "'=', ';' or spaces) or None")
        seconds = to_seconds(wait)
        if not 0 <= seconds <= MAX_WAIT:
            raise ValueError(f"wait must be 0 to {MAX_WAIT:.0f} seconds")
        if not 1 <= max_response_bytes <= MAX_RESPONSE_BYTES:
            raise ValueError(f"max_response_bytes must be 1 to {MAX_RESPONSE_BYTES}")
        return cls(namespace, frozenset(m.upper() for m in methods),
                   None if paths is None else tuple(paths), required, seconds, lease,
                   max_response_bytes, retry_server_errors, canonical_json, docs_url,
                   session_cookie)

    def covers(self, method: str, path: str) -> bool:
        """Whether a request is under the middleware: its method, and a path prefix."""
        if method.upper() not in self.methods:
            return False
        return self.paths is None or any(path.startswith(p) for p in self.paths)


@dataclass
class Response:
    """An HTTP response to send: status, headers, body."""

    status: int
    headers: Headers = field(default_factory=list)
    body: bytes = b""


def parse_key(header: str) -> str | None:
    """The Idempotency-Key's value: an sf-string (`"…"` with `\\"` and `\\\\`) or a bare
    run of printable ASCII; None when malformed, empty or over 255 characters."""
    text = header.strip(" \t")
    if text.startswith('"'):
        chars: list[str] = []
        i = 1
        while i < len(text):
            c = text[i]
            if c == '"':
                break
            if c == "\\":
                i += 1
                if i >= len(text) or text[i] not in '"\\':
                    return None
                c = text[i]
            elif not " " <= c <= "~":
                return None
            chars.append(c)
            i += 1
        if i != len(text) - 1:
            return None  # unterminated, or something after the closing quote
        value = "".join(chars)
    else:
        value = text
        if not value or not all(" " <= c <= "~" for c in value):
            return None
    return value if 1 <= len(value) <= MAX_KEY_CHARS else None


def cookie_value(cookies: Iterable[bytes], name: str) -> bytes | None:
    """The value of the cookie `name` in Cookie header lines, as sent (not URL-decoded):
    pairs split on `;`, spaces around each trimmed, the value after the first `=`; the first
    occurrence wins. None when no line carries it."""
    wanted = name.encode("latin-1")
    for line in cookies:
        for pair in line.split(b";"):
            cookie, eq, value = pair.strip(b" \t").partition(b"=")
            if eq and cookie == wanted:
                return value
    return None


def default_client(authorization: Sequence[bytes], cookies: Iterable[bytes],
                   session_cookie: str | None) -> str:
    """The client of a request when the app gives no client function: `auth:` + SHA-256
    (hex) of its Authorization lines (joined with ", "); else, with a session cookie named,
    `cookie:` + SHA-256 of that cookie's value; else `anonymous` (one shared key space)."""
    if authorization:
        return "auth:" + hashlib.sha256(b", ".join(authorization)).hexdigest()
    if session_cookie is not None:
        value = cookie_value(cookies, session_cookie)
        if value is not None:
            return "cookie:" + hashlib.sha256(value).hexdigest()
    return "anonymous"


def claim_key(client: str, value: str) -> str:
    """The claim key: `<client or '-'> <key>` (client percent-encoded), or `sha256:<hex>`
    of it when over 512 bytes. Method and path are in the fingerprint instead."""
    key = quote(client or "-", safe="!'()*-._~") + " " + value
    if len(key.encode("utf-8")) <= MAX_CLAIM_KEY_BYTES:
        return key
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def is_json(content_type: str | None) -> bool:
    """application/json or */*+json, parameters ignored."""
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or ("/" in media and media.endswith("+json"))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def body_digest_input(body: bytes, content_type: str | None, canonical: bool) -> bytes:
    """The body's part of the fingerprint: canonical JSON of a JSON body, else the bytes."""
    if canonical and is_json(content_type):
        try:
            return canonical_json(json.loads(body.decode("utf-8"), parse_constant=_no_constant))
        except (ValueError, TypeError, RecursionError):
            return body
    return body


def fingerprint(method: str, path_qs: str, body: bytes, content_type: str | None,
                canonical: bool) -> bytes:
    """SHA-256 over `METHOD\\n` + path-with-query + `\\n` + the body's digest input."""
    digest = hashlib.sha256(f"{method.upper()}\n{path_qs}\n".encode("latin-1", "replace"))
    digest.update(body_digest_input(body, content_type, canonical))
    return digest.digest()


def safe_headers(headers: Iterable[tuple[str, str]]) -> Headers:
    """The headers a stored response keeps (lowercase names): none of UNSTORED, no
    `proxy-*` and none that the response's Connection header names (hop-by-hop)."""
    pairs = [(n.lower(), v) for n, v in headers]
    named = {token.strip(" \t").lower() for n, v in pairs if n == "connection"
             for token in v.split(",")}
    return [(n, v) for n, v in pairs
            if n not in UNSTORED and n not in named and not n.startswith("proxy-")]


def _head(status: int, flags: int, headers: Sequence[tuple[str, str]]) -> bytes:
    parts = [MAGIC, struct.pack(">HBH", status, flags, len(headers))]
    for name, value in headers:
        n, v = name.lower().encode("latin-1"), value.encode("latin-1")
        if len(n) > 0xFF or len(v) > 0xFFFF:
            raise ValueError("a response header is too long to store")
        parts += [struct.pack(">B", len(n)), n, struct.pack(">H", len(v)), v]
    return b"".join(parts)


def encode(status: int, headers: Headers, body: bytes, limit: int) -> bytes:
    """The stored form of a response; its body's length alone when over `limit`."""
    head = _head(status, 0, headers)
    if len(head) + len(body) <= limit:
        return head + body
    return _head(status, BODY_NOT_STORED, headers) + struct.pack(">Q", len(body))


def decode(data: bytes) -> tuple[int, Headers, bytes | None, int] | None:
    """(status, headers, body or None when not stored, body length) of a stored response;
    None for bytes this format does not describe."""
    if len(data) < 9 or data[:4] != MAGIC:
        return None
    status, flags, count = struct.unpack_from(">HBH", data, 4)
    at, headers = 9, []
    try:
        for _ in range(count):
            (n,) = struct.unpack_from(">B", data, at)
            name = data[at + 1:at + 1 + n].decode("latin-1")
            (v,) = struct.unpack_from(">H", data, at + 1 + n)
            start = at + 3 + n
            if start + v > len(data):
                return None
            headers.append((name, data[start:start + v].decode("latin-1")))
            at = start + v
        if not 100 <= status <= 999:
            return None
        if not flags & BODY_NOT_STORED:
            return status, headers, data[at:], len(data) - at
        if at + 8 != len(data):
            return None
        (length,) = struct.unpack_from(">Q", data, at)
    except struct.error:
        return None
    return status, headers, None, length


def problem(options: Options, status: int, code: str, title: str, detail: str,
            headers: Headers | None = None) -> Response:
    """An application/problem+json response (RFC 9457) whose type is `code`."""
    out = list(headers or [])
    kind = code
    if options.docs_url:
        kind = f"{options.docs_url}#{code}"
        out.append(("link", f'<{options.docs_url}>; rel="describedby"; type="text/html"'))
    body = {"type": kind, "code": code, "title": title, "status": status, "detail": detail}
    out.append(("content-type", "application/problem+json"))
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    out.append(("content-length", str(len(data))))
    return Response(status, out, data)


def missing(options: Options) -> Response:
    return problem(options, 400, "idempotency-key-missing", "Idempotency-Key is missing",
                   "This operation requires an Idempotency-Key header.")


def invalid(options: Options) -> Response:
    return problem(options, 400, "idempotency-key-invalid", "Idempotency-Key is invalid",
                   INVALID_DETAIL)


def _seconds_until(timestamp: Any, present: bool) -> str:
    """Whole seconds (at least 1) from now until a receipt's timestamp."""
    if not present:
        return "1"
    now = datetime.datetime.now(datetime.timezone.utc)
    left = (timestamp.ToDatetime(tzinfo=datetime.timezone.utc) - now).total_seconds()
    return str(max(1, math.ceil(left)))


def replay(options: Options, stored: bytes) -> Response:
    """The replay of a stored response, marked `Idempotent-Replayed: true`."""
    decoded = decode(stored)
    if decoded is None:
        return problem(options, 500, "idempotency-response-unreadable",
                       "Stored response cannot be replayed",
                       "The stored response of this key is not one this middleware wrote.")
    status, headers, body, length = decoded
    if body is not None:
        headers = [h for h in headers if h[0] != "content-length"]
        headers += [(REPLAYED, "true"), ("content-length", str(len(body)))]
        return Response(status, headers, body)
    kept = [h for h in headers if h[0] not in ("content-type", "content-length")]
    kept.append((REPLAYED, "true"))
    return problem(options, status, "idempotency-response-not-stored",
                   "The response was not stored",
                   f"This request was handled; its response body ({length} bytes) was too "
                   "large to keep, so it cannot be replayed.", kept)


def answer(options: Options, result: Answer) -> Response:
    """The HTTP answer to a Claim that did not grant a lease."""
    receipt = result.receipt
    if result.decision is Decision.COMPLETED:
        if receipt.HasField("response_pruned_at") or not result.response:
            return problem(options, 422, "idempotency-key-expired", "Idempotency-Key is used up",
                           "This key was used and its response is no longer kept; use a new key.")
        return replay(options, result.response)
    if result.decision is Decision.IN_FLIGHT:
        after = _seconds_until(receipt.lease_expires_at, receipt.HasField("lease_expires_at"))
        return problem(options, 409, "idempotency-request-in-progress",
                       "A request with this Idempotency-Key is still being processed",
                       "Retry the request later; it will get the same response.",
                       [("retry-after", after)])
    if result.decision is Decision.RETRY_SCHEDULED:
        after = _seconds_until(receipt.next_attempt_at, receipt.HasField("next_attempt_at"))
        return problem(options, 503, "idempotency-retry-scheduled",
                       "The last attempt of this request failed",
                       "Retry the request later to run it again.", [("retry-after", after)])
    if result.decision is Decision.QUARANTINED:
        return problem(options, 422, "idempotency-key-expired", "Idempotency-Key is used up",
                       "Every attempt of this request failed; use a new Idempotency-Key.")
    return problem(options, 422, "idempotency-key-reused", "Idempotency-Key is already used",
                   "This key was used with another request (method, path or body); use a "
                   "new key for a new request.")


#: Claim failures answered 503 (try again later) rather than raised.
UNAVAILABLE_CODES = frozenset({
    grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
})


def claim_failed(options: Options, error: ClaimdError) -> Response | None:
    """503 with Retry-After when a tenant quota refused the Claim (its delay in whole
    seconds, rounded up, at least 1) and with Retry-After: 1 when claimd is unreachable or
    slow; None (raise it) else. The handler does not run either way."""
    if isinstance(error, QuotaError):
        return problem(options, 503, "idempotency-quota-exceeded",
                       "Idempotency store quota exceeded",
                       "This service is over its quota of the idempotency store; retry after "
                       "Retry-After seconds.", [("retry-after", retry_after_seconds(error))])
    if error.code not in UNAVAILABLE_CODES:
        return None
    return problem(options, 503, "idempotency-store-unavailable",
                   "Idempotency store unavailable",
                   f"The idempotency store could not be asked ({error.code.name}); the request "
                   "was not handled. Retry it later.", [("retry-after", "1")])


def retry_after_seconds(error: QuotaError) -> str:
    """A quota's delay as `Retry-After`: whole seconds, rounded up, at least 1."""
    return str(max(1, math.ceil(error.retry_after)))


def settle_as_retry(options: Options, status: int) -> bool:
    """Whether a produced response is given back with Retry instead of stored."""
    return options.retry_server_errors and status >= 500


ClientOf = Callable[[Any], str]
