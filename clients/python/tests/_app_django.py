"""The Django test site: `claimd.django.IdempotencyMiddleware` in MIDDLEWARE after Django's
sessions and authentication, configured by `CLAIMD_IDEMPOTENCY`, with the routes of
_routes.py and POST /login (`username`, `password`: Django's own login, a session cookie).
Its database is SQLite in a temporary directory of this process, migrated on first use,
with the users alice and bob (password "pw").

`configure()` sets Django up once per process; `wsgi_app(target, **options)` is a fresh
`get_wsgi_application()` whose middleware reads CLAIMD_IDEMPOTENCY with `options`.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from typing import Any

import django
from django.conf import settings
from django.contrib.auth import authenticate, login
from django.core.management import call_command
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.test import override_settings
from django.urls import path

import _settings
import claimd
from _routes import NAMESPACE, BIG, Boom, announce, ran

USERS = ("alice", "bob")
PASSWORD = "pw"
block = False
_lock = threading.Lock()


def claimd_setting(target: str | None = None, **options: Any) -> dict[str, Any]:
    """CLAIMD_IDEMPOTENCY for the claimd under test (or `target`) with `options`."""
    kwargs = _settings.client_kwargs(target)
    return {"target": kwargs["target"], "api_key": kwargs["api_key"],
            "tls": kwargs["tls"], "namespace": NAMESPACE, **options}


def configure() -> None:
    """Configures Django for this process (once): settings, migrated database, users."""
    with _lock:
        if settings.configured:
            return
        directory = tempfile.mkdtemp(prefix="claimd-django-")
        settings.configure(
            DEBUG=False, SECRET_KEY="claimd-tests-only", ALLOWED_HOSTS=["*"],
            ROOT_URLCONF=__name__, USE_TZ=True,
            INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth",
                            "django.contrib.sessions"],
            MIDDLEWARE=["django.contrib.sessions.middleware.SessionMiddleware",
                        "django.contrib.auth.middleware.AuthenticationMiddleware",
                        "claimd.django.IdempotencyMiddleware"],
            DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3",
                                   "NAME": os.path.join(directory, "db.sqlite3")}},
            PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
            CLAIMD_IDEMPOTENCY=claimd_setting(),
            LOGGING_CONFIG=None,
        )
        django.setup()
        call_command("migrate", verbosity=0)
        from django.contrib.auth.models import User
        for name in USERS:
            User.objects.create_user(name, password=PASSWORD)


def wsgi_app(target: str | None = None, **options: Any) -> Any:
    """Django's WSGI application, its middleware configured with `options`."""
    configure()
    from django.core.wsgi import get_wsgi_application
    with override_settings(CLAIMD_IDEMPOTENCY=claimd_setting(target, **options)):
        return get_wsgi_application()  # loads the middleware: reads the setting now


def orders(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return JsonResponse({"listing": "ok"})
    body = json.loads(request.body)
    n = ran(request.headers.get("Idempotency-Key"))
    announce(block)
    while block:
        time.sleep(3600)
    time.sleep(float(request.GET.get("delay", "0")))
    lease = claimd.current_lease()
    response = JsonResponse({"order": n, "attempt": lease.attempt,
                             "amount": body.get("amount")}, status=201)
    response["x-order"] = str(n)
    response.set_cookie("seen", str(n))
    return response


def fail(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"failed": ran(request.headers.get("Idempotency-Key"))}, status=500)


def big(request: HttpRequest) -> HttpResponse:
    n = ran(request.headers.get("Idempotency-Key"))
    return HttpResponse(b"x" * BIG, content_type="text/plain", headers={"x-order": str(n)})


def boom(request: HttpRequest) -> HttpResponse:
    ran(request.headers.get("Idempotency-Key"))
    raise Boom("a secret the error must not carry")


def sign_in(request: HttpRequest) -> HttpResponse:
    """Django's login: a session for the user whose password matches."""
    user = authenticate(request, username=request.POST.get("username"),
                        password=request.POST.get("password"))
    if user is None:
        return HttpResponse(status=403)
    login(request, user)
    return JsonResponse({"user": user.pk})


urlpatterns = [
    path("orders", orders), path("payments", orders), path("fail", fail), path("big", big),
    path("raise", boom), path("login", sign_in),
]
