"""`openapi2mcp lint`: every rule fires on a crafted overlay and on none of the curated ones, the client
profiles refuse what their clients refuse, suppressions work and are checked, SARIF validates against
the official SARIF 2.1.0 schema, and the command's exit codes and output.

Fixtures: tests/lint/api.yaml (a small API with every problem an overlay can have), bad.yaml (an
overlay with each O2M1xx rule once, its comments say which), clients.yaml (one refusal of each kind
per client), sarif-schema-2.1.0.json (OASIS sarif-spec, sarif-2.1/schema, errata01, commit a560296).
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from openapi2mcp.authoring import PROFILES, RULES, LintOptions, LintReport, load_project, run_lint, to_sarif
from openapi2mcp.authoring.clients import collisions, schema_refusals
from openapi2mcp.cli.app import app
from tests.local import EXAMPLES, ROOT

FIXTURES = ROOT / "tests" / "lint"
API = FIXTURES / "api.yaml"
BAD = FIXTURES / "bad.yaml"
CLIENTS = FIXTURES / "clients.yaml"
OVERLAY_RULES = sorted(r.id for r in RULES if r.id.startswith("O2M1"))


def lint(spec: Path | str, *overlays: Path | str, **options: object) -> LintReport:
    return run_lint(load_project(str(spec), [str(o) for o in overlays]), LintOptions(**options))  # type: ignore[arg-type]


def found(report: LintReport) -> set[tuple[str, str | None]]:
    return {(f.rule.id, f.tool) for f in report.active}


def tool_lines(path: Path) -> dict[str, tuple[int, int]]:
    """tool name -> (its `- name:` line, the next tool's line) in an overlay file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    starts = [(n + 1, m.group(1)) for n, line in enumerate(lines) if (m := re.match(r"\s*- name: ([\w.]+)", line))]
    ends = [s for s, _ in starts[1:]] + [len(lines) + 1]
    return {name: (start, end) for (start, name), end in zip(starts, ends, strict=True)}


# ============================================================================ the rules


def test_the_rules_are_data_with_stable_ids() -> None:
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids)) and all(re.fullmatch(r"O2M\d{3}", i) for i in ids)
    assert ids == ["O2M001", "O2M002", *[f"O2M1{n:02}" for n in range(1, 13)], *[f"O2M20{n}" for n in range(1, 8)]]
    for r in RULES:
        assert r.why.endswith(".") and r.fix and r.name == r.name.lower()
        assert (r.check is None) == (r.id in ("O2M001", "O2M002"))
        assert r.clients == r.id.startswith("O2M2")
    docs = (ROOT / "docs" / "authoring.md").read_text(encoding="utf-8")
    for r in RULES:  # every rule is documented, under its own anchor
        assert f'<a id="{r.id.lower()}"></a>' in docs and f"`{r.name}`" in docs, r.id


def test_every_overlay_rule_fires_on_the_crafted_overlay() -> None:
    report = lint(API, BAD, max_tokens=500)
    assert sorted({f.rule.id for f in report.active}) == OVERLAY_RULES
    assert found(report) == {
        ("O2M101", "items_get"), ("O2M102", "stock_manage"), ("O2M103", "items_list"), ("O2M104", "items_list"),
        ("O2M105", "items_list"), ("O2M106", "items_get"), ("O2M107", None), ("O2M108", "items_lookup"),
        ("O2M109", "items_create"), ("O2M110", "items_delete"), ("O2M111", "host_shell"), ("O2M112", None),
    }
    blocks = tool_lines(BAD)
    text = BAD.read_text(encoding="utf-8").splitlines()
    for f in report.active:
        assert f.file == str(BAD) and f.line and (f.fix or f.rule.fix)
        if f.tool:  # located inside the tool's block of the overlay
            start, end = blocks[f.tool]
            assert start <= f.line < end, (f.rule.id, f.line)
    by_rule = {f.rule.id: f for f in report.active}
    assert text[by_rule["O2M112"].line - 1].startswith("spec:")
    assert text[by_rule["O2M107"].line - 1] == "tools:"
    assert "'per_page'" in by_rule["O2M104"].message and "maximum: 100" in (by_rule["O2M104"].fix or "")
    assert yaml.safe_load(by_rule["O2M105"].fix or "") == {"pagination": {  # init's block, pasteable as is
        "style": "page", "page_size": 20, "max_items": 100, "items": "items"}}
    assert "only repeats 'getItem'" in by_rule["O2M101"].message
    assert "runs commands or code (exec)" in by_rule["O2M111"].message  # init's words (authoring/risk.py)
    assert "items_search" in by_rule["O2M108"].message
    assert report.spec_sha256 in by_rule["O2M112"].message  # both hashes and the fix
    assert "a" * 64 in by_rule["O2M112"].message and report.spec_sha256 in (by_rule["O2M112"].fix or "")


def test_the_budgets_are_options() -> None:
    assert "O2M107" not in {f.rule.id for f in lint(API, BAD).active}  # ~2,600 tokens: within the default
    assert "O2M106" not in {f.rule.id for f in lint(API, BAD, max_response_bytes=100_000).active}
    small = {f.rule.id for f in lint(API, BAD, max_response_bytes=200).active}
    assert "O2M106" in small


EXAMPLE_OVERLAYS = sorted(EXAMPLES.glob("*/overlay*.yaml"))


@pytest.mark.parametrize("overlay", EXAMPLE_OVERLAYS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_example_overlays_pass(overlay: Path) -> None:
    profiles = tuple(p for p in PROFILES if p != "gemini-api")
    report = lint(overlay.parent / "openapi.yaml", overlay, clients=profiles)
    assert report.active == [], "\n".join(f"{f.where} {f.rule.id} {f.message}" for f in report.active)
    for f in report.findings:  # what is suppressed says why
        assert f.suppressed, f.rule.id


def test_the_curated_github_overlay_passes(corpus: Path) -> None:
    spec = corpus / "github" / "api.github.com.json"
    report = lint(spec, ROOT / "overlays" / "github.yaml", clients=tuple(p for p in PROFILES if p != "gemini-api"))
    assert report.active == [], "\n".join(f"{f.where} {f.rule.id} {f.message}" for f in report.active)
    gemini = lint(spec, ROOT / "overlays" / "github.yaml", clients=("gemini-api",))
    assert {f.rule.id for f in gemini.active} <= {"O2M204", "O2M205"}  # docs/authoring.md: Gemini's subset


# ============================================================================ suppressions


def with_lines(text: str, edits: dict[str, str]) -> str:
    """`text` with each line that starts with a key replaced by its value (which may hold several lines)."""
    out = []
    for line in text.splitlines():
        key = next((k for k in edits if line.startswith(k)), None)
        out.append(edits.pop(key) if key is not None else line)
    assert not edits, edits
    return "\n".join(out) + "\n"


def test_suppressions_with_reasons_on_the_line_the_line_above_or_the_tool(tmp_path: Path) -> None:
    overlay = tmp_path / "bad.yaml"
    overlay.write_text(with_lines(BAD.read_text(encoding="utf-8"), {
        # the tool's line covers the tool; a comment two lines up covers nothing
        "  - name: items_get ": "  # o2m: ignore[O2M101] -- too far up\n\n"
                                "  - name: items_get   # o2m: ignore[O2M106] -- read whole on purpose",
        "  - name: items_create ": "  # o2m: ignore[O2M109]\n  - name: items_create",  # the line above, no reason
        "      q: {description: Text}": "      q: {description: Text}   # o2m: ignore[O2M103] -- the API ignores q",
        "  - name: items_search": "  - name: items_search   # o2m: ignore[O2M111] -- nothing here",
        "  - name: stock_manage": "  - name: stock_manage   # o2m: ignore[O2M999] -- no such rule",
    }), encoding="utf-8")
    report = lint(API, overlay)
    suppressed = {(f.rule.id, f.tool): f.suppressed for f in report.findings if f.suppressed is not None}
    assert suppressed == {("O2M106", "items_get"): "read whole on purpose", ("O2M109", "items_create"): "",
                          ("O2M103", "items_list"): "the API ignores q"}
    assert "O2M101" in {f.rule.id for f in report.active}
    meta = [(f.rule.id, f.message) for f in report.active if f.rule.id in ("O2M001", "O2M002")]
    assert ("O2M001", "suppression of O2M109 gives no reason") in meta
    assert any(r == "O2M002" and "O2M111" in m for r, m in meta)
    assert any(r == "O2M002" and "unknown rule 'O2M999'" in m for r, m in meta)
    assert any(r == "O2M002" and "O2M101" in m for r, m in meta)
    assert len(meta) == 4 and report.counts()["suppressed"] == 3


# ============================================================================ client profiles

REFUSED = {
    "claude": {("O2M201", "items.get"), ("O2M203", "stock_lookup")},
    "claude-code": {("O2M201", "items.get"), ("O2M201", "stock_levels_for_every_warehouse_and_region"),
                    ("O2M203", "stock_lookup")},
    "openai": {("O2M201", "items.get"), ("O2M203", "stock_lookup")},
    "cursor": {("O2M201", "items.get"), ("O2M201", "stock_levels_for_every_warehouse_and_region")},
    "vscode": {("O2M202", "items_get")},
    "gemini": set(),
    "gemini-api": {("O2M204", "stock_levels_for_every_warehouse_and_region"),
               ("O2M205", "stock_levels_for_every_warehouse_and_region")},
}


@pytest.mark.parametrize("client", list(PROFILES))
def test_each_client_refuses_what_it_refuses(client: str) -> None:
    report = lint(API, CLIENTS, clients=(client,))
    assert found(report) - {(r, t) for r, t in found(report) if not r.startswith("O2M2")} == REFUSED[client]
    for f in report.active:
        if f.rule.id.startswith("O2M2"):
            assert f.client == client and PROFILES[client].title in f.message
    if client == "claude-code":
        long = next(f for f in report.active if f.tool == "stock_levels_for_every_warehouse_and_region")
        assert "mcp__inventory-service__stock_levels_for_every_warehouse_and_region" in long.message
        assert "67 characters" in long.message
    if client == "cursor":
        assert any("60 characters" in f.message for f in report.active)
    if client == "gemini-api":
        messages = " ".join(f.message for f in report.active)
        assert "'X-Trace-Id'" in messages and "format 'date'" in messages
        assert "additionalProperties" not in messages  # Gemini CLI strips it before sending


def test_the_server_name_is_the_clients_key() -> None:
    short = lint(API, CLIENTS, clients=("claude-code", "cursor"), server_name="inv")
    assert ("O2M201", "stock_levels_for_every_warehouse_and_region") not in found(short)


def test_too_many_tools_for_openai_and_vscode(tmp_path: Path) -> None:
    paths = {f"/r{i}": {"get": {"operationId": f"readThing{i}", "summary": f"Read thing number {i} of the store.",
                                "responses": {"200": {"description": "ok"}}}} for i in range(130)}
    spec = tmp_path / "wide.json"
    spec.write_text(json.dumps({"openapi": "3.0.3", "info": {"title": "Wide", "version": "1"},
                                "servers": [{"url": "http://127.0.0.1:9"}], "paths": paths}), encoding="utf-8")
    overlay = tmp_path / "wide.yaml"
    overlay.write_text("openapi2mcp: 1\nserver: {name: wide}\npassthrough: true\n", encoding="utf-8")
    report = lint(spec, overlay, clients=tuple(PROFILES), max_tokens=10**6)
    counts = [f for f in report.active if f.rule.id == "O2M207"]
    assert sorted(f.client or "" for f in counts) == ["openai", "vscode"]
    assert all("130" in f.message and "128" in f.message for f in counts)


def test_vscode_omits_a_tool_whose_schema_is_not_json_schema() -> None:
    vscode = PROFILES["vscode"]
    bad = list(schema_refusals(vscode, {"type": "object", "properties": {"x": {"type": "strng"}}}, "t"))
    assert [r.kind for r in bad] == ["meta_schema"] and bad[0].pointer == "/properties/x/type"
    assert list(schema_refusals(vscode, {"type": "object", "properties": {"x": {"type": "string"}}}, "t")) == []


def test_gemini_cli_names_and_cuts_like_gemini_cli() -> None:
    gemini = PROFILES["gemini"]
    assert gemini.rename is not None
    assert gemini.rename("github", "list_repos") == "mcp_github_list_repos"  # gemini-cli mcp-tool.test.ts
    assert gemini.rename("srv", "namespace:tool") == "mcp_srv_namespace:tool"
    long = gemini.rename("s", "x" * 80)
    assert len(long) == 63 and long == "mcp_s_" + "x" * 24 + "..." + "x" * 30
    # two long names that differ only in the middle become one name: lint says so
    a, b = (f"orders_for_the_warehouse_{side}_list_everything_for_the_region" for side in ("north", "south"))
    assert [r.kind for r in collisions(gemini, "shop", [a, b])] == ["collision"]
    # Gemini CLI sends the schema as parametersJsonSchema: JSON Schema as written, nullable type lists included
    ok = {"type": "object", "properties": {"a": {"type": ["string", "null"], "format": "uuid", "examples": ["x"]}}}
    assert list(schema_refusals(gemini, ok, "t")) == []
    assert [r.kind for r in schema_refusals(gemini, {"type": "object", "properties": {"a": {"type": 3}}}, "t")] == [
        "meta_schema"]


def test_gemini_api_takes_its_subset_only() -> None:
    gemini = PROFILES["gemini-api"]
    schema = {"type": "object", "additionalProperties": False, "properties": {
        "a": {"type": ["string", "null"]}, "b": {"type": "integer", "enum": [1, 2]}, "c": {"const": "x"},
        "d": {"type": "string", "format": "date-time", "nullable": True}, "e": {"type": "string", "format": "uri"},
        "f-g": {"type": "string"}}}
    kinds = {(r.arg, r.kind) for r in schema_refusals(gemini, schema, "t")}
    assert kinds == {("a", "schema"), ("b", "schema"), ("c", "schema"), ("e", "schema"), ("f-g", "argument")}


# ============================================================================ SARIF


def sarif_validator() -> jsonschema.protocols.Validator:
    schema = json.loads((FIXTURES / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)  # type: ignore[no-any-return]


def test_sarif_validates_and_points_into_the_overlay(tmp_path: Path) -> None:
    out = tmp_path / "lint.sarif"
    result = CliRunner().invoke(app, ["lint", str(API.relative_to(ROOT)), "-O", str(BAD.relative_to(ROOT)),
                                      "--format", "sarif", "-o", str(out), "--max-tokens", "500"],
                                catch_exceptions=False)
    assert result.exit_code == 1, result.output
    log = json.loads(out.read_text(encoding="utf-8"))
    errors = sorted(sarif_validator().iter_errors(log), key=str)
    assert errors == [], errors[0].message if errors else ""
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.id for r in RULES]
    report = lint(API, BAD, max_tokens=500)
    assert len(run["results"]) == len(report.findings)
    for res, f in zip(run["results"], report.findings, strict=True):
        assert res["ruleId"] == f.rule.id and rules[res["ruleIndex"]]["id"] == f.rule.id
        loc = res["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"] == {"uri": "tests/lint/bad.yaml", "uriBaseId": "%SRCROOT%"}
        assert loc["region"]["startLine"] == f.line and res["level"] == f.severity.value


def test_sarif_keeps_suppressions_with_their_justification(tmp_path: Path) -> None:
    overlay = tmp_path / "bad.yaml"
    overlay.write_text(with_lines(BAD.read_text(encoding="utf-8"), {
        "  - name: host_shell ": "  - name: host_shell   # o2m: ignore[O2M111] -- a sandboxed test host"}),
        encoding="utf-8")
    report = lint(API, overlay)
    log = to_sarif(report, root=tmp_path)
    assert list(sarif_validator().iter_errors(log)) == []
    suppressed = [r for r in log["runs"][0]["results"] if "suppressions" in r]
    assert [r["ruleId"] for r in suppressed] == ["O2M111"]
    assert suppressed[0]["suppressions"] == [{"kind": "inSource", "justification": "a sandboxed test host"}]
    assert suppressed[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "bad.yaml"


# ============================================================================ the command


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_exit_codes() -> None:
    notes = [str(EXAMPLES / "notes" / "openapi.yaml"), "-O", str(EXAMPLES / "notes" / "overlay.yaml")]
    code, out, _ = invoke("lint", *notes)
    assert code == 0 and out.strip().endswith("4 tool(s), 0 error(s), 0 warning(s)")
    code, out, _ = invoke("lint", str(API), "-O", str(BAD))
    assert code == 1 and "O2M110 error: items_delete is critical" in out and "    fix: " in out
    assert invoke("lint", str(API), "-O", str(BAD), "--fail-on", "never")[0] == 0
    # the overlay without its three errors: warnings fail the default gate, not --fail-on error
    errors = run_lint(load_project(str(API), [str(BAD)]), LintOptions())
    assert {f.rule.id for f in errors.active if f.severity.value == "error"} == {"O2M110", "O2M111", "O2M112"}


def test_warnings_alone_pass_fail_on_error(tmp_path: Path) -> None:
    overlay = tmp_path / "warn.yaml"
    overlay.write_text("openapi2mcp: 1\ntools:\n  - name: items_get\n    operation: getItem\n", encoding="utf-8")
    assert invoke("lint", str(API), "-O", str(overlay))[0] == 1
    assert invoke("lint", str(API), "-O", str(overlay), "--fail-on", "error")[0] == 0


def test_json_report() -> None:
    code, out, _ = invoke("lint", str(API), "-O", str(BAD), "--json")
    data = json.loads(out)
    assert code == 1 and data["summary"]["error"] == 3 and data["tools"] == 8
    first = data["findings"][0]
    assert set(first) >= {"rule", "name", "severity", "message", "file", "line", "column", "tool", "fix", "suppressed"}
    assert data["spec"]["sha256"] == load_project(str(API), [str(BAD)]).spec.sha256


def test_list_rules() -> None:
    code, out, _ = invoke("lint", "--list-rules")
    assert code == 0 and all(f"{r.id} {r.name} [{r.severity.value}]" in out for r in RULES)


@pytest.mark.parametrize(("args", "says"), [
    (["lint", "missing.yaml", "-O", str(BAD)], "missing.yaml"),
    (["lint", str(API), "-O", "missing-overlay.yaml"], "overlay file not found: missing-overlay.yaml"),
    (["lint", str(API)], "no tool overlay given"),
    (["lint", str(API), "-O", str(API)], "not an overlay"),
    (["lint", str(API), "-O", str(BAD), "--client", "netscape"], "netscape"),
    (["lint", "-O", str(BAD)], "SPEC"),
])
def test_bad_input_exits_2_with_one_paragraph(args: list[str], says: str) -> None:
    result = CliRunner().invoke(app, args)
    text = result.stdout + result.stderr
    assert result.exit_code == 2, text
    assert says in text and "Traceback" not in text
    assert "\n\n" not in text.strip() or "Usage:" in text  # one paragraph (click's usage errors: its own box)


def test_a_broken_overlay_is_located(tmp_path: Path) -> None:
    overlay = tmp_path / "broken.yaml"
    overlay.write_text("openapi2mcp: 1\ntools:\n  - name: items_get\n    operation: getItm\n", encoding="utf-8")
    code, _, err = invoke("lint", str(API), "-O", str(overlay))
    assert code == 2 and f"{overlay}:4" in err and "did you mean 'getItem'" in err


def test_plain_when_piped_rich_on_a_terminal() -> None:
    args = [sys.executable, "-m", "openapi2mcp", "lint", str(API), "-O", str(BAD)]
    env = {**os.environ, "COLUMNS": "160", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    piped = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert piped.returncode == 1 and "\x1b[" not in piped.stdout
    assert re.search(r"^tests/lint/bad\.yaml:27:5: O2M110 error: ", piped.stdout.replace(str(ROOT) + "/", ""), re.M)
    leader, follower = pty.openpty()
    with subprocess.Popen(args, stdout=follower, stderr=subprocess.PIPE, env=env, cwd=ROOT) as proc:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the other end closed
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.wait(timeout=120)
    os.close(leader)
    shown = b"".join(chunks).decode("utf-8", "replace")
    assert proc.returncode == 1
    assert "\x1b[" in shown and "O2M110" in shown and "fix:" in shown  # a coloured table
    assert "8 tool(s), 3 error(s)" in re.sub(r"\x1b\[[0-9;]*m", "", shown)
