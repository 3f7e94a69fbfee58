"""Forwarding: one tool step becomes one HTTP request to the upstream REST API (httpx2).

See README.md in this folder for the flow and where each behaviour lives.
"""

from __future__ import annotations

from openapi2mcp.upstream.client import FORWARDED_HEADERS, Upstream
from openapi2mcp.upstream.credentials import CALLER_TOKEN, CallerToken
from openapi2mcp.upstream.observe import PROPAGATED, Observe, Sent
from openapi2mcp.upstream.request import EncodedBody, Evaluate, Prepared, check_json_arguments
from openapi2mcp.upstream.response import Payload, UpstreamResponse, is_json_media
from openapi2mcp.upstream.secrets import SECRET_HEADER, Redactor
from openapi2mcp.upstream.settings import ConfigError, relative_server_notice
from openapi2mcp.upstream.transport import KeepAliveTransport

__all__ = [
    "CALLER_TOKEN",
    "FORWARDED_HEADERS",
    "PROPAGATED",
    "SECRET_HEADER",
    "CallerToken",
    "ConfigError",
    "EncodedBody",
    "Evaluate",
    "KeepAliveTransport",
    "Observe",
    "Payload",
    "Prepared",
    "Redactor",
    "Sent",
    "Upstream",
    "UpstreamResponse",
    "check_json_arguments",
    "is_json_media",
    "relative_server_notice",
]
