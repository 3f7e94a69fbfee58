"""`openapi2mcp init`: a draft overlay that compiles as is, for every spec we have.

Real files only: the corpus (../shared/corpus, or tests/corpus unpacked by .ci/fetch-corpus.sh),
the example APIs, the saved specs of the third-party servers (tests/specs/thirdparty). Every draft
is compiled again from the file written, the way `openapi2mcp compile` does, and checked for what
the issue promises: every operation exactly once (in a tool or in the not-exposed list), served
names valid for Claude, the same bytes for the same spec. One drafted overlay is served and its
tools called with the SDK client against the real petstore upstream.
"""

from __future__ import annotations

import collections
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from anyio.from_thread import BlockingPortal

from examples import Upstream
from openapi2mcp.authoring import draft_overlay
from openapi2mcp.compiler import compile_manifest
from openapi2mcp.loader import load_spec
from openapi2mcp.manifest import Manifest
from openapi2mcp.overlay import read_overlay
from tests.conftest import corpus_file
from tests.e2e_support import McpSession, err, no_traceback, ok, portal, run_cli
from tests.local import EXAMPLES, ROOT

CLAUDE_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
NOT_EXPOSED = re.compile(r"^#   (.+?)\s{2,}([A-Z]+ /\S*)  -- (.+)$")
THIRDPARTY = ROOT / "tests" / "specs" / "thirdparty"

SMALL_CORPUS = [
    "apis-guru/docker.com_engine.json",
    "apis-guru/slack.com.json",
    "apis-guru/spotify.com.json",
    *(f"oai-learn/v2.0/{kind}/{name}.{kind}" for kind in ("json", "yaml") for name in (
        "api-with-examples", "petstore-expanded", "petstore-minimal", "petstore-simple",
        "petstore-with-external-docs", "petstore", "uber")),
    *(f"oai-learn/v3.0/{name}.{ext}" for ext in ("json", "yaml") for name in (
        "api-with-examples", "callback-example", "link-example", "petstore-expanded", "petstore", "uspto")),
    *(f"oai-learn/v3.1/{name}.{ext}" for ext in ("json", "yaml") for name in ("non-oauth-scopes", "tictactoe")),
    "oai-learn/v3.2/3.2-tags-example.json",
    "oai-learn/v3.2/3.2-tags-example.yaml",
]
BIG_CORPUS = [
    "github/api.github.com.json",
    "stripe/spec3.json",
    "stripe/spec3.yaml",
    "openai/openapi.yaml",
    "kubernetes/swagger-kubernetes-client-python-8.0.0b1.json",
    "digitalocean/specification/DigitalOcean-public.v2.yaml",
]


# ----------------------------------------------------------------------------- checking a draft


def ops_of_tool(tool: dict[str, Any]) -> list[str]:
    if "operation" in tool:
        return [tool["operation"]]
    if "actions" in tool:
        return [a["operation"] for a in tool["actions"].values()]
    return [v["operation"] for v in tool["variants"]]


def check_draft(spec: Path, overlay: Path, **load: Any) -> tuple[Manifest, dict[str, Any]]:
    """Compile the written file as `openapi2mcp compile` does and check what every draft promises."""
    loaded = load_spec(str(spec), **load)
    compiled = compile_manifest(loaded, [read_overlay(overlay)]).manifest
    raw = compile_manifest(loaded, all_operations=True).manifest
    key_of = {t.branches[0].steps[0].operation.id: f"{t.branches[0].steps[0].operation.method} "
              f"{t.branches[0].steps[0].operation.path}" for t in raw.tools}
    text = overlay.read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    seen: collections.Counter[str] = collections.Counter()
    for tool in data["tools"]:
        seen.update(key_of[ref] for ref in ops_of_tool(tool))
    hidden = [m for line in text.splitlines() if (m := NOT_EXPOSED.match(line))]
    seen.update(m.group(2) for m in hidden)
    assert all(m.group(3).strip() for m in hidden), "every operation left out says why"
    every = set(key_of.values())
    assert set(seen) == every, sorted(every ^ set(seen))[:5]
    assert [k for k, n in seen.items() if n != 1] == [], "every operation exactly once"
    for tool in compiled.tools:
        assert CLAUDE_NAME.match(tool.name), tool.name
        assert tool.input_schema["type"] == "object"
        assert not {"oneOf", "anyOf", "allOf"} & set(tool.input_schema)
    return compiled, data


def draft_to(spec: Path, out: Path, max_tools: int = 30, **load: Any) -> Any:
    d = draft_overlay(load_spec(str(spec), **load), max_tools=max_tools, name=out.name)
    out.write_text(d.text, encoding="utf-8")
    return d


# ----------------------------------------------------------------------------- the corpus


@pytest.mark.parametrize("rel", SMALL_CORPUS)
def test_corpus_spec_drafts_and_compiles(rel: str, tmp_path: Path) -> None:
    spec = corpus_file(rel)
    out = tmp_path / "overlay.yaml"
    d = draft_to(spec, out)
    compiled, data = check_draft(spec, out)
    listed = [t for t in compiled.tools if t.risk != "forbidden"]
    assert len(listed) == d.summary.tools <= 30
    assert d.summary.covered + d.summary.not_exposed + sum(
        len(ops_of_tool(t)) for t in data["tools"] if t.get("risk") == "forbidden") == d.summary.operations


@pytest.mark.slow
@pytest.mark.parametrize("rel", BIG_CORPUS)
def test_big_corpus_spec_drafts_and_compiles(rel: str, tmp_path: Path) -> None:
    spec = corpus_file(rel)
    out = tmp_path / "overlay.yaml"
    d = draft_to(spec, out)
    check_draft(spec, out)
    assert d.summary.tools == 30
    assert d.summary.ratio >= 10, d.summary.as_dict()  # a few task-level tools, not the raw conversion


def test_split_spec_drafts_with_its_ref_root(tmp_path: Path) -> None:
    spec = corpus_file("oai-learn/v2.0/json/petstore-separate/spec/swagger.json")
    out = tmp_path / "overlay.yaml"
    draft_to(spec, out, ref_root=spec.parent.parent)
    check_draft(spec, out, ref_root=spec.parent.parent)


def test_a_spec_without_operations_is_bad_input(tmp_path: Path) -> None:
    spec = corpus_file("oai-learn/v3.1/webhook-example.yaml")
    proc = run_cli("init", str(spec), "-o", str(tmp_path / "o.yaml"))
    assert proc.returncode == 2, proc.stderr
    assert "no operations under `paths`" in proc.stderr
    assert not (tmp_path / "o.yaml").exists()


@pytest.mark.slow
def test_github_draft_is_small_and_covers_the_core(tmp_path: Path) -> None:
    spec = corpus_file("github/api.github.com.json")
    out = tmp_path / "github.yaml"
    d = draft_to(spec, out)
    _, data = check_draft(spec, out)
    assert d.summary.raw_bytes >= 10 * d.summary.listed_bytes, d.summary.as_dict()
    used = {ref for t in data["tools"] if t.get("risk") != "forbidden" for ref in ops_of_tool(t)}
    for core in ("issues/get", "issues/list-for-repo", "issues/create", "pulls/get", "pulls/list", "pulls/create",
                 "repos/get"):
        assert core in used, core
    assert data["upstream"]["base_url"] == "${GITHUB_URL:-https://api.github.com}"
    # GitHub pages with page/per_page and a Link header
    find = next(t for t in data["tools"] if "issues/list-for-repo" in ops_of_tool(t))
    branch = next(b for b in (find.get("variants") or find.get("actions", {}).values())
                  if b["operation"] == "issues/list-for-repo")
    assert branch["pagination"]["style"] == "link"


@pytest.mark.slow
def test_stripe_draft_is_small_and_covers_the_core(tmp_path: Path) -> None:
    spec = corpus_file("stripe/spec3.json")
    out = tmp_path / "stripe.yaml"
    d = draft_to(spec, out)
    _, data = check_draft(spec, out)
    assert d.summary.raw_bytes >= 10 * d.summary.listed_bytes, d.summary.as_dict()
    used = {ref for t in data["tools"] if t.get("risk") != "forbidden" for ref in ops_of_tool(t)}
    for core in ("GetCustomers", "GetCustomersCustomer", "PostCustomers", "GetCharges", "GetChargesCharge",
                 "PostCharges", "GetInvoices", "GetInvoicesInvoice", "PostInvoices"):
        assert core in used, core
    by_op = {b["operation"]: b for t in data["tools"] if "actions" in t for b in t["actions"].values()}
    assert by_op["PostCharges"]["risk"] == "critical"  # creating a charge moves money
    assert by_op["PostInvoicesInvoicePay"]["risk"] == "critical"
    # Stripe's cursor is the last item's id, while has_more says there is more
    paged = [b for t in data["tools"] for b in (t.get("variants") or []) if b["operation"] == "GetCustomers"]
    assert paged[0]["pagination"]["style"] == "body_cursor"
    assert paged[0]["pagination"]["cursor_param"] == "starting_after"


# ----------------------------------------------------------------------------- the examples and third parties


@pytest.mark.parametrize("name", ["notes", "petstore", "mailfiles", "market"])
def test_example_drafts_compile_with_the_cli(name: str, tmp_path: Path) -> None:
    spec = EXAMPLES / name / "openapi.yaml"
    out = tmp_path / f"{name}.yaml"
    proc = run_cli("init", str(spec), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc.stdout + proc.stderr)
    assert proc.stdout.startswith(f"wrote {out}: ")
    built = run_cli("compile", str(spec), "--overlay", str(out), "-o", str(tmp_path / "manifest.json"))
    assert built.returncode == 0, built.stderr
    listed = run_cli("inspect", str(spec), "--overlay", str(out), "--json")
    assert listed.returncode == 0, listed.stderr
    assert all(CLAUDE_NAME.match(t["name"]) for t in json.loads(listed.stdout))
    check_draft(spec, out)


def test_notes_run_command_is_forbidden(tmp_path: Path) -> None:
    spec = EXAMPLES / "notes" / "openapi.yaml"
    out = tmp_path / "notes.yaml"
    draft_to(spec, out)
    compiled, data = check_draft(spec, out)
    forbidden = [t for t in data["tools"] if t.get("risk") == "forbidden"]
    assert [t["operation"] for t in forbidden] == ["runCommand"]
    assert "runCommand" not in {op for t in compiled.tools if t.risk != "forbidden" for op in t.meta.get(
        "operations", [])}


def test_mailfiles_risks_come_from_the_words(tmp_path: Path) -> None:
    spec = EXAMPLES / "mailfiles" / "openapi.yaml"
    out = tmp_path / "mailfiles.yaml"
    draft_to(spec, out)
    compiled, _ = check_draft(spec, out)
    risk = {s.operation.id: b.risk for t in compiled.tools for b in t.branches for s in b.steps}
    assert risk["sendExternalEmail"] == "critical"  # sends e-mail outside
    assert risk["deleteFile"] == "high"
    assert risk["listFiles"] == "low"


@pytest.mark.parametrize("name", ["kinto.json", "prefect.json", "chroma.json", "jupyter.yaml"])
def test_thirdparty_specs_draft_and_compile(name: str, tmp_path: Path) -> None:
    spec = THIRDPARTY / name
    out = tmp_path / "overlay.yaml"
    d = draft_to(spec, out)
    check_draft(spec, out)
    assert d.summary.tools >= 5


def test_prefect_draft_pages_its_filter_bodies(tmp_path: Path) -> None:
    """Prefect lists with POST .../filter, offset and limit in the JSON body, and a relative server."""
    spec = THIRDPARTY / "prefect.json"
    out = tmp_path / "prefect.yaml"
    draft_to(spec, out)
    _, data = check_draft(spec, out)
    assert data["upstream"]["base_url"] == "${PREFECT_URL}"  # relative server /api: the variable is needed
    branches = [b for t in data["tools"] for b in (t.get("variants") or list((t.get("actions") or {}).values())
                                                    or [t])]
    flows = next(b for b in branches if b.get("operation") == "read_flows_flows_filter_post")
    assert flows["pagination"]["style"] == "offset"
    assert flows["risk"] == "low"  # a POST that only reads


def test_odd_names_and_shapes_still_compile(tmp_path: Path) -> None:
    """Duplicate and missing operationIds, an id longer than 64, `action`/`limit` arguments, a
    non-ASCII path, a dotted path, `{a}-{b}` segments, HEAD, deprecated and admin operations."""
    spec = ROOT / "tests" / "specs" / "odd-names.yaml"
    out = tmp_path / "odd.yaml"
    d = draft_to(spec, out)
    _, data = check_draft(spec, out)
    assert data["server"]["name"] == "unicode"
    assert data["upstream"]["base_url"] == "${UNICODE_URL:-https://eu.odd.example/v2}"
    assert data["upstream"]["auth"] == {"type": "header", "name": "X-Odd-Key", "value": "${UNICODE_API_KEY}"}
    manage = next(t for t in data["tools"] if t["name"] == "things_manage")
    assert manage["actions"]["create"]["params"]["action"] == {"rename": "create_action"}  # `action` is taken
    assert [t["operation"] for t in data["tools"] if t.get("risk") == "forbidden"] == ["execThing"]
    text = out.read_text(encoding="utf-8")
    for left_out in ("rootHead  HEAD /", "with space  PATCH /things/{id}", "GET /admin/users  GET /admin/users"):
        assert left_out in text
    assert d.summary.forbidden == 1 and d.summary.not_exposed == 3


def test_a_get_named_as_a_write_is_drafted_as_a_write(tmp_path: Path) -> None:
    """Slack's spec declares `GET /views.publish` and `GET /apps.uninstall`: a read there would be listed
    read-only and retried as safe; the draft makes them writes (risk from the words) and says why."""
    ok = {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}}
    paths = {f"/{m}": {"get": {"operationId": m.replace(".", "_"), "summary": s, "responses": ok}} for m, s in (
        ("views.publish", "Publish a static view for a User."), ("views.update", "Update an existing view."),
        ("views.info", "Get a view."), ("apps.uninstall", "Uninstalls your app from a workspace."),
        ("views.preview", "Render a view without saving it."))}
    spec = tmp_path / "rpc.json"
    spec.write_text(json.dumps({"openapi": "3.0.3", "info": {"title": "Rpc", "version": "1"},
                                "servers": [{"url": "http://127.0.0.1:9"}], "paths": paths}), encoding="utf-8")
    out = tmp_path / "rpc.yaml"
    draft_to(spec, out)
    compiled, _ = check_draft(spec, out)
    risk = {s.operation.id: b.risk for t in compiled.tools for b in t.branches for s in b.steps}
    assert risk["views_publish"] == "high" and risk["views_update"] == "medium" and risk["views_info"] == "low"
    assert risk["apps_uninstall"] != "low" and risk["views_preview"] == "low"  # a verb that only reads
    assert "a GET whose name says it writes" in out.read_text(encoding="utf-8")
    for tool in compiled.tools:  # a GET at risk medium or above creates state: no read-only hint
        ops = {s.operation.id for b in tool.branches for s in b.steps}
        assert tool.annotations["readOnlyHint"] is (ops <= {"views_info", "views_preview"}), tool.name


# ----------------------------------------------------------------------------- determinism, ranking, bad input


def test_the_same_spec_gives_the_same_bytes(tmp_path: Path) -> None:
    """Determinism: twice, and from another path to a copy of the spec."""
    spec = corpus_file("apis-guru/docker.com_engine.json")
    copy = tmp_path / "elsewhere" / spec.name
    copy.parent.mkdir()
    shutil.copy(spec, copy)
    first = run_cli("init", str(spec), "-o", str(tmp_path / "overlay.yaml"))
    second = run_cli("init", str(copy), "-o", str(copy.parent / "overlay.yaml"))
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert (tmp_path / "overlay.yaml").read_bytes() == (copy.parent / "overlay.yaml").read_bytes()
    third = draft_overlay(load_spec(str(spec))).text
    assert third.encode() == (tmp_path / "overlay.yaml").read_bytes()


def test_the_draft_pins_its_spec_and_a_changed_spec_is_caught(tmp_path: Path) -> None:
    """The draft writes `spec: {sha256}` (docs/overlay.md#the-spec-pin); edit the spec and compile warns,
    `--strict` refuses, lint reports O2M112 with the new hash as the fix."""
    spec = tmp_path / "openapi.yaml"
    shutil.copy(EXAMPLES / "notes" / "openapi.yaml", spec)
    overlay = tmp_path / "overlay.yaml"
    assert run_cli("init", str(spec), "-o", str(overlay)).returncode == 0
    old = load_spec(str(spec)).sha256
    assert yaml.safe_load(overlay.read_text(encoding="utf-8"))["spec"] == {"sha256": old}
    assert read_overlay(overlay).tools.spec.sha256 == old  # type: ignore[union-attr]
    clean = run_cli("compile", str(spec), "--overlay", str(overlay), "--strict", "-o", str(tmp_path / "m.json"))
    assert clean.returncode == 0 and "spec changed" not in clean.stderr, clean.stderr
    fresh = json.loads(run_cli("lint", str(spec), "--overlay", str(overlay), "--json").stdout)
    assert fresh["spec"]["sha256"] == old and "O2M112" not in {f["rule"] for f in fresh["findings"]}
    spec.write_text(spec.read_text(encoding="utf-8").replace("title: Study Notes API", "title: Study Notes API v2"),
                    encoding="utf-8")
    new = load_spec(str(spec)).sha256
    assert new != old
    warned = run_cli("compile", str(spec), "--overlay", str(overlay), "-o", str(tmp_path / "m.json"))
    assert warned.returncode == 0 and f"the overlay pins sha256 {old}" in warned.stderr, warned.stderr
    refused = run_cli("compile", str(spec), "--overlay", str(overlay), "--strict", "-o", str(tmp_path / "m.json"))
    assert refused.returncode == 2 and "--strict" in refused.stderr and new in refused.stderr, refused.stderr
    no_traceback(refused.stderr)
    linted = run_cli("lint", str(spec), "--overlay", str(overlay), "--json")
    pins = [f for f in json.loads(linted.stdout)["findings"] if f["rule"] == "O2M112"]
    assert linted.returncode == 1 and len(pins) == 1 and new in pins[0]["fix"], linted.stdout
    assert overlay.read_text(encoding="utf-8").splitlines()[pins[0]["line"] - 1].startswith("spec:")


def test_max_tools_keeps_the_best_ranked(tmp_path: Path) -> None:
    spec = corpus_file("apis-guru/spotify.com.json")
    full = draft_to(spec, tmp_path / "all.yaml", max_tools=200)
    few = draft_to(spec, tmp_path / "few.yaml", max_tools=5)
    check_draft(spec, tmp_path / "few.yaml")
    assert few.summary.tools == 5
    assert few.summary.tool_names == full.summary.tool_names[:5]
    text = (tmp_path / "few.yaml").read_text(encoding="utf-8")
    assert "# over --max-tools 5" in text
    scores = [float(s) for s in re.findall(r"^  # score ([\d.-]+): ", text, re.M)]
    assert scores == sorted(scores, reverse=True) and len(scores) == 5
    # what was cut says which tool it would have been
    assert re.search(r"would be \w+ \(score [\d.]+", text)


def test_cli_bad_input_exits_2_with_one_paragraph(tmp_path: Path) -> None:
    existing = tmp_path / "overlay.yaml"
    existing.write_text("keep me\n", encoding="utf-8")
    cases = [
        (["init", str(tmp_path / "missing.yaml"), "-o", str(tmp_path / "x.yaml")], "file not found"),
        (["init", str(ROOT / "tests" / "specs" / "not-openapi.yaml"), "-o", str(tmp_path / "x.yaml")],
         "not an OpenAPI document"),
        (["init", str(EXAMPLES / "notes" / "openapi.yaml"), "-o", str(existing)], "exists; pass --force"),
        (["init", str(EXAMPLES / "notes" / "openapi.yaml"), "-o", str(tmp_path)], "exists"),
    ]
    for args, words in cases:
        proc = run_cli(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        no_traceback(proc.stderr)
        assert words in proc.stderr, proc.stderr
        assert proc.stderr.startswith("openapi2mcp: error: ")
        assert "\n\n" not in proc.stderr.strip()  # one paragraph
        assert proc.stdout == ""
    assert existing.read_text(encoding="utf-8") == "keep me\n"
    assert not (tmp_path / "x.yaml").exists()
    forced = run_cli("init", str(EXAMPLES / "notes" / "openapi.yaml"), "-o", str(existing), "--force", "--json")
    assert forced.returncode == 0, forced.stderr
    summary = json.loads(forced.stdout)
    assert summary["output"] == str(existing) and summary["tools"] >= 3
    assert existing.read_text(encoding="utf-8").startswith("# A draft tool overlay")


def test_cli_writes_yaml_to_stdout_and_the_summary_to_stderr(tmp_path: Path) -> None:
    proc = run_cli("init", str(EXAMPLES / "market" / "openapi.yaml"), "-o", "-")
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load(proc.stdout)["openapi2mcp"] == 1
    assert proc.stderr.startswith("wrote stdout: ")
    assert "\x1b[" not in proc.stderr  # plain when piped


def test_cli_help_has_examples() -> None:
    proc = run_cli("init", "--help")
    assert proc.returncode == 0
    assert "Examples:" in proc.stdout and "--max-tools" in proc.stdout


# ----------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def loop() -> Iterator[BlockingPortal]:
    with portal() as p:
        yield p


PET_TOKEN = "canary-init-3f1e9b2c7d"


def test_drafted_tools_work_against_the_petstore(loop: BlockingPortal, tmp_path: Path) -> None:
    """The draft, served as written, lists its tools, pages, finds by id and creates, with the real
    upstream checking every request against its spec."""
    spec = EXAMPLES / "petstore" / "openapi.yaml"
    out = tmp_path / "petstore.yaml"
    proc = run_cli("init", str(spec), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    data = yaml.safe_load(out.read_text(encoding="utf-8"))
    names = [t["name"] for t in data["tools"] if t.get("risk") != "forbidden"]
    with Upstream.start("petstore", auth=f"bearer:{PET_TOKEN}") as up:
        env = {"EXAMPLE_PET_URL": up.base_url, "EXAMPLE_PET_TOKEN": PET_TOKEN}
        session = McpSession.stdio(loop, [str(spec), "--overlay", str(out)], mode="auto", label="init-petstore",
                                   log_dir=tmp_path, env=env)
        try:
            assert [t.name for t in session.list_tools()] == names
            first = ok(session.call("pets_find", {"limit": 2}))
            assert len(first["items"]) == 2 and first["has_more"] is True
            assert set(first["items"][0]) <= {"id", "name", "status", "tags", "createdAt"}  # the drafted select
            second = ok(session.call("pets_find", {"limit": 2, "cursor": first["next_cursor"]}))
            assert {p["id"] for p in second["items"]}.isdisjoint({p["id"] for p in first["items"]})
            pet = ok(session.call("pets_find", {"petId": first["items"][0]["id"]}))
            assert pet["id"] == first["items"][0]["id"]
            created = ok(session.call("pets_manage", {"action": "create", "name": "Drafty"}))
            assert created["name"] == "Drafty"
            missing = err(session.call("pets_find", {"petId": "no-such-pet"}), "NOT_FOUND")
            assert missing["status"] == 404
        finally:
            session.close()
        up.assert_no_violations()


@pytest.mark.thirdparty
def test_drafted_tools_work_against_kinto(loop: BlockingPortal, tmp_path: Path) -> None:
    """A third-party server we did not write: Kinto's live Swagger 2.0 spec, drafted, served as
    written (credentials from $OPENAPI2MCP_USERNAME/PASSWORD: the spec declares no scheme), and
    called with the SDK client."""
    import secrets

    import httpx2

    from tests.thirdparty.support import Service, fetch_spec, server_python
    from tests.thirdparty.test_kinto import INI

    python = server_python("kinto")
    ini = tmp_path / "kinto.ini"
    ini.write_text(INI.format(secret=secrets.token_hex(32)), encoding="utf-8")
    run = "import sys; from kinto.__main__ import main; sys.exit(main(sys.argv[1:]))"
    user, password = "drafter", "canary-init-kinto-5a8e"
    with Service.start("kinto", lambda port: [str(python), "-c", run, "start", "--ini", str(ini), "--port", str(port)],
                       ready="/v1/__heartbeat__", log_dir=tmp_path) as kinto:
        with httpx2.Client(base_url=kinto.direct + "/v1", trust_env=False, timeout=30) as rest:
            rest.put(f"/accounts/{user}", json={"data": {"password": password}}).raise_for_status()
            rest.put("/buckets/shelf", auth=(user, password)).raise_for_status()
            rest.put("/buckets/shelf/collections/books", auth=(user, password)).raise_for_status()
        spec = fetch_spec(kinto.direct + "/v1/__api__", tmp_path / "kinto.json")
        out = tmp_path / "kinto.yaml"
        proc = run_cli("init", str(spec), "-o", str(out))
        assert proc.returncode == 0, proc.stderr
        check_draft(spec, out)
        env = {"KINTO_URL": kinto.url + "/v1", "OPENAPI2MCP_USERNAME": user, "OPENAPI2MCP_PASSWORD": password}
        session = McpSession.stdio(loop, [str(spec), "--overlay", str(out)], mode="auto", label="init-kinto",
                                   log_dir=tmp_path, env=env)
        try:
            names = {t.name for t in session.list_tools()}
            assert {"records_manage", "records_list", "records_get"} <= names
            where = {"bucket_id": "shelf", "collection_id": "books"}
            created = ok(session.call("records_manage", {"action": "create", **where, "data": {"title": "Dune"}}))
            record = created["data"]
            assert record["title"] == "Dune"
            listed = ok(session.call("records_list", where))
            assert [r["id"] for r in listed["data"]] == [record["id"]]
            one = ok(session.call("records_get", {**where, "id": record["id"]}))
            assert one["data"]["title"] == "Dune"
            assert password not in "".join(session.seen)
        finally:
            session.close()
