"""Fixtures every third-party module shares (each is per module: one server, one set of sessions)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from anyio.from_thread import BlockingPortal

from tests.e2e_support import portal
from tests.thirdparty.support import TRANSPORTS, User


@pytest.fixture(scope="module")
def logs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's folder for server logs, fetched specs and written overlays."""
    return tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_"))


@pytest.fixture(scope="module")
def loop() -> Iterator[BlockingPortal]:
    with portal() as p:
        yield p


@pytest.fixture(scope="module", params=list(TRANSPORTS))
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def user() -> User:
    return User()


@pytest.fixture(autouse=True)
def fresh_user(user: User) -> None:
    """Every test starts with a user who accepts, and nothing asked yet."""
    user.reset()
