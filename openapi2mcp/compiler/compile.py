"""The compile stage's entry point: a loaded spec plus overlays -> a frozen, hashed Manifest.

    compile_manifest(spec, overlays, all_operations=False) -> Compiled(manifest, warnings)

What happens, in order (README.md in this folder has the map of the modules):
1. OAI Overlay documents patch the spec (overlay.apply_oai_overlays).
2. Every operation is indexed by operationId and by "METHOD /path" (operations.py).
3. The overlay's tool names become the names clients accept (names.py), and the upstream section
   is made first (upstream.py): the parameters its auth supplies are no tool's arguments.
4. Each overlay tool is compiled by its kind: `operation` (single.py), `actions` / `variants`
   (branches.py) or `steps` (chains.py); toolspec.py makes every ToolSpec.
5. With `passthrough: true` (or `--all-operations` without an overlay) every other operation
   becomes a tool of its own, 1:1 (single.raw_tool).
6. Resources, prompts and result links (catalog.py), then the served names; the Manifest is sealed.

Anything the overlay names that does not exist is an error with file, line and a suggestion; a
problem in the spec that can be worked around is a warning with its JSON pointer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from openapi2mcp import __version__
from openapi2mcp.compiler.branches import action_tool, variant_tool
from openapi2mcp.compiler.catalog import compile_catalog
from openapi2mcp.compiler.chains import chain_tool
from openapi2mcp.compiler.model import Context
from openapi2mcp.compiler.names import (
    check_unique_names,
    raw_tool_names,
    served_names,
    served_tool,
    with_served_mentions,
)
from openapi2mcp.compiler.operations import index_operations, unique_operations
from openapi2mcp.compiler.pin import pin_warning
from openapi2mcp.compiler.responses import response_def_of, response_spec
from openapi2mcp.compiler.schemas import SchemaConverter
from openapi2mcp.compiler.single import operation_tool, raw_tool
from openapi2mcp.compiler.upstream import server_spec, upstream_spec
from openapi2mcp.errors import InputError, Problem, SpecWarning
from openapi2mcp.manifest import Manifest, ResponseSpec, SourceSpec, ToolSpec, paused_gc
from openapi2mcp.overlay import KeyPath, OverlayFile, ToolDef, ToolOverlay, apply_oai_overlays

if TYPE_CHECKING:
    from openapi2mcp.loader import LoadedSpec


@dataclass(frozen=True)
class Unexposed:
    """An operation of the spec that no tool, resource or forbidden tool uses (the catalog lists them)."""

    id: str
    method: str
    path: str
    summary: str | None = None


@dataclass
class Compiled:
    """The sealed Manifest and the warnings about the spec met on the way (loading's included).

    `unexposed`: the spec's operations the Manifest does not mention, for people reviewing what is
    served (`openapi2mcp docs`); not in the Manifest, which holds only what the runtime needs.
    """

    manifest: Manifest
    warnings: list[SpecWarning]
    unexposed: list[Unexposed] = field(default_factory=list)


@paused_gc()
def compile_manifest(
    spec: LoadedSpec,
    overlays: Sequence[OverlayFile] = (),
    *,
    all_operations: bool = False,
    seal: bool = True,
) -> Compiled:
    """Compile a spec and overlays into a sealed Manifest (raises InputError on bad input).

    `seal=False` leaves `content_hash` empty: what `serve SPEC` serves, which needs no hash to start
    (the Runtime hashes it when /healthz first asks; GitHub's every operation: 0.2 s, Graph's: 2 s).
    """
    tool_overlays = [o for o in overlays if o.tools is not None]
    if len(tool_overlays) > 1:
        raise InputError.at(
            f"more than one tool overlay given ({', '.join(o.path for o in tool_overlays)})",
            hint="merge them into one `openapi2mcp: 1` file; OAI Overlays (overlay: 1.x) may repeat",
        )
    doc_overlay = tool_overlays[0] if tool_overlays else None
    if doc_overlay is None and not all_operations:
        raise InputError.at(
            "no tool overlay given: nothing to expose",
            hint="pass --overlay FILE (an `openapi2mcp: 1` file), or --all-operations for every operation 1:1",
        )
    # OAI Overlays patch the document as written; the CLI applies them while loading (before a
    # Swagger 2.0 conversion), else they apply here, to the 3.x document
    document = spec.document if spec.patched else apply_oai_overlays(spec.document, [o for o in overlays if o.oai])
    converter = SchemaConverter(document, openapi31=spec.openapi_version.startswith("3.1"))
    ctx = Context(spec=spec, document=document, converter=converter, ops={})
    ctx.warnings.extend(w for w in [pin_warning(spec, doc_overlay)] if w)  # the overlay's `spec` pin (pin.py)
    ctx.ops = index_operations(ctx)
    if not ctx.ops:
        raise InputError.at("the spec has no operations under `paths`", file=spec.source, pointer="/paths")
    tool_overlay = doc_overlay.tools if doc_overlay else None
    renames: dict[str, str] = {}  # written tool name -> served name (names.py)
    if doc_overlay and tool_overlay:
        renames = served_names(tool_overlay, doc_overlay)
        tool_overlay = with_served_mentions(tool_overlay, renames)
    upstream = upstream_spec(ctx, tool_overlay, doc_overlay)

    tools: list[ToolSpec] = []
    used: set[str] = set()
    if doc_overlay and tool_overlay:
        problems: list[Problem] = []
        for i, tdef in enumerate(tool_overlay.tools):
            try:
                tool = _overlay_tool(ctx, tdef, tool_overlay, doc_overlay, ("tools", i))
            except InputError as e:
                problems.extend(e.problems)
                continue
            tools.append(tool)
            used.update(s.operation.id for b in tool.branches for s in b.steps)
        if problems:
            raise InputError(problems, title=f"{doc_overlay.path}: the overlay does not fit the spec")
        check_unique_names(tools, doc_overlay)
    if all_operations or (tool_overlay is not None and tool_overlay.passthrough):
        taken = {renames.get(t.name, t.name) for t in tools}
        ops = [op for op in unique_operations(ctx.ops) if op.id not in used]
        raw = response_spec(response_def_of(tool_overlay)) if tool_overlay else ResponseSpec()
        raw = raw.model_copy(update={"select": None})  # a default `select` fits no 1:1 tool
        tools.extend(raw_tool(ctx, op, name, raw) for op, name in zip(ops, raw_tool_names(ops, taken), strict=True))

    tools, resources, prompts = compile_catalog(ctx, tool_overlay, doc_overlay, tools)
    tools = [served_tool(t, renames) for t in tools]  # after the catalog: it finds tools by their written names
    manifest = Manifest(
        generator=f"openapi2mcp {__version__}",
        server=server_spec(spec, document, tool_overlay),
        upstream=upstream,
        tools=tools,
        resources=resources,
        prompts=prompts,
        sources=_sources(spec, overlays),
    )
    manifest = manifest.sealed() if seal else manifest
    return Compiled(manifest=manifest, warnings=[*spec.warnings, *ctx.warnings], unexposed=_unexposed(ctx, manifest))


def _unexposed(ctx: Context, manifest: Manifest) -> list[Unexposed]:
    """The spec's operations, in spec order, that no tool (forbidden ones included) or resource calls."""
    mentioned = {s.operation.id for t in manifest.tools for b in t.branches for s in b.steps}
    mentioned |= {r.operation.id for r in manifest.resources}
    out = []
    for op in unique_operations(ctx.ops):
        if op.id not in mentioned:
            summary = op.node.get("summary")
            out.append(Unexposed(op.id, op.method, op.path, summary if isinstance(summary, str) else None))
    return out


def _overlay_tool(ctx: Context, tdef: ToolDef, overlay: ToolOverlay, doc: OverlayFile, at: KeyPath) -> ToolSpec:
    """One overlay tool, by its kind (the overlay model allows exactly one of the four)."""
    if tdef.operation is not None:
        return operation_tool(ctx, tdef, overlay, doc, at)
    if tdef.actions is not None:
        return action_tool(ctx, tdef, overlay, doc, at)
    if tdef.variants is not None:
        return variant_tool(ctx, tdef, overlay, doc, at)
    return chain_tool(ctx, tdef, overlay, doc, at)


def _sources(spec: LoadedSpec, overlays: Iterable[OverlayFile]) -> list[SourceSpec]:
    """What the Manifest was compiled from: file names and hashes."""
    kind = ("swagger " if spec.original_version.startswith("2") else "openapi ") + spec.original_version
    out = [SourceSpec(name=_basename(spec.source), sha256=spec.sha256, kind=kind)]
    out.extend(SourceSpec(name=_basename(o.path), sha256=o.sha256, kind=o.kind) for o in overlays)
    return out


def _basename(source: str) -> str:
    return source.rstrip("/").rsplit("/", 1)[-1] or source
