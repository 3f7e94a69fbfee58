"""What telemetry sees of the upstream requests: a hook around each one, and headers it adds.

`Upstream.observe` (None: nothing is observed, the default) is called around every attempt of an
operation (`fetch`: the first request and each retry, with its redirect hops) with a `Sent`:
low-cardinality facts only (operation, method, route template, origin, resend count, status),
never a URL with its values, a query string or a header value. The runtime's telemetry
(runtime/telemetry.py) turns it into a span and metrics. While the hook runs it may set
`PROPAGATED` (e.g. W3C `traceparent`): those headers go on the request, over any of the same name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass

PROPAGATED: ContextVar[Mapping[str, str] | None] = ContextVar("openapi2mcp_propagated_headers", default=None)


@dataclass
class Sent:
    """One attempt of an upstream operation, as telemetry may record it (no secret, no value from a call)."""

    operation: str  # the operationId (or "METHOD /path")
    method: str  # upper case
    route: str  # the path template under the base URL's path, e.g. /v1/pets/{petId}
    scheme: str
    host: str
    port: int | None
    resend: int  # 0: the operation's first request; n: its n-th retry
    status: int | None = None  # the final HTTP status (None: no answer came)


Observe = Callable[[Sent], AbstractContextManager[None]]


def add_propagated(headers: dict[str, str]) -> None:
    """Put the observer's headers (trace context) on a request, replacing any spelling of the same name."""
    extra = PROPAGATED.get()
    if not extra:
        return
    for name, value in extra.items():
        for same in [h for h in headers if h.lower() == name.lower()]:
            del headers[same]
        headers[name] = value
