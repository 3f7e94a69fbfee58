"""The operation index: every operation of the spec by operationId and by "METHOD /path".

An overlay names an operation either way (`operation: getPet` or `operation: GET /pets/{id}`); a
name that is not there is an error with a did-you-mean over the operationIds.
"""

from __future__ import annotations

from typing import Any

from openapi2mcp.compiler.model import Context, Operation
from openapi2mcp.compiler.schemas import SchemaError
from openapi2mcp.errors import InputError, did_you_mean
from openapi2mcp.overlay import KeyPath, OverlayFile

HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def index_operations(ctx: Context) -> dict[str, Operation]:
    """operationId -> Operation and "METHOD /path" -> Operation, in spec order."""
    out: dict[str, Operation] = {}
    paths = ctx.document.get("paths") or {}
    if not isinstance(paths, dict):
        raise InputError.at("`paths` is not a mapping", pointer="/paths")
    for path, item in paths.items():
        item_ptr = "/paths/" + _escape(path)
        try:
            item = ctx.converter.resolve(item, item_ptr)
        except SchemaError as e:
            ctx.warn(f"path item skipped: {e}", item_ptr)
            continue
        if not isinstance(item, dict):
            continue
        shared = _parameters(ctx, item.get("parameters"), item_ptr + "/parameters")
        for method in HTTP_METHODS:
            node = item.get(method)
            if not isinstance(node, dict):
                continue
            ptr = f"{item_ptr}/{method}"
            own = _parameters(ctx, node.get("parameters"), ptr + "/parameters")
            merged = {(p.get("in"), p.get("name")): (p, at) for p, at in shared}
            merged.update({(p.get("in"), p.get("name")): (p, at) for p, at in own})
            op_id = node.get("operationId")
            key = f"{method.upper()} {path}"
            op = Operation(
                id=op_id if isinstance(op_id, str) and op_id.strip() else key,
                method=method.upper(), path=path, pointer=ptr, node=node, params=list(merged.values()),
            )
            if op.id in out and op.id != key:  # a duplicate operationId (the loader warns): by "METHOD /path"
                op.id = key

            out.setdefault(op.id, op)
            out.setdefault(key, op)
    return out


def _parameters(ctx: Context, raw: Any, pointer: str) -> list[tuple[dict[str, Any], str]]:
    """The usable parameter objects of a `parameters` list, resolved, with their pointers."""
    out = []
    for i, p in enumerate(raw or [] if isinstance(raw, list) else []):
        at = f"{pointer}/{i}"
        try:
            p = ctx.converter.resolve(p, at)
        except SchemaError as e:
            ctx.warn(f"parameter skipped: {e}", at)
            continue
        if not isinstance(p, dict) or not isinstance(p.get("name"), str) or p.get("in") not in (
            "path", "query", "header", "cookie"
        ):
            ctx.warn("parameter skipped: it needs a string `name` and `in` of path/query/header/cookie", at)
            continue
        out.append((p, at))
    return out


def unique_operations(ops: dict[str, Operation]) -> list[Operation]:
    """Each operation of the index once (it is there by id and by "METHOD /path"), in spec order."""
    seen: set[str] = set()
    out = []
    for op in ops.values():
        if op.key not in seen:
            seen.add(op.key)
            out.append(op)
    return out


def find_operation(ctx: Context, ref: str) -> Operation | None:
    """The operation an overlay names: an operationId or "METHOD /path" (any case, extra spaces)."""
    op = ctx.ops.get(ref)
    if op is None:
        method, _, path = ref.strip().partition(" ")
        op = ctx.ops.get(f"{method.upper()} {path.strip()}")
    return op


def unknown_operation(ctx: Context, ref: str, doc: OverlayFile, where: KeyPath) -> InputError:
    """The error for an operation the spec does not have, with the nearest operationIds."""
    ids = [k for k in ctx.ops if " " not in k] or list(ctx.ops)
    hint = did_you_mean(ref, ids)
    return InputError(doc.problem(
        where,
        f"unknown operation {ref!r}" + (f"; {hint}" if hint else ""),
        hint='use an operationId from the spec, or "METHOD /path"; `openapi2mcp inspect SPEC '
        "--all-operations` lists them",
    ))


def require_operation(ctx: Context, ref: str, doc: OverlayFile, where: KeyPath) -> Operation:
    """The operation an overlay names at `where`, or InputError (unknown_operation)."""
    op = find_operation(ctx, ref)
    if op is None:
        raise unknown_operation(ctx, ref, doc, where)
    return op


def _escape(part: str) -> str:
    """A JSON pointer token (RFC 6901)."""
    return part.replace("~", "~0").replace("/", "~1")
