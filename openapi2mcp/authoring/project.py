"""A spec and its overlays, loaded and compiled once for the authoring commands (lint, diff).

The same steps as `openapi2mcp compile` (cli/app.py): the overlays are read first (an OAI Overlay
patches the spec while it loads), then the spec, then the compiler. Unlike `compile`, the loaded
spec and the overlay files stay available: lint reports into the overlay's lines and reads the
spec's own words (summaries, parameter descriptions, response schemas).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openapi2mcp.compiler import Compiled, compile_manifest
from openapi2mcp.errors import InputError
from openapi2mcp.loader import LoadedSpec, load_spec
from openapi2mcp.manifest import Manifest
from openapi2mcp.overlay import OverlayFile, apply_oai_overlays, read_overlay

FETCH_TIMEOUT = 120.0


@dataclass(frozen=True)
class LoadOptions:
    """How the spec is read: the options `compile` takes (see `openapi2mcp compile --help`)."""

    allow_remote_refs: tuple[str, ...] = ()
    ref_root: str | None = None
    fetch_timeout: float = FETCH_TIMEOUT
    strict: bool = False  # validate the spec fully; spec warnings become errors (as `compile --strict`)


@dataclass
class Project:
    """One spec and its overlays: what `openapi2mcp compile SPEC --overlay ...` reads, and its Manifest."""

    spec: LoadedSpec
    overlays: list[OverlayFile]
    compiled: Compiled

    @property
    def manifest(self) -> Manifest:
        return self.compiled.manifest

    @property
    def tool_overlay(self) -> OverlayFile | None:
        return next((o for o in self.overlays if o.tools is not None), None)


def read_overlays(paths: Sequence[str | os.PathLike[str]]) -> list[OverlayFile]:
    return [read_overlay(Path(p)) for p in paths]


def load(spec: str, overlays: list[OverlayFile], options: LoadOptions = LoadOptions()) -> LoadedSpec:
    """The spec, patched by the OAI Overlays among `overlays` while it loads (as `compile` does)."""
    oai = [d for d in overlays if d.oai is not None]

    def patch(document: dict[str, Any]) -> dict[str, Any]:
        return apply_oai_overlays(document, oai)

    remote: bool | list[str] = True if "*" in options.allow_remote_refs else list(options.allow_remote_refs)
    return load_spec(spec, allow_remote_refs=remote or False, ref_root=options.ref_root, strict=options.strict,
                     patch=patch if oai else None, fetch_deadline=options.fetch_timeout)


def load_project(spec: str, overlay_paths: Sequence[str | os.PathLike[str]],
                 options: LoadOptions = LoadOptions()) -> Project:
    """Read the overlays, load the spec and compile; InputError (located) when any of it cannot be used."""
    overlays = read_overlays(overlay_paths)
    if not any(o.tools is not None for o in overlays):
        raise InputError.at(
            "no tool overlay given: the authoring commands check an `openapi2mcp: 1` overlay",
            hint="pass --overlay FILE (a tool overlay; OAI Overlays may come with it)",
        )
    loaded = load(spec, overlays, options)
    return Project(spec=loaded, overlays=overlays, compiled=compile_manifest(loaded, overlays))
