"""Fixtures every third-party module shares (each is per module: one server, one set of sessions)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from anyio.from_thread import BlockingPortal

from tests.e2e_support import portal
from tests.thirdparty.support import TRANSPORTS, User, generated_target

if TYPE_CHECKING:
    from tests.properties import Target


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


@pytest.fixture(scope="module")
def generated(served: tuple[list[str], dict[str, str]]) -> Iterator[Target]:
    """The module's overlay served in memory, through tests/spec_proxy.py, for the property tier."""
    args, env = served
    with generated_target(args, env) as target:
        yield target
