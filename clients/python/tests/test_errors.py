"""`ClaimdError` from the real claimd: the status code and the field claimd names in its
BadRequest detail, nothing secret in a message, and the API key and TLS settings of the
claimd under test (those cases run only against a claimd with keys, or with TLS)."""

from __future__ import annotations

import os
import pickle

import grpc
import pytest
from google.protobuf import any_pb2

import _settings
from claimd import TLS, ClaimdError, Claims, Decision, FieldViolation, Lease
from claimd._errors import field_violations
from claimd._rpc import status_pb2

FP = _settings.FINGERPRINT
needs_key = pytest.mark.skipif(not _settings.api_key(), reason="claimd under test has no keys")
needs_tls = pytest.mark.skipif(not _settings.tls(), reason="claimd under test serves plaintext")
needs_mtls = pytest.mark.skipif(
    not os.environ.get("CLAIMD_CLIENT_CERT"), reason="claimd under test does not require mTLS"
)


def refused(call: object, *args: object, **kwargs: object) -> ClaimdError:
    """The ClaimdError that `call(*args, **kwargs)` raises."""
    assert callable(call)
    with pytest.raises(ClaimdError) as caught:
        call(*args, **kwargs)
    return caught.value


def test_an_empty_key_is_invalid_argument_naming_the_field_key(
    claims: Claims, namespace: str
) -> None:
    error = refused(claims.claim, namespace, "", FP)
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.field == "key"
    assert error.violations[0] == FieldViolation("key", error.violations[0].description)
    assert str(error).startswith("INVALID_ARGUMENT: ")


def test_a_lease_shorter_than_a_second_names_lease_ttl(
    claims: Claims, namespace: str, key: str
) -> None:
    error = refused(claims.claim, namespace, key, FP, lease=0.5)
    assert (error.code, error.field) == (grpc.StatusCode.INVALID_ARGUMENT, "lease_ttl")


def test_a_wait_longer_than_a_minute_names_wait(
    claims: Claims, namespace: str, key: str
) -> None:
    error = refused(claims.claim, namespace, key, FP, wait=61, timeout=1)
    assert (error.code, error.field) == (grpc.StatusCode.INVALID_ARGUMENT, "wait")


def test_a_namespace_outside_its_alphabet_names_namespace(claims: Claims, key: str) -> None:
    error = refused(claims.claim, "no spaces allowed", key, FP)
    assert (error.code, error.field) == (grpc.StatusCode.INVALID_ARGUMENT, "namespace")


def test_a_bad_page_token_names_page_token(claims: Claims, namespace: str) -> None:
    error = refused(claims.list, namespace, page_token="not a token")
    assert (error.code, error.field) == (grpc.StatusCode.INVALID_ARGUMENT, "page_token")


def test_an_unknown_receipt_is_not_found_without_a_field(claims: Claims, namespace: str) -> None:
    error = refused(claims.get, namespace, "never-claimed")
    assert error.code == grpc.StatusCode.NOT_FOUND
    assert error.field is None
    assert error.violations == ()


def test_redriving_what_is_not_a_dead_letter_is_failed_precondition(
    claims: Claims, namespace: str, key: str
) -> None:
    lease = claims.claim(namespace, key, FP)
    assert isinstance(lease, Lease)
    error = refused(claims.redrive, namespace, key)
    assert error.code == grpc.StatusCode.FAILED_PRECONDITION
    lease.complete()


def test_errors_never_carry_the_token_the_api_key_or_the_payload(
    claims: Claims, namespace: str, key: str
) -> None:
    secret_payload = b"card 4242-secret " * 5000  # over the 64 KiB limit
    too_big = refused(claims.claim, namespace, key, FP, recovery_payload=secret_payload)
    assert too_big.field == "recovery_payload"

    lease = claims.claim(namespace, key, FP, lease=1)
    assert isinstance(lease, Lease)
    lease.stop()
    taken = None
    for _ in range(40):
        taken = claims.claim(namespace, key, FP, wait=2)
        if isinstance(taken, Lease):
            break
    assert isinstance(taken, Lease)
    lost = refused(lease.complete, b"card 4242-secret")
    assert lost.code == grpc.StatusCode.ABORTED
    taken.complete()

    api_key = _settings.api_key()
    for error in (too_big, lost):
        for text in (str(error), repr(error), repr(error.args)):
            assert "4242-secret" not in text
            assert lease._token not in text
            assert taken._token not in text
            if api_key:
                assert api_key not in text


def test_a_claimd_error_survives_pickling(claims: Claims, namespace: str) -> None:
    error = refused(claims.claim, namespace, "", FP)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.code, copy.details, copy.field) == (error.code, error.details, "key")


def test_the_status_details_trailer_decodes_a_bad_request_and_ignores_the_rest() -> None:
    bad_request = status_pb2.BadRequest(
        field_violations=[status_pb2.BadRequest.FieldViolation(field="key", description="empty")]
    )
    other = any_pb2.Any(type_url="type.googleapis.com/google.rpc.RetryInfo", value=b"\x00")
    status = status_pb2.Status(
        code=3,
        message="key: empty",
        details=[
            other,
            any_pb2.Any(
                type_url="type.googleapis.com/google.rpc.BadRequest",
                value=bad_request.SerializeToString(),
            ),
        ],
    )
    trailer = (("grpc-status-details-bin", status.SerializeToString()),)
    assert field_violations(trailer) == (FieldViolation("key", "empty"),)
    assert field_violations((("grpc-status-details-bin", b"\xff\xff garbage"),)) == ()
    assert field_violations(None) == ()


@needs_key
def test_without_the_api_key_claimd_answers_unauthenticated(namespace: str, key: str) -> None:
    kwargs = dict(_settings.client_kwargs(), api_key=None)
    with Claims(**kwargs) as anonymous:
        error = refused(anonymous.claim, namespace, key, FP)
    assert error.code == grpc.StatusCode.UNAUTHENTICATED


@needs_key
def test_a_wrong_api_key_is_unauthenticated_and_never_echoed(namespace: str, key: str) -> None:
    wrong = "ck_wrong_" + "x" * 40
    with Claims(**dict(_settings.client_kwargs(), api_key=wrong)) as impostor:
        error = refused(impostor.claim, namespace, key, FP)
    assert error.code == grpc.StatusCode.UNAUTHENTICATED
    assert wrong not in str(error) and wrong not in repr(error)


@needs_key
def test_the_api_key_is_sent_with_every_call(claims: Claims, namespace: str, key: str) -> None:
    lease = claims.claim(namespace, key, FP)
    assert isinstance(lease, Lease)
    lease.checkpoint(b"x")
    lease.complete(b"ok")
    assert claims.get(namespace, key).response == b"ok"
    assert len(claims.list(namespace, page_size=1).receipts) == 1


def test_the_api_key_never_shows_in_the_clients_repr() -> None:
    with Claims("127.0.0.1:1", api_key="ck_very_secret_key") as client:
        assert "ck_very_secret_key" not in repr(client)
        assert "api_key=set" in repr(client)


def test_an_api_key_with_whitespace_is_refused_without_echoing_it() -> None:
    with pytest.raises(ValueError) as caught:
        Claims("127.0.0.1:1", api_key="ck_secret\nInjected: header")
    assert "ck_secret" not in str(caught.value)


@needs_tls
def test_over_tls_every_call_works(claims: Claims, namespace: str, key: str) -> None:
    lease = claims.claim(namespace, key, FP)
    assert isinstance(lease, Lease)
    assert lease.complete(b"over tls").response == b"over tls"
    replay = claims.claim(namespace, key, FP)
    assert replay.decision is Decision.COMPLETED


@needs_tls
def test_a_plaintext_channel_to_the_tls_claimd_fails_unavailable(namespace: str, key: str) -> None:
    kwargs = dict(_settings.client_kwargs(), tls=None)
    with Claims(**kwargs, timeout=2) as plaintext:
        error = refused(plaintext.claim, namespace, key, FP)
    assert error.code == grpc.StatusCode.UNAVAILABLE


@needs_tls
def test_a_server_certificate_from_an_unknown_ca_is_refused(namespace: str, key: str) -> None:
    kwargs = dict(_settings.client_kwargs(), tls=True)  # the system's roots only
    with Claims(**kwargs, timeout=2) as untrusting:
        error = refused(untrusting.claim, namespace, key, FP)
    assert error.code == grpc.StatusCode.UNAVAILABLE


@needs_mtls
def test_without_a_client_certificate_the_mtls_claimd_refuses_the_call(
    namespace: str, key: str
) -> None:
    tls = _settings.tls()
    assert tls is not None
    kwargs = dict(_settings.client_kwargs(), tls=TLS(ca=tls.ca))
    with Claims(**kwargs, timeout=2) as no_cert:
        error = refused(no_cert.claim, namespace, key, FP)
    assert error.code == grpc.StatusCode.UNAVAILABLE


def test_the_tls_private_key_never_shows_in_its_repr() -> None:
    tls = TLS(ca=b"-----BEGIN CERTIFICATE-----", cert=b"c", key=b"-----BEGIN PRIVATE KEY----- k")
    assert "PRIVATE KEY" not in repr(tls)


def test_a_client_certificate_without_its_key_is_refused() -> None:
    with pytest.raises(ValueError, match="needs its key"):
        Claims("127.0.0.1:1", tls=TLS(cert=b"-----BEGIN CERTIFICATE-----"))
