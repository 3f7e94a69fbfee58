"""Shared fixtures: where the real-world corpus is; how the suite is spread over xdist workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.local import EXAMPLES as EXAMPLES  # for the test modules that import them from here
from tests.local import corpus_dir


def pytest_configure(config: pytest.Config) -> None:
    # Module-scoped fixtures start `openapi2mcp serve` processes, upstreams, packages, an image or a
    # third-party server: each module runs on one xdist worker (`loadfile`, what .ci/run asks for),
    # so that work is done once, not once on every worker that gets some of the module's tests.
    # `-n N` alone means `--dist load`, which would split modules.
    if getattr(config.option, "dist", None) == "load":
        config.option.dist = "loadfile"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent.name == "thirdparty":
            item.add_marker(pytest.mark.thirdparty)


def corpus_file(rel: str) -> Path:
    """A file of the corpus, or skip: CI has only the part it can fetch from package registries."""
    root = corpus_dir()
    if root is None or not (root / rel).exists():
        pytest.skip(f"{rel} is not in the corpus on this machine (see .ci/fetch-corpus.sh)")
    return root / rel


@pytest.fixture(scope="session")
def corpus() -> Path:
    found = corpus_dir()
    if found is None:
        pytest.skip("the real-world spec corpus is not here (set OPENAPI2MCP_CORPUS)")
    return found


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
