"""The HTTP apps the middleware tests run: a FastAPI app (under uvicorn) and a Flask app
(under waitress), with the same routes, each behind claimd's Idempotency-Key middleware,
served on a free port of 127.0.0.1 — in a thread of the test process (`serve`), or in a
process of its own to be killed mid-request:

    python _apps.py asgi|wsgi --block --lease 1

prints `listening <port>`, then `handling` when a request's handler starts (and, with
--block, never answers it).

Routes (POST): /orders and /payments answer 201 with a serial number, the lease's attempt
and the body's `amount` (after `?delay=` seconds); /fail answers 500; /big answers 200 with
100 KiB; /raise raises. `runs` counts the handler runs per Idempotency-Key.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import flask
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from flask import Flask, jsonify, request
from waitress.server import create_server

import _settings
import claimd
from claimd import AsyncClaims, Claims, asgi, wsgi

NAMESPACE = "py-http-tests"
BIG = 100 * 1024

runs: collections.Counter[str] = collections.Counter()
_serial = itertools.count(1)
_lock = threading.Lock()


class Boom(RuntimeError):
    """What /raise raises (its message must never reach claimd)."""


def _ran(key: str | None) -> int:
    with _lock:
        runs[key or ""] += 1
        return next(_serial)


def _announce(block: bool) -> None:
    if block:
        print("handling", flush=True)


def asgi_app(target: str | None = None, *, block: bool = False, **options: Any) -> Any:
    """The FastAPI app behind `claimd.asgi.IdempotencyMiddleware`."""
    app = FastAPI()
    kwargs = _settings.client_kwargs()
    if target is not None:
        kwargs["target"] = target
    app.add_middleware(asgi.IdempotencyMiddleware, claims=lambda: AsyncClaims(**kwargs),
                       namespace=NAMESPACE, **options)

    async def order(request: Request) -> JSONResponse:
        body = await request.json()
        n = _ran(request.headers.get("idempotency-key"))
        _announce(block)
        while block:
            await asyncio.sleep(3600)
        await asyncio.sleep(float(request.query_params.get("delay", "0")))
        lease = claimd.current_async_lease()
        return JSONResponse({"order": n, "attempt": lease.attempt, "amount": body.get("amount")},
                            status_code=201, headers={"x-order": str(n)})

    app.post("/orders")(order)
    app.post("/payments")(order)

    @app.post("/fail")
    async def fail(request: Request) -> JSONResponse:
        n = _ran(request.headers.get("idempotency-key"))
        return JSONResponse({"failed": n}, status_code=500)

    @app.post("/big")
    async def big(request: Request) -> Response:
        n = _ran(request.headers.get("idempotency-key"))
        return Response(b"x" * BIG, media_type="text/plain", headers={"x-order": str(n)})

    @app.post("/raise")
    async def boom(request: Request) -> None:
        _ran(request.headers.get("idempotency-key"))
        raise Boom("a secret the error must not carry")

    @app.get("/orders")
    async def listing() -> dict[str, str]:
        return {"listing": "ok"}

    return app


def wsgi_app(target: str | None = None, *, block: bool = False, **options: Any) -> Any:
    """The Flask app behind `claimd.wsgi.IdempotencyMiddleware`."""
    app = Flask(__name__)
    # An exception reaches the middleware (which retries) instead of becoming Flask's 500.
    app.config["PROPAGATE_EXCEPTIONS"] = True
    kwargs = _settings.client_kwargs()
    if target is not None:
        kwargs["target"] = target

    def order() -> tuple[flask.Response, int, dict[str, str]]:
        body = request.get_json()
        n = _ran(request.headers.get("Idempotency-Key"))
        _announce(block)
        while block:
            time.sleep(3600)
        time.sleep(float(request.args.get("delay", "0")))
        lease = claimd.current_lease()
        return (jsonify(order=n, attempt=lease.attempt, amount=body.get("amount")), 201,
                {"x-order": str(n)})

    app.add_url_rule("/orders", "orders", order, methods=["POST"])
    app.add_url_rule("/payments", "payments", order, methods=["POST"])

    @app.post("/fail")
    def fail() -> tuple[flask.Response, int]:
        return jsonify(failed=_ran(request.headers.get("Idempotency-Key"))), 500

    @app.post("/big")
    def big() -> flask.Response:
        n = _ran(request.headers.get("Idempotency-Key"))
        return flask.Response(b"x" * BIG, mimetype="text/plain", headers={"x-order": str(n)})

    @app.post("/raise")
    def boom() -> NoReturn:
        _ran(request.headers.get("Idempotency-Key"))
        raise Boom("a secret the error must not carry")

    @app.get("/orders")
    def listing() -> dict[str, str]:
        return {"listing": "ok"}

    app.wsgi_app = wsgi.IdempotencyMiddleware(  # type: ignore[method-assign]
        app.wsgi_app, claims=Claims(**kwargs), namespace=NAMESPACE, **options)
    return app


def _bound() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


@contextmanager
def serve(kind: str, target: str | None = None, **options: Any) -> Iterator[str]:
    """Serves the `kind` ("asgi" or "wsgi") app in a thread; yields its base URL."""
    if kind == "asgi":
        sock = _bound()
        server = uvicorn.Server(uvicorn.Config(asgi_app(target, **options), lifespan="off",
                                               log_level="critical"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        try:
            yield f"http://127.0.0.1:{sock.getsockname()[1]}"
        finally:
            server.should_exit = True
            thread.join()
            sock.close()
    else:
        wsgi = create_server(wsgi_app(target, **options), host="127.0.0.1", port=0, threads=32)
        thread = threading.Thread(target=wsgi.run, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{wsgi.effective_port}"
        finally:
            # Closed from the server's own loop (its trigger), which then ends. A loop that
            # already ended has closed its trigger (EBADF): nothing is left to close.
            try:
                wsgi.trigger.pull_trigger(lambda: _close_all(wsgi))
            except OSError:
                pass
            thread.join()
            wsgi.task_dispatcher.shutdown()


def _close_all(wsgi: Any) -> None:
    """Closes a waitress server's connections and itself (in its loop's thread)."""
    for channel in list(wsgi._map.values()):
        if channel is not wsgi and channel is not wsgi.trigger:
            channel.close()
    wsgi.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["asgi", "wsgi"])
    parser.add_argument("--block", action="store_true")
    parser.add_argument("--lease", type=float, default=30.0)
    args = parser.parse_args()
    if args.kind == "asgi":
        sock = _bound()
        sock.listen(64)
        print(f"listening {sock.getsockname()[1]}", flush=True)
        config = uvicorn.Config(asgi_app(block=args.block, lease=args.lease), lifespan="off",
                                log_level="critical")
        uvicorn.Server(config).run(sockets=[sock])
    else:
        server = create_server(wsgi_app(block=args.block, lease=args.lease), host="127.0.0.1",
                               port=0, threads=4)
        print(f"listening {server.effective_port}", flush=True)
        server.run()


if __name__ == "__main__":
    main()
