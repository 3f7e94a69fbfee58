"""Retries of upstream requests: only idempotent ones, with backoff, Retry-After and the call's deadline.

Which requests (`plan`):

* idempotent by method (GET, HEAD, OPTIONS, TRACE, PUT, DELETE; not a GET the overlay rates as a
  write, `manifest.changes_state`), or carrying an idempotency key (the tool or action says
  `idempotent: true`: the upstream deduplicates by the key);
* how often: `retries.max_attempts` of the tool, else of the upstream. Without either, keyed
  writes get 2 attempts (the retry is what the key is for) and everything else 1: retrying reads
  by default would hide a flaky upstream from its operators, multiply the load during an outage,
  and stack on the retries of agents, which already retry errors marked `retryable`;
* any other write (POST/PATCH without a key) is never retried, whatever `retries` says.

When: a connection that failed or broke (UPSTREAM_UNAVAILABLE), a timeout (UPSTREAM_TIMEOUT), or
an answer 429, 502, 503 or 504. How long: `Retry-After` when the upstream sends it (a longer wait
than `max_retry_after` is not waited for: the error carries it instead), otherwise full jitter
(a random wait between 0 and `backoff * 2^(n-1)`, at most `max_backoff`; AWS's "Exponential Backoff
and Jitter"). Never past the deadline of the call (the `anyio.fail_after` of `TimeoutSpec.total`
around it): a wait that would end after it is not started, and the last answer stands.

No library: tenacity and stamina retry on exceptions and fixed waits, while this needs a retry on
a returned status, waits that come from the response, the enclosing cancel scope's deadline and a
record of every attempt for the audit log; that is the forty lines below.
"""

from __future__ import annotations

import math
import random
from collections.abc import Awaitable, Callable
from typing import Any, Final

import anyio

from openapi2mcp.errors import ErrorCode, ToolFailure
from openapi2mcp.manifest import IDEMPOTENT_METHODS, SAFE_METHODS, RetrySpec
from openapi2mcp.upstream.response import UpstreamResponse, retry_after

RETRY_STATUSES: Final = frozenset({429, 502, 503, 504})
_RETRIED_FAILURES: Final = frozenset({ErrorCode.UPSTREAM_UNAVAILABLE, ErrorCode.UPSTREAM_TIMEOUT})


def plan(method: str, *, keyed: bool, tool: RetrySpec | None, upstream: RetrySpec | None,
         writes: bool = False) -> RetrySpec | None:
    """How one request is retried (None: it is sent once). `writes`: a safe method the overlay rates as a
    write (manifest.changes_state), whose idempotency nobody knows: like a POST, only with a key."""
    method = method.upper()
    if (method not in IDEMPOTENT_METHODS or (writes and method in SAFE_METHODS)) and not keyed:
        return None
    spec = tool or upstream or (RetrySpec() if keyed else None)
    return spec if spec is not None and spec.max_attempts > 1 else None


def backoff(spec: RetrySpec, attempt: int, rng: Callable[[], float] = random.random) -> float:
    """Full jitter: uniform in [0, min(max_backoff, backoff * 2^(attempt-1))]."""
    return rng() * min(spec.max_backoff, spec.backoff * 2.0 ** (attempt - 1))


def _remaining() -> float:
    deadline = anyio.current_effective_deadline()
    return math.inf if deadline == math.inf else deadline - anyio.current_time()


async def send(
    attempt: Callable[[], Awaitable[UpstreamResponse]],
    spec: RetrySpec | None,
    *,
    on_retry: Callable[[dict[str, Any]], None] = lambda _: None,
    rng: Callable[[], float] = random.random,
) -> UpstreamResponse:
    """Call `attempt` until it gives a final answer; `on_retry` records each attempt that is retried."""
    n = 1
    while True:
        try:
            resp = await attempt()
        except ToolFailure as failure:
            if spec is None or n >= spec.max_attempts or failure.error.code not in _RETRIED_FAILURES:
                raise
            wait = backoff(spec, n, rng)
            if wait >= _remaining():
                raise
            on_retry({"attempt": n, "error": failure.error.code, "retry_in_ms": int(wait * 1000)})
        else:
            if spec is None or n >= spec.max_attempts or resp.status not in RETRY_STATUSES:
                return resp
            after = retry_after(resp.headers)
            if after is not None and after > spec.max_retry_after:
                return resp
            wait = after if after is not None else backoff(spec, n, rng)
            if wait >= _remaining():
                return resp
            on_retry({**resp.provenance(), "attempt": n, "retry_in_ms": int(wait * 1000)})
        await anyio.sleep(wait)
        n += 1
