"""What the checks look at: each compiled tool beside the overlay entry that wrote it and the spec's operations.

A check sees three views of one tool at once: the Manifest's (what a client is served), the
overlay's (what the author wrote, with its key path for the report) and the spec's (what the API
says: hidden parameters, summaries, response schemas).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from openapi2mcp.authoring.lint.model import LintOptions
from openapi2mcp.authoring.specdoc import SpecDoc, SpecOperation
from openapi2mcp.compiler import CompiledFiles
from openapi2mcp.manifest import DRY_RUN_ARG, DRY_RUN_TOKEN_ARG, Branch, ResponseSpec, ToolSpec
from openapi2mcp.overlay import KeyPath, OperationUse, OverlayFile, ToolDef, ToolOverlay


@dataclass(frozen=True)
class BranchView:
    """One branch of a tool (the tool itself for a single operation): the overlay's words and the spec's operations."""

    key: str
    path: KeyPath  # where the overlay writes it: the tool, an action or a variant
    branch: Branch
    written: OperationUse | None  # the action or variant definition (None: a single operation or a chain)
    operations: list[SpecOperation]
    tool: ToolSpec

    @property
    def response(self) -> ResponseSpec:
        return self.branch.response or self.tool.response

    @property
    def label(self) -> str:
        return f"{self.tool.name} ({self.key})" if self.written is not None else self.tool.name


@dataclass(frozen=True)
class ToolView:
    index: int | None  # in the overlay's `tools` (None: a passthrough tool)
    written: ToolDef | None
    spec: ToolSpec
    branches: list[BranchView]

    @property
    def path(self) -> KeyPath:
        return ("tools", self.index) if self.index is not None else ("passthrough",)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def listed(self) -> bool:
        return self.spec.risk != "forbidden"

    def generated_args(self) -> set[str]:
        """Arguments openapi2mcp adds and describes itself: the action switch, paging, dry run."""
        out = {DRY_RUN_ARG, DRY_RUN_TOKEN_ARG}
        if self.spec.dispatch == "action":
            out.add(self.spec.action_arg)
        for b in self.branches:
            if b.branch.pagination is not None:
                out |= {b.branch.pagination.limit_arg, b.branch.pagination.cursor_arg}
        return out

    def arg_path(self, arg: str) -> KeyPath:
        """Where the overlay speaks of argument `arg` (its `params` entry), else the tool."""
        for b in [*self.branches, None]:
            written = b.written if b is not None else self.written
            params = getattr(written, "params", None) or {}
            base = b.path if b is not None and b.written is not None else self.path
            for key, pdef in params.items():
                if arg in (key, pdef.rename):
                    return (*base, "params", key)
        return self.path


@dataclass
class LintContext:
    """Everything the checks read; built once per run."""

    project: CompiledFiles
    options: LintOptions
    overlay: OverlayFile
    tools: list[ToolView] = field(default_factory=list)

    @cached_property
    def doc(self) -> SpecDoc:
        """The spec's own words (the loaded document, its refs followed)."""
        return SpecDoc(self.project.spec.document)

    @property
    def written(self) -> ToolOverlay:
        assert self.overlay.tools is not None
        return self.overlay.tools

    @property
    def listed(self) -> list[ToolView]:
        return [t for t in self.tools if t.listed]

    @property
    def server_name(self) -> str:
        return self.options.server_name or self.project.manifest.server.name

    @cached_property
    def definitions(self) -> list[dict[str, Any]]:
        """tools/list as a client with every scope sees it."""
        return [t.spec.definition() for t in self.listed]

    def listing_bytes(self) -> int:
        """The bytes of tools/list that reach the model: `_meta` (the contract) is for the host, not the prompt."""
        return len(json.dumps({"tools": [for_model(d) for d in self.definitions]}, ensure_ascii=False).encode())


def for_model(definition: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in definition.items() if k != "_meta"}


def build_context(project: CompiledFiles, options: LintOptions) -> LintContext:
    overlay = project.tool_overlay
    assert overlay is not None and overlay.tools is not None
    ctx = LintContext(project=project, options=options, overlay=overlay)
    index = {t.name: i for i, t in enumerate(overlay.tools.tools)}
    for tool in project.manifest.tools:
        i = index.get(tool.written_name or tool.name)
        written = overlay.tools.tools[i] if i is not None else None
        path: KeyPath = ("tools", i) if i is not None else ("passthrough",)
        ctx.tools.append(ToolView(index=i, written=written, spec=tool,
                                  branches=_branches(ctx, tool, written, path)))
    return ctx


def _branches(ctx: LintContext, tool: ToolSpec, written: ToolDef | None, path: KeyPath) -> list[BranchView]:
    defs: list[tuple[KeyPath, OperationUse | None]]
    if written is not None and written.actions is not None:
        defs = [((*path, "actions", k), written.actions[k]) for k in written.actions]
    elif written is not None and written.variants is not None:
        defs = [((*path, "variants", j), v) for j, v in enumerate(written.variants)]
    else:
        defs = [(path, None)] * len(tool.branches)
    if len(defs) != len(tool.branches):  # cannot happen for a compiled overlay; keep the report honest anyway
        defs = [(path, None)] * len(tool.branches)
    out = []
    for (at, bdef), branch in zip(defs, tool.branches, strict=True):
        ops = [ctx.doc.operation(s.operation.method, s.operation.path, s.operation.id) for s in branch.steps]
        out.append(BranchView(key=branch.key, path=at, branch=branch, written=bdef,
                              operations=[o for o in ops if o is not None], tool=tool))
    return out
