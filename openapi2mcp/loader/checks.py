"""What is checked about a spec: its version, that it has operations, cheap lint, strict validation.

* `detect_version`: Swagger 2.0 and OpenAPI 3.0, 3.1, 3.2; anything else is refused with a hint
  that says what the document looks like instead (Swagger 1.x, AsyncAPI, a JSON Schema).
* `require_operations`: a document without `paths` or `webhooks` is a library, not an API.
* `lint`: cheap checks, reported as warnings located by JSON pointer: what would surprise a user
  later (no info, no servers, an operation without responses, a duplicate operationId).
* `validate`: openapi-spec-validator, only with `strict=True`. Not by default: full validation
  took 24 s on GitHub (DESIGN.md) and rejects real specs that are perfectly usable (OpenAI,
  DigitalOcean). Strict mode also turns the warnings into errors (load.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import islice
from typing import Any

from openapi2mcp.errors import InputError, Location, Problem, SpecWarning
from openapi2mcp.loader.tree import JsonPath, json_pointer, type_name, warn

MAX_STRICT_PROBLEMS = 50
SUPPORTED_VERSIONS = "Swagger 2.0 and OpenAPI 3.0, 3.1, 3.2"

# the keys of a path item that hold operations (OpenAPI 3.2 adds `query`)
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace", "query")

_OPENAPI3 = re.compile(r"^3\.(\d+)(?:\.\d+)?(?:-[0-9A-Za-z.-]+)?$")
_OPENAPI_HINT = 'an OpenAPI document starts with `openapi: 3.1.0` (or `swagger: "2.0"`)'


def detect_version(document: Any, display: str, warnings: list[SpecWarning]) -> str:
    """The version the document declares; refuses what is not OpenAPI 2.0/3.0/3.1/3.2."""
    if not isinstance(document, dict):
        raise InputError.at(
            f"not an OpenAPI document: the top level is {type_name(document)}, not a mapping",
            file=display,
            hint=_OPENAPI_HINT,
        )
    key = "openapi" if "openapi" in document else "swagger"
    if key not in document:
        raise InputError.at(
            "not an OpenAPI document: no 'openapi' or 'swagger' key", file=display, hint=_not_openapi_hint(document)
        )
    version = document[key]
    if isinstance(version, (int, float)) and not isinstance(version, bool):
        document[key] = version = str(version)
        warnings.append(warn(f"'{key}' should be a string: write {key}: \"{version}\"", (key,)))
    match = _OPENAPI3.match(version) if key == "openapi" and isinstance(version, str) else None
    if (match and int(match.group(1)) <= 2) or (key == "swagger" and version == "2.0"):
        return str(version)
    raise InputError.at(
        f"unsupported version: {key} {version!r} (supported: {SUPPORTED_VERSIONS})",
        file=display,
        pointer=f"/{key}",
        hint="convert the document to OpenAPI 3.x (e.g. with swagger2openapi for Swagger 2.0)"
        if key == "swagger"
        else "use an OpenAPI 3.0, 3.1 or 3.2 document",
    )


def _not_openapi_hint(document: dict[str, Any]) -> str:
    if "swaggerVersion" in document:
        return f"this is Swagger 1.x, which is not supported ({SUPPORTED_VERSIONS})"
    if "asyncapi" in document:
        return "this is an AsyncAPI document; openapi2mcp reads OpenAPI (REST) descriptions"
    if "$schema" in document or "properties" in document:
        return "this looks like a JSON Schema, not an OpenAPI description"
    return _OPENAPI_HINT


def require_operations(document: dict[str, Any], display: str) -> None:
    paths, hooks = document.get("paths"), document.get("webhooks")
    for key, value in (("paths", paths), ("webhooks", hooks)):
        if value is not None and not isinstance(value, dict):
            raise InputError.at(
                f"'{key}' must be a mapping, found {type_name(value)}", file=display, pointer=f"/{key}"
            )
    if not paths and not hooks:
        raise InputError.at(
            "the spec has no operations: 'paths' is missing or empty",
            file=display,
            pointer="/paths",
            hint="openapi2mcp turns operations into tools; add them under `paths:` "
            "(a components-only document is a library, not an API)",
        )


def lint(document: dict[str, Any]) -> list[SpecWarning]:
    """Cheap checks, located by pointer: what would surprise a user later, not full validation."""
    found: list[SpecWarning] = []
    info = document.get("info")
    if not isinstance(info, dict):
        found.append(warn("no 'info' object", ("info",), hint="add `info: {title: ..., version: ...}`"))
    else:
        found += [warn(f"info has no '{k}'", ("info", k)) for k in ("title", "version") if info.get(k) in (None, "")]
        if isinstance(info.get("version"), (int, float)):  # `version: 1.0` in YAML is a number
            info["version"] = str(info["version"])
            found.append(
                warn(f'info.version should be a string: write version: "{info["version"]}"', ("info", "version"))
            )
    if not document.get("servers"):
        found.append(
            warn(
                "no servers: the upstream base URL will have to be given when serving",
                ("servers",),
                hint="add `servers: [{url: https://api.example.com}]`",
            )
        )
    first_use: dict[str, str] = {}
    for path, operation in _operations(document, found):
        if not operation.get("responses"):
            found.append(warn("operation has no responses", (*path, "responses")))
        operation_id = operation.get("operationId")
        if isinstance(operation_id, str):
            if operation_id in first_use:
                found.append(
                    warn(
                        f"duplicate operationId {operation_id!r} (first used at {first_use[operation_id]})",
                        (*path, "operationId"),
                        hint="operationIds must be unique; refer to this operation as 'METHOD /path' "
                        "or rename it with an overlay",
                    )
                )
            else:
                first_use[operation_id] = json_pointer(path)
    return found


def _operations(document: dict[str, Any], found: list[SpecWarning]) -> Iterator[tuple[JsonPath, dict[str, Any]]]:
    for section in ("paths", "webhooks"):
        items = document.get(section)
        if not isinstance(items, dict):
            continue
        for name, item in items.items():
            if section == "paths" and not name.startswith("/"):
                found.append(warn(f"path {name!r} does not start with '/'", (section, name)))
            if not isinstance(item, dict):
                found.append(warn(f"path item is {type_name(item)}, not a mapping", (section, name)))
                continue
            for method in HTTP_METHODS:
                operation = item.get(method)
                if isinstance(operation, dict):
                    yield (section, name, method), operation
                elif operation is not None:
                    found.append(warn(f"operation is {type_name(operation)}", (section, name, method)))


STRICT_HINT = "fix the spec, or load it without strict mode (then this is only a warning)"


def validate(document: dict[str, Any], version: str) -> list[Problem]:
    """openapi-spec-validator's findings (strict mode only: slow on big specs)."""
    from openapi_spec_validator import (
        OpenAPIV2SpecValidator,
        OpenAPIV30SpecValidator,
        OpenAPIV31SpecValidator,
        OpenAPIV32SpecValidator,
    )

    validators = {"2.0": OpenAPIV2SpecValidator, "3.0": OpenAPIV30SpecValidator, "3.1": OpenAPIV31SpecValidator}
    validator = validators.get(version[:3], OpenAPIV32SpecValidator)
    hint = "fix the spec, or load it without strict mode"
    errors: list[Any] = []
    crash = None
    try:
        errors.extend(islice(validator(document).iter_errors(), MAX_STRICT_PROBLEMS))
    except Exception as exc:  # it crashes on some broken specs (a parameter without `in`: KeyError)
        crash = Problem(message=f"the validator stopped: {type(exc).__name__}: {exc}", hint=hint)
    containers = _containers(document)
    found = {(f"invalid: {error.message}", _locate(error, containers)): None for error in errors}
    problems = [Problem(message=message, location=Location(pointer=pointer), hint=hint) for message, pointer in found]
    return [*problems, crash] if crash else problems


def _containers(document: Any) -> dict[int, tuple[JsonPath, Any]]:
    """Every dict and list of the document by identity, with its path."""
    found: dict[int, tuple[JsonPath, Any]] = {}
    stack: list[tuple[JsonPath, Any]] = [((), document)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, (dict, list)) and id(node) not in found:
            found[id(node)] = (path, node)
            items = node.items() if isinstance(node, dict) else enumerate(node)
            stack.extend(((*path, k), v) for k, v in items)
    return found


def _locate(error: Any, containers: dict[int, tuple[JsonPath, Any]]) -> str | None:
    """The document pointer of a validator error: its paths are relative to the schema that the
    validator was looking at; the objects it reports are the document's own."""
    relative = tuple(getattr(error, "absolute_path", ()))
    if id(error.instance) in containers:
        return json_pointer(containers[id(error.instance)][0]) or None
    if relative:
        *parent, last = relative
        for path, node in containers.values():
            if path[len(path) - len(parent) :] == tuple(parent) and _child(node, last) is error.instance:
                return json_pointer((*path, last))
    return json_pointer(relative) or None


def _child(node: Any, key: Any) -> Any:
    try:
        return node[key]
    except (LookupError, TypeError):
        return _Missing


class _Missing:
    pass
