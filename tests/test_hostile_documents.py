"""Issue 11 items 10 and 17 (spec side): hostile specs and overlays get a located error, never a crash.

Each case is what a red team tried: a YAML alias bomb in an overlay (1 GB after 30 s before the
fix), schemas nested 150 deep, a chain of 400 inlined references, 100,000-digit integers and
non-finite numbers in JSON specs, YAML specs and overlays, overlays nested past any use. The
command line runs in a child process with a memory cap (an alias bomb must fail fast and small),
and must exit 2 with the file, the place and a fix: not "internal error ... bug" (exit 1).
"""

from __future__ import annotations

import json
import resource
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from openapi2mcp.compiler import compile_manifest
from openapi2mcp.errors import InputError
from openapi2mcp.loader import MAX_NESTING, load_spec
from openapi2mcp.loader import parse as parse_module
from openapi2mcp.manifest import Manifest
from openapi2mcp.overlay import read_overlay
from openapi2mcp.overlay import reading as overlay_reading
from openapi2mcp.overlay.reading import parse_overlay
from tests.conftest import corpus_file
from tests.e2e_support import child_env, cli, no_traceback
from tests.local import ROOT

MEMORY_CAP = 1536 * 2**20  # bytes of address space for the child: the bomb needs far more


def spec_with(schema: Any, *, extra: str = "") -> str:
    """A one-operation spec (JSON text) whose request and response body have `schema`."""
    doc = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "http://127.0.0.1:9/api"}],
        "paths": {"/x": {"post": {
            "operationId": "create_x",
            "requestBody": {"content": {"application/json": {"schema": "@SCHEMA@"}}},
            "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": "@SCHEMA@"}}}},
        }}},
    }
    return json.dumps(doc).replace('"@SCHEMA@"', json.dumps(schema) if not isinstance(schema, str) else schema)


def nested_objects(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """`openapi2mcp ARGS` in a child with a memory cap; it must end on its own."""
    return subprocess.run(cli(*args), env=child_env(), cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False, preexec_fn=_cap_memory)


def refused(done: subprocess.CompletedProcess[str], *expected: str) -> str:
    """A clean refusal: exit 2, no traceback, not an internal error, and each expected text."""
    no_traceback(done.stderr)
    assert "internal error" not in done.stderr, done.stderr
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    for text in expected:
        assert text in done.stderr, done.stderr[-2000:]
    return done.stderr


def overlay_for(body: str) -> str:
    return "openapi2mcp: 1\n" + textwrap.dedent(body) + "tools:\n  - name: create_x\n    operation: create_x\n"


# ============================================================================ item 10: overlays


def test_an_alias_bomb_in_an_overlay_is_refused_quickly_and_small(tmp_path: Path) -> None:
    """Ten levels of ten aliases: 10^10 strings once walked. Before the fix this ate 1 GB in 30 s."""
    lines = ["openapi2mcp: 1", "x-a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"x-a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 11)]
    lines += ["tools: []"]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    spec = tmp_path / "openapi.json"
    spec.write_text(spec_with({"type": "object"}))
    stderr = refused(run("inspect", str(spec), "--overlay", str(bomb)), "bomb.yaml", "alias bomb")
    assert "$ref instead of YAML anchors" in stderr


def test_merge_key_bombs_in_overlays_are_refused() -> None:
    merges = ["openapi2mcp: 1", "x-m0: &m0 {k: v}"]
    merges += [f"x-m{i}: &m{i} {{<<: *m{i - 1}, l: [*m{i - 1}, *m{i - 1}, *m{i - 1}]}}" for i in range(1, 30)]
    with pytest.raises(InputError) as info:
        parse_overlay("\n".join(merges) + "\ntools: []\n", "merge.yaml")
    assert "alias bomb" in info.value.render()


def test_an_overlay_that_uses_aliases_reasonably_still_works() -> None:
    doc = parse_overlay(textwrap.dedent("""\
        openapi2mcp: 1
        tools:
          - name: a_one
            operation: one
            failure_modes: &modes {404: {code: NOT_FOUND, message: Not there.}}
          - name: a_two
            operation: two
            failure_modes: *modes
        """), "ok.yaml")
    assert doc.tools is not None
    assert doc.data["tools"][0]["failure_modes"] == doc.data["tools"][1]["failure_modes"]
    assert doc.data["tools"][0]["failure_modes"] is not doc.data["tools"][1]["failure_modes"]  # a tree


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x-deep: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
        ("x-deep: " + "[" * (MAX_NESTING + 5) + "]" * (MAX_NESTING + 5) + "\n", f"more than {MAX_NESTING} levels"),
        ("x-deep: " + "".join(f"{{k{i}: " for i in range(150)) + "1" + "}" * 150 + "\n",
         f"more than {MAX_NESTING} levels"),
    ],
)
def test_overlays_nested_past_any_use_are_refused(text: str, expected: str) -> None:
    with pytest.raises(InputError) as info:
        parse_overlay("openapi2mcp: 1\n" + text + "tools: []\n", "deep.yaml")
    assert expected in info.value.render() and "deep.yaml" in info.value.render()


def test_an_overlay_too_large_is_refused_before_parsing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("openapi2mcp: 1\n" + "# padding\n" * 2000 + "tools: []\n")
    monkeypatch.setattr(overlay_reading, "MAX_OVERLAY_BYTES", 10_000)
    with pytest.raises(InputError) as info:
        read_overlay(path)
    assert "larger than" in info.value.render() and "big.yaml" in info.value.render()


def test_an_overlay_that_is_not_utf8_is_located(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"openapi2mcp: 1\n# caf\xe9\ntools: []\n")
    with pytest.raises(InputError) as info:
        read_overlay(path)
    assert "not UTF-8" in info.value.render() and "latin1.yaml:2" in info.value.render()


def test_an_oai_overlay_cannot_nest_the_spec_past_the_limit(tmp_path: Path) -> None:
    spec = tmp_path / "openapi.json"
    spec.write_text(spec_with(nested_objects(10)))
    deep = "[" * 95 + "1" + "]" * 95  # fine alone, too deep where the action puts it
    oai = parse_overlay(textwrap.dedent(f"""\
        overlay: 1.0.0
        info: {{title: deepen, version: '1'}}
        actions:
          - target: "$.paths['/x'].post.requestBody.content['application/json'].schema.properties.a.properties.a"
            update: {{x-deep: {deep}}}
        """), "deepen.yaml")
    with pytest.raises(InputError) as info:
        compile_manifest(load_spec(str(spec)), [oai], all_operations=True)
    assert "deepen.yaml" in info.value.render() and f"more than {MAX_NESTING} levels" in info.value.render()


# ============================================================================ item 17: numbers


HUGE = "9" * 100_000
YAML_HEAD = "openapi: 3.0.3\ninfo: {title: t, version: '1'}\n"


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("spec.json", spec_with(f'{{"type": "integer", "maximum": {HUGE}}}'), "spec.json:1:"),
        ("spec.json", spec_with(f'{{"type": "integer", "example": -{HUGE}}}'), "spec.json:1:"),
        ("spec.json", spec_with('{"type": "number", "maximum": 1e999}'), "spec.json:1:"),
        ("spec.json", spec_with('{"type": "number", "maximum": NaN}'), "spec.json:1:"),
        ("spec.json", spec_with('{"type": "number", "minimum": -Infinity}'), "spec.json:1:"),
        ("spec.yaml", f"{YAML_HEAD}x-big: {HUGE}\npaths: {{}}\n", "spec.yaml:3:"),
        ("spec.yaml", f"{YAML_HEAD}x-big: 1e400\npaths: {{}}\n", "spec.yaml:3:"),
    ],
)
def test_numbers_no_json_reader_can_hold_are_located_in_specs(tmp_path: Path, name: str, text: str,
                                                             where: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    stderr = refused(run("inspect", str(path), "--all-operations"), where, "invalid number", "as a string")
    assert len(stderr) < 2000  # the 100,000 digits are not repeated back


@pytest.mark.parametrize(
    "value", [HUGE, f"-{HUGE}", "1e400", ".inf", "-.inf", ".nan"],
)
def test_numbers_no_json_reader_can_hold_are_located_in_overlays(tmp_path: Path, value: str) -> None:
    spec = tmp_path / "openapi.json"
    spec.write_text(spec_with({"type": "object", "properties": {"n": {"type": "integer"}}}))
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(overlay_for("") + f"    params:\n      n: {{maximum: {value}}}\n")
    stderr = refused(run("inspect", str(spec), "--overlay", str(overlay)), "overlay.yaml:6:20", "invalid number")
    assert len(stderr) < 2000


@pytest.mark.parametrize(
    "number",
    ["1e999", "-1.5E+400", "1e0400", "1" * 250 + "e99", "1" * 400 + ".0", "[\n  1e999]", "9" * 5000],
)
def test_numbers_that_overflow_are_located_whatever_their_spelling(tmp_path: Path, number: str) -> None:
    """JSON is parsed by pydantic-core from the bytes when no number needs a check; it would turn
    these into inf (or refuse without a place), so they must take the `json` path and be located."""
    path = tmp_path / "spec.json"
    path.write_text(spec_with(f'{{"type": "number", "maximum":\n  {number}}}'))
    with pytest.raises(InputError) as info:
        load_spec(str(path))
    assert "invalid number" in info.value.render() and "spec.json:" in info.value.render()


def test_number_lookalikes_in_strings_keep_the_fast_json_path(tmp_path: Path) -> None:
    """Hex ids and UUIDs (`550e8400-...`) look like 3-digit exponents; in strings they are text."""
    texts = ["550e8400-e29b-41d4", "ID 1e999", "ref 6dcb09b5e4193", "1E400", "-1e300x", "9" * 150]
    doc = json.loads(spec_with({"type": "string", "enum": texts}))
    data = json.dumps(doc, indent=2).encode()
    assert not parse_module._may_need_number_check(data)
    assert parse_module._fast_json(data) == doc
    assert load_spec(_written(tmp_path / "spec.json", data)).document["paths"] == doc["paths"]


@pytest.mark.parametrize("name", ["github/api.github.com.json", "stripe/spec3.json", "openai/openapi.yaml"])
def test_the_fast_json_path_reads_what_json_reads(name: str) -> None:
    path = corpus_file(name)
    data = path.read_bytes()
    fast = parse_module._fast_json(data)
    if name.endswith(".yaml"):
        assert fast is None
        return
    assert fast is not None, "a real spec should take the fast path"
    assert fast == json.loads(data) and parse_module.parse_document(data, name)[0] == fast


@pytest.mark.parametrize("inner", ["", "1"])
def test_json_nested_exactly_to_the_limit_loads_and_one_more_is_located(tmp_path: Path, inner: str) -> None:
    """The fast JSON path bounds nesting by pydantic-core's recursion limit (the bytes parsed inside
    more arrays); the edge must be where check_document puts it, whichever path decides."""
    for depth, fine in ((MAX_NESTING, True), (MAX_NESTING + 1, False)):
        data = ("[" * depth + inner + "]" * depth).encode()
        if fine:
            assert parse_module.parse_document(data, "deep.json")[0] == json.loads(data)
        else:
            with pytest.raises(InputError) as info:
                parse_module.parse_document(data, "deep.json")
            assert f"more than {MAX_NESTING} levels" in info.value.render()
    assert parse_module._padding_limits_nesting(), "pydantic-core's recursion limit changed: no fast path"


def test_the_padding_never_turns_two_json_values_into_one() -> None:
    for text in (b'{"a": 1}, {"b": 2}', b"[1]]]", b"[1], [2", b'{"a": 1}\n]'):
        assert parse_module._fast_json(text) is None
        with pytest.raises(InputError):
            parse_module.parse_document(text, "two.json")


def _written(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


# ============================================================================ item 17: nesting


def test_a_schema_150_objects_deep_is_a_located_error(tmp_path: Path) -> None:
    for name, text in (("deep.json", spec_with(nested_objects(150))),
                       ("deep.yaml", json.dumps(json.loads(spec_with(nested_objects(150))), indent=1))):
        path = tmp_path / name
        path.write_text(text)
        refused(run("inspect", str(path), "--all-operations"), name, f"more than {MAX_NESTING} levels deep",
                "/paths/~1x/post/", "flatten")


def test_a_chain_of_inlined_references_is_cut_with_a_warning(tmp_path: Path) -> None:
    """400 components, each a property referring to the next (no cycle: all inlined, 400 deep)."""
    schemas: dict[str, Any] = {
        f"S{i}": {"type": "object", "properties": {"a": {"$ref": f"#/components/schemas/S{i + 1}"}}} for i in range(400)
    }
    schemas["S400"] = {"type": "string"}
    doc = json.loads(spec_with({"$ref": "#/components/schemas/S0"}))
    doc["components"] = {"schemas": schemas}
    path = tmp_path / "chain.json"
    path.write_text(json.dumps(doc))
    compiled = compile_manifest(load_spec(str(path)), all_operations=True)
    assert any("nests more than 64 schemas deep" in w.message for w in compiled.warnings)
    again = Manifest.from_json(compiled.manifest.to_json())  # serialisable and verifiable
    assert again.content_hash == compiled.manifest.content_hash
    done = run("inspect", str(path), "--all-operations")
    assert done.returncode == 0, done.stderr
    no_traceback(done.stderr)


def test_a_select_expression_nested_past_any_use_is_an_overlay_error(tmp_path: Path) -> None:
    spec = tmp_path / "openapi.json"
    spec.write_text(spec_with({"type": "object", "properties": {"a": {"type": "object"}}}))
    for expression in ("(" * 3000 + "a" + ")" * 3000, "[" * 100 + "a" + "]" * 100, "!" * 3000 + "a"):
        overlay = tmp_path / "overlay.yaml"
        overlay.write_text(overlay_for("") + f"    response: {{select: {json.dumps(expression)}}}\n")
        refused(run("inspect", str(spec), "--overlay", str(overlay)), "overlay.yaml", "nests more than")
