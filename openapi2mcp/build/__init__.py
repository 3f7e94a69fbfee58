"""The build stage: a Manifest becomes a self-contained server package and container context."""

from __future__ import annotations

from openapi2mcp.build.build import build_package, client_config, default_name, package_client_defaults, package_name

__all__ = [
    "build_package",
    "client_config",
    "default_name",
    "package_client_defaults",
    "package_name",
]
