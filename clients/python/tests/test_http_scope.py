"""Whose key it is, through real HTTP against the real claimd, on every kind of mounting
(_apps.py): two callers with other credentials and the same Idempotency-Key and body each
run the handler and get their own order, never the other's stored response (the
Authorization header; the session cookie named by `session_cookie`; Django's signed-in
user); a replay never carries Set-Cookie or headers the Connection header names."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import httpx
import pytest

import _apps
import _settings
from claimd import Claims, _http

BODY = b'{"amount":5}'


@pytest.fixture(params=_apps.KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def post(url: str, key: str, **headers: str) -> httpx.Response:
    sent = {"content-type": "application/json", "idempotency-key": key, **headers}
    return httpx.post(url + "/orders", content=BODY, headers=sent, timeout=60)


def new_key() -> str:
    return f"scope-{secrets.token_hex(8)}"


def test_two_users_with_one_key_and_body_each_run_their_handler(kind: str) -> None:
    key = new_key()
    with _apps.serve(kind) as url:
        alice = post(url, key, authorization="Bearer token-A")
        bob = post(url, key, authorization="Bearer token-B")
        alice_again = post(url, key, authorization="Bearer token-A")
        bob_again = post(url, key, authorization="Bearer token-B")
    assert alice.status_code == bob.status_code == 201, (alice.text, bob.text)
    assert "idempotent-replayed" not in bob.headers
    assert bob.json()["order"] != alice.json()["order"]
    assert alice_again.content == alice.content and bob_again.content == bob.content
    assert alice_again.headers["idempotent-replayed"] == "true"
    assert _apps.runs[key] == 2
    # The claim key is the Authorization header's digest and the key: nothing of the token.
    with Claims(**_settings.client_kwargs()) as claims:
        client = _http.default_client([b"Bearer token-A"], [], None)
        receipt = claims.get(_apps.NAMESPACE, _http.claim_key(client, key))
    assert receipt.key.startswith("auth%3A") and "token" not in receipt.key


def test_two_session_cookies_with_one_key_and_body_each_run_their_handler(kind: str) -> None:
    key = new_key()
    with _apps.serve(kind, session_cookie="sid") as url:
        first = post(url, key, cookie="theme=dark; sid=s%3Aone.sig")
        second = post(url, key, cookie="sid=s%3Atwo.sig; theme=dark")
        first_again = post(url, key, cookie="sid=s%3Aone.sig")
        anonymous = post(url, key, cookie="theme=dark")  # no sid: the anonymous scope
    assert first.status_code == second.status_code == anonymous.status_code == 201
    orders = {first.json()["order"], second.json()["order"], anonymous.json()["order"]}
    assert len(orders) == 3
    assert first_again.content == first.content
    assert first_again.headers["idempotent-replayed"] == "true"
    assert _apps.runs[key] == 3


def test_a_replay_never_carries_set_cookie(kind: str) -> None:
    key = new_key()
    with _apps.serve(kind) as url:
        first = post(url, key)
        again = post(url, key)
    assert first.headers["set-cookie"].startswith(f"seen={first.json()['order']}")
    assert again.headers["idempotent-replayed"] == "true"
    assert "set-cookie" not in again.headers
    assert again.headers["x-order"] == first.headers["x-order"]


@pytest.mark.parametrize("asgi_kind", _apps.ASGI_KINDS)
def test_a_replay_never_carries_headers_the_connection_header_names(asgi_kind: str) -> None:
    # WSGI servers refuse hop-by-hop headers from the app (PEP 3333): ASGI apps only.
    key = new_key()
    with _apps.serve(asgi_kind) as url:
        first = httpx.post(url + "/hop", headers={"idempotency-key": key}, timeout=60)
        again = httpx.post(url + "/hop", headers={"idempotency-key": key}, timeout=60)
    assert first.headers["x-hop"] == "1" and first.headers["connection"] == "x-hop"
    assert again.headers["idempotent-replayed"] == "true" and again.content == b"hop"
    assert "x-hop" not in again.headers and "x-hop" not in again.headers.get("connection", "")
    assert again.headers["x-order"] == first.headers["x-order"]


@pytest.fixture
def django_url() -> Iterator[str]:
    with _apps.serve("django") as base:
        yield base


def signed_in(url: str, user: str) -> httpx.Client:
    """A client holding a Django session of `user` (Django's login, over HTTP)."""
    client = httpx.Client(base_url=url, timeout=60)
    response = client.post("/login", data={"username": user, "password": "pw"},
                           headers={"idempotency-key": new_key()})
    assert response.status_code == 200, response.text
    assert "sessionid" in client.cookies
    return client


def test_on_django_a_signed_in_user_is_one_scope_across_sessions(django_url: str) -> None:
    key = new_key()
    headers = {"content-type": "application/json", "idempotency-key": key}
    alice, alice2, bob = (signed_in(django_url, user) for user in ("alice", "alice", "bob"))
    try:
        assert alice.cookies["sessionid"] != alice2.cookies["sessionid"]
        first = alice.post("/orders", content=BODY, headers=headers)
        same_user = alice2.post("/orders", content=BODY, headers=headers)
        other_user = bob.post("/orders", content=BODY, headers=headers)
    finally:
        for client in (alice, alice2, bob):
            client.close()
    assert first.status_code == other_user.status_code == 201
    assert same_user.content == first.content
    assert same_user.headers["idempotent-replayed"] == "true"
    assert other_user.json()["order"] != first.json()["order"]
    assert "idempotent-replayed" not in other_user.headers
    assert _apps.runs[key] == 2
