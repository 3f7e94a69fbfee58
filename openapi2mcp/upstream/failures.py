"""Failures: an answer that is not 2xx, or no answer, becomes a stable `ToolFailure`.

HTTP status -> `ErrorCode` (the overlay's `failure_modes` first), quoting the upstream's own
complaint (errorbody.py), short and redacted; a 401 without a credential says which variable to
set. Transport failures: UPSTREAM_TIMEOUT, UPSTREAM_UNAVAILABLE, RESPONSE_TOO_LARGE.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from typing import Final

from openapi2mcp.errors import ErrorCode, ToolFailure
from openapi2mcp.manifest import FailureMode, OperationSpec
from openapi2mcp.upstream.errorbody import Complaint, read_complaint
from openapi2mcp.upstream.response import UpstreamResponse, clip_quote, is_json_media, loads, retry_after
from openapi2mcp.upstream.secrets import Redactor


def timed_out() -> ToolFailure:
    return ToolFailure.of(
        ErrorCode.UPSTREAM_TIMEOUT,
        "the upstream did not answer in time; retry later (the request may or may not have taken effect)",
        retryable=True,
    )


def unavailable(message: str) -> ToolFailure:
    return ToolFailure.of(ErrorCode.UPSTREAM_UNAVAILABLE, message + "; retry later", retryable=True)


def too_large(cap: int, status: int) -> ToolFailure:
    return ToolFailure.of(
        ErrorCode.RESPONSE_TOO_LARGE,
        f"the upstream response is larger than this server's limit of {cap} bytes; "
        "ask for less (filters, a smaller page or limit, fewer fields)",
        status=status,
    )


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


def _builtin(status: int) -> tuple[ErrorCode, bool, str, str]:
    if status in STATUS_ERRORS:
        code, what, advice = STATUS_ERRORS[status]
        return code, status == 429, what, advice
    if status >= 500:
        retry = status in (502, 503, 504)
        return ErrorCode.UPSTREAM_ERROR, retry, "the upstream failed", "Retry later." if retry else ""
    if 300 <= status < 400:
        return (
            ErrorCode.UPSTREAM_ERROR,
            False,
            "the upstream answered with a redirect, which is not followed",
            "",
        )
    return ErrorCode.UPSTREAM_ERROR, False, "the upstream refused the request", ""


def _failure_mode(status: int, modes: Mapping[str, FailureMode]) -> FailureMode | None:
    for key in (str(status), f"{status // 100}XX", f"{status // 100}xx", "default"):
        if key in modes:
            return modes[key]
    return None


def status_failure(
    resp: UpstreamResponse, op: OperationSpec, modes: Mapping[str, FailureMode], redactor: Redactor, *,
    no_credential: str | None = None, refused: tuple[str, str] | None = None,
) -> ToolFailure:
    """Map a non-2xx response to a ToolFailure; the overlay's failure_modes win.

    `no_credential`: why no credential was sent, which is the advice a 401 then gets; `refused`:
    what a 401 means and the advice when the credential is obtained while serving (credentials.py).
    """
    status = resp.status
    complaint = upstream_complaint(resp, op)
    said = clip_quote(redactor.text(complaint.message)) if complaint.message else ""
    code, retryable, what, advice = _builtin(status)
    if status == 401 and no_credential:
        what, advice = "the upstream requires credentials", no_credential[0].upper() + no_credential[1:] + "."
    elif status == 401 and refused:
        what, advice = refused
    mode = _failure_mode(status, modes)
    if mode is not None:
        code_text = mode.code
        retryable = mode.retryable if mode.retryable is not None else retryable
        message = mode.message or f"{what} ({op.method} {op.path} returned {status})"
        if said:
            message += f" (upstream said: {said})"
    else:
        code_text = str(code)
        message = f"{what} ({op.method} {op.path} returned {status})"
        if said:
            message += f": {said.rstrip('.')}"
        if advice:
            message += f". {advice}"
    wait = retry_after(resp.headers) if status in (429, 503) else None
    field = complaint.field if code_text == ErrorCode.ARGUMENT_INVALID else None
    return ToolFailure.of(code_text, message, retryable=retryable, field=field, status=status, retry_after=wait)


def upstream_complaint(resp: UpstreamResponse, op: OperationSpec | None = None) -> Complaint:
    """The upstream's own explanation of a failure and the argument it is about (errorbody.py)."""
    body = resp.body
    if not body or len(body) > 1_000_000:
        return Complaint("")
    document = None
    if not resp.media_type or is_json_media(resp.media_type):
        try:
            document = loads(body)
        except ValueError:  # not JSON whatever its label says (Jupyter's 404 is text): quote the text
            document = None
    text = None
    textual = not resp.media_type or resp.media_type.startswith("text/") or is_json_media(resp.media_type)
    if document is None and textual and len(body) < 10_000:
        text = body.decode(resp.charset if resp.charset and _known_charset(resp.charset) else "utf-8", "replace")
    return read_complaint(document, text, resp.media_type, op)


def _known_charset(name: str) -> bool:
    try:
        codecs.lookup(name)
    except LookupError:
        return False
    return True
