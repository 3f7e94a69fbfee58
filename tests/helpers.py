"""Small helpers for tests: compile a spec text or an example, read problems."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import yaml

from openapi2mcp.compiler import Compiled, compile_manifest
from openapi2mcp.loader import load_spec
from openapi2mcp.overlay import read_overlay
from openapi2mcp.overlay.reading import parse_overlay
from tests.local import EXAMPLES


def compile_example(name: str, *, all_operations: bool = False, overlay: str | None = "overlay.yaml") -> Compiled:
    spec = load_spec(str(EXAMPLES / name / "openapi.yaml"))
    overlays = [read_overlay(EXAMPLES / name / overlay)] if overlay else []
    return compile_manifest(spec, overlays, all_operations=all_operations)


def write_spec(tmp_path: Path, spec: dict[str, Any] | str, name: str = "openapi.yaml") -> Path:
    path = tmp_path / name
    text = textwrap.dedent(spec) if isinstance(spec, str) else yaml.safe_dump(spec, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return path


def compile_text(
    tmp_path: Path, spec: dict[str, Any] | str, overlay: str | None = None, *, all_operations: bool = False
) -> Compiled:
    path = write_spec(tmp_path, spec)
    overlays = [parse_overlay(textwrap.dedent(overlay), "overlay.yaml")] if overlay else []
    return compile_manifest(load_spec(str(path)), overlays, all_operations=all_operations)


def tool(compiled: Compiled, name: str) -> Any:
    found = compiled.manifest.tool(name)
    assert found is not None, f"no tool {name!r}; have {[t.name for t in compiled.manifest.tools]}"
    return found
