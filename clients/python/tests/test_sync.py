"""The blocking client (`Claims`, `Lease`) against the real claimd: every decision, the
background heartbeat, a takeover reported through `lost`, the with block, checkpoints,
`wait`, the orphan and dead-letter calls."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import threading
import time

import grpc
import pytest

import _settings
from claimd import Answer, ClaimdError, Claims, Decision, Lease, OrphanReason, State
from claimd.v1 import claims_pb2

FP = _settings.FINGERPRINT
HOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "holder.py")


def held(result: Lease | Answer) -> Lease:
    """The lease of a CLAIMED answer; fails the test on any other."""
    assert isinstance(result, Lease), f"expected CLAIMED, got {result!r}"
    return result


def answered(result: Lease | Answer, decision: Decision) -> Answer:
    """The answer, which must have `decision`."""
    assert isinstance(result, Answer), f"expected {decision.name}, got {result!r}"
    assert result.decision is decision, result
    return result


def claim_when_due(claims: Claims, namespace: str, key: str, timeout: float = 10.0) -> Lease:
    """Claims `key` again and again (each Claim waiting up to 2 s) until it is CLAIMED."""
    deadline = time.monotonic() + timeout
    while True:
        result = claims.claim(namespace, key, FP, lease=30, wait=2)
        if isinstance(result, Lease):
            return result
        assert time.monotonic() < deadline, f"never CLAIMED again, last {result!r}"
        time.sleep(0.1)


def test_a_first_claim_holds_the_lease_and_a_duplicate_is_in_flight(
    claims: Claims, namespace: str, key: str
) -> None:
    lease = held(claims.claim(namespace, key, FP, lease=30, recovery_payload=b"body"))
    assert lease.decision is Decision.CLAIMED
    assert lease.attempt == 1
    assert lease.receipt.state == State.PROCESSING
    assert lease.receipt.recovery_payload == b"body"
    assert 29 <= lease.lease_seconds <= 30
    duplicate = answered(claims.claim(namespace, key, FP, delivery_attempt=1), Decision.IN_FLIGHT)
    assert duplicate.receipt.HasField("lease_expires_at")
    assert duplicate.receipt.attempt == 1
    lease.complete(b"done")


def test_a_completed_claim_replays_the_stored_response(
    claims: Claims, namespace: str, key: str
) -> None:
    lease = held(claims.claim(namespace, key, FP))
    receipt = lease.complete(b'{"posted": true}')
    assert receipt.state == State.COMPLETED
    assert lease.settled
    replay = answered(claims.claim(namespace, key, FP, delivery_attempt=2), Decision.COMPLETED)
    assert replay.response == b'{"posted": true}'
    assert replay.receipt.response == replay.response


@pytest.mark.slow
def test_a_retried_claim_is_retry_scheduled_until_due_then_claimed_with_its_checkpoint(
    claims: Claims, namespace: str, key: str
) -> None:
    lease = held(claims.claim(namespace, key, FP, lease=30))
    assert lease.checkpoint(b"step 2 of 3").checkpoint == b"step 2 of 3"
    receipt = lease.retry("upstream answered 503", retry_after=1)
    assert receipt.state == State.RETRY_WAIT
    assert receipt.last_error == "upstream answered 503"
    scheduled = answered(claims.claim(namespace, key, FP), Decision.RETRY_SCHEDULED)
    assert scheduled.receipt.HasField("next_attempt_at")
    again = claim_when_due(claims, namespace, key)
    assert again.attempt == 2
    assert again.receipt.checkpoint == b"step 2 of 3"
    again.complete()


def test_a_retried_claim_answers_retry_scheduled_with_when_it_is_due(
    claims: Claims, namespace: str, key: str
) -> None:
    lease = held(claims.claim(namespace, key, FP))
    receipt = lease.retry("the platform said 429", retry_after=60, count_attempt=False)
    assert receipt.state == State.RETRY_WAIT
    scheduled = answered(claims.claim(namespace, key, FP), Decision.RETRY_SCHEDULED)
    due_in = scheduled.receipt.next_attempt_at.ToSeconds() - receipt.updated_at.ToSeconds()
    assert 59 <= due_in <= 61


def test_a_quarantined_claim_answers_quarantined_with_the_last_error(
    claims: Claims, namespace: str, key: str
) -> None:
    lease = held(claims.claim(namespace, key, FP))
    assert lease.quarantine("malformed event").state == State.QUARANTINED
    dead = answered(claims.claim(namespace, key, FP), Decision.QUARANTINED)
    assert dead.receipt.last_error == "malformed event"


def test_the_same_key_with_another_fingerprint_is_a_conflict(
    claims: Claims, namespace: str, key: str
) -> None:
    lease = held(claims.claim(namespace, key, FP))
    conflict = answered(claims.claim(namespace, key, b"another body"), Decision.CONFLICT)
    assert conflict.receipt.fingerprint == FP
    lease.complete()


@pytest.mark.slow
def test_the_background_heartbeat_keeps_a_one_second_lease_alive_past_three_seconds(
    claims: Claims, namespace: str, key: str
) -> None:
    lease = held(claims.claim(namespace, key, FP, lease=1))
    assert lease.lease_seconds == 1
    time.sleep(3.3)
    answered(claims.claim(namespace, key, FP, lease=1), Decision.IN_FLIGHT)
    assert not lease.lost.is_set()
    assert lease.complete(b"kept it").attempt == 1


@pytest.mark.slow
def test_a_stalled_holder_learns_of_the_takeover_through_lost(
    claims: Claims, namespace: str, key: str
) -> None:
    holder = subprocess.Popen(
        [sys.executable, HOLDER, namespace, key],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().split() == ["claimed", "1"]
        os.kill(holder.pid, signal.SIGSTOP)  # a stall: its heartbeat thread stops too
        try:
            takeover = claim_when_due(claims, namespace, key)
        finally:
            os.kill(holder.pid, signal.SIGCONT)
        out, _ = holder.communicate(timeout=20)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert out.split() == ["lost", "ABORTED", "complete", "ABORTED"], out
    assert takeover.attempt == 2
    assert takeover.complete(b"the new holder's").response == b"the new holder's"


@pytest.mark.slow
def test_a_stopped_lease_runs_out_and_is_taken_over_with_its_recovery_payload(
    claims: Claims, namespace: str, key: str
) -> None:
    lease = held(claims.claim(namespace, key, FP, lease=1, recovery_payload=b"original body"))
    lease.stop()
    deadline = time.monotonic() + 10
    while True:
        page = claims.list_orphaned(namespace, page_size=1000)
        reasons = {o.receipt.key: o.reason for o in page.orphans}
        if key in reasons:
            break
        assert time.monotonic() < deadline, "the expired lease was never listed"
        time.sleep(0.2)
    assert reasons[key] == OrphanReason.LEASE_EXPIRED
    takeover = held(claims.claim(namespace, key, FP, lease=30))
    assert takeover.attempt == 2
    assert takeover.receipt.recovery_payload == b"original body"
    with pytest.raises(ClaimdError) as refused:
        lease.complete(b"late")
    assert refused.value.code == grpc.StatusCode.ABORTED
    assert lease.lost.is_set()
    assert lease.lost_error is refused.value
    takeover.complete()


@pytest.mark.slow
def test_a_lease_nobody_references_stops_heartbeating_and_runs_out(
    claims: Claims, namespace: str, key: str
) -> None:
    lease = held(claims.claim(namespace, key, FP, lease=1))
    del lease  # dropped without a settle: nobody could ever settle it now
    gc.collect()
    started = time.monotonic()
    takeover = claim_when_due(claims, namespace, key)
    assert takeover.attempt == 2
    assert time.monotonic() - started < 5
    takeover.complete()


def test_the_with_block_completes_with_the_response_set_inside_it(
    claims: Claims, namespace: str, key: str
) -> None:
    with held(claims.claim(namespace, key, FP)) as lease:
        lease.response = b"made in the block"
    assert lease.settled
    receipt = claims.get(namespace, key)
    assert receipt.state == State.COMPLETED
    assert receipt.response == b"made in the block"


def test_an_exception_in_the_with_block_retries_and_propagates(
    claims: Claims, namespace: str, key: str
) -> None:
    with pytest.raises(ValueError, match="secret payload"):
        with held(claims.claim(namespace, key, FP)) as lease:
            raise ValueError("the secret payload was malformed")
    assert lease.settled
    receipt = claims.get(namespace, key)
    assert receipt.state == State.RETRY_WAIT
    assert receipt.last_error == "ValueError", "the type, never the message"


def test_a_lease_settled_inside_the_with_block_is_left_as_it_is(
    claims: Claims, namespace: str, key: str
) -> None:
    with held(claims.claim(namespace, key, FP)) as lease:
        lease.quarantine("poison event")
    assert claims.get(namespace, key).state == State.QUARANTINED


def test_a_lease_settles_only_once(claims: Claims, namespace: str, key: str) -> None:
    lease = held(claims.claim(namespace, key, FP))
    lease.complete(b"first")
    with pytest.raises(RuntimeError, match="already settled"):
        lease.retry("second")
    with pytest.raises(RuntimeError, match="already settled"):
        lease.checkpoint(b"after")
    assert claims.get(namespace, key).response == b"first"


def test_a_waiting_claim_gets_the_completed_response(
    claims: Claims, namespace: str, key: str
) -> None:
    lease = held(claims.claim(namespace, key, FP, lease=30))
    finish = threading.Timer(0.5, lease.complete, args=(b'{"status": 201}',))
    finish.start()
    started = time.monotonic()
    answer = answered(claims.claim(namespace, key, FP, wait=10), Decision.COMPLETED)
    finish.join()
    assert answer.response == b'{"status": 201}'
    assert time.monotonic() - started >= 0.3, "it waited"


def test_a_wait_that_runs_out_answers_in_flight(
    claims: Claims, namespace: str, key: str
) -> None:
    lease = held(claims.claim(namespace, key, FP, lease=30))
    answered(claims.claim(namespace, key, FP, wait=0.3), Decision.IN_FLIGHT)
    lease.complete()


def test_a_dead_letter_is_listed_and_redriven_to_be_claimed_again(
    claims: Claims, namespace: str, key: str
) -> None:
    held(claims.claim(namespace, key, FP)).quarantine("poison event")
    listed: list[claims_pb2.Receipt] = []
    page_token = ""
    while True:
        page = claims.list(namespace, [State.QUARANTINED], page_size=100, page_token=page_token)
        listed.extend(page.receipts)
        page_token = page.next_page_token
        if not page_token:
            break
    assert key in {r.key for r in listed}
    assert all(r.state == State.QUARANTINED for r in listed)
    assert claims.redrive(namespace, key).state == State.RETRY_WAIT
    again = held(claims.claim(namespace, key, FP))
    assert again.attempt == 2
    again.complete()


def test_a_lease_taken_without_a_length_uses_the_namespaces_and_shows_it(
    claims: Claims, namespace: str, key: str
) -> None:
    lease = held(claims.claim(namespace, key, FP))
    assert lease.lease_seconds == pytest.approx(90, abs=1), "the built-in policy's lease"
    assert lease._token not in repr(lease)
    lease.complete()
