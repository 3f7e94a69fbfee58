"""Clients we did not write: the official MCP Inspector CLI and the MCP conformance suite.

Both are Node programs (Node >= 22), installed by `.ci/external-clients.sh` under `.cache/node/`.
Without them these tests skip, saying how to install them; with `CI=true` they fail instead,
because CI must run them.

* The Inspector CLI (`npx mcp-inspector --cli CMD... --method ...`) starts `openapi2mcp serve`
  over stdio itself, once per invocation, in both protocol eras.
* The conformance suite (`npx conformance server --url ...`) runs against `openapi2mcp serve
  --transport http`, stateful and `--stateless`, once per module. The server is the petstore
  example behind a small fixture overlay that gives five real operations the tool names the
  suite calls (`test_simple_text` is getPetNotes, `test_image_content` is getPetPhoto, ...), so
  the tools-call scenarios exercise the real forwarding and result shaping. Which scenarios apply
  to a tools-only server, and why the others do not, is in docs/testing.md and in the tables
  below; the tests hold both: applicable scenarios pass, and not-applicable ones fail only for
  their documented reason (so a real failure cannot hide there).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from examples import Upstream
from tests.e2e_support import (
    LEGACY,
    MODERN,
    PY,
    ROOT,
    HttpServer,
    NodeTools,
    example_args,
    no_traceback,
    node_tools,
)

pytestmark = pytest.mark.external

NOTES_CANARY = "canary-inspector-notes-0d9e41"
PET_CANARY = "canary-inspector-pets-77ab2c"


@pytest.fixture(scope="module")
def node() -> NodeTools:
    return node_tools()


@pytest.fixture(scope="module")
def node_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("node-home")


# ============================================================================ MCP Inspector CLI


@dataclass
class InspectorRun:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        text = self.stdout.strip() or self.stderr.strip().splitlines()[-1]
        data: dict[str, Any] = json.loads(text)
        return data

    def __str__(self) -> str:
        return (
            f"mcp-inspector {' '.join(self.args)}\nexit {self.returncode}\n{self.stdout[-2000:]}\n{self.stderr[-2000:]}"
        )


NOTES_SEARCH = [
    "--method",
    "tools/call",
    "--tool-name",
    "notes_search",
    "--tool-arg",
    "keyword=mcp",
    "--tool-arg",
    "limit=2",
]

# case -> (example, Inspector arguments after the server command)
INSPECTOR_CASES: dict[str, tuple[str, list[str]]] = {
    "list": ("notes", ["--method", "tools/list", "--strict"]),
    "list-modern": ("notes", ["--protocol-era", "modern", "--method", "tools/list", "--strict"]),
    "call": ("notes", NOTES_SEARCH),
    "call-modern": ("notes", ["--protocol-era", "modern", *NOTES_SEARCH]),
    "call-json-args": (
        "petstore",
        ["--method", "tools/call", "--tool-name", "pets_get", "--tool-args-json", '{"petId": "1"}'],
    ),
    "tool-error": (
        "petstore",
        ["--method", "tools/call", "--tool-name", "pets_notes", "--tool-args-json", '{"petId": "nope"}'],
    ),
    "tool-error-with-output-schema": (
        "notes",
        [
            "--protocol-era",
            "modern",
            "--method",
            "tools/call",
            "--tool-name",
            "notes_read",
            "--tool-arg",
            "path=private/diary-2026-11.md",
        ],
    ),
    "unknown-tool": ("notes", ["--method", "tools/call", "--tool-name", "notes.nope"]),
    "forbidden-tool": (
        "notes",
        ["--method", "tools/call", "--tool-name", "admin_run_command", "--tool-arg", "command=id"],
    ),
}


@dataclass
class InspectorSetup:
    upstreams: dict[str, Upstream]
    runs: dict[str, InspectorRun] = field(default_factory=dict)


@pytest.fixture(scope="module")
def inspector(node: NodeTools, node_home: Path) -> Iterator[InspectorSetup]:
    """Every Inspector invocation, run once (three at a time); tests assert on the results."""
    with (
        Upstream.start("notes", auth=f"bearer:{NOTES_CANARY}") as notes,
        Upstream.start("petstore", auth=f"bearer:{PET_CANARY}") as pets,
    ):
        setup = InspectorSetup({"notes": notes, "petstore": pets})
        secrets = {"notes": f"NOTES_API_TOKEN={NOTES_CANARY}", "petstore": f"PETSTORE_TOKEN={PET_CANARY}"}

        def run(case: str) -> InspectorRun:
            example, method = INSPECTOR_CASES[case]
            server = [
                PY,
                "-m",
                "openapi2mcp",
                "serve",
                *example_args(example),
                "--base-url",
                setup.upstreams[example].base_url,
            ]
            # --connect-timeout: the server's start (a Python process) may take more than the Inspector's 15 s
            # on a loaded 2-core machine; the run's own timeout below still bounds it
            args = ["--cli", "--format", "json", "--connect-timeout", "90000", "--cwd", str(ROOT), "-e",
                    secrets[example], *server, *method]
            proc = node.npx(node.inspector_dir, ["mcp-inspector", *args], home=node_home, timeout=120)
            return InspectorRun(args, proc.returncode, proc.stdout, proc.stderr)

        with ThreadPoolExecutor(max_workers=3) as pool:
            futures = {case: pool.submit(run, case) for case in INSPECTOR_CASES}
            setup.runs = {case: future.result() for case, future in futures.items()}
        yield setup


def _listed(example: str) -> list[str]:
    data = yaml.safe_load((ROOT / "examples" / example / "overlay.yaml").read_text(encoding="utf-8"))
    return [t["name"] for t in data["tools"] if t.get("risk") != "forbidden"]


@pytest.mark.parametrize("case", ["list", "list-modern"])
def test_inspector_lists_the_tools(inspector: InspectorSetup, case: str) -> None:
    run = inspector.runs[case]
    assert run.returncode == 0, run  # --strict: no error-severity schema portability problem
    tools = run.json()["result"]["tools"]
    assert [t["name"] for t in tools] == _listed("notes")
    assert all(t["inputSchema"]["type"] == "object" for t in tools)


@pytest.mark.parametrize("case", ["call", "call-modern"])
def test_inspector_calls_a_tool_in_both_eras(inspector: InspectorSetup, case: str) -> None:
    run = inspector.runs[case]
    assert run.returncode == 0, run
    result = run.json()["result"]
    assert result.get("isError") in (None, False)
    structured = result["structuredContent"]
    assert 1 <= len(structured["results"]) <= 2  # limit=2 arrived as an integer
    assert json.loads(result["content"][0]["text"]) == structured
    assert result["_meta"]["openapi2mcp/requests"][0]["operation"] == "searchNotes"


def test_inspector_passes_json_arguments(inspector: InspectorSetup) -> None:
    run = inspector.runs["call-json-args"]
    assert run.returncode == 0, run
    pet = run.json()["result"]["structuredContent"]
    assert (pet["id"], pet["name"]) == ("1", "Rex")


def test_inspector_sees_tool_errors_as_results(inspector: InspectorSetup) -> None:
    run = inspector.runs["tool-error"]
    assert run.returncode == 5, run  # the Inspector's exit status for "the tool returned isError"
    result = run.json()["result"]
    assert result["isError"] is True and "structuredContent" not in result
    assert json.loads(result["content"][0]["text"])["code"] == "NOT_FOUND"


def test_inspector_sees_tool_errors_of_tools_with_an_output_schema(inspector: InspectorSetup) -> None:
    # an error result carries no structuredContent: the Inspector validates that against outputSchema
    run = inspector.runs["tool-error-with-output-schema"]
    assert run.returncode == 5, run
    result = run.json()["result"]
    assert result["isError"] is True and "structuredContent" not in result
    assert json.loads(result["content"][0]["text"])["code"] == "FORBIDDEN"


@pytest.mark.parametrize("case", ["unknown-tool", "forbidden-tool"])
def test_inspector_cannot_call_unknown_or_forbidden_tools(inspector: InspectorSetup, case: str) -> None:
    run = inspector.runs[case]
    assert run.returncode == 5, run
    assert run.json()["error"]["code"] == "tool_not_found"
    assert inspector.upstreams["notes"].count("runCommand") == 0


def test_inspector_runs_leaked_nothing_and_sent_only_valid_requests(inspector: InspectorSetup) -> None:
    for run in inspector.runs.values():
        for text in (run.stdout, run.stderr):
            assert NOTES_CANARY not in text and PET_CANARY not in text, run
            no_traceback(text)
    for up in inspector.upstreams.values():
        up.assert_no_violations()
    assert inspector.upstreams["notes"].count("searchNotes") == 2
    assert inspector.upstreams["petstore"].count("getPetNotes") == 1


# ============================================================================ conformance suite

CONFORMANCE_OVERLAY = """\
# The petstore example dressed as the conformance suite's fixture server: five real operations
# get the tool names its tools-call scenarios call. Everything still goes through the normal
# pipeline (compile, forward, validate, shape).
openapi2mcp: 1
server:
  name: petstore-conformance
  title: Pet store (conformance fixture)
upstream:
  base_url: ${PETSTORE_URL}
tools:
  - name: pets_list
    operation: listPets
    params:
      limit: {hidden: true}
      session: {hidden: true}
  - name: pets_get
    operation: getPet
  - name: test_simple_text
    description: The keeper's notes about pet 1 (a text/plain body becomes text content).
    operation: getPetNotes
    params:
      petId: {value: "1"}
  - name: test_image_content
    description: Pet 1's photo (an image/png body becomes image content).
    operation: getPetPhoto
    params:
      petId: {value: "1"}
  - name: test_embedded_resource
    description: Pet 2's photo, served as application/octet-stream (becomes an embedded resource).
    operation: getPetPhoto
    params:
      petId: {value: "2"}
  - name: test_audio_content
    description: Pet 3's photo, served as audio/wav (should become audio content).
    operation: getPetPhoto
    params:
      petId: {value: "3"}
  - name: test_error_handling
    description: A pet that does not exist (the upstream's 404 becomes an isError result).
    operation: getPet
    params:
      petId: {value: "no-such-pet"}
"""

# run id -> (server, arguments): the requirement set of each revision, on its own wire (2026-07-28:
# stateless requests; 2025-11-25: the initialize handshake). (`--suite all` would run the scenarios
# both revisions share, tools-list and tools-call-*, on the 2025-11-25 wire only.)
RUNS: dict[str, tuple[str, list[str]]] = {
    f"{server}/{revision}": (server, ["--requirements", revision])
    for server in ("stateful", "stateless")
    for revision in (MODERN, LEGACY)
}
# What the suite's `wire-schema-valid` check names the JSON schema of each revision (0.2.0-alpha.12
# validates 2026-07-28 messages against the schema it calls "draft").
WIRE_SCHEMA = {MODERN: "draft", LEGACY: LEGACY}

# Scenarios that apply to a tools-only server, with the check ids that still do not (and why).
APPLICABLE: dict[str, dict[str, str]] = {
    "server-initialize": {},
    "server-session-lifecycle": {},
    "server-stateless": {
        "sep-2575-server-rejects-undeclared-capability": "needs the fixture's test_missing_capability tool",
        "sep-2575-missing-capability-http-400": "needs the fixture's test_missing_capability tool",
        "sep-2575-http-server-no-independent-requests-on-stream": "needs the fixture's test_streaming_elicitation tool",
        "sep-2575-server-no-log-without-loglevel": "needs the fixture's test_logging_tool tool",
    },
    "ping": {},
    "tools-list": {},
    "tools-call-simple-text": {},
    "tools-call-image": {},
    "tools-call-embedded-resource": {},
    "tools-call-error": {},
    "tools-call-audio": {},
    "server-sse-multiple-streams": {},
    "dns-rebinding-protection": {},
    "http-header-validation": {},
    "caching": {
        "sep-2549-prompts-list-caching-hints": "no prompts: prompts/list is Method not found",
        "sep-2549-resources-list-caching-hints": "no resources: resources/list is Method not found",
        "sep-2549-resources-templates-list-caching-hints": "no resources: resources/templates/list is Method not found",
    },
    "input-required-result-unsupported-methods": {},
    "input-required-result-validate-input": {},
}

KNOWN_GAPS: dict[str, str] = {}

# Applicable scenarios that check nothing in one run (no check passes or fails there), and why.
# Everywhere else an applicable scenario must have at least one passing check.
NOT_TESTABLE_IN: dict[tuple[str, str], str] = {
    ("server-session-lifecycle", f"stateless/{LEGACY}"): "a stateless server has no session (INFO: not applicable)",
    ("server-sse-multiple-streams", f"stateless/{LEGACY}"): (
        "the 2025-11-25 variant needs a session id (WARNING 'Server provides session ID for multiple streams test')"
    ),
}

# Scenarios that do not apply, and the failure messages that show it is for that reason.
_FIXTURE_TOOL = r"Unknown tool: |Tool '\w+' not found|not list the diagnostic tool"
_NO_METHOD = r"Method not found|-32601"
NOT_APPLICABLE: dict[str, tuple[str, str]] = {
    "logging-set-level": ("no logging capability (MCP logging is not offered)", _NO_METHOD),
    "completion-complete": ("no prompts or resource templates, so nothing to complete", _NO_METHOD),
    "tools-call-mixed-content": ("one upstream response is one media type: never text+image+resource", _FIXTURE_TOOL),
    "tools-call-with-logging": ("needs a tool that sends log notifications", _NO_METHOD + "|" + _FIXTURE_TOOL),
    "tools-call-with-progress": ("needs a tool that sends progress notifications", _FIXTURE_TOOL),
    "tools-call-sampling": ("needs a tool that asks the client to sample an LLM", _FIXTURE_TOOL),
    "tools-call-elicitation": ("needs a fixture tool that elicits", _FIXTURE_TOOL),
    "json-schema-2020-12": ("needs the fixture's json_schema_2020_12_tool schema verbatim", _FIXTURE_TOOL),
    "elicitation-sep1034-defaults": ("needs a fixture tool that elicits", _FIXTURE_TOOL),
    "elicitation-sep1330-enums": ("needs a fixture tool that elicits", _FIXTURE_TOOL),
    "server-sse-polling": ("pending in the suite; JSON responses, no SSE to poll (informational only)", r"$^"),
    "resources-list": ("tools-only server: no resources", _NO_METHOD),
    "resources-read-text": ("tools-only server: no resources", _NO_METHOD),
    "resources-read-binary": ("tools-only server: no resources", _NO_METHOD),
    "resources-templates-read": ("tools-only server: no resources", _NO_METHOD),
    "resources-subscribe": ("tools-only server: no resources", _NO_METHOD),
    "resources-unsubscribe": ("tools-only server: no resources", _NO_METHOD),
    "sep-2164-resource-not-found": ("tools-only server: no resources (passes vacuously)", _NO_METHOD),
    "prompts-list": ("tools-only server: no prompts", _NO_METHOD),
    "prompts-get-simple": ("tools-only server: no prompts", _NO_METHOD),
    "prompts-get-with-args": ("tools-only server: no prompts", _NO_METHOD),
    "prompts-get-embedded-resource": ("tools-only server: no prompts", _NO_METHOD),
    "prompts-get-with-image": ("tools-only server: no prompts", _NO_METHOD),
    "http-custom-header-server-validation": (
        "needs tools whose arguments are mirrored in x-mcp-header headers; openapi2mcp emits none",
        r"Not testable",
    ),
    "sep-2640-skills-directory": ("skills extension, not offered", r"$^"),
    "sep-2640-skills-enumeration": ("skills extension, not offered", r"$^"),
    "sep-2640-skills-manifest": ("skills extension, not offered", r"$^"),
    **{
        f"tasks-{name}": (
            "tasks extension (SEP-2663), not offered: every check needs tasks the server never creates",
            _FIXTURE_TOOL + r"|Not testable|got -32601|capabilities\.extensions MUST be advertised"
            r"|fixture from Check 2 unavailable|for failing_job returned error code",
        )
        for name in (
            "lifecycle",
            "capability-negotiation",
            "wire-fields",
            "request-state-removal",
            "mrtr-input",
            "request-headers",
            "dispatch-and-envelope",
            "status-notifications",
            "required-task-error",
            "mrtr-composition",
        )
    },
    **{
        f"input-required-result-{name}": (
            "needs fixture tools that return InputRequiredResult (openapi2mcp's confirmation flow is not these tools)",
            _NO_METHOD + r"|" + _FIXTURE_TOOL + r"|Prerequisite failed|Expected InputRequiredResult",
        )
        for name in (
            "basic-elicitation",
            "basic-sampling",
            "basic-list-roots",
            "request-state",
            "multiple-input-requests",
            "multi-round",
            "missing-input-response",
            "non-tool-request",
            "result-type",
            "tampered-state",
            "capability-check",
            "ignore-extra-params",
        )
    },
}

_RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


@dataclass
class Conformance:
    listed: list[str]  # every server scenario the suite knows
    checks: dict[str, dict[str, list[dict[str, Any]]]]  # run id -> scenario -> checks
    outputs: dict[str, subprocess.CompletedProcess[str]]

    def failures(self, run: str, scenario: str) -> list[dict[str, Any]]:
        return [c for c in self.checks[run].get(scenario, []) if c.get("status") == "FAILURE"]


def _read_results(folder: Path) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for sub in sorted(folder.iterdir()):
        match = _RESULT_DIR.match(sub.name)
        if match and (sub / "checks.json").exists():
            found[match["scenario"]] = json.loads((sub / "checks.json").read_text(encoding="utf-8"))
    return found


@pytest.fixture(scope="module")
def conformance(node: NodeTools, node_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Conformance:
    """The suite, once: a stateful and a stateless server, the 2026-07-28 and 2025-11-25 requirements each."""
    work = tmp_path_factory.mktemp("conformance")
    overlay = work / "conformance.overlay.yaml"
    overlay.write_text(CONFORMANCE_OVERLAY, encoding="utf-8")
    listing = node.npx(node.conformance_dir, ["conformance", "list"], home=node_home)
    assert listing.returncode == 0, listing.stderr
    server_part = listing.stdout.split("Client scenarios", 1)[0]
    listed = re.findall(r"^\s+- ([\w.-]+) \[", server_part, flags=re.MULTILINE)
    assert listed, listing.stdout

    with Upstream.start("petstore") as up:
        up.fault(path_prefix="/pets/2/photo", kind="binary", times=None)
        up.fault(path_prefix="/pets/3/photo", kind="binary", content_type="audio/wav", times=None)
        args = [*example_args("petstore", overlay), "--base-url", up.base_url]
        with ThreadPoolExecutor(max_workers=2) as pool:
            stateful = pool.submit(HttpServer.start, args, log_dir=work)
            stateless = pool.submit(HttpServer.start, [*args, "--stateless"], log_dir=work)
            servers = {"stateful": stateful.result(), "stateless": stateless.result()}
        try:

            def run(run_id: str) -> subprocess.CompletedProcess[str]:
                server, options = RUNS[run_id]
                out = work / run_id.replace("/", "-")
                command = ["conformance", "server", "--url", servers[server].url, *options, "--timeout", "30000"]
                return node.npx(node.conformance_dir, [*command, "-o", str(out)], home=node_home, timeout=600)

            with ThreadPoolExecutor(max_workers=2) as pool:
                futures = {run_id: pool.submit(run, run_id) for run_id in RUNS}
                outputs = {run_id: future.result() for run_id, future in futures.items()}
            up.assert_no_violations()
            for server in servers.values():
                no_traceback(server.stderr())
        finally:
            for server in servers.values():
                server.stop()
    checks = {run_id: _read_results(work / run_id.replace("/", "-")) for run_id in RUNS}
    return Conformance(listed, checks, outputs)


def test_conformance_every_scenario_is_classified(conformance: Conformance) -> None:
    unclassified = sorted(set(conformance.listed) - set(APPLICABLE) - set(NOT_APPLICABLE))
    assert not unclassified, f"new conformance scenarios; classify them here and in docs/testing.md: {unclassified}"
    for run_id, found in conformance.checks.items():
        assert found, f"{run_id} produced no results:\n{conformance.outputs[run_id].stdout[-3000:]}"


@pytest.mark.parametrize(
    "scenario",
    [
        pytest.param(s, marks=pytest.mark.xfail(reason=KNOWN_GAPS[s], strict=True)) if s in KNOWN_GAPS else s
        for s in APPLICABLE
    ],
)
def test_conformance_scenario_passes(conformance: Conformance, scenario: str) -> None:
    ran = [run_id for run_id in RUNS if scenario in conformance.checks[run_id]]
    assert ran, f"{scenario} did not run in any of {list(RUNS)}"
    problems = []
    for run_id in ran:
        passed = any(c["status"] == "SUCCESS" for c in conformance.checks[run_id][scenario])
        if passed is ((scenario, run_id) in NOT_TESTABLE_IN):
            problems.append(f"{run_id}: a check passed; drop it from NOT_TESTABLE_IN" if passed else
                            f"{run_id}: no check passed (all skipped or informational?)")
        for check in conformance.failures(run_id, scenario):
            if check["id"] not in APPLICABLE[scenario]:
                problems.append(f"{run_id}: [{check['id']}] {check.get('errorMessage') or check.get('description')}")
    assert not problems, "\n".join(problems)


def test_conformance_covers_both_eras_and_both_server_modes(conformance: Conformance) -> None:
    for run_id in RUNS:
        revision = run_id.split("/")[1]
        checks = conformance.checks[run_id]
        assert "dns-rebinding-protection" in checks, run_id
        # the tool scenarios ran on that revision's wire, every message valid against its schema
        for scenario in ("tools-list", "tools-call-simple-text", "tools-call-image", "tools-call-error"):
            wire = [c for c in checks[scenario] if c["id"] == "wire-schema-valid"]
            schemas = {ref["url"].split("/schema/")[1].split("/")[0] for c in wire for ref in c["specReferences"]}
            assert [c["status"] for c in wire] == ["SUCCESS"] and schemas == {WIRE_SCHEMA[revision]}, (run_id, wire)
    for run_id in (f"stateful/{MODERN}", f"stateless/{MODERN}"):
        stateless = conformance.checks[run_id]["server-stateless"]
        assert sum(c["status"] == "SUCCESS" for c in stateless) >= 15, run_id  # the 2026-07-28 wire really ran
        assert "http-header-validation" in conformance.checks[run_id]
    lifecycle = conformance.checks[f"stateful/{LEGACY}"]["server-session-lifecycle"]
    assert {c["id"] for c in lifecycle if c["status"] == "SUCCESS"} >= {
        "server-session-initialized-accepted",
        "server-session-delete-accepted",
        "server-session-terminated-returns-404",
    }


def test_conformance_not_applicable_scenarios_fail_only_for_their_reason(conformance: Conformance) -> None:
    unexpected = []
    for scenario, (_why, signature) in NOT_APPLICABLE.items():
        for run_id in RUNS:
            for check in conformance.failures(run_id, scenario):
                message = str(check.get("errorMessage") or check.get("description") or "")
                # what the server sent must be valid MCP even where the scenario does not apply
                if check["id"] == "wire-schema-valid" or not re.search(signature, message):
                    unexpected.append(f"{run_id}: {scenario} [{check['id']}] {message[:300]}")
    assert not unexpected, "\n".join(unexpected)
