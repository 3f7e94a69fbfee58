"""What lint reports: rules (data), the hits their checks return, the located findings."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from openapi2mcp.overlay import KeyPath

if TYPE_CHECKING:
    from openapi2mcp.authoring.lint.views import LintContext


class Severity(StrEnum):
    """SARIF's levels: an error fails every gate, a warning the default one (`--fail-on warning`)."""

    error = "error"
    warning = "warning"
    note = "note"

    @property
    def rank(self) -> int:
        return {"note": 0, "warning": 1, "error": 2}[self.value]


@dataclass(frozen=True)
class Hit:
    """One problem a check found: where in the tool overlay (a key path), about which tool."""

    message: str
    path: KeyPath = ()
    tool: str | None = None
    fix: str | None = None  # a fix for this very case (else the rule's)
    client: str | None = None


Check = Callable[["LintContext"], Iterable[Hit]]


@dataclass(frozen=True)
class Rule:
    """A lint rule: its stable id (never reused), severity, why it matters, how to fix it, its check."""

    id: str
    name: str
    severity: Severity
    why: str
    fix: str
    check: Check | None  # None: reported by the engine itself (suppression rules)
    clients: bool = False  # runs only for the profiles named by --client

    def summary(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "severity": self.severity.value, "why": self.why, "fix": self.fix}


@dataclass
class Finding:
    """A hit, located in a file (line and column), maybe suppressed by an `# o2m: ignore[...]` comment."""

    rule: Rule
    message: str
    file: str | None
    line: int | None
    column: int | None
    pointer: str | None
    tool: str | None = None
    fix: str | None = None
    client: str | None = None
    suppressed: str | None = None  # the justification ("" when the comment gives none)

    @property
    def severity(self) -> Severity:
        return self.rule.severity

    @property
    def where(self) -> str:
        if not self.file:
            return ""
        out = self.file
        if self.line:
            out += f":{self.line}" + (f":{self.column}" if self.column else "")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule.id, "name": self.rule.name, "severity": self.severity.value, "message": self.message,
            "file": self.file, "line": self.line, "column": self.column, "pointer": self.pointer, "tool": self.tool,
            "client": self.client, "fix": self.fix or self.rule.fix, "suppressed": self.suppressed is not None,
            **({"justification": self.suppressed} if self.suppressed is not None else {}),
        }


@dataclass(frozen=True)
class LintOptions:
    clients: tuple[str, ...] = ()  # client profiles to check (clients.py)
    max_tokens: int = 16_000  # budget of the whole tools/list (bytes/4, like `inspect`)
    max_response_bytes: int = 4_000  # structure size of a response schema without `select` (specdoc.py)
    server_name: str | None = None  # the server's key in the client configuration (default: server.name)


@dataclass
class LintReport:
    findings: list[Finding]
    spec: str
    spec_sha256: str
    overlay: str
    tools: int
    options: LintOptions = field(default_factory=LintOptions)

    @property
    def active(self) -> list[Finding]:
        return [f for f in self.findings if f.suppressed is None]

    def failed(self, threshold: Severity | None) -> bool:
        """Is there an unsuppressed finding at or above `threshold` (None: never fail)?"""
        return threshold is not None and any(f.severity.rank >= threshold.rank for f in self.active)

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in Severity}
        for f in self.active:
            out[f.severity.value] += 1
        out["suppressed"] = len(self.findings) - len(self.active)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "spec": {"source": self.spec, "sha256": self.spec_sha256},
            "overlay": self.overlay,
            "tools": self.tools,
            "summary": self.counts(),
            "findings": [f.to_dict() for f in self.findings],
        }
