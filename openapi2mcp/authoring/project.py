"""A spec and its tool overlay, loaded and compiled once for lint (and diff's old side).

The steps are the compiler's `compile_files`, the ones `openapi2mcp compile` takes; what it keeps
beside the Manifest (the loaded spec, the overlay files) is what lint reports into: the overlay's
lines and the spec's own words (summaries, parameter descriptions, response schemas).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from openapi2mcp.compiler import CompiledFiles, LoadOptions, compile_files, read_overlays
from openapi2mcp.errors import InputError


def load_project(spec: str, overlay_paths: Sequence[str | os.PathLike[str]],
                 options: LoadOptions = LoadOptions()) -> CompiledFiles:
    """Read the overlays, load the spec and compile; InputError (located) when any of it cannot be used."""
    overlays = read_overlays(overlay_paths)
    if not any(o.tools is not None for o in overlays):  # before the spec loads: it may be large
        raise InputError.at(
            "no tool overlay given: the authoring commands check an `openapi2mcp: 1` overlay",
            hint="pass --overlay FILE (a tool overlay; OAI Overlays may come with it)",
        )
    return compile_files(spec, overlays, options=options)
