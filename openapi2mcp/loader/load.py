"""The load stage: a spec file or URL in, one self-contained OpenAPI 3.x document out.

`load_spec` reads a spec (a path or an http(s) URL; YAML or JSON; OpenAPI 3.0, 3.1, 3.2 or Swagger
2.0), bundles the files its `$ref`s point to into that one document, converts Swagger 2.0 to
OpenAPI 3.0.3 and reports what looks wrong but does not stop us as located warnings. Anything
unusable raises `InputError` naming the file, the line:column or JSON pointer, and the fix.

This module only orchestrates; each step has its module (see README.md in this folder):
reader.py (files, URLs, the policy for untrusted input) -> parse.py (text -> JSON data) ->
checks.py (version, operations) -> refs.py + bundle.py (external refs, with prance) -> the
caller's patch -> checks.py (strict validation) -> swagger2.py -> checks.py (lint).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from openapi2mcp.errors import InputError, Problem, SpecWarning
from openapi2mcp.loader.checks import STRICT_HINT, detect_version, lint, require_operations, validate
from openapi2mcp.loader.parse import NESTING_HINT
from openapi2mcp.loader.reader import FETCH_DEADLINE, Allowed, Reader
from openapi2mcp.loader.refs import has_external_refs
from openapi2mcp.loader.swagger2 import Swagger2
from openapi2mcp.loader.untrusted import MAX_NESTING
from openapi2mcp.manifest import paused_gc


@dataclass(frozen=True)
class LoadedSpec:
    """A spec ready for the overlay and compile stages.

    `document` is an OpenAPI 3.x dict of plain JSON data: Swagger 2.0 converted to 3.0.3, the
    content of other files bundled in, internal `#/...` refs kept as they are. It is a tree (no
    shared subtrees), so later stages may patch it in place.
    """

    document: dict[str, Any]
    original_version: str  # "2.0", "3.0.3", "3.1.0", ...
    openapi_version: str  # the version of `document` ("3.0.3" after a 2.0 conversion)
    source: str  # the path or URL as given
    sha256: str  # over the bytes of every file read: the root, then included ones (sorted)
    warnings: list[SpecWarning] = field(default_factory=list)
    patched: bool = False  # the OAI Overlays were applied while loading (load_spec's `patch`)
    files: tuple[str, ...] = ()  # the local files read, root first (absolute real paths; none for a URL)


@paused_gc()
def load_spec(
    source: str | os.PathLike[str],
    *,
    allow_remote_refs: bool | Sequence[str] = False,
    strict: bool = False,
    timeout: float = 30.0,
    ref_root: str | os.PathLike[str] | None = None,
    fetch_deadline: float = FETCH_DEADLINE,
    patch: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> LoadedSpec:
    """Load, bundle, normalise and check a spec; raise `InputError` when it cannot be used.

    allow_remote_refs: remote `$ref`s (and redirects) may go to the spec's own origin (scheme,
    host and port); True allows any, a list allows those origins (`https://host:8443`), hosts
    with a port (`host:8443`, either scheme) or hosts (`host`: every port of it). strict:
    validate with openapi-spec-validator and treat warnings as errors. timeout: seconds per HTTP
    connect or read. ref_root: the folder that file refs may reach (default: the root spec's
    folder), for specs that share files with siblings. fetch_deadline: seconds all network reads
    of this load may take together (the spec and every remote $ref). patch: applied to the
    bundled document as its author wrote it, before it is validated and before a Swagger 2.0
    conversion (OAI Overlay actions target that document; `patched` is then set).
    """
    given = os.fspath(source)
    allowed = Allowed.parse(allow_remote_refs)
    reader = Reader(allowed, timeout, None if ref_root is None else os.fspath(ref_root), fetch_deadline)
    try:
        return _load(given, reader, strict=strict, patch=patch)
    except RecursionError as exc:
        raise InputError.at(
            f"the document is nested too deeply to process (the limit is {MAX_NESTING} levels)",
            file=given,
            hint=NESTING_HINT,
        ) from exc
    finally:
        reader.close()


def _load(
    source: str, reader: Reader, *, strict: bool, patch: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> LoadedSpec:
    document, text = reader.read_root(source)
    warnings: list[SpecWarning] = []
    original = detect_version(document, source, warnings)
    require_operations(document, source)
    if has_external_refs(text, document):
        from openapi2mcp.loader.bundle import Bundler  # prance: only for specs in several files

        document = Bundler(document, reader, swagger2=original == "2.0").bundle()
    del text
    if patch is not None:
        document = patch(document)
    problems = validate(document, original) if strict else []
    if original == "2.0":
        document = Swagger2(document, reader.root, warnings).convert()
    version = str(document["openapi"])
    warnings += lint(document)
    if strict and (problems or warnings):
        raise InputError(
            [
                *problems,
                *(Problem(message=w.message, location=w.location, hint=w.hint or STRICT_HINT) for w in warnings),
            ],
            title=f"{source}: rejected in strict mode",
        )
    return LoadedSpec(
        document=document,
        original_version=original,
        openapi_version=version,
        source=source,
        sha256=reader.digest(),
        warnings=warnings,
        patched=patch is not None,
        files=reader.files(),
    )
