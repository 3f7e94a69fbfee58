"""The Python API: the root package's lazy exports, and every example of docs/python-api.md, run.

The page's ```python blocks run in order in one namespace, from the repository root, against the
real notes example API (started here; the examples read NOTES_API_URL, as a reader's would point
at `python -m examples notes`).
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import openapi2mcp
from examples import Upstream
from tests.local import ROOT

PAGE = ROOT / "docs" / "python-api.md"


def code_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, re.M | re.S)


def test_the_examples_of_the_page_run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = code_blocks(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) >= 6
    monkeypatch.chdir(ROOT)
    namespace: dict[str, object] = {"__name__": "python_api_page"}
    with Upstream.start("notes") as up:
        monkeypatch.setenv("NOTES_API_URL", up.base_url)
        for number, block in enumerate(blocks, 1):
            exec(compile(block, f"{PAGE}:block {number}", "exec"), namespace)  # our own docs
        assert up.count("searchNotes") >= 1 and up.count("readNote") >= 1  # the in-memory client really called it
        up.assert_no_violations()
    out = capsys.readouterr().out
    assert "ai-agent/mcp-basics.md" in out and "noSuchOperation" in out


def test_every_name_the_page_lists_is_exported() -> None:
    text = PAGE.read_text(encoding="utf-8")
    table = text.split("\n\n", 2)[2].split("\n\n", 1)[0]
    names = {n for cell in re.findall(r"^\| (.*?) \|", table, re.M) for n in re.findall(r"`(\w+)", cell)}
    assert names - {"name"} <= set(openapi2mcp.__all__), sorted(names - set(openapi2mcp.__all__))
    for name in openapi2mcp.__all__:
        assert getattr(openapi2mcp, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = openapi2mcp.nothing_here  # type: ignore[attr-defined]


def test_importing_the_package_is_cheap() -> None:
    """`import openapi2mcp` loads no stage, no SDK and no pydantic: the runtime imports it for __version__."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "import openapi2mcp"], capture_output=True,
                          text=True, cwd=ROOT, check=True)
    loaded = {ln.rsplit("|", 1)[1].strip() for ln in done.stderr.splitlines() if ln.startswith("import time:")}
    heavy = {m for m in loaded if m.startswith(("openapi2mcp.", "mcp", "pydantic", "prance", "httpx2", "jsonschema"))}
    assert "openapi2mcp" in loaded and not heavy, sorted(heavy)
