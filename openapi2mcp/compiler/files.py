"""Files in, a Manifest out: what `openapi2mcp compile SPEC --overlay F ...` does, for every command.

    compile_files(spec, overlays, *, all_operations=False, options=LoadOptions()) -> CompiledFiles

1. The overlays are read first (`read_overlays`; files already read are taken as they are): an OAI
   Overlay patches the spec as written, while
   it loads (before a Swagger 2.0 conversion), so its targets are the document's own paths.
2. The spec is loaded with those patches and the options (`load_with_overlays`: `--allow-remote-refs`,
   `--ref-root`, `--fetch-timeout`, `--strict`).
3. compile_manifest; with `strict`, its warnings (the loader's, the spec pin's) are an error.

inspect, compile, serve and build (cli/app.py) take the Compiled; lint and diff (authoring/) keep
the loaded spec and the overlay files too, to report into the overlay's lines and read the spec's
own words; init loads its spec the same way, without overlays.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openapi2mcp.compiler.compile import Compiled, compile_manifest
from openapi2mcp.errors import InputError
from openapi2mcp.loader import FETCH_DEADLINE, LoadedSpec, load_spec
from openapi2mcp.manifest import Manifest
from openapi2mcp.overlay import OverlayFile, apply_oai_overlays, read_overlay


@dataclass(frozen=True)
class LoadOptions:
    """How the spec is read: the options every command that reads one takes (`openapi2mcp compile --help`)."""

    allow_remote_refs: tuple[str, ...] = ()  # origins remote $refs may reach; "*" for any
    ref_root: str | os.PathLike[str] | None = None  # the folder file $refs may reach (default: the spec's)
    fetch_timeout: float = FETCH_DEADLINE  # seconds for a spec by URL, its remote refs included
    strict: bool = False  # validate the spec fully; its warnings become errors


@dataclass
class CompiledFiles:
    """One spec and its overlays as read, and what they compile to."""

    spec: LoadedSpec
    overlays: list[OverlayFile]
    compiled: Compiled

    @property
    def manifest(self) -> Manifest:
        return self.compiled.manifest

    @property
    def tool_overlay(self) -> OverlayFile | None:
        return next((o for o in self.overlays if o.tools is not None), None)


def read_overlays(overlays: Sequence[str | os.PathLike[str] | OverlayFile]) -> list[OverlayFile]:
    """The overlay files at these paths, in order (an OverlayFile given is kept as it is)."""
    return [o if isinstance(o, OverlayFile) else read_overlay(Path(o)) for o in overlays]


def load_with_overlays(spec: str | os.PathLike[str], overlays: Sequence[OverlayFile] = (),
                       options: LoadOptions = LoadOptions()) -> LoadedSpec:
    """The spec, patched by the OAI Overlays among `overlays` while it loads (targets: the spec as written)."""
    oai = [d for d in overlays if d.oai is not None]

    def patch(document: dict[str, Any]) -> dict[str, Any]:
        return apply_oai_overlays(document, oai)

    remote: bool | list[str] = True if "*" in options.allow_remote_refs else list(options.allow_remote_refs)
    return load_spec(spec, allow_remote_refs=remote or False, strict=options.strict, ref_root=options.ref_root,
                     patch=patch if oai else None, fetch_deadline=options.fetch_timeout)


def compile_files(spec: str | os.PathLike[str], overlays: Sequence[str | os.PathLike[str] | OverlayFile] = (), *,
                  all_operations: bool = False, options: LoadOptions = LoadOptions(),
                  seal: bool = True) -> CompiledFiles:
    """Read the overlays, load the spec and compile, as `openapi2mcp compile` does (InputError when any of it
    cannot be used; with `options.strict`, also when the spec has warnings). `seal`: as compile_manifest's."""
    files = read_overlays(overlays)
    loaded = load_with_overlays(spec, files, options)
    compiled = compile_manifest(loaded, files, all_operations=all_operations, seal=seal)
    if options.strict and compiled.warnings:
        raise InputError(compiled.warnings, title="spec problems (--strict):")
    return CompiledFiles(spec=loaded, overlays=files, compiled=compiled)
