"""openapi2mcp: an OpenAPI description plus a curated overlay, served as a few safe MCP tools.

The pipeline, one package per stage (data flows one way; the runtime never imports the compiler):

    load -> overlay -> compile -> manifest -> runtime -> upstream -> shape -> result

The Python API (docs/python-api.md) is exported from here and imported on first use, so that
`import openapi2mcp` stays cheap (the runtime reads `openapi2mcp.__version__` at start-up) and a
runtime-only install (openapi2mcp-runtime) can import this module without the compiler:

    from openapi2mcp import load_spec, read_overlay, compile_manifest, Runtime
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from openapi2mcp import testing
    from openapi2mcp.build import build_package
    from openapi2mcp.compiler import Compiled, compile_manifest
    from openapi2mcp.errors import InputError
    from openapi2mcp.loader import LoadedSpec, load_spec
    from openapi2mcp.manifest import Manifest
    from openapi2mcp.overlay import OverlayFile, apply_oai_overlays, read_overlay
    from openapi2mcp.runtime import HttpLimits, HttpOptions, Runtime, RuntimeOptions, http_app, serve_http, serve_stdio
    from openapi2mcp.serving import RunOptions, resolve, serve
    from openapi2mcp.upstream import ConfigError

# name -> the package that defines it; the compile side is not part of openapi2mcp-runtime.
_EXPORTS = {
    "load_spec": "openapi2mcp.loader",
    "LoadedSpec": "openapi2mcp.loader",
    "read_overlay": "openapi2mcp.overlay",
    "apply_oai_overlays": "openapi2mcp.overlay",
    "OverlayFile": "openapi2mcp.overlay",
    "compile_manifest": "openapi2mcp.compiler",
    "Compiled": "openapi2mcp.compiler",
    "build_package": "openapi2mcp.build",
    "Manifest": "openapi2mcp.manifest",
    "Runtime": "openapi2mcp.runtime",
    "RuntimeOptions": "openapi2mcp.runtime",
    "HttpOptions": "openapi2mcp.runtime",
    "HttpLimits": "openapi2mcp.runtime",
    "http_app": "openapi2mcp.runtime",
    "serve_http": "openapi2mcp.runtime",
    "serve_stdio": "openapi2mcp.runtime",
    "RunOptions": "openapi2mcp.serving",
    "resolve": "openapi2mcp.serving",
    "serve": "openapi2mcp.serving",
    "InputError": "openapi2mcp.errors",
    "ConfigError": "openapi2mcp.upstream",
}
_COMPILE_SIDE = frozenset({"openapi2mcp.loader", "openapi2mcp.overlay", "openapi2mcp.compiler", "openapi2mcp.build"})


if not TYPE_CHECKING:  # to a type checker the names are the imports above, not Any

    def __getattr__(name: str) -> Any:
        if name == "testing":
            return importlib.import_module("openapi2mcp.testing")
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module 'openapi2mcp' has no attribute {name!r}")
        try:
            value = getattr(importlib.import_module(module), name)
        except ModuleNotFoundError as e:
            if module in _COMPILE_SIDE and (e.name or "").startswith("openapi2mcp"):
                raise ImportError(f"openapi2mcp.{name} is part of the compiler, which this installation "
                                  "(openapi2mcp-runtime) does not have: install openapi2mcp-tools") from None
            raise
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted([*globals(), *_EXPORTS, "testing"])


__all__ = [
    "Compiled",
    "ConfigError",
    "HttpLimits",
    "HttpOptions",
    "InputError",
    "LoadedSpec",
    "Manifest",
    "OverlayFile",
    "RunOptions",
    "Runtime",
    "RuntimeOptions",
    "__version__",
    "apply_oai_overlays",
    "build_package",
    "compile_manifest",
    "http_app",
    "load_spec",
    "read_overlay",
    "resolve",
    "serve",
    "serve_http",
    "serve_stdio",
    "testing",
]
