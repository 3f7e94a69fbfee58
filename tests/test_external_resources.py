"""The MCP Inspector CLI lists and reads the notes example's resources and prompts (issue 7).

Needs Node 22 and the Inspector under .cache/node (`.ci/external-clients.sh` installs them);
skipped with the reason when they are missing, a failure under CI=true.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples import Upstream
from tests.e2e_support import PY, ROOT, HttpServer, NodeTools, example_args, node_tools

pytestmark = pytest.mark.external


@pytest.fixture(scope="module")
def tools() -> NodeTools:
    return node_tools()


@pytest.fixture(scope="module")
def notes() -> Iterator[Upstream]:
    with Upstream.start("notes") as up:
        yield up


@pytest.fixture(autouse=True)
def requests_stay_valid(notes: Upstream) -> Iterator[None]:
    """After every test: no request the notes spec would reject reached the upstream."""
    yield
    notes.assert_no_violations()


@pytest.fixture(scope="module")
def server(tools: NodeTools, notes: Upstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    log_dir = tmp_path_factory.mktemp("serve")
    with HttpServer.start([*example_args("notes"), "--base-url", notes.base_url], log_dir=log_dir) as s:
        yield s


def inspector(tools: NodeTools, home: Path, target: list[str], *args: str) -> tuple[int, Any, str]:
    """Run `mcp-inspector --cli TARGET ARGS --format json -q`; (exit status, parsed JSON, stderr)."""
    proc = tools.npx(tools.inspector_dir, ["mcp-inspector", "--cli", "--connect-timeout", "90000", "--cwd", str(ROOT),
                                           "--format", "json", "-q",
                                           *target, *args], home=home)
    text = proc.stdout.strip() or proc.stderr.strip()
    try:
        data = json.loads(text)
    except ValueError:
        raise AssertionError(f"no JSON (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}") from None
    return proc.returncode, data, proc.stderr


def test_inspector_lists_resources_over_stdio(tools: NodeTools, notes: Upstream, tmp_path: Path) -> None:
    target = [PY, "-m", "openapi2mcp", "serve", *example_args("notes"), "--base-url", notes.base_url]
    rc, data, _ = inspector(tools, tmp_path, target, "--method", "resources/list")
    assert rc == 0, data
    assert [(r["name"], r["uri"]) for r in data["result"]["resources"]] == [("note-index", "notes://index")]


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_inspector_over_http(tools: NodeTools, server: HttpServer, tmp_path: Path, era: str) -> None:
    target = [server.url, "--protocol-era", era]
    rc, data, _ = inspector(tools, tmp_path, target, "--method", "resources/list")
    assert rc == 0 and data["result"]["resources"][0]["uri"] == "notes://index", data
    rc, data, _ = inspector(tools, tmp_path, target, "--method", "resources/templates/list")
    assert rc == 0, data
    assert [(t["name"], t["uriTemplate"]) for t in data["result"]["resourceTemplates"]] == [("note", "notes://{+path}")]
    rc, data, _ = inspector(tools, tmp_path, target, "--method", "prompts/list")
    assert rc == 0, data
    (prompt,) = data["result"]["prompts"]
    assert (prompt["name"], prompt["arguments"][0]["name"], prompt["arguments"][0]["required"]) == (
        "study.plan", "path", True)

    rc, data, _ = inspector(tools, tmp_path, target, "--method", "prompts/get", "--prompt-name", "study.plan",
                            "--prompt-args", "path=ai-agent/tool-design.md")
    assert rc == 0, data
    text, embedded = (m["content"] for m in data["result"]["messages"])
    assert text["text"].startswith("Read the note ai-agent/tool-design.md")
    assert embedded["type"] == "resource" and embedded["resource"]["uri"] == "notes://ai-agent/tool-design.md"
    assert embedded["resource"]["text"].startswith("# Tool design")

    rc, data, _ = inspector(tools, tmp_path, target, "--method", "resources/read", "--uri",
                            "notes://private/diary-2026-11.md")
    assert rc != 0
    assert "FORBIDDEN" in data["error"]["message"] and "outside the folders an agent may read" in json.dumps(data)


# The official conformance suite's resource and prompt scenarios that need no fixture of its own
# (the others read fixed test:// URIs of its reference server). sep-2164: -32602 with data.uri on
# 2026-07-28; caching: ttlMs/cacheScope on resources/list, templates/list, read, prompts/list.
CONFORMANCE = ["sep-2164-resource-not-found", "resources-list", "prompts-list", "caching"]


@pytest.mark.parametrize("scenario", CONFORMANCE)
def test_conformance_scenario(tools: NodeTools, server: HttpServer, tmp_path: Path, scenario: str) -> None:
    proc = tools.npx(tools.conformance_dir, ["conformance", "server", "--url", server.url, "--scenario", scenario,
                                             "--timeout", "20000"], home=tmp_path)
    out = proc.stdout + proc.stderr
    summary = re.search(r"Passed: (\d+)/(\d+), (\d+) failed", out)
    assert proc.returncode == 0 and summary is not None, out[-3000:]
    passed, checks, failed = map(int, summary.groups())
    assert passed == checks > 0 and failed == 0, out[-3000:]  # something was checked, and all of it passed
