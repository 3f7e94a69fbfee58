"""Shared fixtures: where the real-world corpus is; how the suite is spread over xdist workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.local import EXAMPLES as EXAMPLES  # for the test modules that import them from here
from tests.local import corpus_dir

# Modules whose module-scoped fixtures start `openapi2mcp serve` processes, build packages or a
# container image, or run the Node clients (and every module of tests/thirdparty/, which starts
# a third-party server). Each runs on one xdist worker, so that work is done
# once, not once on every worker that gets some of the module's tests.
ONE_WORKER = {
    "test_access",
    "test_build",
    "test_container",
    "test_e2e",
    "test_external_clients",
    "test_external_resources",
    "test_replicas",
}


def pytest_configure(config: pytest.Config) -> None:
    # `-n N` alone means `--dist load`, which ignores xdist_group marks; `loadgroup` is the same
    # scheduling except that it honours them (and .ci/run asks for it explicitly).
    if getattr(config.option, "dist", None) == "load":
        config.option.dist = "loadgroup"


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent.name == "thirdparty":
            item.add_marker(pytest.mark.thirdparty)
            item.add_marker(pytest.mark.xdist_group(f"thirdparty_{item.path.stem}"))
        elif item.path.stem in ONE_WORKER:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))


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
