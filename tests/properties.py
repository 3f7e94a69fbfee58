"""The property-based tier's machinery, shared by tests/test_properties.py (the example APIs) and the
third-party modules (tests/thirdparty/, real servers behind tests/spec_proxy.py).

hypothesis (with hypothesis-jsonschema) draws arguments from each tool's `inputSchema` as the
client sees it, and breaks them in the ways models and attackers do: wrong types, values out of
range, missing and unknown keys, null, NaN and infinities, control characters, lone surrogates,
huge strings. Every call goes through the real MCP server (the SDK client in memory, which also
checks structured content against `outputSchema`) to a real upstream on 127.0.0.1, and every
request that reaches it is checked against its spec with openapi-core.

Properties, for every call:
* no crash and no INTERNAL_ERROR: a result, or a tool error with a stable code;
* a call refused before anything was sent names the argument (`field`);
* every request that reached the upstream was valid for its spec (no openapi-core violation).

Runs are derandomised (the same examples every run, so CI is repeatable); set
`O2M_HYPOTHESIS_SEED=random` to explore new ones, `O2M_HYPOTHESIS_EXAMPLES=N` for more of them.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from mcp import Client, MCPError, types

from openapi2mcp.manifest import Manifest
from openapi2mcp.result import error_of
from openapi2mcp.runtime import Runtime, RuntimeOptions
from tests.e2e_support import portal

# every risk is approved, so that writes reach the upstream and are checked there too
APPROVE = "critical"
PROFILE = settings(
    max_examples=int(os.environ.get("O2M_HYPOTHESIS_EXAMPLES", "60")),
    deadline=None,
    derandomize=os.environ.get("O2M_HYPOTHESIS_SEED") != "random",
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much],
)


@dataclass
class Target:
    """One served overlay: its tools, a way to call them, and the upstream's record of bad requests."""

    name: str
    tools: list[types.Tool]
    call: Callable[[str, dict[str, Any]], types.CallToolResult]  # through the SDK client
    violations: Callable[[], list[dict[str, Any]]]  # every request the spec does not allow, so far


@contextlib.contextmanager
def served_in_memory(
    name: str, manifest: Manifest, environ: Mapping[str, str], violations: Callable[[], list[dict[str, Any]]]
) -> Iterator[Target]:
    """The Manifest behind the real MCP server, the SDK client connected to it in memory."""
    runtime = Runtime(manifest, RuntimeOptions(environ=dict(environ), auto_approve=APPROVE))
    with portal() as loop:
        client = loop.wrap_async_context_manager(Client(runtime.build_server(), mode="legacy"))
        session = client.__enter__()
        try:
            tools = loop.call(session.list_tools).tools
            yield Target(name, tools, lambda tool, args: loop.call(session.call_tool, tool, args), violations)
        finally:
            client.__exit__(None, None, None)
            loop.call(runtime.aclose)


# ============================================================================ argument strategies

JSON_SCALARS = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(
    max_size=40)
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.text(max_size=10), inner, max_size=4), max_leaves=12)
# what hostile clients send that JSON Schema generators never do
NASTY_STRINGS = st.sampled_from([
    "", " ", "\x00", "a\r\nX-Injected: 1", "\x0b lead", "../../etc/passwd", "%2e%2e%2f", "?x=1&y=2#frag",
    "\ud800", "cut \ud83d", "é☕\u202e\u200b", "x" * 70_000, "{{7*7}}", "'; DROP TABLE x; --", "NaN",
]) | st.text(alphabet=st.characters(codec="utf-8", exclude_categories=()), max_size=30)
NASTY_NUMBERS = st.sampled_from([math.nan, math.inf, -math.inf, 10**400, -(10**30), 1e308, -0.0, 2**63])


@functools.cache
def valid_arguments(schema_json: str) -> st.SearchStrategy[dict[str, Any]]:
    schema = json.loads(schema_json)
    return from_schema(schema, allow_x00=True)  # type: ignore[no-any-return]


def broken_arguments(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """One valid call, then one thing changed the way a model or an attacker would."""
    props: dict[str, Any] = schema.get("properties") or {}
    names = sorted(props)
    required = [n for n in schema.get("required", []) if n in props]

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        base = dict(draw(valid_arguments(json.dumps(schema, sort_keys=True))))
        how = draw(st.sampled_from(["wrong", "nasty", "number", "null", "unknown", "missing", "random"]))
        if how == "random" or not names:
            return dict(draw(st.dictionaries(st.text(max_size=12), JSON_VALUES, max_size=5)))
        key = draw(st.sampled_from(names))
        if how == "wrong":
            base[key] = draw(JSON_VALUES)
        elif how == "nasty":
            base[key] = draw(NASTY_STRINGS)
        elif how == "number":
            base[key] = draw(NASTY_NUMBERS)
        elif how == "null":
            base[key] = None
        elif how == "unknown":
            base[draw(st.text(min_size=1, max_size=12).filter(lambda k: k not in props))] = draw(JSON_VALUES)
        elif required:
            base.pop(draw(st.sampled_from(required)), None)
        return base

    return build()


def draw_call(data: st.DataObject, target: Target, *, broken: bool) -> tuple[types.Tool, dict[str, Any]]:
    tool = data.draw(st.sampled_from(target.tools), label="tool")
    schema = dict(tool.input_schema)
    if broken:
        return tool, data.draw(broken_arguments(schema), label="arguments")
    return tool, dict(data.draw(valid_arguments(json.dumps(schema, sort_keys=True)), label="arguments"))


# ============================================================================ the properties


def check(target: Target, tool: types.Tool, arguments: dict[str, Any]) -> None:
    """Call the tool and assert every property of the tier on what comes back."""
    seen = len(target.violations())
    where = f"{target.name} {tool.name}({_shown(arguments)})"
    try:
        result = target.call(tool.name, arguments)
    except MCPError as e:  # a protocol error for a listed tool and object arguments: never expected
        raise AssertionError(f"{where}: protocol error {e!r}") from None
    violations = target.violations()[seen:]
    assert not violations, f"{where}: the upstream received a request its spec does not allow: {violations[0]}"
    if not result.is_error:
        if tool.output_schema is not None and result.structured_content is not None:
            jsonschema.validate(result.structured_content, tool.output_schema)  # what the SDK client checks too
        return
    body = error_of(result)
    assert body is not None, f"{where}: an error without the seed-000 body: {result.model_dump_json()[:500]}"
    assert body["code"] != "INTERNAL_ERROR", f"{where}: {body}"
    assert isinstance(body.get("message"), str) and body["message"], f"{where}: {body}"
    sent = (result.meta or {}).get("openapi2mcp/requests") or []
    if body["code"] == "ARGUMENT_INVALID" and not sent:
        assert body.get("field") is not None, f"{where}: refused without naming the argument: {body}"


def _shown(arguments: Any) -> str:
    text = json.dumps(arguments, ensure_ascii=True, default=repr)
    return text if len(text) < 300 else text[:300] + "..."
