"""The asyncio client (`AsyncClaims`, `AsyncLease`) against the real claimd: the same cases
as test_sync, each test running its own event loop with asyncio.run."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable

import grpc
import pytest

import _settings
from claimd import (
    Answer,
    AsyncClaims,
    AsyncLease,
    ClaimdError,
    Claims,
    Decision,
    Lease,
    State,
)

FP = _settings.FINGERPRINT


def run(scenario: Callable[[AsyncClaims], Awaitable[None]]) -> None:
    """Runs `scenario` with a fresh AsyncClaims in a fresh event loop."""

    async def main() -> None:
        async with AsyncClaims(**_settings.client_kwargs()) as claims:
            await scenario(claims)

    asyncio.run(main())


def held(result: AsyncLease | Answer) -> AsyncLease:
    assert isinstance(result, AsyncLease), f"expected CLAIMED, got {result!r}"
    return result


def answered(result: AsyncLease | Answer, decision: Decision) -> Answer:
    assert isinstance(result, Answer), f"expected {decision.name}, got {result!r}"
    assert result.decision is decision, result
    return result


async def claim_when_due(claims: AsyncClaims, namespace: str, key: str) -> AsyncLease:
    """Claims `key` (each Claim waiting up to 2 s) until it is CLAIMED, for at most 10 s."""
    deadline = time.monotonic() + 10
    while True:
        result = await claims.claim(namespace, key, FP, lease=30, wait=2)
        if isinstance(result, AsyncLease):
            return result
        assert time.monotonic() < deadline, f"never CLAIMED again, last {result!r}"
        await asyncio.sleep(0.1)


def test_async_claims_answer_claimed_in_flight_completed_and_conflict(
    namespace: str, key: str
) -> None:
    async def scenario(claims: AsyncClaims) -> None:
        lease = held(await claims.claim(namespace, key, FP, lease=30, recovery_payload=b"b"))
        assert lease.attempt == 1
        assert lease.receipt.recovery_payload == b"b"
        answered(await claims.claim(namespace, key, FP), Decision.IN_FLIGHT)
        answered(await claims.claim(namespace, key, b"other"), Decision.CONFLICT)
        assert (await lease.complete(b"response")).state == State.COMPLETED
        replay = answered(await claims.claim(namespace, key, FP), Decision.COMPLETED)
        assert replay.response == b"response"

    run(scenario)


@pytest.mark.slow
def test_async_retry_is_scheduled_then_claimed_and_quarantine_answers_quarantined(
    namespace: str, key: str
) -> None:
    async def scenario(claims: AsyncClaims) -> None:
        lease = held(await claims.claim(namespace, key, FP))
        await lease.checkpoint(b"halfway")
        assert (await lease.retry("timeout upstream", retry_after=1)).state == State.RETRY_WAIT
        answered(await claims.claim(namespace, key, FP), Decision.RETRY_SCHEDULED)
        again = await claim_when_due(claims, namespace, key)
        assert again.attempt == 2
        assert again.receipt.checkpoint == b"halfway"
        assert (await again.quarantine("poison")).state == State.QUARANTINED
        dead = answered(await claims.claim(namespace, key, FP), Decision.QUARANTINED)
        assert dead.receipt.last_error == "poison"

    run(scenario)


@pytest.mark.slow
def test_the_async_heartbeat_keeps_a_one_second_lease_alive_past_three_seconds(
    namespace: str, key: str
) -> None:
    async def scenario(claims: AsyncClaims) -> None:
        lease = held(await claims.claim(namespace, key, FP, lease=1))
        await asyncio.sleep(3.3)
        answered(await claims.claim(namespace, key, FP, lease=1), Decision.IN_FLIGHT)
        assert not lease.lost.is_set()
        assert (await lease.complete()).attempt == 1

    run(scenario)


@pytest.mark.slow
def test_an_async_holder_whose_loop_stalled_learns_of_the_takeover_through_lost(
    namespace: str, key: str
) -> None:
    taken: list[Lease] = []

    def take_over() -> None:
        with Claims(**_settings.client_kwargs()) as other:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                result = other.claim(namespace, key, FP, lease=30, wait=2)
                if isinstance(result, Lease):
                    taken.append(result)
                    result.complete(b"the other holder's")
                    return
                time.sleep(0.1)

    async def scenario(claims: AsyncClaims) -> None:
        lease = held(await claims.claim(namespace, key, FP, lease=1))
        thief = threading.Thread(target=take_over)
        thief.start()
        thief.join()  # blocks the event loop: the heartbeat task cannot run, as in a stall
        assert taken, "the other caller never took the work over"
        await asyncio.wait_for(lease.lost.wait(), timeout=5)
        assert lease.lost_error is not None
        # The token is checked before the state: ABORTED although the other one completed.
        assert lease.lost_error.code == grpc.StatusCode.ABORTED
        with pytest.raises(ClaimdError):
            await lease.complete(b"too late")
        assert (await claims.get(namespace, key)).response == b"the other holder's"

    run(scenario)


def test_async_with_completes_with_the_response_and_retries_on_an_exception(
    namespace: str, key: str
) -> None:
    async def scenario(claims: AsyncClaims) -> None:
        async with held(await claims.claim(namespace, key, FP)) as lease:
            lease.response = b"from the block"
        assert (await claims.get(namespace, key)).response == b"from the block"

        failing = key + "-fails"
        with pytest.raises(KeyError):
            async with held(await claims.claim(namespace, failing, FP)):
                raise KeyError("secret payload")
        receipt = await claims.get(namespace, failing)
        assert receipt.state == State.RETRY_WAIT
        assert receipt.last_error == "KeyError"

    run(scenario)


def test_a_cancelled_async_with_block_only_stops_the_heartbeats(
    namespace: str, key: str
) -> None:
    async def scenario(claims: AsyncClaims) -> None:
        entered = asyncio.Event()
        holding: list[AsyncLease] = []

        async def work() -> None:
            async with held(await claims.claim(namespace, key, FP, lease=30)) as lease:
                holding.append(lease)
                entered.set()
                await asyncio.sleep(60)

        task = asyncio.create_task(work())
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not holding[0].settled
        assert holding[0]._task.done()
        assert (await claims.get(namespace, key)).state == State.PROCESSING

    run(scenario)


def test_an_async_waiting_claim_gets_the_completed_response(namespace: str, key: str) -> None:
    async def scenario(claims: AsyncClaims) -> None:
        lease = held(await claims.claim(namespace, key, FP, lease=30))

        async def finish() -> None:
            await asyncio.sleep(0.5)
            await lease.complete(b'{"status": 201}')

        started = time.monotonic()
        answer, _ = await asyncio.gather(claims.claim(namespace, key, FP, wait=10), finish())
        assert answered(answer, Decision.COMPLETED).response == b'{"status": 201}'
        assert time.monotonic() - started >= 0.3
        short = key + "-short"
        other = held(await claims.claim(namespace, short, FP, lease=30))
        answered(await claims.claim(namespace, short, FP, wait=0.3), Decision.IN_FLIGHT)
        await other.complete()

    run(scenario)


def test_async_errors_carry_the_code_and_the_field(namespace: str) -> None:
    async def scenario(claims: AsyncClaims) -> None:
        with pytest.raises(ClaimdError) as empty:
            await claims.claim(namespace, "", FP)
        assert empty.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert empty.value.field == "key"
        with pytest.raises(ClaimdError) as unknown:
            await claims.get(namespace, "never-claimed")
        assert unknown.value.code == grpc.StatusCode.NOT_FOUND
        assert unknown.value.field is None

    run(scenario)
