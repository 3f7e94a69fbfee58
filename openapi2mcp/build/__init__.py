"""The build stage: a Manifest becomes a self-contained server package and container context."""

from __future__ import annotations

from openapi2mcp.build.build import build_package, client_config, default_name, package_client_defaults, package_name
from openapi2mcp.build.runtime_dist import RUNTIME, RUNTIME_MODULES, build_runtime_wheel

__all__ = [
    "RUNTIME",
    "RUNTIME_MODULES",
    "build_package",
    "build_runtime_wheel",
    "client_config",
    "default_name",
    "package_client_defaults",
    "package_name",
]
