"""The curated overlay of a third-party module passes `openapi2mcp lint` against the spec its server publishes."""

from __future__ import annotations

from openapi2mcp.authoring import PROFILES, LintOptions, load_project, run_lint


def assert_lints_clean(serve_args: list[str]) -> None:
    """`serve_args` as the module serves them (SPEC, then --overlay FILE ...): no finding left unsuppressed,
    for every client profile but Gemini's (docs/authoring.md: its schema subset)."""
    overlays = [serve_args[i + 1] for i, a in enumerate(serve_args) if a == "--overlay"]
    clients = tuple(p for p in PROFILES if p != "gemini-api")
    report = run_lint(load_project(serve_args[0], overlays), LintOptions(clients=clients))
    assert report.active == [], "\n".join(f"{f.where} {f.rule.id} {f.message}" for f in report.active)
    assert all(f.suppressed for f in report.findings)  # what is suppressed says why
