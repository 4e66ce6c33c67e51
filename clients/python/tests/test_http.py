"""The Idempotency-Key rules through real HTTP against the real claimd, each test on every
kind of mounting (_apps.py): FastAPI under uvicorn with the ASGI middleware (`[asgi]`) and
with the dependency (`[depends]`), Flask under waitress with the WSGI middleware (`[wsgi]`),
Django under waitress with its middleware in MIDDLEWARE (`[django]`)."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

import _apps
import _settings
from claimd import Claims

APPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_apps.py")


@pytest.fixture(params=_apps.KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def url(kind: str) -> Iterator[str]:
    with _apps.serve(kind) as base:
        yield base


def new_key() -> str:
    return f"k-{secrets.token_hex(8)}"


def post(url: str, path: str, key: str | None, body: bytes | None = None,
         content_type: str = "application/json") -> httpx.Response:
    headers = {"content-type": content_type}
    if key is not None:
        headers["idempotency-key"] = key
    return httpx.post(url + path, content=body if body is not None else b'{"amount":5}',
                      headers=headers, timeout=60)


def is_problem(response: httpx.Response, status: int, code: str) -> dict[str, object]:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/problem+json")
    problem: dict[str, object] = response.json()
    assert problem["code"] == code and problem["type"] == code, problem
    return problem


def test_twenty_concurrent_retries_run_the_handler_once_and_all_get_one_response(
    url: str,
) -> None:
    key = new_key()
    with ThreadPoolExecutor(20) as pool:
        responses = list(pool.map(lambda _: post(url, "/orders?delay=0.5", key), range(20)))
    assert _apps.runs[key] == 1
    assert {r.status_code for r in responses} == {201}
    assert len({r.content for r in responses}) == 1
    assert len({r.headers["x-order"] for r in responses}) == 1
    assert sorted(r.headers.get("idempotent-replayed", "") for r in responses) == (
        [""] + ["true"] * 19)
    assert responses[0].json()["amount"] == 5


def test_a_5xx_response_is_stored_and_replayed_and_the_handler_not_run_again(url: str) -> None:
    key = new_key()
    first = post(url, "/fail", key)
    assert first.status_code == 500 and "idempotent-replayed" not in first.headers
    for _ in range(3):
        again = post(url, "/fail", key)
        assert again.status_code == 500
        assert again.content == first.content
        assert again.headers["idempotent-replayed"] == "true"
    assert _apps.runs[key] == 1


def test_an_oversized_response_settles_the_key_and_the_handler_is_not_run_again(
    url: str,
) -> None:
    key = new_key()
    first = post(url, "/big", key)
    assert first.status_code == 200 and first.content == b"x" * _apps.BIG
    for _ in range(2):
        again = post(url, "/big", key)
        problem = is_problem(again, 200, "idempotency-response-not-stored")
        assert f"({_apps.BIG} bytes)" in str(problem["detail"])
        assert again.headers["idempotent-replayed"] == "true"
        assert again.headers["x-order"] == first.headers["x-order"]
    assert _apps.runs[key] == 1


def test_another_body_with_the_same_key_is_422(url: str) -> None:
    key = new_key()
    assert post(url, "/orders", key, b'{"amount":5}').status_code == 201
    is_problem(post(url, "/orders", key, b'{"amount":6}'), 422, "idempotency-key-reused")
    assert _apps.runs[key] == 1


def test_the_same_key_on_another_route_is_422(url: str) -> None:
    key = new_key()
    assert post(url, "/orders", key).status_code == 201
    is_problem(post(url, "/payments", key), 422, "idempotency-key-reused")
    assert _apps.runs[key] == 1


def test_canonical_json_bodies_are_one_request_not_a_conflict(url: str) -> None:
    key = new_key()
    first = post(url, "/orders", key, b'{ "amount": 5, "currency": "EUR" }')
    again = post(url, "/orders", key, b'{"currency":"EUR","amount":5}')
    assert first.status_code == again.status_code == 201
    assert again.content == first.content and again.headers["idempotent-replayed"] == "true"
    assert _apps.runs[key] == 1


@pytest.mark.parametrize("value", ["dGVzdA==", "order@123", '"quoted \\"key\\""'])
def test_bare_and_quoted_keys_are_accepted(url: str, value: str) -> None:
    key = f"{value}-{secrets.token_hex(4)}" if not value.startswith('"') else (
        value[:-1] + secrets.token_hex(4) + '"')
    first = post(url, "/orders", key)
    assert first.status_code == 201, first.text
    assert post(url, "/orders", key).headers["idempotent-replayed"] == "true"


def test_a_missing_key_is_400_and_a_malformed_one_too(url: str) -> None:
    is_problem(post(url, "/orders", None), 400, "idempotency-key-missing")
    for bad in ['"unterminated', "x" * 256, '"bad \\n escape"', '""']:
        problem = is_problem(post(url, "/orders", bad), 400, "idempotency-key-invalid")
        assert problem["detail"] == (
            "Idempotency-Key must be 1–255 printable ASCII characters, or a quoted string of them")
    assert _apps.runs[""] == 0
    listing = httpx.get(url + "/orders", timeout=30)  # GET is not covered
    assert listing.status_code == 200 and listing.json() == {"listing": "ok"}


def test_a_handler_that_raises_gives_the_key_back_and_its_error_is_only_the_type(
    url: str, kind: str
) -> None:
    key = new_key()
    first = post(url, "/raise", key)
    assert first.status_code == 500 and "idempotent-replayed" not in first.headers
    again = post(url, "/raise", key)
    # The key was given back with Retry: RETRY_SCHEDULED until its backoff is over.
    problem = is_problem(again, 503, "idempotency-retry-scheduled")
    assert int(again.headers["retry-after"]) >= 1
    assert "secret" not in str(problem) and key not in str(problem)
    assert _apps.runs[key] == 1
    with Claims(**_settings.client_kwargs()) as claims:
        receipt = claims.get(_apps.NAMESPACE, f"anonymous {key}")  # the claim key
    assert receipt.last_error == "Boom"


def test_retry_server_errors_gives_a_5xx_back_instead_of_storing_it(kind: str) -> None:
    key = new_key()
    with _apps.serve(kind, retry_server_errors=True) as base:
        assert post(base, "/fail", key).status_code == 500
        again = post(base, "/fail", key)
    is_problem(again, 503, "idempotency-retry-scheduled")
    assert int(again.headers["retry-after"]) >= 1
    assert _apps.runs[key] == 1


def test_a_request_still_running_after_the_wait_is_409_with_retry_after(kind: str) -> None:
    key = new_key()
    with _apps.serve(kind, wait=0) as base:
        first = threading.Thread(target=lambda: post(base, "/orders?delay=3", key))
        first.start()
        while _apps.runs[key] == 0:  # until the first request's handler runs
            threading.Event().wait(0.02)
        busy = post(base, "/orders?delay=3", key)  # the same request: the query counts
        first.join()
    problem = is_problem(busy, 409, "idempotency-request-in-progress")
    assert int(busy.headers["retry-after"]) >= 1
    assert key not in str(problem)
    assert _apps.runs[key] == 1


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_claimd_down_is_503_with_retry_after_and_the_handler_not_run(kind: str) -> None:
    key = new_key()
    with _apps.serve(kind, target=f"127.0.0.1:{free_port()}") as base:
        response = post(base, "/orders", key)
    problem = is_problem(response, 503, "idempotency-store-unavailable")
    assert response.headers["retry-after"] == "1"
    assert key not in str(problem)
    assert _apps.runs[key] == 0


@pytest.mark.slow
def test_a_holder_that_dies_mid_request_is_taken_over_by_a_retry(url: str, kind: str) -> None:
    key = new_key()
    holder = subprocess.Popen([sys.executable, APPS, kind, "--block", "--lease", "1"],
                              stdout=subprocess.PIPE, text=True, cwd=os.path.dirname(APPS))
    try:
        assert holder.stdout is not None
        port = int(holder.stdout.readline().split()[1])
        # The first request: its handler starts, then blocks; its process is killed.
        threading.Thread(target=lambda: _quietly(f"http://127.0.0.1:{port}", key),
                         daemon=True).start()
        assert holder.stdout.readline().strip() == "handling"
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The retry waits for the dead holder's lease to run out, takes over, and runs it.
    retry = post(url, "/orders", key)
    assert retry.status_code == 201, retry.text
    assert retry.json()["attempt"] == 2
    assert "idempotent-replayed" not in retry.headers
    assert _apps.runs[key] == 1  # in this process: the retry's run
    assert post(url, "/orders", key).content == retry.content


def _quietly(base: str, key: str) -> None:
    try:
        post(base, "/orders", key)
    except httpx.HTTPError:
        pass  # the server was killed
