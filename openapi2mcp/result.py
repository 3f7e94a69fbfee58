"""Building `CallToolResult`s: the only shapes a client ever sees from a tool call.

* success: `structuredContent` = the shaped JSON, the same JSON as compact text in the first
  content block, a second text block when the result was cut; `_meta` carries the traceId,
  the upstream requests that produced it (provenance, secrets redacted) and the cuts.
  A repaired result (shape/repair.py: values that do not fit the outputSchema) keeps the upstream's
  values in the first text block, says what was repaired in a further text block, and lists
  every repaired path in `_meta["openapi2mcp/repairs"]` (`{path, expected, got, action}`, at most
  `MAX_LISTED_REPAIRS`; `openapi2mcp/repairsOmitted` counts the rest).
  The tool's `links` add `resource_link` items after the text (resources.py builds them).
* error: `isError`, the `ToolError.body()` (seed 000 shape: code, message, retryable, field,
  traceId) as compact JSON text and in `_meta["openapi2mcp/error"]`. No `structuredContent`:
  it is for results that conform to the tool's outputSchema, and clients (the MCP Inspector,
  for one) validate it against that schema even on errors.
* binary: an image becomes `ImageContent`, audio `AudioContent`, anything else an
  `EmbeddedResource` blob, each with a
  one-line text description for clients that do not render them; refused above a size cap.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any, Final

import mcp_types as types

from openapi2mcp.errors import ErrorCode, ToolError, ToolFailure
from openapi2mcp.shape import Repair, Shaped, dumps, notice, repair_notice

TRACE_KEY: Final = "openapi2mcp/traceId"
ERROR_KEY: Final = "openapi2mcp/error"
REQUESTS_KEY: Final = "openapi2mcp/requests"
CUTS_KEY: Final = "openapi2mcp/truncated"
REPAIRS_KEY: Final = "openapi2mcp/repairs"
REPAIRS_OMITTED_KEY: Final = "openapi2mcp/repairsOmitted"
MAX_LISTED_REPAIRS: Final = 100


def meta(trace_id: str, requests: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {TRACE_KEY: trace_id}
    if requests:
        out[REQUESTS_KEY] = list(requests)
    return out


def success(
    shaped: Shaped, result_meta: Mapping[str, Any], *, links: Sequence[types.ResourceLink] = ()
) -> types.CallToolResult:
    content: list[types.ContentBlock] = [types.TextContent(text=shaped.text)]
    out_meta = dict(result_meta)
    if shaped.cuts:
        content.append(types.TextContent(text=notice(shaped.cuts)))
        out_meta[CUTS_KEY] = [c.meta() for c in shaped.cuts]
    out_meta.update(repairs_meta(shaped.repairs))
    if shaped.repairs:
        content.append(types.TextContent(text=repair_notice(shaped.repairs)))
    content.extend(links)  # resource_link items: what the result drew from (the tool's `links`)
    if shaped.structured is None:
        return types.CallToolResult(content=content, meta=out_meta)
    return types.CallToolResult(content=content, structured_content=shaped.structured, meta=out_meta)


def repairs_meta(repairs: Sequence[Repair]) -> dict[str, Any]:
    """The `_meta` entries that name every repaired path (none when nothing was repaired)."""
    if not repairs:
        return {}
    out: dict[str, Any] = {REPAIRS_KEY: [r.meta() for r in repairs[:MAX_LISTED_REPAIRS]]}
    if len(repairs) > MAX_LISTED_REPAIRS:
        out[REPAIRS_OMITTED_KEY] = len(repairs) - MAX_LISTED_REPAIRS
    return out


def failure(error: ToolError, result_meta: Mapping[str, Any]) -> types.CallToolResult:
    body = error.body()
    return types.CallToolResult(
        content=[types.TextContent(text=dumps(body))],
        is_error=True,
        meta={**result_meta, ERROR_KEY: body},
    )


def error_of(result: types.CallToolResult) -> dict[str, Any] | None:
    """The error body of an `isError` result (for clients and tests), or None."""
    if not result.is_error:
        return None
    body = (result.meta or {}).get(ERROR_KEY)
    return body if isinstance(body, dict) else None


def internal_error(trace_id: str) -> ToolError:
    return ToolError(
        code=ErrorCode.INTERNAL_ERROR,
        message=f"internal error; see the server log, traceId {trace_id}",
        traceId=trace_id,
    )


def _size(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 1_000_000 else f"{n} bytes"


def binary(
    data: bytes, media_type: str, uri: str, result_meta: Mapping[str, Any], *, cap: int, repaired: Shaped | None = None
) -> types.CallToolResult:
    """A binary body as image, audio or embedded resource; RESPONSE_TOO_LARGE above `cap` bytes.

    `repaired`: the structured content (and its repairs) of a tool that documented JSON instead."""
    media_type = media_type or "application/octet-stream"
    if len(data) > cap:
        raise ToolFailure.of(
            ErrorCode.RESPONSE_TOO_LARGE,
            f"the upstream sent {_size(len(data))} of {media_type}; this server returns binary results "
            f"up to {_size(cap)}",
        )
    encoded = base64.b64encode(data).decode("ascii")
    block: types.ContentBlock
    if media_type.startswith("image/"):
        block = types.ImageContent(data=encoded, mime_type=media_type)
    elif media_type.startswith("audio/"):
        block = types.AudioContent(data=encoded, mime_type=media_type)
    else:
        block = types.EmbeddedResource(resource=types.BlobResourceContents(uri=uri, mime_type=media_type, blob=encoded))
    described = types.TextContent(text=f"binary result: {media_type}, {_size(len(data))}")
    if repaired is None:
        return types.CallToolResult(content=[block, described], meta=dict(result_meta))
    notes = types.TextContent(text=repair_notice(repaired.repairs))
    return types.CallToolResult(content=[block, described, notes], structured_content=repaired.structured,
                                meta={**result_meta, **repairs_meta(repaired.repairs)})
