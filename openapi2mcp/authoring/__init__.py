"""The authoring stage: tools that help a person write and review an overlay (docs/authoring.md):
`init` drafts one from a spec, `lint` reviews it, `diff` says what a spec upgrade does to the tools,
`call` makes one tool call as a client does, `serve --reload` (Reloader) serves each saved edit,
`docs` renders the review catalog (catalog.py).

Used from outside only through these names; the modules are private to the package.
"""

from __future__ import annotations

from openapi2mcp.authoring.call import ERAS, Answer, Outcome, Question, Target, call_tool
from openapi2mcp.authoring.callargs import parse_arguments
from openapi2mcp.authoring.catalog import (
    Catalog,
    build_catalog,
    catalog_files,
    catalog_format,
    render,
    render_html,
    render_markdown,
)
from openapi2mcp.authoring.clients import PROFILES, ClientProfile
from openapi2mcp.authoring.diff import DiffReport, ToolDiff, diff_manifests, diff_specs, is_manifest, read_manifest
from openapi2mcp.authoring.draft import DEFAULT_MAX_TOOLS, Draft, Summary, draft_overlay
from openapi2mcp.authoring.lint import RULES, Finding, LintOptions, LintReport, Rule, Severity, run_lint
from openapi2mcp.authoring.project import load_project
from openapi2mcp.authoring.reload import Reloader
from openapi2mcp.authoring.sarif import to_sarif
from openapi2mcp.authoring.schemadiff import Change
from openapi2mcp.compiler import LoadOptions  # how the spec is read, as for compile

__all__ = [
    "DEFAULT_MAX_TOOLS",
    "ERAS",
    "PROFILES",
    "RULES",
    "Answer",
    "Catalog",
    "Change",
    "ClientProfile",
    "DiffReport",
    "Draft",
    "Finding",
    "LintOptions",
    "LintReport",
    "LoadOptions",
    "Outcome",
    "Question",
    "Reloader",
    "Rule",
    "Severity",
    "Summary",
    "Target",
    "ToolDiff",
    "build_catalog",
    "call_tool",
    "catalog_files",
    "catalog_format",
    "diff_manifests",
    "diff_specs",
    "draft_overlay",
    "is_manifest",
    "load_project",
    "parse_arguments",
    "read_manifest",
    "render",
    "render_html",
    "render_markdown",
    "run_lint",
    "to_sarif",
]
