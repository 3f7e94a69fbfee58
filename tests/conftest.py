"""Shared fixtures: where the examples and the real-world corpus are, and compiling helpers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def corpus_dir() -> Path | None:
    """The real-world spec corpus (../shared/corpus beside the repo, or $OPENAPI2MCP_CORPUS)."""
    env = os.environ.get("OPENAPI2MCP_CORPUS")
    candidates = [Path(env)] if env else []
    candidates += [ROOT.parent / "shared" / "corpus", ROOT / ".cache" / "corpus"]
    for c in candidates:
        if c.is_dir():
            return c
    return None


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
