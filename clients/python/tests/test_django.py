"""`claimd.django.IdempotencyMiddleware` through Django's test client against the real
claimd (the site of _app_django.py; test_http.py and test_http_scope.py run the same site
under waitress): the view runs once per key and its response is replayed without its
cookies, a signed-in user's keys are scoped by the user's id, a view that raised gives the
key back, and a wrong CLAIMD_IDEMPOTENCY fails when Django loads its middleware."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

import _app_django
import _apps
import _settings
from claimd import Claims

_app_django.configure()

from django.contrib.auth.models import User  # noqa: E402  (needs the configured settings)
from django.core.exceptions import ImproperlyConfigured  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.test import Client, override_settings  # noqa: E402

BODY = '{"amount": 5}'


def new_key() -> str:
    return f"dj-{secrets.token_hex(8)}"


def order(client: Any, key: str | None, body: str = BODY, path: str = "/orders") -> Any:
    headers = {} if key is None else {"idempotency-key": key}
    return client.post(path, data=body, content_type="application/json", headers=headers)


def test_the_view_runs_once_and_its_response_is_replayed_without_its_cookies() -> None:
    client, key = Client(), new_key()
    first = order(client, key)
    again = order(Client(), key)
    assert first.status_code == again.status_code == 201
    assert "seen" in first.cookies and "Idempotent-Replayed" not in first.headers
    assert again.content == first.content and again["x-order"] == first["x-order"]
    assert again["Idempotent-Replayed"] == "true"
    assert not again.cookies
    assert _apps.runs[key] == 1


def test_a_missing_key_is_400_and_another_body_or_route_with_the_key_is_422() -> None:
    client, key = Client(), new_key()
    missing = order(client, None)
    assert missing.status_code == 400 and missing.json()["code"] == "idempotency-key-missing"
    assert order(client, key).status_code == 201
    other_body = order(client, key, body='{"amount": 6}')
    other_route = order(client, key, path="/payments")
    assert other_body.status_code == other_route.status_code == 422
    assert other_body.json()["code"] == "idempotency-key-reused"
    assert _apps.runs[key] == 1


def test_signed_in_users_are_scoped_by_their_id_not_their_session() -> None:
    key = new_key()
    alice, alice2, bob = Client(), Client(), Client()
    alice.force_login(User.objects.get(username="alice"))
    alice2.force_login(User.objects.get(username="alice"))
    bob.force_login(User.objects.get(username="bob"))
    first, same_user, other_user = order(alice, key), order(alice2, key), order(bob, key)
    assert same_user.content == first.content and same_user["Idempotent-Replayed"] == "true"
    assert other_user.status_code == 201 and other_user.json() != first.json()
    assert _apps.runs[key] == 2
    alice_id = User.objects.get(username="alice").pk
    with Claims(**_settings.client_kwargs()) as claims:
        receipt = claims.get(_apps.NAMESPACE, f"user%3A{alice_id} {key}")
    assert receipt.key == f"user%3A{alice_id} {key}"


def test_a_view_that_raises_gives_the_key_back_with_only_its_type_name() -> None:
    client, key = Client(raise_request_exception=False), new_key()
    first = order(client, key, path="/raise")
    assert first.status_code == 500 and "Idempotent-Replayed" not in first.headers
    again = order(client, key, path="/raise")
    assert again.status_code == 503 and again.json()["code"] == "idempotency-retry-scheduled"
    assert _apps.runs[key] == 1
    with Claims(**_settings.client_kwargs()) as claims:
        receipt = claims.get(_apps.NAMESPACE, f"anonymous {key}")
    assert receipt.last_error == "Boom"


def test_client_of_may_be_a_dotted_path_in_the_setting() -> None:
    key = new_key()
    setting = _app_django.claimd_setting(client_of="test_django.tenant_of")
    with override_settings(CLAIMD_IDEMPOTENCY=setting):
        assert order(Client(), key).status_code == 201
    with Claims(**_settings.client_kwargs()) as claims:
        assert claims.get(_apps.NAMESPACE, f"tenant-7 {key}").key == f"tenant-7 {key}"


def tenant_of(request: Any) -> str:
    return "tenant-7"


@pytest.mark.parametrize(("setting", "named"), [
    (None, "missing"),
    ({"target": "127.0.0.1:1"}, "namespace must be a non-empty str"),
    ({"namespace": "orders-api"}, "give target"),
    ({"target": "127.0.0.1:1", "namespace": "n", "tenant": "x"}, "unknown keys ['tenant']"),
    ({"target": "127.0.0.1:1", "namespace": "n", "wait": 600}, "wait must be 0 to 60"),
    ({"target": "127.0.0.1:1", "namespace": "n", "client_of": "no.such.thing"},
     "client_of 'no.such.thing' cannot be imported"),
])
def test_a_wrong_setting_fails_when_django_loads_the_middleware(
    setting: dict[str, Any] | None, named: str
) -> None:
    with override_settings(CLAIMD_IDEMPOTENCY=setting):
        with pytest.raises(ImproperlyConfigured) as refused:
            get_wsgi_application()
    assert "settings.CLAIMD_IDEMPOTENCY" in str(refused.value)
    assert named in str(refused.value)
