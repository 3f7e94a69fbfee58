"""The `openapi2mcp-runtime` wheel: the run-time modules of openapi2mcp-tools, and only their dependencies.

A frozen package needs the runtime side of the pipeline (serving, runtime, upstream, shape,
manifest, result, errors, testing) and none of the compile side, the CLI or the examples. This
module writes that subset as a wheel of its own, from the files of the openapi2mcp that is running
(a source checkout or a pip-installed openapi2mcp-tools: the same files, the same bytes), with the
Requires-Dist of openapi2mcp-tools narrowed to `RUNTIME_REQUIRES`, and the extras of
`RUNTIME_EXTRAS` (`openapi2mcp-runtime[redis]`: redis-py for `--state`; `[otel]`: tracing) as openapi2mcp-tools
declares them. openapi2mcp-tools keeps
shipping everything; `openapi2mcp-runtime` is its run-time half under another name, for package
environments and images (docs/build.md, "The runtime distribution", says why a second
distribution and not extras).

The wheel is written directly (PEP 427: the files, METADATA, WHEEL, RECORD in one zip) rather
than by a build backend: it needs no hatchling and no index at build time, works from installed
files, and is reproducible by construction (sorted entries, fixed timestamps and modes).
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
import tomllib
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from email.parser import HeaderParser
from pathlib import Path
from typing import Final

from openapi2mcp import __version__
from openapi2mcp.errors import InputError

TOOLS: Final = "openapi2mcp-tools"
RUNTIME: Final = "openapi2mcp-runtime"

# The run-time side: what import-linter's forbidden contract lists as never importing the compile
# side (tests/test_build.py checks the two lists are the same).
RUNTIME_MODULES: Final = ("errors", "manifest", "result", "runtime", "serving", "shape", "testing", "upstream")

# openapi2mcp-tools' dependencies the run-time modules import (tests/test_build.py checks every
# third-party import of those modules is in their closure, and each is imported).
RUNTIME_REQUIRES: Final = ("httpx2", "jmespath", "jsonschema", "mcp", "prometheus-client", "pydantic", "pyjwt",
                           "pyyaml", "rfc3339-validator", "starlette", "uvicorn", "uvloop", "httptools")
LOADED_BY_LIBRARIES: Final = {"rfc3339-validator": "jsonschema, for the date-time format check",  # never imported by us
                              "httptools": "uvicorn, for its C HTTP parser (runtime/httpguard.py)"}

# openapi2mcp-tools' extras that the runtime offers too, with their own dependencies (optional
# imports: the run-time modules load them only when the feature is used, e.g. `--state redis://`).
RUNTIME_EXTRAS: Final = {
    "otel": ("opentelemetry-exporter-otlp-proto-http", "opentelemetry-sdk"),  # traces (docs/telemetry.md)
    "redis": ("redis",),  # --state redis:// (docs/safety.md)
}

_EPOCH: Final = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can carry


def wheel_name(version: str = __version__) -> str:
    return f"openapi2mcp_runtime-{version}-py3-none-any.whl"


def runtime_files(source: Path) -> list[tuple[str, Path]]:
    """(path in the wheel, file) of every run-time module under `source` (an `openapi2mcp` folder), sorted."""
    found = [("openapi2mcp/__init__.py", source / "__init__.py")]
    for name in RUNTIME_MODULES:
        module, package = source / f"{name}.py", source / name
        if module.is_file():
            found.append((f"openapi2mcp/{name}.py", module))
        elif package.is_dir():
            found += [(f"openapi2mcp/{p.relative_to(source).as_posix()}", p) for p in package.rglob("*.py")
                      if "__pycache__" not in p.parts]
        else:
            raise InputError.at(f"{source} has no run-time module {name!r}: not a complete openapi2mcp")
    return sorted(found)


def tools_metadata(source: Path) -> tuple[list[str], str]:
    """(Requires-Dist, Requires-Python) of the openapi2mcp-tools these files belong to, extras' with their marker.

    A source checkout: its pyproject.toml. An installed (or unpacked) wheel: the
    openapi2mcp_tools-<version>.dist-info beside the `openapi2mcp` folder.
    """
    project = source.parent / "pyproject.toml"
    if project.is_file():
        data = tomllib.loads(project.read_text(encoding="utf-8")).get("project", {})
        if data.get("name") == TOOLS:
            extras = [f'{r}; extra == "{name}"' for name, reqs in data.get("optional-dependencies", {}).items()
                      for r in reqs]
            return [*data.get("dependencies", []), *extras], str(data.get("requires-python", ""))
    record = source.parent / f"openapi2mcp_tools-{__version__}.dist-info" / "METADATA"
    if record.is_file():
        meta = HeaderParser().parsestr(record.read_text(encoding="utf-8"))
        return list(meta.get_all("Requires-Dist") or []), str(meta.get("Requires-Python") or "")
    raise InputError.at(
        f"cannot tell the dependencies of the openapi2mcp at {source}: no pyproject.toml of {TOOLS} beside it "
        f"and no {record.parent.name}",
        hint=f"install openapi2mcp-tools {__version__} with pip, or pass --runtime-wheel FILE",
    )


def runtime_requires(tools_requires: Iterable[str]) -> list[str]:
    """The requirements of openapi2mcp-tools that the run-time modules need, normalised and sorted."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    picked: dict[str, str] = {}
    for requirement in map(Requirement, tools_requires):
        requirement.name = canonicalize_name(requirement.name)  # a pyproject's and a METADATA's spelling agree
        # a platform marker stays (uvloop: not on Windows); a requirement of an extra is not the runtime's
        if requirement.name in RUNTIME_REQUIRES and (requirement.marker is None or "extra" not in str(requirement.marker)):
            picked[requirement.name] = str(requirement)
    missing = sorted(set(RUNTIME_REQUIRES) - set(picked))
    if missing:
        raise InputError.at(f"{TOOLS} {__version__} does not declare {', '.join(missing)}, which the runtime needs")
    return [picked[name] for name in sorted(picked)]


def runtime_extras(tools_requires: Iterable[str]) -> dict[str, list[str]]:
    """Each of RUNTIME_EXTRAS -> its requirements as openapi2mcp-tools declares them (without the marker)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    found: dict[str, dict[str, str]] = {extra: {} for extra in RUNTIME_EXTRAS}
    for requirement in map(Requirement, tools_requires):
        marker, requirement.marker = requirement.marker, None
        requirement.name = canonicalize_name(requirement.name)
        for extra, names in RUNTIME_EXTRAS.items():
            if marker is not None and marker.evaluate({"extra": extra}) and not marker.evaluate({"extra": ""}) \
                    and requirement.name in names:
                found[extra][requirement.name] = str(requirement)
    for extra, names in RUNTIME_EXTRAS.items():
        missing = sorted(set(names) - set(found[extra]))
        if missing:
            raise InputError.at(f"{TOOLS} {__version__} does not declare {', '.join(missing)} in its [{extra}] extra")
    return {extra: [reqs[name] for name in sorted(reqs)] for extra, reqs in sorted(found.items())}


def metadata_text(requires: Sequence[str], requires_python: str, version: str = __version__,
                  extras: Mapping[str, Sequence[str]] | None = None) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {RUNTIME}",
        f"Version: {version}",
        f"Summary: The run-time half of {TOOLS}: serves a frozen openapi2mcp Manifest (no compiler, no CLI).",
        "License: Apache-2.0",
        *([f"Requires-Python: {requires_python}"] if requires_python else []),
        *(f"Requires-Dist: {r}" for r in requires),
        *(f"Provides-Extra: {extra}" for extra in sorted(extras or {})),
        *(f'Requires-Dist: {r}; extra == "{extra}"' for extra, reqs in sorted((extras or {}).items()) for r in reqs),
        "",
        f"The run-time modules of {TOOLS} {version} (openapi2mcp.serving, runtime, upstream, shape,",
        "manifest, result, errors, testing), written by `openapi2mcp build` for a frozen server package.",
        f"Install it or {TOOLS} in an environment, not both: they hold the same files.",
    ]
    return "\n".join(lines) + "\n"


def build_runtime_wheel(dest: Path, source: Path | None = None) -> Path:
    """Write the openapi2mcp-runtime wheel of this version into `dest` (from `source`, default: this openapi2mcp)."""
    source = source or Path(__file__).resolve().parents[1]
    files = [(name, path.read_bytes()) for name, path in runtime_files(source)]
    requires, requires_python = tools_metadata(source)
    info = f"openapi2mcp_runtime-{__version__}.dist-info"
    files += [
        (f"{info}/METADATA", metadata_text(runtime_requires(requires), requires_python,
                                           extras=runtime_extras(requires)).encode()),
        (f"{info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: openapi2mcp build {__version__}\n"
                           "Root-Is-Purelib: true\nTag: py3-none-any\n").encode()),
    ]
    record = "".join(f"{name},sha256={_digest(data)},{len(data)}\n" for name, data in files) + f"{info}/RECORD,,\n"
    files.append((f"{info}/RECORD", record.encode()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        for name, data in files:
            entry = zipfile.ZipInfo(name, date_time=_EPOCH)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(entry, data, compresslevel=9)
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / wheel_name()
    target.write_bytes(buffer.getvalue())
    return target


def check_runtime_wheel(path: Path) -> None:
    """A wheel given with --runtime-wheel: this version of openapi2mcp-runtime, or an InputError."""
    if not path.is_file():
        raise InputError.at(f"runtime wheel not found: {path}")
    if not re.fullmatch(re.escape(wheel_name()), path.name):
        raise InputError.at(
            f"{path.name} is not the {RUNTIME} {__version__} wheel ({wheel_name()})",
            hint="the package pins the openapi2mcp that compiled it; `openapi2mcp build` writes the wheel itself "
            "when --runtime-wheel is left out",
        )


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
