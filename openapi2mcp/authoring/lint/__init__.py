"""`openapi2mcp lint`: the quality gate of an overlay (rules.py lists the rules; docs/authoring.md#lint)."""

from __future__ import annotations

from openapi2mcp.authoring.lint.engine import run_lint
from openapi2mcp.authoring.lint.model import Finding, LintOptions, LintReport, Rule, Severity
from openapi2mcp.authoring.lint.rules import BY_ID, RULES

__all__ = [
    "BY_ID",
    "RULES",
    "Finding",
    "LintOptions",
    "LintReport",
    "Rule",
    "Severity",
    "run_lint",
]
