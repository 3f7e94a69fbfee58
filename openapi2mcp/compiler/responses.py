"""What an operation gives back: its success response, the tool's output schema and result plan.

* success_response: the response object of the main success status (200 first, then 2xx);
  success_statuses and accept_header: what the call plan accepts and asks for.
* output_schema / response_base: its JSON schema converted for a tool (depth-limited) or for a
  projection (deep); wrap_output: legacy MCP needs an object at the root, so an array or scalar
  result is wrapped under `items` / `result` and the ResponseSpec says so.
* projected_output / project: the schema of a JMESPath `select` (projection.py) over it, with the
  overlay's file and line when it does not fit.
* output_contract: what the tool advertises under `response.validate` (tolerant, strict, off).
"""

from __future__ import annotations

from typing import Any

from openapi2mcp.compiler.media import pick_media, reads_as_json
from openapi2mcp.compiler.model import Context, Operation, OutputKind
from openapi2mcp.compiler.projection import ProjectionError, project_schema
from openapi2mcp.compiler.schemas import SchemaError, limit_depth, schema_types
from openapi2mcp.errors import InputError
from openapi2mcp.manifest import ResponseSpec
from openapi2mcp.overlay import KeyPath, OverlayFile, ResponseDef, ToolOverlay

# Output schemas describe the shape of results to the model and let clients validate them.
# Deeper than this they say "an object" / "an array" without the contents: real response schemas
# are DAGs whose full expansion explodes (Stripe: 180 MB for 417 tools inlined) while the model
# needs the first levels. Overlay tools project their responses, so they get more room.
OUTPUT_DEPTH_RAW = 3
OUTPUT_DEPTH_TOOL = 3
PROJECTION_BASE_DEPTH = 12
# The result of a call whose success response documents no body.
EMPTY_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {"status": {"type": "integer", "description": "The upstream's HTTP status (no content)."}},
}


# ============================================================================ the overlay's `response`


def response_def_of(overlay: ToolOverlay, *own: ResponseDef | None) -> ResponseDef | None:
    """The `response` a tool (or branch) runs with: `own` (most specific first: a branch's, then its
    tool's) over the overlay's `defaults.response`, merged key by key, so a tool with its own
    `select` keeps the default `max_bytes`."""
    layers = [*own, overlay.defaults.response if overlay.defaults else None]
    merged: dict[str, Any] = {}
    for layer in reversed(layers):
        if layer is not None:
            merged.update(layer.model_dump(by_alias=True, exclude_unset=True))
    return ResponseDef.model_validate(merged) if any(layer is not None for layer in layers) else None


def response_spec(rdef: ResponseDef | None) -> ResponseSpec:
    """The result plan an overlay `response` asks for (the wrap key comes from the result's schema)."""
    if rdef is None:
        return ResponseSpec()
    return ResponseSpec(select=rdef.select, max_items=rdef.max_items, max_bytes=rdef.max_bytes or 64_000,
                        validate_=rdef.validate_ or "tolerant")


def output_contract(ctx: Context, schema: dict[str, Any] | None, response: ResponseSpec) -> dict[str, Any] | None:
    """The outputSchema a tool advertises for a (strict, wrapped) result schema under `response.validate`:
    tolerant (default) derives what real data keeps (schemas.tolerant), strict is the spec's own, off none."""
    if schema is None or response.validate_ == "off":
        return None
    return ctx.converter.tolerant(schema) if response.validate_ == "tolerant" else schema


# ============================================================================ the spec's responses


def success_response(ctx: Context, op: Operation) -> dict[str, Any] | None:
    """The response object of the operation's main success status (200 first, then 2xx)."""
    responses = op.node.get("responses")
    if not isinstance(responses, dict):
        return None
    ordered = sorted((str(c) for c in responses if str(c).startswith("2")), key=lambda c: (c != "200", c))
    return next((r for r in (response_object(ctx, op, c) for c in ordered) if r is not None), None)


def response_object(ctx: Context, op: Operation, status: str) -> dict[str, Any] | None:
    """The resolved response object of one status (YAML may key it by an integer); None: none usable."""
    responses = op.node.get("responses")
    if not isinstance(responses, dict):
        return None
    raw = responses.get(status, responses.get(int(status)) if status.isdigit() else None)
    try:
        resp = ctx.converter.resolve(raw)
    except SchemaError:
        return None
    return resp if isinstance(resp, dict) else None


def json_schema(resp: dict[str, Any] | None) -> Any:
    """The schema of a response object's first JSON media type (None: it documents no JSON body)."""
    content = resp.get("content") if resp else None
    if not isinstance(content, dict):
        return None
    mt = next((mt for media, mt in content.items() if reads_as_json(str(media))), None)
    return mt.get("schema") if isinstance(mt, dict) else None


def success_statuses(op: Operation) -> list[str]:
    """The statuses the call plan accepts as success (2XX when the spec lists none)."""
    responses = op.node.get("responses")
    if not isinstance(responses, dict):
        return ["2XX"]
    codes = sorted(str(c).upper() for c in responses if str(c).startswith("2"))
    return codes or ["2XX"]


def accept_header(op: Operation) -> str | None:
    """The Accept header of the call: the documented success media types, JSON first (at most 4)."""
    responses = op.node.get("responses")
    if not isinstance(responses, dict):
        return None
    media: list[str] = []
    for code, resp in responses.items():
        if str(code).startswith("2") and isinstance(resp, dict) and isinstance(resp.get("content"), dict):
            media.extend(m for m in resp["content"] if m not in media)
    if not media:
        return None
    media.sort(key=lambda m: pick_media([m, "zz/zz"]) != m)
    return ", ".join(media[:4])


def output_kind(ctx: Context, op: Operation) -> OutputKind:
    """json: the success response has a JSON schema; empty: it documents no body; other: anything else."""
    resp = success_response(ctx, op)
    if json_schema(resp) is not None:
        return "json"
    if resp is not None and not resp.get("content"):
        return "empty"
    return "other"


def _response_schema(ctx: Context, op: Operation) -> Any:
    return json_schema(success_response(ctx, op))


# ============================================================================ output schemas


def response_base(ctx: Context, op: Operation) -> dict[str, Any] | None:
    """The success response's schema converted for projections (deep; None: not JSON)."""
    raw = _response_schema(ctx, op)
    if raw is None:
        return None
    return ctx.convert(raw, "output", op.pointer + "/responses", PROJECTION_BASE_DEPTH)


def output_schema(ctx: Context, op: Operation, depth: int) -> tuple[dict[str, Any] | None, str | None]:
    """The outputSchema of the success response and the wrap key if it is not an object."""
    raw = _response_schema(ctx, op)
    if raw is None:
        return None, None
    schema = ctx.convert(raw, "output", op.pointer + "/responses", depth)
    return wrap_output(schema)


def wrap_output(schema: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """Legacy MCP needs an object at the root: wrap arrays and scalars under `items`/`result`."""
    types = schema_types(schema)
    if types == {"object"} and not _may_be_null(schema):
        return schema, None
    key = "items" if types == {"array"} else "result"
    defs = schema.get("$defs")
    inner = {k: v for k, v in schema.items() if k != "$defs"}
    out: dict[str, Any] = {"type": "object", "properties": {key: inner}, "required": [key]}
    if defs:
        out["$defs"] = defs
    return out, key


def _may_be_null(schema: dict[str, Any]) -> bool:
    t = schema.get("type")
    return isinstance(t, list) and "null" in t


def projected_output(
    ctx: Context, op: Operation, response: ResponseSpec, doc: OverlayFile, at: KeyPath
) -> tuple[dict[str, Any] | None, ResponseSpec]:
    """Output schema after a JMESPath projection (see projection.py for the inference)."""
    assert response.select is not None
    try:
        projected = project_schema(response.select, response_base(ctx, op))
    except ProjectionError as e:
        raise InputError(doc.problem(at, str(e), hint=e.hint)) from None
    if projected is None:
        return None, response.model_copy(update={"wrap": None})
    schema, wrap = wrap_output(limit_depth(projected, OUTPUT_DEPTH_TOOL + 1))
    return schema, response.model_copy(update={"wrap": wrap})


def project(
    expr: str, base: dict[str, Any], what: str, doc: OverlayFile, where: KeyPath, *, context: bool = False
) -> dict[str, Any]:
    """The schema of `expr`'s result over `base` (over a chain's {inputs, steps} with `context`)."""
    try:
        out = project_schema(expr, base, what=what, context=context)
    except ProjectionError as e:
        raise InputError(doc.problem(where, str(e), hint=e.hint)) from None
    return out or {}
