"""Running a call's requests: single steps, pages and chains, all through the one send path.

`Steps.fetch` is the only way a tool call reaches the upstream: the audit attempt line of a
write first (a write whose line cannot be written is not sent: audit.py), then `Upstream.fetch`
(send, retry, provenance into the call's audit record, a status that is not 2xx raised as its
stable error, the body decoded). A chain's steps run in order, each `when` over the results so
far; a paginated branch collects its items page by page (paginate.py) and signs the next cursor.
`result` shapes what came back (shape.Shaper) into the `CallToolResult`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types

from openapi2mcp import result as results
from openapi2mcp.errors import ErrorCode, ToolFailure
from openapi2mcp.manifest import Branch, OperationSpec, changes_state
from openapi2mcp.runtime.admission import Plan
from openapi2mcp.runtime.audit import Auditor
from openapi2mcp.runtime.resources import Catalog
from openapi2mcp.runtime.tools import Tool, invalid
from openapi2mcp.shape import Shaped, search, truthy
from openapi2mcp.upstream import Evaluate, Payload, Upstream, UpstreamResponse


class Steps:
    """The requests of admitted calls (`Plan`s), and their results."""

    def __init__(self, upstream: Upstream, auditor: Auditor, catalog: Catalog, *, max_binary_bytes: int) -> None:
        self.upstream = upstream
        self.auditor = auditor
        self.catalog = catalog
        self.max_binary_bytes = max_binary_bytes

    async def fetch(
        self, plan: Plan, op: OperationSpec, arguments: Mapping[str, Any], evaluate: Evaluate, step: str | None = None
    ) -> tuple[UpstreamResponse, Payload]:
        """One upstream request of this call (`Upstream.fetch`), after the audit attempt line of a write."""
        writes = changes_state(plan.branch, op)
        if writes and not plan.dry_run:
            self.auditor.attempt(plan.record)  # AuditError: not sent
        return await self.upstream.fetch(op, arguments, evaluate, requests=plan.record.requests, headers=plan.headers,
                                         retries=plan.tool.retries, failure_modes=plan.tool.failure_modes, step=step,
                                         writes=writes)

    async def run_steps(
        self, tool: Tool, branch: Branch, arguments: dict[str, Any], plan: Plan
    ) -> tuple[Payload, UpstreamResponse | None]:
        """A single step or a chain: each step whose `when` holds, in order; a failure names its step."""
        context: dict[str, Any] = {"inputs": arguments, "steps": {}}
        multi = len(branch.steps) > 1
        payload: Payload | None = None
        last: UpstreamResponse | None = None
        for step in branch.steps:
            if step.when and not truthy(search(step.when, context)):
                continue
            try:
                resp, payload = await self.fetch(plan, step.operation, arguments, lambda e: search(e, context),
                                                 step.id if multi else None)
            except ToolFailure as failure:
                if multi:
                    failure.error.step = step.id
                raise
            last = resp
            context["steps"][step.id] = step_value(payload, resp.status)
        if branch.output:
            return Payload("json", search(branch.output, context), "application/json"), last
        if payload is None:
            raise invalid("nothing to do: no step of this tool applies to these arguments")
        return payload, last

    async def run_pages(self, tool: Tool, branch: Branch, arguments: dict[str, Any], plan: Plan) -> Shaped:
        """A paginated branch: collect up to `limit` items from the cursor's position, sign the next one."""
        pager = tool.pagers[branch.key]
        paging = pager.spec
        binding = pager.binding(arguments)
        cursor = arguments.get(paging.cursor_arg)
        start = pager.decode(cursor if isinstance(cursor, str) else None, binding)
        limit = arguments.get(paging.limit_arg)
        want = limit if isinstance(limit, int) and limit > 0 else min(paging.page_size, paging.max_items)

        async def send(op: OperationSpec) -> tuple[Mapping[str, str], Any, str]:
            resp, payload = await self.fetch(plan, op, arguments, lambda e: None)
            if payload.kind != "json":
                raise ToolFailure.of(
                    ErrorCode.UPSTREAM_INVALID_RESPONSE,
                    f"the upstream sent {payload.media_type or 'no content'} where a JSON page was expected",
                    status=resp.status,
                )
            return resp.headers, self.upstream.redactor.value(payload.value), resp.url

        settings = self.upstream.settings
        drop = {settings.query_auth[0]} if settings.query_auth else set()
        got = await pager.collect(send, branch.steps[0].operation, start, want, settings.base_url, drop)
        items = [search(paging.item_select, item) for item in got.items] if paging.item_select else got.items

        def cursor_at(k: int) -> str | None:
            position = got.resume[k] if k < len(got.resume) else got.next
            if position is None:
                return None
            if self.upstream.redactor.found(str(position.at)):  # a cursor is signed, not encrypted: readable
                raise ToolFailure.of(
                    ErrorCode.UPSTREAM_INVALID_RESPONSE,
                    "the upstream's next-page position holds a credential this server sends upstream (it echoes "
                    "the request); it cannot go into a cursor",
                )
            return pager.encode(position, binding)

        return tool.shaper_of(branch).page(items, got.total, cursor_at)

    def success(self, tool: Tool, shaped: Shaped, meta: dict[str, Any]) -> types.CallToolResult:
        """A shaped result, with the resource links the overlay declares for it."""
        return results.success(shaped, meta, links=self.catalog.links(tool.spec, shaped.structured))

    def result(
        self, tool: Tool, branch: Branch, payload: Payload, last: UpstreamResponse | None, meta: dict[str, Any]
    ) -> types.CallToolResult:
        """The last step's body (or the chain's `output`) shaped by the branch's Shaper, secrets scrubbed;
        binary bodies become content blocks up to `max_binary_bytes`."""
        shaper, redact = tool.shaper_of(branch), self.upstream.redactor
        if payload.kind == "binary":
            repaired = shaper.placeholder(payload.media_type) if tool.spec.output_schema is not None else None
            if tool.spec.output_schema is not None and repaired is None:
                raise ToolFailure.of(
                    ErrorCode.UPSTREAM_INVALID_RESPONSE,
                    f"the upstream sent {payload.media_type or 'binary data'} where the documented JSON was expected",
                )
            uri = last.url if last else f"openapi2mcp:{tool.spec.name}"
            return results.binary(payload.raw, payload.media_type, uri, meta, cap=self.max_binary_bytes,
                                  repaired=repaired)
        if payload.kind == "empty":
            shaped = shaper.empty(last.status if last else 204)
        elif payload.kind == "text":
            shaped = shaper.text(redact.text(payload.value), payload.media_type)
        else:
            shaped = shaper.json(redact.value(payload.value))
        return self.success(tool, shaped, meta)


def step_value(payload: Payload, status: int) -> Any:
    """What later steps' expressions see of a step: JSON, text, {"status"} when empty."""
    if payload.kind in ("json", "text"):
        return payload.value
    if payload.kind == "empty":
        return {"status": status}
    return None
