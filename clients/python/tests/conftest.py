"""Fixtures of the claimd client suite: a `Claims` on the claimd under test (see
_settings.py for how it is found) and a fresh key per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import _settings
from claimd import Claims


@pytest.fixture
def claims() -> Iterator[Claims]:
    """A sync client of the claimd under test, closed after the test."""
    with Claims(**_settings.client_kwargs()) as client:
        yield client


@pytest.fixture
def key(request: pytest.FixtureRequest) -> str:
    """A key of this test only."""
    return _settings.new_key(request.node.name[:60])


@pytest.fixture
def namespace() -> str:
    return _settings.NAMESPACE
