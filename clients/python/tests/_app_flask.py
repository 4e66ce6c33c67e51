"""The Flask test app behind `claimd.wsgi.IdempotencyMiddleware`, with the routes of
_routes.py; `options` go to the middleware."""

from __future__ import annotations

import time
from typing import Any, NoReturn

import flask
from flask import Flask, jsonify, request

import _settings
import claimd
from _routes import NAMESPACE, BIG, Boom, announce, ran
from claimd import Claims, wsgi


def wsgi_app(target: str | None = None, *, block: bool = False, **options: Any) -> Any:
    """The Flask app behind `claimd.wsgi.IdempotencyMiddleware`."""
    app = Flask(__name__)
    # An exception reaches the middleware (which retries) instead of becoming Flask's 500.
    app.config["PROPAGATE_EXCEPTIONS"] = True
    kwargs = _settings.client_kwargs(target)

    def order() -> flask.Response:
        body = request.get_json()
        n = ran(request.headers.get("Idempotency-Key"))
        announce(block)
        while block:
            time.sleep(3600)
        time.sleep(float(request.args.get("delay", "0")))
        lease = claimd.current_lease()
        response = jsonify(order=n, attempt=lease.attempt, amount=body.get("amount"))
        response.status_code = 201
        response.headers["x-order"] = str(n)
        response.set_cookie("seen", str(n))
        return response

    app.add_url_rule("/orders", "orders", order, methods=["POST"])
    app.add_url_rule("/payments", "payments", order, methods=["POST"])

    @app.post("/fail")
    def fail() -> tuple[flask.Response, int]:
        return jsonify(failed=ran(request.headers.get("Idempotency-Key"))), 500

    @app.post("/big")
    def big() -> flask.Response:
        n = ran(request.headers.get("Idempotency-Key"))
        return flask.Response(b"x" * BIG, mimetype="text/plain", headers={"x-order": str(n)})

    @app.post("/raise")
    def boom() -> NoReturn:
        ran(request.headers.get("Idempotency-Key"))
        raise Boom("a secret the error must not carry")

    @app.get("/orders")
    def listing() -> dict[str, str]:
        return {"listing": "ok"}

    app.wsgi_app = wsgi.IdempotencyMiddleware(  # type: ignore[method-assign]
        app.wsgi_app, claims=Claims(**kwargs), namespace=NAMESPACE, **options)
    return app
