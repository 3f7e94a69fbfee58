"""Forwarding: one tool step becomes one HTTP request to the upstream REST API (httpx2)."""

from __future__ import annotations

from openapi2mcp.upstream.upstream import (
    FORWARDED_HEADERS,
    SECRET_HEADER,
    ConfigError,
    EncodedBody,
    Evaluate,
    Payload,
    Prepared,
    Redactor,
    Upstream,
    UpstreamResponse,
    check_json_arguments,
    is_json_media,
    relative_server_notice,
)

__all__ = [
    "FORWARDED_HEADERS",
    "SECRET_HEADER",
    "ConfigError",
    "EncodedBody",
    "Evaluate",
    "Payload",
    "Prepared",
    "Redactor",
    "Upstream",
    "UpstreamResponse",
    "check_json_arguments",
    "is_json_media",
    "relative_server_notice",
]
