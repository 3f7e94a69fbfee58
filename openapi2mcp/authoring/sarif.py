"""Lint findings as SARIF 2.1.0, the format GitHub code scanning uploads (`lint --format sarif`).

One run, openapi2mcp as the tool; every rule in `tool.driver.rules` (id, name, why, fix, level);
one result per finding at its file:line in the overlay, suppressed ones with their in-source
justification. Paths are relative to the working directory (the repository root in CI), under
`%SRCROOT%`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from openapi2mcp import __version__
from openapi2mcp.authoring.lint import RULES, Finding, LintReport

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
INFORMATION_URI = "https://github.com/openapi2mcp/openapi2mcp/blob/main/docs/authoring.md"


def to_sarif(report: LintReport, root: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The SARIF log of a lint report; `root` is the folder paths are relative to (default: the working dir)."""
    base = Path(root or os.getcwd()).resolve()
    index = {r.id: i for i, r in enumerate(RULES)}
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "openapi2mcp",
                "semanticVersion": __version__,
                "informationUri": INFORMATION_URI,
                "rules": [_rule(r) for r in RULES],
            }},
            "automationDetails": {"id": "openapi2mcp/lint/"},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": base.as_uri() + "/"}},
            "columnKind": "unicodeCodePoints",
            "results": [_result(f, index[f.rule.id], base) for f in report.findings],
        }],
    }


def _rule(rule: Any) -> dict[str, Any]:
    return {
        "id": rule.id,
        "name": "".join(w.capitalize() for w in rule.name.split("-")),
        "shortDescription": {"text": rule.why},
        "fullDescription": {"text": rule.why},
        "help": {"text": f"Fix: {rule.fix}", "markdown": f"**Fix:** {rule.fix}\n\n[{rule.id}]({INFORMATION_URI}"
                 f"#{rule.id.lower()})"},
        "helpUri": f"{INFORMATION_URI}#{rule.id.lower()}",
        "defaultConfiguration": {"level": rule.severity.value},
        "properties": {"tags": ["mcp", "client" if rule.clients else "overlay"]},
    }


def _result(f: Finding, rule_index: int, base: Path) -> dict[str, Any]:
    region: dict[str, Any] = {"startLine": f.line or 1}
    if f.column:
        region["startColumn"] = f.column
    message = f.message + (f" Fix: {f.fix}" if f.fix else "")
    out: dict[str, Any] = {
        "ruleId": f.rule.id,
        "ruleIndex": rule_index,
        "level": f.severity.value,
        "message": {"text": message},
        "locations": [{"physicalLocation": {"artifactLocation": _artifact(f.file or "", base), "region": region}}],
    }
    if f.tool:
        out["properties"] = {"tool": f.tool, **({"client": f.client} if f.client else {})}
    if f.suppressed is not None:
        out["suppressions"] = [{"kind": "inSource", **({"justification": f.suppressed} if f.suppressed else {})}]
    return out


def _artifact(path: str, base: Path) -> dict[str, Any]:
    p = Path(path)
    absolute = (p if p.is_absolute() else Path.cwd() / p).resolve()
    try:
        relative = absolute.relative_to(base)
    except ValueError:
        return {"uri": absolute.as_uri()}
    return {"uri": quote(relative.as_posix()), "uriBaseId": "%SRCROOT%"}
