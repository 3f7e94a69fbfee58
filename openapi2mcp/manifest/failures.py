"""What an upstream HTTP status becomes: the stable error code, whether it is worth retrying, and why.

One table for both sides: the runtime maps each failed response with it (upstream/failures.py),
and the tool contract lists the codes a tool can return from it (contract.py). The overlay's
`failure_modes` win over the table (`failure_mode_for`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from openapi2mcp.errors import ErrorCode
from openapi2mcp.manifest.model import FailureMode

# status -> (code, what happened, advice to the model)
STATUS_ERRORS: Final[dict[int, tuple[ErrorCode, str, str]]] = {
    400: (ErrorCode.ARGUMENT_INVALID, "the upstream rejected the request", "Check the arguments."),
    422: (ErrorCode.ARGUMENT_INVALID, "the upstream rejected the request", "Check the arguments."),
    401: (
        ErrorCode.UNAUTHORIZED,
        "the upstream refused the server's credentials",
        "The server's API credential is missing, wrong or expired; changing arguments will not help.",
    ),
    403: (
        ErrorCode.FORBIDDEN,
        "the upstream denied access",
        "The server's credential lacks permission for this operation or resource.",
    ),
    404: (ErrorCode.NOT_FOUND, "not found", "Check the identifiers, or list or search first."),
    409: (
        ErrorCode.CONFLICT,
        "conflict",
        "The resource changed or already exists; read it again before retrying.",
    ),
    412: (
        ErrorCode.PRECONDITION_FAILED,
        "precondition failed",
        "The resource changed since it was read; read it again.",
    ),
    413: (ErrorCode.PAYLOAD_TOO_LARGE, "the request is too large for the upstream", "Send less data."),
    429: (ErrorCode.RATE_LIMITED, "rate limited by the upstream", "Wait, then retry."),
}
RETRYABLE_STATUSES: Final = frozenset({429, 502, 503, 504})
# One status of each kind the table tells apart: what a tool's failure modes are computed over.
KINDS_OF_STATUS: Final = (300, 400, 401, 402, 403, 404, 409, 412, 413, 422, 429, 500, 502, 503, 504)


def builtin_failure(status: int) -> tuple[ErrorCode, bool, str, str]:
    """(code, retryable, what happened, advice) of a non-2xx status without an overlay mapping."""
    retry = status in RETRYABLE_STATUSES
    if status in STATUS_ERRORS:
        code, what, advice = STATUS_ERRORS[status]
        return code, retry, what, advice
    if status >= 500:
        return ErrorCode.UPSTREAM_ERROR, retry, "the upstream failed", "Retry later." if retry else ""
    if 300 <= status < 400:
        return ErrorCode.UPSTREAM_ERROR, False, "the upstream answered with a redirect, which is not followed", ""
    return ErrorCode.UPSTREAM_ERROR, False, "the upstream refused the request", ""


def failure_mode_for(status: int, modes: Mapping[str, FailureMode]) -> FailureMode | None:
    """The overlay's mapping of `status`: exact ("404"), then its class ("4XX"), then "default"."""
    for key in (str(status), f"{status // 100}XX", f"{status // 100}xx", "default"):
        if key in modes:
            return modes[key]
    return None


def status_outcome(status: int, modes: Mapping[str, FailureMode]) -> tuple[str, bool]:
    """The code and retryable flag a failed response with `status` gets (the overlay's mapping first)."""
    code, retryable, _, _ = builtin_failure(status)
    mode = failure_mode_for(status, modes)
    if mode is None:
        return str(code), retryable
    return mode.code, mode.retryable if mode.retryable is not None else retryable
