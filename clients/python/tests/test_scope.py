"""Whose key it is, and what a stored response keeps, as pure functions (no claimd, no
server): the default scope's three worked examples of the shared spec (the four packages
give the same claim keys), the session cookie's parsing, the WSGI environ's reading of
them, and the headers never stored."""

from __future__ import annotations

import pytest

from claimd import _http
from claimd.wsgi import environ_client

TOKEN_A = "auth:554b8cec38a5a3f3b9baf98b21f33155c74c0520c6e4db8bd91ac366fa3775ed"
SID = "cookie:b55bfccadad2d5e3cd608c839d764d9b794fed8effba825a3fdbade6fd7de562"


def test_an_authorization_header_scopes_the_key_by_its_digest() -> None:
    client = _http.default_client([b"Bearer token-A"], [], None)
    assert client == TOKEN_A
    assert _http.claim_key(client, "order-1") == (
        "auth%3A554b8cec38a5a3f3b9baf98b21f33155c74c0520c6e4db8bd91ac366fa3775ed order-1")


def test_without_authorization_the_named_session_cookie_scopes_the_key_by_its_digest() -> None:
    client = _http.default_client([], [b"a=1; sid=s%3Aabc.def; b=2"], "sid")
    assert client == SID
    assert _http.claim_key(client, "order-1") == (
        "cookie%3Ab55bfccadad2d5e3cd608c839d764d9b794fed8effba825a3fdbade6fd7de562 order-1")


def test_with_neither_the_key_is_anonymous() -> None:
    assert _http.default_client([], [], None) == "anonymous"
    assert _http.claim_key(_http.default_client([], [], None), "order-1") == "anonymous order-1"
    # A cookie is a scope only when the app names it.
    assert _http.default_client([], [b"sid=s%3Aabc.def"], None) == "anonymous"
    assert _http.default_client([], [b"other=1"], "sid") == "anonymous"


def test_authorization_wins_over_the_session_cookie_and_lines_join_with_a_comma() -> None:
    assert _http.default_client([b"Bearer token-A"], [b"sid=s%3Aabc.def"], "sid") == TOKEN_A
    joined = _http.default_client([b"Bearer token-A, Basic eA=="], [], None)
    assert _http.default_client([b"Bearer token-A", b"Basic eA=="], [], None) == joined
    assert joined != TOKEN_A


def test_the_cookie_is_read_as_sent_and_its_first_occurrence_wins() -> None:
    lines = [b"x=1;sid=first;  sid=second", b"sid=third"]
    assert _http.cookie_value(lines, "sid") == b"first"
    assert _http.cookie_value([b"sid=a=b"], "sid") == b"a=b"  # after the first '='
    assert _http.cookie_value([b"SID=upper; sidx=1; sid"], "sid") is None
    assert _http.cookie_value([b"other=1", b" sid=s%3Aabc.def "], "sid") == b"s%3Aabc.def"


def test_a_wsgi_environ_gives_the_same_scope_as_the_header_bytes() -> None:
    assert environ_client({"HTTP_AUTHORIZATION": "Bearer token-A"}, None) == TOKEN_A
    environ = {"HTTP_COOKIE": "a=1; sid=s%3Aabc.def; b=2"}
    assert environ_client(environ, "sid") == SID
    assert environ_client(environ, None) == "anonymous"
    # latin-1 as received: the é of a header is one byte, 0xE9.
    expected = _http.default_client([b"Bearer caf\xe9"], [], None)
    assert environ_client({"HTTP_AUTHORIZATION": "Bearer caf\xe9"}, None) == expected


@pytest.mark.parametrize("name", ["", "a=b", "a;b", "a b", "caf\xe9"])
def test_a_session_cookie_that_is_no_cookie_name_is_refused(name: str) -> None:
    with pytest.raises(TypeError, match="session_cookie"):
        _http.Options.make("ns", ["POST"], None, True, 1, 1, 10, False, True, None, name)


def test_set_cookie_hop_by_hop_and_connection_named_headers_are_never_stored() -> None:
    headers = [
        ("Content-Type", "application/json"), ("Set-Cookie", "session=secret"),
        ("set-cookie", "other=1"), ("Connection", "keep-alive, X-Hop"),
        ("Connection", "x-other"), ("X-Hop", "1"), ("x-other", "2"),
        ("Keep-Alive", "timeout=5"), ("Transfer-Encoding", "chunked"), ("Upgrade", "h2c"),
        ("TE", "trailers"), ("Trailer", "x-checksum"), ("Proxy-Authenticate", "Basic"),
        ("Proxy-Anything", "1"), ("Content-Length", "2"), ("Date", "today"),
        ("Idempotent-Replayed", "true"), ("X-Order", "7"), ("Location", "/orders/7"),
    ]
    assert _http.safe_headers(headers) == [
        ("content-type", "application/json"), ("x-order", "7"), ("location", "/orders/7")]
