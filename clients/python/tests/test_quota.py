"""A tenant quota of claimd (docs/DESIGN.md §5.15) through the package, against the real
claimd of CLAIMD_QUOTA_TARGET: its anonymous tenant gets one Claim, then one per thousand
seconds, so once a test has spent that Claim every Claim is refused RESOURCE_EXHAUSTED with
RetryInfo and QuotaFailure, whatever ran before. The client raises `QuotaError` with the
quota and the delay (sync, asyncio, the decorator); each kind of mounting (_apps.py) answers
503 with Retry-After and does not run the handler. A RESOURCE_EXHAUSTED without those
details stays a plain `ClaimdError`, and the middleware's store-unavailable 503."""

from __future__ import annotations

import asyncio
import secrets

import grpc
import httpx
import pytest

import _apps
import _settings
import claimd
from claimd import AsyncClaims, ClaimdError, Claims, QuotaError

NS = "py-quota-tests"
FP = _settings.FINGERPRINT


def quota_claims() -> Claims:
    """A client of the quota claimd (anonymous, plaintext)."""
    return Claims(**_settings.client_kwargs(_settings.quota_target()))


def spend_the_quota() -> QuotaError:
    """Claims until the quota claimd refuses one by its quota (the second at the latest)."""
    with quota_claims() as claims:
        for _ in range(3):
            try:
                claims.claim(NS, f"spent-{secrets.token_hex(6)}", FP)
            except QuotaError as error:
                return error
    raise AssertionError("the claimd of CLAIMD_QUOTA_TARGET refused no Claim by its quota")


def test_a_claim_over_the_tenant_quota_raises_quota_error_with_the_quota_and_a_positive_delay() -> None:
    error = spend_the_quota()
    assert isinstance(error, ClaimdError)
    assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error.quota == "claims_per_second"
    assert error.retry_after > 0
    assert "claims_per_second" in error.details
    assert "QuotaError" in repr(error)


def test_an_async_claim_over_the_tenant_quota_raises_quota_error_too() -> None:
    spend_the_quota()

    async def claim() -> QuotaError:
        async with AsyncClaims(**_settings.client_kwargs(_settings.quota_target())) as claims:
            with pytest.raises(QuotaError) as caught:
                await claims.claim(NS, f"async-{secrets.token_hex(6)}", FP)
            return caught.value

    error = asyncio.run(claim())
    assert error.quota == "claims_per_second"
    assert error.retry_after > 0


def test_under_the_decorator_a_claim_over_the_quota_raises_quota_error_and_the_function_never_runs() -> None:
    spend_the_quota()
    runs = []
    with quota_claims() as claims:

        @claimd.idempotent(claims, NS, key=lambda order_id: order_id)
        def charge(order_id: str) -> str:
            runs.append(order_id)
            return "charged"

        with pytest.raises(QuotaError) as caught:
            charge(f"order-{secrets.token_hex(6)}")
    assert caught.value.quota == "claims_per_second"
    assert runs == []


def test_a_resource_exhausted_without_quota_details_stays_a_plain_claimd_error() -> None:
    # A send limit below any Claim: grpcio refuses to send it, RESOURCE_EXHAUSTED, no details.
    with Claims(**_settings.client_kwargs(), options=[("grpc.max_send_message_length", 8)]) as small:
        with pytest.raises(ClaimdError) as caught:
            small.claim(NS, f"too-large-{secrets.token_hex(6)}", FP)
    assert caught.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert not isinstance(caught.value, QuotaError)


@pytest.fixture(params=_apps.KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_a_claim_refused_by_the_tenant_quota_is_503_with_retry_after_and_the_handler_not_run(
    kind: str,
) -> None:
    spend_the_quota()
    key = f"k-{secrets.token_hex(8)}"
    with _apps.serve(kind, target=_settings.quota_target()) as base:
        response = httpx.post(base + "/orders", content=b'{"amount":5}', timeout=60,
                              headers={"content-type": "application/json",
                                       "idempotency-key": key})
    assert response.status_code == 503, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["code"] == "idempotency-quota-exceeded", problem
    retry_after = response.headers["retry-after"]
    assert retry_after.isdigit() and int(retry_after) >= 1, retry_after
    assert _apps.runs[key] == 0
