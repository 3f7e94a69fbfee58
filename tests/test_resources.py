"""Resources and prompts (issue 7): the notes example end to end, and the overlay's checks.

The real notes upstream (`examples.Upstream.start("notes")`) serves the compiled example overlay:
in-process with the SDK `mcp.Client`, over stdio and over Streamable HTTP as a user starts it
(`python -m openapi2mcp serve ... --base-url URL`), each in both protocol eras. Every session
lists and reads resources and templates, gets the `study.plan` prompt with its embedded note,
follows the resource links of `notes_search` results with resources/read, and meets the errors
(coded per era: resource not found is -32002 on 2025-11-25 and -32602 on 2026-07-28).
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

from openapi2mcp.compiler import compile_manifest
from openapi2mcp.errors import InputError
from openapi2mcp.loader import LoadedSpec, load_spec
from openapi2mcp.manifest import Manifest, RetrySpec, TemplateError, UriTemplate
from openapi2mcp.overlay import overlay_json_schema
from openapi2mcp.overlay.reading import parse_overlay
from openapi2mcp.runtime import Runtime, RuntimeOptions
from openapi2mcp.runtime.resources import coerce_variable, fill, not_found_code
from tests.e2e_support import HttpServer, child_env, example_args
from tests.helpers import compile_example

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from examples import Upstream  # noqa: E402

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
ERAS = [("legacy", LEGACY), ("auto", MODERN)]
NOTES_SPEC = ROOT / "examples" / "notes" / "openapi.yaml"


@pytest.fixture(scope="module")
def notes() -> Iterator[Upstream]:
    with Upstream.start("notes") as up:
        yield up


@pytest.fixture(scope="module")
def manifest(notes: Upstream) -> Manifest:
    """The example overlay, compiled, pointed at this module's upstream."""
    m = compile_example("notes").manifest
    return m.model_copy(update={"upstream": m.upstream.model_copy(update={"base_url": notes.base_url})})


# ============================================================================ what every session shows


async def expect_error(call: Any, code: int, data_code: str | None, message: str) -> MCPError:
    with pytest.raises(MCPError) as info:
        await call
    error = info.value
    assert error.code == code, (error.code, error.message)
    assert message in error.message, error.message
    if data_code is not None:
        assert error.data["code"] == data_code, error.data
        assert isinstance(error.data["traceId"], str)
    return error


async def exercise(c: Client, protocol: str, up: Upstream) -> None:
    assert c.protocol_version == protocol
    caps = c.server_capabilities
    assert caps.resources is not None and caps.prompts is not None and caps.tools is not None

    # ---------------------------------------------------------------- lists
    listed = (await c.list_resources()).resources
    assert [(r.name, r.uri, r.mime_type, r.title) for r in listed] == [
        ("note-index", "notes://index", "application/json", "Index of the notes")
    ]
    templates = (await c.list_resource_templates()).resource_templates
    assert [(t.name, t.uri_template, t.mime_type) for t in templates] == [("note", "notes://{+path}", "text/markdown")]
    assert "private/" in (templates[0].description or "")
    prompts = (await c.list_prompts()).prompts
    assert [(p.name, p.title) for p in prompts] == [("study.plan", "Plan study tasks from a note")]
    assert [(a.name, a.required) for a in prompts[0].arguments or []] == [("path", True)]

    # ---------------------------------------------------------------- reads
    index = (await c.read_resource("notes://index")).contents[0]
    assert isinstance(index, types.TextResourceContents)
    assert (index.uri, index.mime_type) == ("notes://index", "application/json")
    paths = [entry["path"] for entry in json.loads(index.text)]
    assert "study/python-asyncio.md" in paths and not any(p.startswith("private/") for p in paths)

    read = await c.read_resource("notes://ai-agent/mcp-basics.md")
    note = read.contents[0]
    assert isinstance(note, types.TextResourceContents)
    assert (note.uri, note.mime_type) == ("notes://ai-agent/mcp-basics.md", "text/markdown")
    assert note.text.startswith("# MCP 基础：Host、Client 与 Server\n")
    assert read.meta is not None and read.meta["openapi2mcp/requests"][0]["operation"] == "readNote"
    encoded = (await c.read_resource("notes://ai-agent%2Fmcp-basics.md")).contents[0]  # {path} style, decoded
    assert isinstance(encoded, types.TextResourceContents) and encoded.text == note.text

    # ---------------------------------------------------------------- tool results link their evidence
    result = await c.call_tool("notes_search", {"keyword": "mcp", "scope": "all-allowed"})
    assert not result.is_error
    evidence = result.structured_content["evidencePaths"]
    assert len(evidence) >= 3
    links = [b for b in result.content if isinstance(b, types.ResourceLink)]
    assert [(link.uri, link.name, link.mime_type) for link in links] == [
        (f"notes://{p}", p, "text/markdown") for p in evidence
    ]
    assert isinstance(result.content[0], types.TextContent)  # the JSON text stays first
    for link in links:
        linked = (await c.read_resource(link.uri)).contents[0]
        assert isinstance(linked, types.TextResourceContents) and linked.text.startswith("# ")

    # ---------------------------------------------------------------- the prompt, with its note embedded
    got = await c.get_prompt("study.plan", {"path": "study/python-asyncio.md"})
    assert got.description and "study tasks" in got.description
    assert [m.role for m in got.messages] == ["user", "user"]
    text, embedded = got.messages[0].content, got.messages[1].content
    assert isinstance(text, types.TextContent)
    assert text.text.startswith("Read the note study/python-asyncio.md (below) and propose up to 3 study tasks")
    assert isinstance(embedded, types.EmbeddedResource)
    assert isinstance(embedded.resource, types.TextResourceContents)
    assert embedded.resource.uri == "notes://study/python-asyncio.md"
    assert embedded.resource.text.startswith("# Python asyncio notes")

    # ---------------------------------------------------------------- errors, coded for the era
    nf = -32002 if protocol == LEGACY else -32602
    await expect_error(c.read_resource("notes://missing.md"), nf, "NOT_FOUND",
                       "Resource not found: notes://missing.md: not found (GET /notes/content returned 404): "
                       "no note at missing.md")
    error = await expect_error(c.read_resource("weird://x"), nf, "NOT_FOUND",
                               "no resource has this URI (this server serves: notes://index, notes://{+path})")
    assert error.data["uri"] == "weird://x"
    await expect_error(c.read_resource("notes://../secret.md"), nf, "ARGUMENT_INVALID", "path: '../secret.md' does")
    forbidden = await expect_error(
        c.read_resource("notes://private/diary-2026-11.md"), types.INTERNAL_ERROR, "FORBIDDEN",
        "Could not read notes://private/diary-2026-11.md: FORBIDDEN: the upstream denied access "
        "(GET /notes/content returned 403): private/diary-2026-11.md is outside the folders an agent may read",
    )
    assert forbidden.data["status"] == 403 and forbidden.data["retryable"] is False
    up.fault(operation="readNote", status=503)
    failed = await expect_error(c.read_resource("notes://ai-agent/mcp-basics.md"), types.INTERNAL_ERROR,
                                "UPSTREAM_ERROR", "returned 503")
    assert failed.data["retryable"] is True
    await expect_error(c.list_resources(cursor="bm9wZQ=="), types.INVALID_PARAMS, None, "Invalid cursor")

    await expect_error(c.get_prompt("study.plans", {}), types.INVALID_PARAMS, None, "Unknown prompt: study.plans")
    await expect_error(c.get_prompt("study.plan", {}), types.INVALID_PARAMS, None,
                       "prompt study.plan needs the argument path")
    await expect_error(c.get_prompt("study.plan", {"path": "a.md", "paht": "b.md"}), types.INVALID_PARAMS, None,
                       "prompt study.plan has no argument 'paht'; did you mean 'path'?")
    await expect_error(c.get_prompt("study.plan", {"path": "missing.md"}), types.INVALID_PARAMS, "NOT_FOUND",
                       "prompt study.plan: Resource not found: notes://missing.md")
    await expect_error(c.get_prompt("study.plan", {"path": "private/diary-2026-11.md"}), types.INTERNAL_ERROR,
                       "FORBIDDEN", "prompt study.plan: Could not read notes://private/diary-2026-11.md: FORBIDDEN")


# ============================================================================ the three transports


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "protocol"), ERAS)
async def test_in_process(manifest: Manifest, notes: Upstream, mode: str, protocol: str) -> None:
    runtime = Runtime(manifest)
    async with Client(runtime.build_server(), mode=mode) as client:
        await exercise(client, protocol, notes)
    await runtime.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "protocol"), ERAS)
async def test_stdio(notes: Upstream, tmp_path: Path, mode: str, protocol: str) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "openapi2mcp", "serve", *example_args("notes"), "--base-url", notes.base_url,
              "--log-level", "info"],
        env=child_env(),
        cwd=str(ROOT),
    )
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
            await exercise(client, protocol, notes)
    logs = (tmp_path / "stderr.log").read_text()
    assert "resource=notes://ai-agent/mcp-basics.md traceId=" in logs  # one log line per read, on stderr


@pytest.mark.anyio
async def test_streamable_http_both_eras(notes: Upstream, tmp_path: Path) -> None:
    with HttpServer.start([*example_args("notes"), "--base-url", notes.base_url], log_dir=tmp_path) as server:
        for mode, protocol in ERAS:
            async with Client(server.url, mode=mode) as client:
                await exercise(client, protocol, notes)


@pytest.mark.anyio
async def test_a_read_takes_the_upstream_retries_like_a_tool_call(manifest: Manifest, notes: Upstream) -> None:
    """Reads go through the same forwarding as tool steps: the upstream's `retries`, every attempt recorded."""
    retrying = manifest.upstream.model_copy(update={"retries": RetrySpec(max_attempts=2)})
    runtime = Runtime(manifest.model_copy(update={"upstream": retrying}))
    notes.fault(operation="readNote", status=503, headers={"Retry-After": "0"})
    try:
        read = await runtime.catalog.read("notes://ai-agent/mcp-basics.md")
    finally:
        await runtime.aclose()
    note = read.contents[0]
    assert isinstance(note, types.TextResourceContents) and note.text.startswith("# MCP 基础")
    assert read.meta is not None
    attempts = read.meta["openapi2mcp/requests"]
    assert [(r["operation"], r["method"], r["status"], r.get("retried", False)) for r in attempts] == [
        ("readNote", "GET", 503, True), ("readNote", "GET", 200, False)]


# ============================================================================ capabilities and pages


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "protocol"), ERAS)
async def test_no_capabilities_without_resources_or_prompts(
    notes_spec: LoadedSpec, notes: Upstream, mode: str, protocol: str
) -> None:
    overlay = f"""
        openapi2mcp: 1
        upstream: {{base_url: "{notes.base_url}"}}
        tools: [{{name: notes_read, operation: readNote}}]
        """
    runtime = Runtime(compile_text(notes_spec, overlay).manifest)
    async with Client(runtime.build_server(), mode=mode) as client:
        caps = client.server_capabilities
        assert caps.tools is not None and caps.resources is None and caps.prompts is None
        with pytest.raises(MCPError) as info:
            await client.list_resources()
        assert info.value.code == types.METHOD_NOT_FOUND
    await runtime.aclose()


PAGED = """
    openapi2mcp: 1
    upstream: {base_url: "BASE"}
    resources:
      - {uri: "notes://index/ai", name: idx-ai, operation: listNotes, params: {scope: ai-agent}}
      - {uri: "notes://by/{+path}", name: by-path, operation: readNote}
      - {uri: "notes://index/all", name: idx-all, operation: listNotes, params: {scope: all-allowed}}
      - {uri: "notes://folder/{folder}", name: folder, operation: listNotes, params: {scope: all-allowed}}
      - {uri: "notes://index/study", name: idx-study, operation: listNotes, params: {folder: study}}
      - {uri: "notes://raw/{+path}", name: raw, operation: readNote, response: {select: "@"}}
    prompts:
      - {name: p.one, messages: [{text: one}]}
      - {name: p.two, messages: [{text: two, resource: "notes://index/ai", embed: false}]}
      - name: p.three
        arguments: [{name: kind}]
        messages: [{role: assistant, text: "three {kind}", resource: "notes://folder/{kind}"}]
    """


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "protocol"), ERAS)
async def test_pagination_in_overlay_order(
    notes_spec: LoadedSpec, notes: Upstream, mode: str, protocol: str
) -> None:
    runtime = Runtime(compile_text(notes_spec, PAGED.replace("BASE", notes.base_url)).manifest,
                      RuntimeOptions(page_size=2))
    async with Client(runtime.build_server(), mode=mode) as client:

        async def walk(fetch: Any, field: str, key: str) -> list[str]:
            out, cursor, pages = [], None, 0
            while True:
                page = await fetch(cursor=cursor)
                out += [getattr(item, key) for item in getattr(page, field)]
                pages += 1
                cursor = page.next_cursor
                if cursor is None:
                    return out

        fixed = await walk(client.list_resources, "resources", "uri")
        assert fixed == ["notes://index/ai", "notes://index/all", "notes://index/study"]
        templated = await walk(client.list_resource_templates, "resource_templates", "uri_template")
        assert templated == ["notes://by/{+path}", "notes://folder/{folder}", "notes://raw/{+path}"]
        assert await walk(client.list_prompts, "prompts", "name") == ["p.one", "p.two", "p.three"]
        first = await client.list_resources()
        assert first.next_cursor is not None
        with pytest.raises(MCPError) as info:  # a cursor of one list is no cursor of another
            await client.list_prompts(cursor=first.next_cursor)
        assert info.value.code == types.INVALID_PARAMS

        # one-segment variables, fixed values, and JSON content when nothing is selected
        folder = (await client.read_resource("notes://folder/study")).contents[0]
        assert isinstance(folder, types.TextResourceContents) and folder.mime_type == "application/json"
        assert {i["path"] for i in json.loads(folder.text)["items"]} == {"study/python-asyncio.md",
                                                                         "study/openapi-basics.md",
                                                                         "study/sql-indexes.md"}
        assert notes.last_request("listNotes")["query"] == "scope=all-allowed&folder=study"
        raw = (await client.read_resource("notes://raw/ai-agent/mcp-basics.md")).contents[0]
        assert isinstance(raw, types.TextResourceContents)
        assert json.loads(raw.text)["evidencePaths"] == ["ai-agent/mcp-basics.md"]
        two = (await client.get_prompt("p.two", {})).messages
        assert [(m.role, m.content.type) for m in two] == [("user", "text"), ("user", "resource_link")]
        assert isinstance(two[1].content, types.ResourceLink) and two[1].content.uri == "notes://index/ai"
        without = (await client.get_prompt("p.three", {})).messages  # optional argument not given
        assert [(m.role, m.content.type) for m in without] == [("assistant", "text")]
        assert isinstance(without[0].content, types.TextContent) and without[0].content.text == "three "
        with_kind = (await client.get_prompt("p.three", {"kind": "inbox"})).messages
        assert [m.content.type for m in with_kind] == ["text", "resource"]
        embedded = with_kind[1].content
        assert isinstance(embedded, types.EmbeddedResource) and embedded.resource.uri == "notes://folder/inbox"
        with pytest.raises(MCPError) as info:  # folder is an enum: the value is checked before sending
            await client.read_resource("notes://folder/private")
        assert info.value.code == not_found_code(protocol)
        assert "folder: 'private' is not one of" in info.value.message
    await runtime.aclose()


# ============================================================================ compile-time checks


@pytest.fixture(scope="module")
def notes_spec() -> LoadedSpec:
    return load_spec(str(NOTES_SPEC))


def compile_text(spec: LoadedSpec, overlay: str) -> Any:
    return compile_manifest(spec, [parse_overlay(textwrap.dedent(overlay), "overlay.yaml")])


def problems_of(spec: LoadedSpec, overlay: str) -> str:
    with pytest.raises(InputError) as info:
        compile_text(spec, overlay)
    return str(info.value)


TOOL = "tools: [{name: notes_search, operation: searchNotes}]"
NOTE = ("{uri: 'notes://{+path}', name: note, operation: readNote, mime_type: text/markdown, "
        "response: {select: content}}")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "resources:\n  - {uri: 'notes://{+path}', name: note, operation: readNotes}",
            ["overlay.yaml:5:42 at resources[0](note).operation: "
             "unknown operation 'readNotes'; did you mean 'readNote'?"],
        ),
        (
            "resources:\n  - {uri: 'tasks://new', name: t, operation: createStudyTask}",
            ["resource 't' uses 'createStudyTask' (POST /tasks): reading a resource must be safe, so its operation "
             "must be a GET", "hint: expose an operation that changes data as a tool"],
        ),
        (
            "resources:\n  - {uri: 'notes://{+paht}', name: note, operation: readNote}",
            ["resources[0](note).uri: URI variable {paht} is not a parameter of 'readNote'; did you mean 'path'?"],
        ),
        (
            "resources:\n  - {uri: 'notes://fixed', name: note, operation: readNote}",
            ["'readNote' requires the query parameter 'path': put it in the URI as {path} or give it a fixed "
             "value under `params`"],
        ),
        (
            "resources:\n  - {uri: 'notes://{+path}', name: note, operation: readNote, params: {path: x}}",
            ["resources[0](note).params.path: 'path' is already given by the URI variable"],
        ),
        (
            "resources:\n  - {uri: 'notes://all', name: idx, operation: listNotes, params: {scope: everything}}",
            ["resources[0](idx).params.scope: value 'everything' does not fit the parameter's schema"],
        ),
        (
            "resources:\n  - {uri: 'notes://all', name: idx, operation: listNotes, params: {scpe: all-allowed}}",
            ["'listNotes' has no parameter 'scpe'; did you mean 'scope'?"],
        ),
        (
            "resources:\n  - {uri: 'notes://{+path}', name: note, operation: readNote, response: {select: contnt}}",
            ["resources[0](note).response.select: `select` names field 'contnt', which the response schema does "
             "not have; did you mean 'content'?"],
        ),
        (
            "resources:\n  - {uri: 'notes://{+path}', name: note, operation: readNote, mime_type: text/markdown, "
            "response: {select: '{t: title}'}}",
            ["`select` gives object but mime_type 'text/markdown' is text: select a string field"],
        ),
        (
            "resources:\n  - {uri: 'notes://{?path}', name: note, operation: readNote}",
            ["invalid resource URI 'notes://{?path}': {?path}: the RFC 6570 operator '?' is not supported"],
        ),
        (
            "resources:\n  - {uri: '{+path}', name: note, operation: readNote}",
            ["a resource URI starts with a literal scheme such as `notes://`"],
        ),
        (
            f"resources:\n  - {NOTE}\n  - {NOTE}",
            ["resources[1](note).name: resource name 'note' is used twice",
             "resources[1](note).uri: resource URI 'notes://{+path}' is used twice"],
        ),
        (
            "resources:\n  - {uri: 'notes://{+path}', name: note, operation: readNote, mimetype: text/plain}",
            ["overlay.yaml:5:63 at resources[0](note).mimetype: "
             "unknown key 'mimetype' in resources[0](note); did you mean 'mime_type'?"],
        ),
        (
            f"resources:\n  - {NOTE}\nprompts:\n  - name: study.plan\n    arguments: [{{name: path}}]\n"
            "    messages:\n      - text: 'Read {paht} and {{literal}}'",
            ["overlay.yaml:10:", "prompts[0](study.plan).messages[0].text: {paht} is not an argument of this "
             "prompt; did you mean 'path'?"],
        ),
        (
            f"resources:\n  - {NOTE}\nprompts:\n  - name: study.plan\n    arguments: [{{name: path}}]\n"
            "    messages:\n      - {text: hi, resource: 'note://{path}'}",
            ["prompts[0](study.plan).messages[0].resource: 'note://{path}' matches no declared resource; "
             "did you mean 'notes://{+path}'?"],
        ),
        (
            "prompts:\n  - name: study.plan\n    messages:\n      - role: user",
            ["prompts[0](study.plan).messages[0]: a message needs `text`, `resource` or both"],
        ),
        (
            f"resources:\n  - {NOTE}\ntools:\n  - name: notes_search\n    operation: searchNotes\n"
            "    links: [{from: 'evidencePath[*]', resource: note}]",
            ["tools[0](notes_search).links[0].from: `select` names field 'evidencePath', which the response "
             "schema does not have; did you mean 'evidencePaths'?"],
        ),
        (
            f"resources:\n  - {NOTE}\ntools:\n  - name: notes_search\n    operation: searchNotes\n"
            "    links: [{from: 'evidencePaths[*]', resource: notes}]",
            ["tools[0](notes_search).links[0].resource: no resource named 'notes'; did you mean 'note'?"],
        ),
        (
            f"resources:\n  - {NOTE}\ntools:\n  - name: notes_search\n    operation: searchNotes\n"
            "    links: [{from: 'results[*].{t: title}', resource: note}]",
            ["`from` 'results[*].{t: title}' gives objects without path (the template needs path)"],
        ),
        (
            "resources:\n  - {uri: 'notes://{+path}', name: note, operation: readNote}\ntools:\n"
            "  - {name: notes_read, operation: readNote, risk: forbidden}",
            ["resource 'note' reads 'readNote', which tool 'notes_read' marks forbidden"],
        ),
    ],
)
def test_compile_errors(notes_spec: LoadedSpec, body: str, expected: list[str]) -> None:
    text = "openapi2mcp: 1\nupstream: {base_url: 'http://127.0.0.1:9'}\n"
    if "tools:" not in body:
        text += TOOL + "\n"
    text += body + "\n"
    message = problems_of(notes_spec, text)
    for part in expected:
        assert part in message, message


def test_the_example_compiles_to_these_manifest_entries() -> None:
    m = compile_example("notes").manifest
    index, note = m.resources
    assert (index.name, index.uri, index.is_template, index.mime_type) == (
        "note-index", "notes://index", False, "application/json")
    assert [(p.name, p.fixed, p.value) for p in index.operation.params] == [("scope", True, "all-allowed")]
    assert (note.uri, note.is_template, note.response.select, note.response.max_bytes) == (
        "notes://{+path}", True, "content", 1_000_000)
    assert [(p.name, p.arg, p.location) for p in note.operation.params] == [("path", "path", "query")]
    assert note.variables["path"]["pattern"].startswith("^(?!.*")
    (prompt,) = m.prompts
    assert [(x.resource, x.resource_args) for x in prompt.messages] == [("note", {"path": "{path}"})]
    search = m.tool("notes_search")
    assert search is not None
    assert [(link.source, link.resource) for link in search.links] == [("evidencePaths[*]", "note")]
    assert Manifest.from_json(m.to_json()) == m  # round-trips with its hash
    dumped = json.loads(m.to_json())
    assert dumped["tools"][0]["links"] == [{"from": "evidencePaths[*]", "resource": "note"}]  # max: the default 20


def test_overlay_schema_has_the_new_keys() -> None:
    schema = overlay_json_schema()
    assert {"resources", "prompts"} <= set(schema["properties"])
    defs = schema["$defs"]
    assert {"uri", "name", "operation", "mime_type", "params", "response"} <= set(defs["ResourceDef"]["properties"])
    assert set(defs["LinkDef"]["properties"]) == {"from", "resource", "max"}
    assert "links" in defs["ToolDef"]["properties"]


# ============================================================================ URI templates and prompt text


def test_uri_templates_both_ways() -> None:
    t = UriTemplate.parse("notes://{+path}")
    assert t.expand({"path": "a b/c.md"}) == "notes://a%20b/c.md"
    assert t.match("notes://a%20b/c.md") == {"path": "a b/c.md"}
    assert t.match("notes://a%2Fc.md") == {"path": "a/c.md"}
    assert t.match("other://a") is None
    s = UriTemplate.parse("pets://{kind}/{id}")
    assert s.expand({"kind": "a/b", "id": "7"}) == "pets://a%2Fb/7"
    assert s.match("pets://a%2Fb/7") == {"kind": "a/b", "id": "7"}
    assert s.match("pets://a/b/7") is None  # {kind} is one segment
    assert not UriTemplate.parse("notes://index").is_template
    for bad, why in [
        ("notes://{a}{b}", "are adjacent"),
        ("notes://{a,b}", "one variable per expression"),
        ("notes://{a*}", "modifiers"),
        ("notes://{a}/{a}", "appears twice"),
        ("notes://{a", "unmatched brace"),
        ("notes:// x", "character ' '"),
        ("no-scheme/{a}", "literal scheme"),
    ]:
        with pytest.raises(TemplateError, match=why):
            UriTemplate.parse(bad)


def test_uri_values_take_the_parameter_type() -> None:
    assert coerce_variable("7", {"type": "integer"}) == 7
    assert coerce_variable("7.5", {"type": ["number", "null"]}) == 7.5
    assert coerce_variable("true", {"type": "boolean"}) is True
    assert coerce_variable("x7", {"type": "integer"}) == "x7"  # left for the schema check to refuse
    assert coerce_variable("007", {"type": "string"}) == "007"


def test_prompt_fill() -> None:
    assert fill("Read {path} {{as is}} {missing}.", {"path": "a.md"}) == "Read a.md {as is} ."
