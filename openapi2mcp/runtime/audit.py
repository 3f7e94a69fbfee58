"""The audit log: one JSON line per tool call (and per resource read), written before the answer.

Off unless configured: `--audit-log PATH` (or `-` for stderr), `$OPENAPI2MCP_AUDIT_LOG`. When it
is configured, no call goes unlogged:

* every `tools/call` gets exactly one `"phase": "result"` line, written before the result is
  returned: successes, tool errors, denials (unknown or forbidden tools, confirmation refused or
  impossible, missing dry run, invalid request state), dry runs and input-required answers;
* a call that will send a mutating request (not GET/HEAD/OPTIONS/TRACE, dry runs excepted) also gets
  a `"phase": "attempt"` line BEFORE the first such request is sent;
* writing fails closed: when the attempt line cannot be written the request is not sent, and when
  the result line cannot be written the client gets AUDIT_FAILED instead of the result.

Each line is one `os.write` to a file opened with O_APPEND (whole lines, in order, even with
several processes appending), so it reaches the kernel before the call answers ("flushed per
line"); it is not fsync'ed. Arguments are redacted: the tool's sensitive arguments (overlay
`sensitive: true`, `format: password`, `writeOnly`, names like password/token/secret/api_key),
keys with such names at any depth, and every known secret value of the upstream configuration;
long strings are shortened. Nothing else of the call's payload (no result) is written, except,
for a result repaired to fit the tool's output schema (an upstream drifting from its spec),
`repairs`: how many values were repaired and where (`{count, paths: [{path, expected, got,
action, count}]}`, paths with list indexes as [*], at most `MAX_REPAIR_PATHS`).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

from openapi2mcp.shape import path_pattern

AUDIT_LOG_VAR: Final = "OPENAPI2MCP_AUDIT_LOG"
MAX_STRING: Final = 500  # characters of one argument string kept in a line
MAX_LINE: Final = 64_000  # bytes; longer lines lose their arguments (never the line itself)
_SECRET_NAME: Final = re.compile(r"pass(word)?|secret|token|api[-_]?key|credential|authorization|cookie", re.I)

MAX_REPAIR_PATHS: Final = 20

Phase = Literal["attempt", "result"]


class AuditError(Exception):
    """The audit log cannot be written: the call must fail closed."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def redact_arguments(
    arguments: Mapping[str, Any],
    sensitive: Iterable[str],
    scrub: Callable[[str], str] = lambda s: s,
    *,
    cut: bool = True,
) -> dict[str, Any]:
    """The arguments as an audit line shows them (see the module doc); `cut=False` keeps lengths (dry runs)."""
    names = set(sensitive)

    def walk(value: Any, key: str | None) -> Any:
        if key is not None and _SECRET_NAME.search(key):
            return "***"
        if isinstance(value, str):
            text = scrub(value)
            return text if not cut or len(text) <= MAX_STRING else text[:MAX_STRING] + f"…({len(text)} chars)"
        if isinstance(value, list):
            if not cut:
                return [walk(v, None) for v in value]
            return [walk(v, None) for v in value[:100]] + ([f"…({len(value)} items)"] if len(value) > 100 else [])
        if isinstance(value, dict):
            return {str(k): walk(v, str(k)) for k, v in value.items()}
        return value

    return {k: "***" if k in names else walk(v, k) for k, v in arguments.items()}


def repairs_summary(repairs: Iterable[Mapping[str, Any]], omitted: int = 0) -> dict[str, Any]:
    """`{count, paths}` of a result's repairs (`_meta["openapi2mcp/repairs"]` entries), grouped by
    path pattern, expectation and action, for the audit line and the log."""
    groups: dict[tuple[str, str, str, str], int] = {}
    total = omitted
    for r in repairs:
        key = (path_pattern(str(r.get("path", ""))), str(r.get("expected")), str(r.get("got")), str(r.get("action")))
        groups[key] = groups.get(key, 0) + 1
        total += 1
    paths = [{"path": p, "expected": e, "got": g, "action": a, "count": n}
             for (p, e, g, a), n in list(groups.items())[:MAX_REPAIR_PATHS]]
    return {"count": total, "paths": paths}


def _line(record: Mapping[str, Any]) -> bytes:
    """One JSON line, UTF-8. A lone surrogate (JSON allows "\\ud800" in arguments) is written escaped."""
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
    try:
        return (text + "\n").encode()
    except UnicodeEncodeError:
        return (json.dumps(record, separators=(",", ":"), default=str) + "\n").encode()


def _open_private(target: str) -> int:
    """Open (or create) the log for appending, as a file only its owner can read (0600).

    The path is often in a shared folder, so a planted file must not redirect or expose the
    trail: a symlink is refused (O_NOFOLLOW; checked by the kernel, no race), so is a regular
    file owned by another user or with other hard links; an existing regular file with wider
    permissions is tightened to 0600, with a warning. Pipes and devices (a FIFO to a collector)
    are written as they are.
    """
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(target, flags, 0o600)
    except OSError as e:
        if e.errno == errno.ELOOP or os.path.islink(target):
            raise AuditError(f"cannot open the audit log {target}: it is a symbolic link, which is refused (a link "
                             "planted there would send the audit trail elsewhere); give the real path") from None
        raise AuditError(f"cannot open the audit log {target}: {e.strerror}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode):
            problem = None
            if info.st_uid != os.geteuid():
                problem = f"it belongs to another user (uid {info.st_uid}), who could read or change the trail"
            elif info.st_nlink > 1:
                problem = f"it has {info.st_nlink - 1} other hard link(s), through which it could be read or changed"
            if problem:
                raise AuditError(f"cannot use the audit log {target}: {problem}; remove it or give another path")
            mode = stat.S_IMODE(info.st_mode)
            if mode & 0o077:
                os.fchmod(fd, 0o600)
                logging.getLogger("openapi2mcp.audit").warning(
                    "the audit log %s could be read by others (mode %04o); its mode is now 0600", target, mode)
    except OSError as e:
        os.close(fd)
        raise AuditError(f"cannot secure the audit log {target}: {e.strerror or e}") from None
    except AuditError:
        os.close(fd)
        raise
    return fd


class AuditLog:
    """An append-only JSON-lines target: a file, or stderr (`-`)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._lock = threading.Lock()
        self._owned = target != "-"
        if target == "-":
            self._fd = sys.stderr.fileno()
            return
        self._fd = _open_private(target)

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one line (one write call); AuditError when it cannot be written in full."""
        data = _line(record)
        if len(data) > MAX_LINE and "arguments" in record:
            data = _line({**record, "arguments": "(too large for one line)"})
        with self._lock:
            try:
                written = os.write(self._fd, data)
                while written < len(data):  # a short write (a full pipe): finish the line
                    written += os.write(self._fd, data[written:])
            except OSError as e:
                raise AuditError(f"cannot write the audit log {self.target}: {e.strerror or e}") from None

    def close(self) -> None:
        with self._lock:
            if self._owned and self._fd >= 0:
                try:
                    os.close(self._fd)
                except OSError:
                    pass
                self._fd = -1


@dataclass
class AuditRecord:
    """What one call's lines say; filled in as the call goes (policy.py, admission.py, calls.py)."""

    event: Literal["tool_call", "resource_read"]
    trace_id: str
    caller: Mapping[str, Any]
    name: str  # the tool name, or the resource URI
    arguments: dict[str, Any] = field(default_factory=dict)  # redacted already
    risk: str | None = None
    audit_event: str | None = None
    branch: str | None = None
    dry_run: bool = False
    confirmation: str | None = None  # not_required, confirmed, declined, cancelled, auto_approved, requested, ...
    idempotency_key: str | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)  # upstream requests, retried ones included
    started: float = field(default_factory=time.monotonic)
    attempted: bool = False  # the attempt line is written
    repairs: dict[str, Any] | None = None  # repairs_summary of a result that was repaired to fit its schema
    replayed: bool = False  # --state: the first result of this keyed write, returned again (nothing sent)
    outcome: str | None = None  # how the call ended (calls.py): ok, error, denied, declined, dry_run, cancelled, ...
    error: str | None = None  # ... and its error code

    def line(self, phase: Phase, outcome: str | None = None, error: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"time": _now(), "event": self.event, "phase": phase, "traceId": self.trace_id,
                               "caller": dict(self.caller)}
        if self.event == "tool_call":
            out.update(tool=self.name, branch=self.branch, risk=self.risk, auditEvent=self.audit_event,
                       arguments=self.arguments, dryRun=self.dry_run, confirmation=self.confirmation)
            if self.idempotency_key:
                out["idempotencyKey"] = self.idempotency_key
        else:
            out["resource"] = self.name
        if phase == "result":
            out.update(outcome=outcome, error=error, requests=self.requests,
                       ms=int((time.monotonic() - self.started) * 1000))
            if self.repairs:
                out["repairs"] = self.repairs
            if self.replayed:
                out["replayed"] = True
        return out


class Auditor:
    """The runtime's audit seam: writes lines when a log is configured, does nothing otherwise."""

    def __init__(self, log: AuditLog | None) -> None:
        self.log = log

    @property
    def enabled(self) -> bool:
        return self.log is not None

    def attempt(self, record: AuditRecord) -> None:
        """Before the first mutating request of a call (AuditError: do not send it)."""
        if self.log is None or record.attempted:
            return
        self.log.write(record.line("attempt"))
        record.attempted = True

    def result(self, record: AuditRecord, outcome: str, error: str | None = None) -> None:
        """The call's one result line (AuditError: do not return the result)."""
        if self.log is not None:
            self.log.write(record.line("result", outcome, error))

    def cancelled(self, record: AuditRecord) -> None:
        """The result line of a call cancelled mid-way (the client's notifications/cancelled, a dropped
        connection, shutdown). Synchronous, so the cancellation under way cannot interrupt it; never
        raises, so the cancellation goes on: what was sent before is still on record."""
        if self.log is None:
            return
        try:
            self.log.write(record.line("result", "cancelled", None))
        except AuditError as e:
            logging.getLogger("openapi2mcp.audit").error("traceId %s: %s", record.trace_id, e)

    def close(self) -> None:
        if self.log is not None:
            self.log.close()
