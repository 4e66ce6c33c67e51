"""How `Depends(claimd.fastapi.idempotency(...))` is mounted, against the real claimd and
through real HTTP (uvicorn): on a route of another class or as an endpoint parameter it is
refused when the route is added (at start, naming IdempotentRoute); with
`app.router.route_class = IdempotentRoute` and a body model, the response of an exception
handler (HTTPException) is the answer stored and replayed; routes of the class without the
dependency are untouched. (The full rule set on the dependency: test_http.py `[depends]`.)"""

from __future__ import annotations

import secrets
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, Depends, FastAPI, HTTPException
from pydantic import BaseModel

import _apps
import _settings
import claimd
from claimd import AsyncClaims
from claimd.fastapi import IdempotentRoute, idempotency

#: Never called: the routes that refuse it are refused before they serve.
orders = idempotency(lambda: AsyncClaims(**_settings.client_kwargs()), _apps.NAMESPACE)


class Order(BaseModel):
    amount: int


async def create(order: Order) -> dict[str, int]:
    return {"amount": order.amount}


def test_on_a_route_of_another_class_the_dependency_is_refused_when_the_route_is_added() -> None:
    app = FastAPI()
    with pytest.raises(RuntimeError, match=r"route_class=claimd\.fastapi\.IdempotentRoute"):
        app.post("/orders", dependencies=[Depends(orders)])(create)
    router = APIRouter(dependencies=[Depends(orders)])
    with pytest.raises(RuntimeError, match="IdempotentRoute"):
        router.post("/orders")(create)


def test_as_an_endpoint_parameter_the_dependency_is_refused_when_the_route_is_added() -> None:
    app = FastAPI()
    app.router.route_class = IdempotentRoute
    with pytest.raises(RuntimeError, match=r"not as an endpoint parameter"):
        @app.post("/orders")
        async def with_parameter(order: Order, _: None = Depends(orders)) -> dict[str, int]:
            return {"amount": order.amount}


def order_app() -> Any:
    # Its own AsyncClaims: made on first use in the loop of this app's server.
    claimed = idempotency(lambda: AsyncClaims(**_settings.client_kwargs()), _apps.NAMESPACE)
    app = FastAPI()
    app.router.route_class = IdempotentRoute

    @app.post("/orders/{name}", status_code=201, dependencies=[Depends(claimed)])
    async def named(name: str, order: Order) -> dict[str, Any]:
        n = _apps.runs[name] = _apps.runs[name] + 1
        if name == "missing":
            raise HTTPException(404, detail=f"no such list (run {n})")
        return {"run": n, "amount": order.amount,
                "attempt": claimd.current_async_lease().attempt}

    @app.post("/plain")
    async def plain(order: Order) -> dict[str, int]:
        return {"amount": order.amount}

    return app


def post(url: str, path: str, key: str | None, amount: int = 5) -> httpx.Response:
    headers = {} if key is None else {"idempotency-key": key}
    return httpx.post(url + path, json={"amount": amount}, headers=headers, timeout=60)


def test_with_the_app_routers_route_class_an_http_exception_is_an_answer_replayed() -> None:
    name = f"missing-{secrets.token_hex(4)}"
    _apps.runs["missing"] = 0
    key = f"fa-{secrets.token_hex(8)}"
    with _apps.serving(order_app(), asgi=True) as url:
        first = post(url, "/orders/missing", key)
        again = post(url, "/orders/missing", key)
        created = post(url, f"/orders/{name}", key + "-2", amount=7)
        conflict = post(url, f"/orders/{name}", key + "-2", amount=8)
    assert first.status_code == again.status_code == 404
    assert again.json() == first.json() == {"detail": "no such list (run 1)"}
    assert again.headers["idempotent-replayed"] == "true"
    assert _apps.runs["missing"] == 1
    assert created.status_code == 201 and created.json() == {"run": 1, "amount": 7,
                                                              "attempt": 1}
    assert conflict.status_code == 422
    assert conflict.json()["code"] == "idempotency-key-reused"


def test_a_route_of_the_class_without_the_dependency_is_untouched() -> None:
    with _apps.serving(order_app(), asgi=True) as url:
        response = post(url, "/plain", None)
    assert response.status_code == 200 and response.json() == {"amount": 5}
