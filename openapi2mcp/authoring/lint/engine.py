"""Run the rules over a project: hits located in the tool overlay, suppressions applied, findings sorted."""

from __future__ import annotations

from openapi2mcp.authoring.lint.model import Finding, Hit, LintOptions, LintReport, Rule
from openapi2mcp.authoring.lint.rules import BY_ID, RULES, SUPPRESSION_REASON, UNUSED_SUPPRESSION
from openapi2mcp.authoring.lint.suppress import Suppression, covering, is_rule_id, read_suppressions
from openapi2mcp.authoring.lint.views import LintContext, build_context
from openapi2mcp.compiler import CompiledFiles
from openapi2mcp.errors import InputError


def run_lint(project: CompiledFiles, options: LintOptions = LintOptions()) -> LintReport:
    """Every rule's findings for the project's tool overlay (client rules: for `options.clients`)."""
    from openapi2mcp.authoring.clients import PROFILES

    unknown = [c for c in options.clients if c not in PROFILES]
    if unknown:
        raise InputError.at(f"unknown client profile {unknown[0]!r}",
                            hint=f"use one of: {', '.join(PROFILES)} (or all)")
    ctx = build_context(project, options)
    findings: list[Finding] = []
    seen: set[tuple[str, int | None, str]] = set()
    tool_lines = {t.name: ctx.overlay.location(t.path).line for t in ctx.tools}
    for rule in RULES:
        if rule.check is None or (rule.clients and not options.clients):
            continue
        for hit in rule.check(ctx):
            finding = _locate(ctx, rule, hit)
            key = (rule.id, finding.line, finding.message)
            if key not in seen:
                seen.add(key)
                findings.append(finding)
    suppressions = read_suppressions(ctx.overlay.path)
    for f in findings:
        lines = [f.line or 0, tool_lines.get(f.tool or "") or 0]
        s = covering(suppressions, f.rule.id, lines)
        if s is not None:
            f.suppressed = s.reason
            s.used.add(f.rule.id)
    findings += _suppression_findings(ctx, suppressions, every_client=len(options.clients) == len(PROFILES))
    findings.sort(key=lambda f: (f.line or 0, f.column or 0, f.rule.id, f.message))
    manifest = project.manifest
    return LintReport(findings=findings, spec=project.spec.source, spec_sha256=project.spec.sha256,
                      overlay=ctx.overlay.path, tools=len([t for t in manifest.tools if t.risk != "forbidden"]),
                      options=options)


def _locate(ctx: LintContext, rule: Rule, hit: Hit) -> Finding:
    where = ctx.overlay.location(hit.path)
    return Finding(rule=rule, message=hit.message, file=where.file, line=where.line, column=where.column,
                   pointer=where.pointer, tool=hit.tool, fix=hit.fix, client=hit.client)


def _suppression_findings(ctx: LintContext, suppressions: list[Suppression], every_client: bool) -> list[Finding]:
    out = []
    for s in suppressions:
        def at(rule: Rule, message: str, s: Suppression = s) -> Finding:
            return Finding(rule=rule, message=message, file=ctx.overlay.path, line=s.line, column=s.column,
                           pointer=None)

        if not s.reason:
            out.append(at(SUPPRESSION_REASON, f"suppression of {', '.join(s.rules) or 'nothing'} gives no reason"))
        for rule_id in s.rules or [""]:
            known = BY_ID.get(rule_id)
            if known is None:
                what = f"unknown rule {rule_id!r}" if rule_id else "no rule"
                hint = "" if not rule_id or is_rule_id(rule_id) else " (rule ids look like O2M105)"
                out.append(at(UNUSED_SUPPRESSION, f"suppression names {what}{hint}"))
            elif rule_id not in s.used and (not known.clients or every_client) and known.check is not None:
                out.append(at(UNUSED_SUPPRESSION, f"suppression of {rule_id} ({known.name}) matches no finding on "
                              "this line, the next, or the tool it starts"))
    return out
