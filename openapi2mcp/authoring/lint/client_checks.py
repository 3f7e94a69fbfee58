"""The checks of the O2M2xx rules: the client profiles of clients.py, for the clients `--client` names."""

from __future__ import annotations

from collections.abc import Iterator

from openapi2mcp.authoring.clients import (
    ClientProfile,
    Refusal,
    collisions,
    count_refusal,
    name_refusals,
    profile,
    schema_refusals,
)
from openapi2mcp.authoring.lint.model import Hit
from openapi2mcp.authoring.lint.views import LintContext, ToolView

_NAME_FIX = ("shorten the tool name (or the server's key in the client configuration: --server-name), using only "
             "a-z A-Z 0-9 _")


def _profiles(ctx: LintContext) -> list[ClientProfile]:
    return [profile(k) for k in ctx.options.clients]


def _hit(ctx: LintContext, tool: ToolView, r: Refusal, p: ClientProfile, fix: str | None = None) -> Hit:
    path = tool.arg_path(r.arg) if r.arg else tool.path
    where = f" (at {r.pointer})" if r.pointer and not r.arg else ""
    return Hit(f"{tool.name}: {r.message}{where}", path, tool.name, fix=fix, client=p.key)


def names(ctx: LintContext) -> Iterator[Hit]:
    for p in _profiles(ctx):
        for tool in ctx.listed:
            for r in name_refusals(p, ctx.server_name, tool.name):
                yield _hit(ctx, tool, r, p, _NAME_FIX)


def renamed_alike(ctx: LintContext) -> Iterator[Hit]:
    for p in _profiles(ctx):
        by_name = {t.name: t for t in ctx.listed}
        for r in collisions(p, ctx.server_name, list(by_name)):
            yield _hit(ctx, by_name[r.tool], r, p, "make the names differ within the client's first characters")


def _schema_hits(ctx: LintContext, kinds: set[str], fix: str) -> Iterator[Hit]:
    for p in _profiles(ctx):
        for tool in ctx.listed:
            for r in schema_refusals(p, tool.spec.input_schema, tool.name):
                if r.kind in kinds:
                    yield _hit(ctx, tool, r, p, fix)


def top_level(ctx: LintContext) -> Iterator[Hit]:
    yield from _schema_hits(ctx, {"top_level"}, "give the tool one object of arguments (a chain's `inputs`: no "
                            "anyOf/oneOf/allOf at its root; say which arguments go together in the description)")


def schema_keywords(ctx: LintContext) -> Iterator[Hit]:
    """One hit per argument (the tool's root: per tool) naming what the client rejects in its schema."""
    fix = "narrow the argument in `params` (one type, string enums) or hide it; the keywords come from the spec"
    for p in _profiles(ctx):
        for tool in ctx.listed:
            found: dict[str | None, list[Refusal]] = {}
            for r in schema_refusals(p, tool.spec.input_schema, tool.name):
                if r.kind == "schema":
                    found.setdefault(r.arg, []).append(r)
            for arg, refusals in found.items():
                reasons = list(dict.fromkeys(r.message.split(": ", 1)[1] for r in refusals))
                what = f"argument {arg!r}" if arg else "the input schema"
                head = refusals[0].message.split(": ", 1)[0]
                shown = "; ".join(reasons[:4]) + (f"; and {len(reasons) - 4} more" if len(reasons) > 4 else "")
                yield Hit(f"{tool.name}: {head}: {what}: {shown}", tool.arg_path(arg) if arg else tool.path,
                          tool.name, fix=fix, client=p.key)


def argument_names(ctx: LintContext) -> Iterator[Hit]:
    yield from _schema_hits(ctx, {"argument"}, "rename the argument: params: {spec_name: {rename: new_name}}")


def meta_schema(ctx: LintContext) -> Iterator[Hit]:
    yield from _schema_hits(ctx, {"meta_schema"}, "fix the schema the overlay writes (a chain's `inputs`, a "
                            "`params` override), or the spec's")


def tool_count(ctx: LintContext) -> Iterator[Hit]:
    for p in _profiles(ctx):
        message = count_refusal(p, len(ctx.listed))
        if message:
            yield Hit(message, ("tools",), client=p.key)
