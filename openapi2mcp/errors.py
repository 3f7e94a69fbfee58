"""Errors, the two kinds users meet.

* `InputError` — compile time: the spec or the overlay cannot be used. It names the place
  (file, line, key or JSON pointer) and the fix; the CLI prints it without a traceback and
  exits with status 2.
* `ToolError` — run time: the structured body of an `isError` tool result (seed 000 shape:
  code, message, retryable, field, traceId). Codes are stable: clients and models branch on them.

This module is shared by both halves of the pipeline, so it imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class Location(BaseModel):
    """Where a problem is: a file, a line/column in it, and a key path or JSON pointer."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    file: str | None = None
    line: int | None = None  # 1-based
    column: int | None = None  # 1-based
    pointer: str | None = None  # JSON pointer ("/paths/~1pets/get") or dotted key path

    def __str__(self) -> str:
        parts = []
        if self.file:
            where = self.file
            if self.line:
                where += f":{self.line}"
                if self.column:
                    where += f":{self.column}"
            parts.append(where)
        if self.pointer:
            parts.append(f"at {self.pointer}" if parts else self.pointer)
        return " ".join(parts)


class Problem(BaseModel):
    """One thing wrong with the input: what, where, and how to fix it."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    message: str
    location: Location = Field(default_factory=Location)
    hint: str | None = None

    def __str__(self) -> str:
        where = str(self.location)
        text = f"{where}: {self.message}" if where else self.message
        if self.hint:
            text += f"\n    hint: {self.hint}"
        return text


class InputError(Exception):
    """The spec or the overlay cannot be used; carries one or more located problems."""

    exit_code = 2

    def __init__(self, problems: Problem | Iterable[Problem], *, title: str | None = None) -> None:
        self.problems: list[Problem] = [problems] if isinstance(problems, Problem) else list(problems)
        self.title = title
        super().__init__(self.render())

    @classmethod
    def at(
        cls,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        pointer: str | None = None,
        hint: str | None = None,
    ) -> InputError:
        loc = Location(file=file, line=line, column=column, pointer=pointer)
        return cls(Problem(message=message, location=loc, hint=hint))

    def render(self) -> str:
        if not self.title:
            return "\n".join(str(p) for p in self.problems)
        count = len(self.problems)
        head = f"{self.title} ({count} problem{'s' if count != 1 else ''})"
        return "\n".join([head, *("  " + str(p).replace("\n", "\n  ") for p in self.problems)])


class SpecWarning(Problem):
    """A spec problem that does not stop compilation (reported; fatal with --strict)."""


def did_you_mean(name: str, candidates: Iterable[str], *, n: int = 1) -> str | None:
    """'did you mean ...?' for a misspelt name, or None when nothing is close."""
    pool = list(candidates)
    import difflib  # only when a name is wrong: not at every start-up

    close = difflib.get_close_matches(name, pool, n=n, cutoff=0.6)
    if not close:
        lowered = {c.lower(): c for c in pool}
        close = [lowered[m] for m in difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.6)]
    if not close:
        return None
    return "did you mean " + " or ".join(repr(c) for c in close) + "?"


class ErrorCode(StrEnum):
    """Stable codes of tool execution errors (seed 000). Never rename one: clients branch on them."""

    ARGUMENT_INVALID = "ARGUMENT_INVALID"
    UNAUTHORIZED = "UNAUTHORIZED"
    FORBIDDEN = "FORBIDDEN"
    NOT_FOUND = "NOT_FOUND"
    CONFLICT = "CONFLICT"
    RATE_LIMITED = "RATE_LIMITED"
    PRECONDITION_FAILED = "PRECONDITION_FAILED"
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    UPSTREAM_ERROR = "UPSTREAM_ERROR"
    UPSTREAM_TIMEOUT = "UPSTREAM_TIMEOUT"
    UPSTREAM_UNAVAILABLE = "UPSTREAM_UNAVAILABLE"
    UPSTREAM_INVALID_RESPONSE = "UPSTREAM_INVALID_RESPONSE"
    RESPONSE_TOO_LARGE = "RESPONSE_TOO_LARGE"
    CONFIRMATION_REQUIRED = "CONFIRMATION_REQUIRED"
    CONFIRMATION_DECLINED = "CONFIRMATION_DECLINED"
    DRY_RUN_REQUIRED = "DRY_RUN_REQUIRED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    CURSOR_INVALID = "CURSOR_INVALID"
    AUDIT_FAILED = "AUDIT_FAILED"
    STATE_UNAVAILABLE = "STATE_UNAVAILABLE"  # --state: the shared store is down; retryable, nothing was sent
    CONFIGURATION_ERROR = "CONFIGURATION_ERROR"
    INTERNAL_ERROR = "INTERNAL_ERROR"


class ToolError(BaseModel):
    """The structured body of an `isError` tool result."""

    model_config = ConfigDict(populate_by_name=True, defer_build=True)

    code: str
    message: str
    retryable: bool = False
    field: str | None = None
    trace_id: str | None = Field(default=None, alias="traceId")
    status: int | None = None  # the upstream HTTP status, when there was one
    step: str | None = None  # the chain step that failed, for multi-step tools
    retry_after: float | None = Field(default=None, alias="retryAfter")  # seconds

    def body(self) -> dict[str, object]:
        """The JSON object a client sees (camelCase keys, no nulls except `field`)."""
        data = self.model_dump(by_alias=True, exclude_none=True)
        data.setdefault("field", None)
        return data


class ToolFailure(Exception):
    """Raised inside the runtime to end a call with a `ToolError` result."""

    def __init__(self, error: ToolError) -> None:
        self.error = error
        super().__init__(f"{error.code}: {error.message}")

    @classmethod
    def of(
        cls,
        code: ErrorCode | str,
        message: str,
        *,
        retryable: bool = False,
        field: str | None = None,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> ToolFailure:
        return cls(
            ToolError(
                code=str(code),
                message=message,
                retryable=retryable,
                field=field,
                status=status,
                retryAfter=retry_after,
            )
        )
