"""The HTTP apps the middleware tests run, each behind claimd's Idempotency-Key handling
with the routes of _routes.py, served on a free port of 127.0.0.1 — in a thread of the
test process (`serve`), or in a process of its own to be killed mid-request:

    python _apps.py asgi|depends|wsgi|django --block --lease 1

prints `listening <port>`, then `handling` when a request's handler starts (and, with
--block, never answers it).

The kinds: `asgi` FastAPI behind `claimd.asgi.IdempotencyMiddleware` and `depends` FastAPI
with `Depends(claimd.fastapi.idempotency(...))` (both under uvicorn); `wsgi` Flask behind
`claimd.wsgi.IdempotencyMiddleware` and `django` Django with
`claimd.django.IdempotencyMiddleware` in MIDDLEWARE (both under waitress).
"""

from __future__ import annotations

import argparse
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from waitress.server import create_server

import _app_django
import _app_fastapi
import _app_flask
from _routes import BIG, NAMESPACE, Boom, runs

__all__ = ["BIG", "KINDS", "NAMESPACE", "Boom", "app", "runs", "serve", "serving"]

KINDS = ("asgi", "depends", "wsgi", "django")
ASGI_KINDS = ("asgi", "depends")


def app(kind: str, target: str | None = None, *, block: bool = False, **options: Any) -> Any:
    """The `kind` app (an ASGI or a WSGI application)."""
    if kind == "asgi":
        return _app_fastapi.asgi_app(target, block=block, **options)
    if kind == "depends":
        return _app_fastapi.depends_app(target, block=block, **options)
    if kind == "wsgi":
        return _app_flask.wsgi_app(target, block=block, **options)
    if kind == "django":
        _app_django.block = block
        return _app_django.wsgi_app(target, **options)
    raise ValueError(f"no app kind {kind!r}: one of {KINDS}")


def _bound() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


@contextmanager
def serve(kind: str, target: str | None = None, **options: Any) -> Iterator[str]:
    """Serves the `kind` app in a thread; yields its base URL."""
    with serving(app(kind, target, **options), asgi=kind in ASGI_KINDS) as base:
        yield base


@contextmanager
def serving(application: Any, *, asgi: bool) -> Iterator[str]:
    """Serves an ASGI app under uvicorn or a WSGI app under waitress, in a thread."""
    if asgi:
        sock = _bound()
        server = uvicorn.Server(uvicorn.Config(application, lifespan="off",
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
        wsgi = create_server(application, host="127.0.0.1", port=0, threads=32)
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
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--block", action="store_true")
    parser.add_argument("--lease", type=float, default=30.0)
    args = parser.parse_args()
    application = app(args.kind, block=args.block, lease=args.lease)
    if args.kind in ASGI_KINDS:
        sock = _bound()
        sock.listen(64)
        print(f"listening {sock.getsockname()[1]}", flush=True)
        config = uvicorn.Config(application, lifespan="off", log_level="critical")
        uvicorn.Server(config).run(sockets=[sock])
    else:
        server = create_server(application, host="127.0.0.1", port=0, threads=4)
        print(f"listening {server.effective_port}", flush=True)
        server.run()


if __name__ == "__main__":
    main()
