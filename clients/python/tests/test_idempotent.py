"""`claimd.idempotent` (plain and `async def` functions) and `claimd.fingerprint_of` against
the real claimd: one run per key under concurrency, stored values replayed, exceptions
giving the key back (PermanentError quarantining it), every other decision a typed
`NotClaimed`, a dead holder taken over, claimd down."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest

import _settings
import claimd
from claimd import AsyncClaims, ClaimdError, Claims, Decision

NS = "py-idempotent-tests"
HOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "idempotent_holder.py")


class Counter:
    """Runs per key, from any thread."""

    def __init__(self) -> None:
        self.runs: collections.Counter[str] = collections.Counter()
        self.lock = threading.Lock()

    def ran(self, key: str) -> int:
        with self.lock:
            self.runs[key] += 1
            return sum(self.runs.values())


def test_twenty_concurrent_calls_run_the_function_once_and_return_one_value(
    claims: Claims, key: str
) -> None:
    counter = Counter()
    gate = threading.Event()

    @claimd.idempotent(claims, NS, key=lambda order_id, amount: order_id,
                       fingerprint=lambda order_id, amount: {"amount": amount})
    def charge(order_id: str, amount: int) -> dict[str, Any]:
        n = counter.ran(order_id)
        gate.wait(0.5)
        return {"charged": amount, "run": n, "attempt": claimd.current_lease().attempt}

    with ThreadPoolExecutor(20) as pool:
        values = list(pool.map(lambda _: charge(key, 5), range(20)))
    assert counter.runs[key] == 1
    assert all(v == {"charged": 5, "run": 1, "attempt": 1} for v in values), values


def test_a_duplicate_returns_the_stored_value_and_other_arguments_are_a_conflict(
    claims: Claims, key: str
) -> None:
    counter = Counter()

    @claimd.idempotent(claims, NS, key=lambda k, body: k, fingerprint=lambda k, body: body)
    def handle(k: str, body: dict[str, int]) -> list[int]:
        counter.ran(k)
        lease = claimd.current_lease()
        lease.checkpoint(b"before the side effect")  # the fence: raises if taken over
        return [body["a"], lease.attempt]

    assert handle(key, {"a": 1, "b": 2}) == [1, 1]
    assert handle(key, {"b": 2, "a": 1}) == [1, 1]  # the same JSON value
    with pytest.raises(claimd.Conflict) as caught:
        handle(key, {"a": 2})
    assert isinstance(caught.value, claimd.NotClaimed)
    assert caught.value.decision is Decision.CONFLICT
    assert key not in str(caught.value) and "CONFLICT" in str(caught.value)
    assert counter.runs[key] == 1


@dataclasses.dataclass
class Receipt:
    id: str
    cents: int


class ReceiptSerializer:
    def dumps(self, value: Any) -> bytes:
        return json.dumps(dataclasses.asdict(value)).encode()

    def loads(self, data: bytes) -> Any:
        return Receipt(**json.loads(data))


def test_a_serializer_stores_dataclasses(claims: Claims, key: str) -> None:
    calls: list[str] = []

    @claimd.idempotent(claims, NS, key=lambda k: k, serializer=ReceiptSerializer())
    def make(k: str) -> Receipt:
        calls.append(k)
        return Receipt(k, 42)

    assert make(key) == Receipt(key, 42)
    assert make(key) == Receipt(key, 42)
    assert calls == [key]


def test_an_exception_retries_and_propagates_then_retry_scheduled(
    claims: Claims, key: str
) -> None:
    class Declined(Exception):
        pass

    @claimd.idempotent(claims, NS, key=lambda k: k)
    def pay(k: str) -> None:
        raise Declined("card 4242 declined")

    with pytest.raises(Declined):
        pay(key)
    with pytest.raises(claimd.RetryScheduled) as caught:
        pay(key)
    assert caught.value.next_attempt_at is not None
    assert "RETRY_SCHEDULED" in str(caught.value)
    receipt = claims.get(NS, key)
    assert receipt.last_error.endswith("Declined") and "4242" not in receipt.last_error


def test_a_permanent_error_quarantines_the_key(claims: Claims, key: str) -> None:
    class Invalid(claimd.PermanentError):
        pass

    @claimd.idempotent(claims, NS, key=lambda k: k)
    def pay(k: str) -> None:
        raise Invalid("secret payload")

    with pytest.raises(Invalid):
        pay(key)
    with pytest.raises(claimd.Quarantined) as caught:
        pay(key)
    assert caught.value.last_error.endswith("Invalid")
    assert "secret" not in str(caught.value)


def test_a_result_the_serializer_cannot_write_quarantines_the_key(
    claims: Claims, key: str
) -> None:
    calls: list[str] = []

    @claimd.idempotent(claims, NS, key=lambda k: k)
    def odd(k: str) -> object:
        calls.append(k)
        return object()

    with pytest.raises(TypeError):
        odd(key)
    with pytest.raises(claimd.Quarantined) as caught:
        odd(key)
    assert caught.value.last_error == "TypeError"
    assert calls == [key]


def test_a_result_too_large_to_store_settles_the_key_and_is_not_run_again(
    claims: Claims, key: str
) -> None:
    calls: list[str] = []

    @claimd.idempotent(claims, NS, key=lambda k: k)
    def big(k: str) -> str:
        calls.append(k)
        return "x" * 70_000

    assert len(big(key)) == 70_000
    with pytest.raises(claimd.NotClaimed) as caught:
        big(key)
    assert caught.value.decision is Decision.COMPLETED and "too large" in str(caught.value)
    assert calls == [key]


def test_in_flight_after_the_wait_raises_in_flight(claims: Claims, key: str) -> None:
    started, release = threading.Event(), threading.Event()

    @claimd.idempotent(claims, NS, key=lambda k: k, wait=0)
    def slow(k: str) -> int:
        started.set()
        release.wait(30)
        return 1

    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(slow, key)
        assert started.wait(30)
        with pytest.raises(claimd.InFlight) as caught:
            slow(key)
        assert caught.value.lease_expires_at is not None
        release.set()
        assert first.result() == 1
    assert slow(key) == 1


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_claimd_down_raises_unavailable_and_the_function_is_not_run(key: str) -> None:
    calls: list[str] = []
    with Claims(f"127.0.0.1:{free_port()}", timeout=2) as down:

        @claimd.idempotent(down, NS, key=lambda k: k)
        def work(k: str) -> None:
            calls.append(k)

        with pytest.raises(ClaimdError) as caught:
            work(key)
    assert caught.value.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    assert calls == []


def test_the_wrong_client_kind_and_a_non_str_key_are_refused(claims: Claims, key: str) -> None:
    @claimd.idempotent(claims, NS, key=lambda k: k)
    async def wrong(k: str) -> None:
        pass

    with pytest.raises(TypeError, match="AsyncClaims"):
        asyncio.run(wrong(key))

    @claimd.idempotent(claims, NS, key=lambda k: len(k))  # type: ignore[arg-type, return-value]
    def numbered(k: str) -> None:
        pass

    with pytest.raises(TypeError, match="key must return a str"):
        numbered(key)


@pytest.mark.slow
def test_a_holder_that_dies_mid_call_is_taken_over(claims: Claims, key: str) -> None:
    holder = subprocess.Popen([sys.executable, HOLDER, NS, key], stdout=subprocess.PIPE,
                              text=True, cwd=os.path.dirname(HOLDER))
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "running 1"
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()

    @claimd.idempotent(claims, NS, key=lambda k: k, wait=30)
    def work(k: str) -> int:
        return claimd.current_lease().attempt

    assert work(key) == 2  # the wait outlasts the dead holder's 1 s lease: a takeover
    assert work(key) == 2


def test_async_twenty_concurrent_calls_run_once_and_an_exception_retries(key: str) -> None:
    async def main() -> None:
        async with AsyncClaims(**_settings.client_kwargs()) as aclaims:
            runs: list[int] = []

            @claimd.idempotent(aclaims, NS, key=lambda k, amount: k,
                               fingerprint=lambda k, amount: amount)
            async def charge(k: str, amount: int) -> dict[str, int]:
                runs.append(amount)
                await asyncio.sleep(0.3)
                return {"amount": amount, "attempt": claimd.current_async_lease().attempt}

            values = await asyncio.gather(*(charge(key, 7) for _ in range(20)))
            assert runs == [7]
            assert all(v == {"amount": 7, "attempt": 1} for v in values)
            with pytest.raises(claimd.Conflict):
                await charge(key, 8)

            @claimd.idempotent(aclaims, NS, key=lambda k: k + "-fails", wait=0)
            async def fails(k: str) -> None:
                raise KeyError("secret")

            with pytest.raises(KeyError):
                await fails(key)
            with pytest.raises(claimd.RetryScheduled):
                await fails(key)

    asyncio.run(main())


def test_async_claims_made_on_first_use_and_in_flight(key: str) -> None:
    async def main() -> None:
        made: list[AsyncClaims] = []

        def client() -> AsyncClaims:
            made.append(AsyncClaims(**_settings.client_kwargs()))
            return made[-1]

        started, release = asyncio.Event(), asyncio.Event()

        @claimd.idempotent(client, NS, key=lambda k: k, wait=0)
        async def slow(k: str) -> str:
            started.set()
            await release.wait()
            return "done"

        first = asyncio.create_task(slow(key))
        await started.wait()
        with pytest.raises(claimd.InFlight):
            await slow(key)
        release.set()
        assert await first == "done"
        assert await slow(key) == "done"
        assert len(made) == 1
        await made[0].close()

    asyncio.run(main())


#: A response as @claimd/client/express stores it (clients/node's tests hold the same
#: bytes): either package replays what the other stored.
EXPRESS_STORED = bytes.fromhex(
    "49444b3200c90000020c636f6e74656e742d7479706500106170706c69636174696f6e2f6a736f6e"
    "07782d6f726465720001377b226964223a377d"
)
EXPRESS_NOT_STORED = bytes.fromhex("49444b3200c901000107782d6f726465720001370000000000011170")


def test_stored_responses_are_the_bytes_the_express_middleware_stores() -> None:
    from claimd import _http

    headers = [("content-type", "application/json"), ("x-order", "7")]
    assert _http.encode(201, headers, b'{"id":7}', 65_536) == EXPRESS_STORED
    assert _http.decode(EXPRESS_STORED) == (201, headers, b'{"id":7}', 8)
    assert _http.encode(201, [("x-order", "7")], b"x" * 70_000, 1_024) == EXPRESS_NOT_STORED
    assert _http.decode(EXPRESS_NOT_STORED) == (201, [("x-order", "7")], None, 70_000)


def test_fingerprint_of_is_canonical_for_json_and_plain_for_bytes_and_str() -> None:
    assert len(claimd.fingerprint_of(b"abc")) == 32
    assert claimd.fingerprint_of(b"abc") == claimd.fingerprint_of("abc")
    assert claimd.fingerprint_of({"a": 1, "b": [1, 2.0]}) == claimd.fingerprint_of(
        {"b": [1, 2], "a": 1})
    assert claimd.fingerprint_of({"a": 1}) != claimd.fingerprint_of({"a": 2})
    assert claimd.canonical_json({"é": "ü", "a": None}) == '{"a":null,"é":"ü"}'.encode()
    with pytest.raises(TypeError, match="fingerprint_of takes"):
        claimd.fingerprint_of(object())


def test_a_str_fingerprint_is_refused_naming_the_field(claims: Claims, key: str) -> None:
    with pytest.raises(TypeError, match="^fingerprint must be bytes"):
        claims.claim(NS, key, "not a digest")  # type: ignore[arg-type]


def test_enum_values_show_by_name() -> None:
    assert str(Decision.IN_FLIGHT) == "IN_FLIGHT"
    assert f"{claimd.State.COMPLETED}" == "COMPLETED"
    assert int(Decision.IN_FLIGHT) == 2
