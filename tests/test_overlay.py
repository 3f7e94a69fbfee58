"""The overlay format: parsing, validation messages (file, line, key, suggestion), OAI Overlays."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import jsonschema
import pytest
import yaml

from openapi2mcp.errors import InputError
from openapi2mcp.overlay import apply_oai_overlays, overlay_json_schema
from openapi2mcp.overlay.reading import parse_overlay
from tests.conftest import EXAMPLES
from tests.e2e_support import run_cli


def problems(text: str) -> list[str]:
    with pytest.raises(InputError) as info:
        parse_overlay(textwrap.dedent(text), "ov.yaml")
    return [str(p) for p in info.value.problems]


def test_example_overlays_are_valid_against_the_published_schema() -> None:
    schema = overlay_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    overlays = sorted(EXAMPLES.glob("*/overlay*.yaml"))
    assert overlays, f"no example overlays under {EXAMPLES}"
    for path in overlays:
        data = yaml.safe_load(path.read_text())
        jsonschema.validate(data, schema)
        assert parse_overlay(path.read_text(), str(path)).tools is not None


def test_unknown_key_names_line_and_suggests() -> None:
    [msg] = problems("""\
        openapi2mcp: 1
        tools:
          - name: notes_search
            operation: searchNotes
            risc: low
        """)
    assert msg.startswith("ov.yaml:5:5 at tools[0](notes_search).risc: unknown key 'risc'")
    assert "did you mean 'risk'?" in msg


def test_nested_unknown_key_lists_the_valid_keys() -> None:
    [msg] = problems("""\
        openapi2mcp: 1
        tools:
          - name: a.b
            operation: x
            params:
              limit: {maximun: 5}
        """)
    assert "ov.yaml:6:15" in msg
    assert "unknown key 'maximun' in tools[0](a.b).params.limit; did you mean 'maximum'?" in msg
    assert "valid keys here:" in msg and "minLength" in msg


def test_bad_enum_value_suggests_the_nearest() -> None:
    [msg] = problems("""\
        openapi2mcp: 1
        tools:
          - {name: a.b, operation: x, risk: hihg}
        """)
    assert "'hihg' is not one of low, medium, high, critical, forbidden; did you mean 'high'?" in msg


def test_union_types_are_reported_once() -> None:
    [msg] = problems("""\
        openapi2mcp: 1
        upstream: {timeout: soon}
        """)
    assert msg == "ov.yaml:2:12 at upstream.timeout: expected a mapping or a number, got 'soon'"


def test_tool_name_rules() -> None:
    for bad in ("notes search", "x" * 65, "", "ünïcode"):
        [msg] = problems(f"""\
            openapi2mcp: 1
            tools:
              - {{name: {json.dumps(bad)}, operation: x}}
            """)
        assert "tool name" in msg and "is invalid" in msg and "1-64 characters" in msg


def test_missing_key_and_wrong_version() -> None:
    [msg] = problems("""\
        openapi2mcp: 1
        tools:
          - name: a.b
        """)
    assert "missing required key 'operation' in tools[0](a.b)" in msg
    [msg] = problems("openapi2mcp: 2\n")
    assert "2 is not one of 1" in msg


def test_comma_in_flow_mapping_gets_a_quoting_hint() -> None:
    [msg] = problems("""\
        openapi2mcp: 1
        tools:
          - name: a.b
            operation: x
            params:
              q: {description: Keyword, 2 to 80 characters.}
        """)
    assert "unknown key '2 to 80 characters.'" in msg and "put the value in quotes" in msg


def test_auth_needs_its_fields_and_failure_mode_keys_are_statuses() -> None:
    msgs = problems("""\
        openapi2mcp: 1
        upstream:
          auth: {type: header, value: "${KEY}"}
        tools:
          - name: a.b
            operation: x
            failure_modes: {99: {code: X}, 404: {code: NOT_FOUND}}
        """)
    assert any("auth type 'header' needs name" in m for m in msgs)
    assert any("failure_modes key '99'" in m for m in msgs)
    [msg] = problems("""\
        openapi2mcp: 1
        tools:
          - name: a.b
            operation: x
            failure_modes: {404: {code: not_upper}}
        """)
    assert msg.startswith("ov.yaml:5:27 at tools[0](a.b).failure_modes.404.code: string should match pattern")


def test_yaml_syntax_error_has_line_and_column() -> None:
    [msg] = problems("openapi2mcp: 1\ntools:\n  - name: [unclosed\n")
    assert msg.startswith("ov.yaml:4:1") and "invalid YAML" in msg


def test_not_an_overlay() -> None:
    [msg] = problems("openapi: 3.0.0\npaths: {}\n")
    assert "not an overlay" in msg
    [msg] = problems("- a\n- b\n")
    assert "must be a YAML mapping" in msg


def test_base_url_must_be_http_or_template() -> None:
    [msg] = problems("openapi2mcp: 1\nupstream: {base_url: ftp://x}\n")
    assert "base_url must be an http(s) URL" in msg
    ok = parse_overlay("openapi2mcp: 1\nupstream: {base_url: '${API:-http://x}'}\n")
    assert ok.tools is not None and ok.tools.upstream.base_url == "${API:-http://x}"


def test_integer_bounds_stay_integers() -> None:
    doc = parse_overlay("openapi2mcp: 1\ntools: [{name: a, operation: x, params: {n: {maximum: 20}}}]\n")
    assert doc.tools is not None
    assert doc.tools.tools[0].params["n"].schema_keywords() == {"maximum": 20}
    assert isinstance(doc.tools.tools[0].params["n"].schema_keywords()["maximum"], int)


# ----------------------------------------------------------------------------- OAI Overlay


SPEC = {
    "openapi": "3.0.3",
    "info": {"title": "t", "version": "1"},
    "paths": {
        "/a": {"get": {"operationId": "getA", "tags": ["x"], "responses": {"200": {"description": "ok"}}}},
        "/internal": {"get": {"operationId": "internal", "responses": {"200": {"description": "ok"}}}},
    },
}


def test_oai_overlay_update_remove_copy() -> None:
    ov = parse_overlay(textwrap.dedent("""\
        overlay: 1.1.0
        info: {title: patch, version: "1"}
        actions:
          - target: $.paths['/a'].get
            update: {summary: Get an A, tags: [y]}
          - target: $.info
            copy: $.paths['/internal'].get.responses['200']
          - target: $.paths['/internal']
            remove: true
        """))
    out = apply_oai_overlays(SPEC, [ov])
    assert out["paths"]["/a"]["get"]["summary"] == "Get an A"
    assert out["paths"]["/a"]["get"]["tags"] == ["x", "y"]  # arrays append
    assert out["info"] == {"title": "t", "version": "1", "description": "ok"}  # the copied node is merged in
    assert "/internal" not in out["paths"]
    assert SPEC["paths"]["/internal"] and "description" not in SPEC["info"]  # the input is not changed


def test_oai_overlay_target_matching_nothing_is_an_error() -> None:
    ov = parse_overlay(textwrap.dedent("""\
        overlay: 1.0.0
        info: {title: patch, version: "1"}
        actions:
          - target: $.paths['/nope'].get
            update: {summary: x}
        """), "patch.yaml")
    with pytest.raises(InputError) as info:
        apply_oai_overlays(SPEC, [ov])
    msg = str(info.value)
    assert "patch.yaml:4:5" in msg and "matches nothing" in msg


def test_oai_overlay_copy_needs_1_1_and_one_kind_per_action() -> None:
    msgs = problems("""\
        overlay: 1.0.0
        info: {title: p, version: "1"}
        actions:
          - {target: $.info, copy: $.x}
        """)
    assert any("copy action needs `overlay: 1.1.0`" in m for m in msgs)
    msgs = problems("""\
        overlay: 1.0.0
        info: {title: p, version: "1"}
        actions:
          - {target: $.info, remove: true, update: {a: 1}}
        """)
    assert any("exactly one of update, remove: true, copy" in m for m in msgs)


def test_oai_overlays_target_a_swagger_2_document_as_written(tmp_path: Path) -> None:
    """`$.securityDefinitions` and `responses['200'].schema` exist only in the 2.0 form: the actions apply
    before the conversion to 3.0, through the CLI as users run it, with `--strict`."""
    spec = tmp_path / "swagger.yaml"
    spec.write_text(textwrap.dedent("""\
        swagger: "2.0"
        info: {title: Things, version: "1"}
        host: api.example.com
        basePath: /v1
        securityDefinitions: {}
        paths:
          /things:
            get:
              operationId: listThings
              produces: [application/json]
              responses:
                "200":
                  description: ok
                  schema: {type: object, properties: {count: {type: integer}}}
        """))
    patch = tmp_path / "patch.yaml"
    patch.write_text(textwrap.dedent("""\
        overlay: 1.0.0
        info: {title: fix the spec, version: "1"}
        actions:
          - target: $.securityDefinitions
            update: {key: {type: apiKey, in: header, name: X-Key}}
          - target: $.paths['/things'].get.responses['200'].schema.properties
            update: {name: {type: string, description: Added by the overlay.}}
        """))
    done = run_cli("inspect", str(spec), "--overlay", str(patch), "--all-operations", "--strict", "--json")
    assert done.returncode == 0, done.stderr
    [listed] = json.loads(done.stdout)
    assert listed["outputSchema"]["properties"]["name"]["description"] == "Added by the overlay."
    out = tmp_path / "m.json"
    compiled = run_cli("compile", str(spec), "--overlay", str(patch), "--all-operations", "-o", str(out))
    assert compiled.returncode == 0, compiled.stderr
    upstream = json.loads(out.read_text())["upstream"]
    assert upstream["auth"] == {"type": "header", "name": "X-Key", "value": "${OPENAPI2MCP_TOKEN:-}"}
    # a target that only the converted form has is not silently matched: the 2.0 document has no `components`
    patch.write_text(patch.read_text().replace("$.securityDefinitions", "$.components.securitySchemes"))
    refused = run_cli("inspect", str(spec), "--overlay", str(patch), "--all-operations")
    assert refused.returncode == 2 and "matches nothing" in refused.stderr


def test_the_overlay_validator_is_built_when_an_overlay_is_read_not_on_import() -> None:
    # `--all-operations` reads no overlay: building the validator at import cost every command ~40 ms
    import subprocess
    import sys

    code = ("from openapi2mcp.compiler import compile_manifest; from openapi2mcp.overlay.model import ToolOverlay; "
            "before = ToolOverlay.__pydantic_complete__; "
            "o = ToolOverlay.model_validate({'openapi2mcp': 1, 'defaults': {'response': {'max_bytes': 1000}}}); "
            "print(before, o.defaults.response.max_bytes)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["False", "1000"]  # ToolDefaults, declared after ToolOverlay, resolves then
