"""The review catalog (`openapi2mcp docs`): what an agent may do with a server, for the people who approve it.

    catalog = build_catalog(manifest, unexposed)   # unexposed: the compile result's, None from a Manifest
    render_html(catalog)  /  render_markdown(catalog)

A summary by risk level, then every listed tool with what it calls (method and path, per action or
variant), its arguments (name, type, required, description, bounds), side effects, permissions,
confirmation and dry run, and failure modes (the tool contract, manifest/contract.py, as a server
without serving flags lists it); then the forbidden tools and the operations the overlay does not
expose. The HTML is one self-contained file (inline CSS, no script, no external asset). Spec and
overlay text is untrusted: every value is escaped for the format it goes into. The output is
deterministic: no clock, everything in Manifest order.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, Final

from pydantic import BaseModel, ConfigDict

from openapi2mcp.compiler import Unexposed
from openapi2mcp.errors import InputError
from openapi2mcp.manifest import RISK_ORDER, Manifest, ToolSpec, tool_contract

RISKS: Final = ("low", "medium", "high", "critical", "forbidden")
_BOUNDS: Final = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
                  "pattern", "format", "minItems", "maxItems", "uniqueItems", "multipleOf")
_ENUM_SHOWN: Final = 12  # enum values listed before "... N more"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class Argument(_Model):
    name: str
    type: str
    required: bool
    description: str
    bounds: list[str]


class Call(_Model):
    """One way the tool runs: an action, a variant or the tool itself, and the requests it sends."""

    label: str  # "action create", "variant when petId", "" for a single-branch tool
    requests: list[str]  # "GET /pets/{petId}", in step order
    risk: str
    confirmation: str
    dry_run: str
    side_effects: list[str]


class ToolEntry(_Model):
    name: str
    title: str | None
    description: str
    contract: dict[str, Any]  # the wire contract (tool_contract(...).wire())
    calls: list[Call]
    arguments: list[Argument]


class Forbidden(_Model):
    name: str
    requests: list[str]


class Catalog(_Model):
    server: str
    title: str | None
    version: str
    generator: str
    manifest: str  # its content hash
    sources: list[str]
    upstream: str
    tools: list[ToolEntry]
    forbidden: list[Forbidden]
    unexposed: list[Unexposed] | None  # None: not known (from a Manifest alone)

    def counts(self) -> dict[str, int]:
        """Listed tools per risk level, and the forbidden ones."""
        out = dict.fromkeys(RISKS, 0)
        for tool in self.tools:
            out[tool.contract["risk"]] += 1
        out["forbidden"] = len(self.forbidden)
        return out


# ============================================================================ the data


def build_catalog(manifest: Manifest, unexposed: Sequence[Unexposed] | None) -> Catalog:
    listed = [t for t in manifest.tools if t.risk != "forbidden"]
    return Catalog(
        server=manifest.server.name, title=manifest.server.title, version=manifest.server.version,
        generator=manifest.generator, manifest=manifest.content_hash or "(unsealed)",
        sources=[f"{s.name} ({s.kind}, sha256 {s.sha256[:12]})" for s in manifest.sources],
        upstream=manifest.upstream.base_url,
        tools=[_entry(t) for t in listed],
        forbidden=[Forbidden(name=t.name, requests=_requests(t.branches)) for t in manifest.tools
                   if t.risk == "forbidden"],
        unexposed=list(unexposed) if unexposed is not None else None,
    )


def _requests(branches: Iterable[Any]) -> list[str]:
    return list(dict.fromkeys(f"{s.operation.method} {s.operation.path}" for b in branches for s in b.steps))


def _entry(tool: ToolSpec) -> ToolEntry:
    contract = tool_contract(tool).wire()
    live = [b for b in tool.branches if b.risk != "forbidden"]
    parts: list[dict[str, Any]] = (list(contract["actions"].values()) if "actions" in contract
                                   else contract.get("variants") or [contract])
    calls = []
    for branch, part in zip(live, parts, strict=True):
        if tool.dispatch == "action":
            label = f"{tool.action_arg}: {branch.key}"
        elif tool.dispatch == "presence":
            label = "when " + " and ".join(branch.when) + " given" if branch.when else "otherwise"
        else:
            label = ""
        calls.append(Call(label=label, requests=[f"{s.operation.method} {s.operation.path}" for s in branch.steps],
                          risk=part["risk"], confirmation=part["confirmation"], dry_run=part["dryRun"],
                          side_effects=part["sideEffects"]))
    return ToolEntry(name=tool.name, title=tool.title, description=tool.description, contract=contract, calls=calls,
                     arguments=_arguments(tool.input_schema))


def _arguments(schema: dict[str, Any]) -> list[Argument]:
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return []
    required = set(schema.get("required") or [])
    defs = schema.get("$defs") or {}
    out = []
    for name, prop in properties.items():
        node = _resolve(prop, defs) if isinstance(prop, dict) else {}
        description = node.get("description") or (prop.get("description") if isinstance(prop, dict) else None)
        out.append(Argument(name=name, type=_type(node, defs), required=name in required,
                            description=str(description or ""), bounds=_bounds(node)))
    return out


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = defs.get(ref.removeprefix("#/$defs/"))
        if isinstance(target, dict):
            return {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _type(node: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> str:
    """A short type: string, integer, array of string, one of (a | b), object."""
    if depth > 3:
        return "any"
    kind = node.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    if kind == "array":
        items = node.get("items")
        return "array of " + (_type(_resolve(items, defs), defs, depth + 1) if isinstance(items, dict) else "any")
    if isinstance(kind, str):
        return kind
    for key in ("anyOf", "oneOf"):
        options = node.get(key)
        if isinstance(options, list):
            return " | ".join(dict.fromkeys(_type(_resolve(o, defs), defs, depth + 1) for o in options
                                            if isinstance(o, dict)))
    if "const" in node:
        return "constant"
    if "enum" in node:
        return "enum"
    return "any"


def _bounds(node: dict[str, Any]) -> list[str]:
    out = [f"{key} {_json(node[key])}" for key in _BOUNDS if key in node]
    enum = node.get("enum")
    if isinstance(enum, list):
        shown = ", ".join(_json(v) for v in enum[:_ENUM_SHOWN])
        more = f", ... {len(enum) - _ENUM_SHOWN} more" if len(enum) > _ENUM_SHOWN else ""
        out.append(f"one of {shown}{more}")
    if "const" in node:
        out.append(f"always {_json(node['const'])}")
    if "default" in node:
        out.append(f"default {_json(node['default'])}")
    return out


def _joined(effects: Iterable[str]) -> str:
    """Side effects on one line: "Adds a pet; notifies the owner" (their own final stops dropped)."""
    return "; ".join(e.strip().rstrip(".") for e in effects if e.strip())


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _approval(contract: dict[str, Any]) -> str:
    if contract["autonomous"]:
        return "autonomous"
    return {"required": "user confirms", "autoApproved": "auto-approved", "none": "not autonomous"}[
        contract["confirmation"]]


def _heading(c: Catalog) -> str:
    return f"{c.title or c.server}: what an agent may do"


def _summary_line(c: Catalog) -> str:
    autonomous = sum(1 for t in c.tools if t.contract["autonomous"])
    confirmed = sum(1 for t in c.tools if t.contract["confirmation"] != "none")
    dry = sum(1 for t in c.tools if t.contract["dryRun"] != "none")
    hidden = "not known (built from a Manifest)" if c.unexposed is None else str(len(c.unexposed))
    return (f"{len(c.tools)} tools listed: {autonomous} autonomous, {confirmed} with the user's confirmation, "
            f"{dry} with a dry run; {len(c.forbidden)} forbidden (never listed); operations not exposed: {hidden}.")


_NOTE: Final = ("The contract is the one a server started without --auto-approve, --state, --audit-log or "
                "--rate-limit lists; those flags add to it (docs/contract.md).")


# ============================================================================ HTML


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


_CSS: Final = """
:root{--ink:#1d2330;--muted:#5b6475;--line:#d9dee7;--soft:#f5f7fa;--accent:#24527a}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:var(--ink);background:#fff}
main{max-width:1180px;margin:0 auto;padding:32px 28px 64px}
h1{font-size:26px;margin:0 0 4px}h2{font-size:20px;margin:40px 0 12px;padding-bottom:6px;
border-bottom:2px solid var(--line)}h3{font-size:17px;margin:0}h3 code{font-size:16px}
p{margin:6px 0}.muted{color:var(--muted)}code,.mono{font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
table{border-collapse:collapse;width:100%;margin:8px 0 16px}
th,td{border:1px solid var(--line);padding:6px 9px;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600;font-size:13px;text-transform:uppercase;letter-spacing:.03em;color:var(--muted)}
tbody tr:nth-child(even) td{background:#fbfcfd}
.risk{display:inline-block;min-width:70px;text-align:center;padding:1px 8px;border-radius:10px;font-size:12px;
font-weight:700;text-transform:uppercase;letter-spacing:.04em;color:#fff}
.risk-low{background:#2f7d4f}.risk-medium{background:#2a6f97}.risk-high{background:#b7791f}
.risk-critical{background:#b42318}.risk-forbidden{background:#343a46}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin:16px 0}
.card{flex:1 1 120px;border:1px solid var(--line);border-radius:8px;padding:10px 14px;background:var(--soft)}
.card b{display:block;font-size:24px}
section.tool{border:1px solid var(--line);border-radius:8px;padding:16px 18px;margin:18px 0;page-break-inside:avoid}
.tool header{display:flex;gap:12px;align-items:center;flex-wrap:wrap;margin-bottom:6px}
.desc{white-space:pre-line;color:#2b3240}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px;margin:10px 0}
dl.facts dt{color:var(--muted);font-weight:600}dl.facts dd{margin:0}
ul{margin:4px 0 4px 20px;padding:0}
.retry{color:#2f7d4f;font-weight:600}.final{color:var(--muted)}
footer{margin-top:48px;color:var(--muted);font-size:13px}
@media print{main{padding:0}section.tool{break-inside:avoid}}
"""


def render_html(c: Catalog) -> str:
    out = ['<!DOCTYPE html>', '<html lang="en">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           # no script, no remote anything: a catalog can be opened from a mail attachment safely
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
           f"<title>{_e(_heading(c))}</title>", f"<style>{_CSS}</style>", "</head>", "<body><main>",
           f"<h1>{_e(_heading(c))}</h1>",
           f'<p class="muted">{_e(c.server)} {_e(c.version)} &middot; upstream <code>{_e(c.upstream)}</code></p>',
           f"<p>{_e(_summary_line(c))}</p>", _html_summary(c), _html_index(c), "<h2>Tools</h2>",
           f'<p class="muted">{_e(_NOTE)}</p>']
    out += [_html_tool(t) for t in c.tools]
    out.append(_html_forbidden(c))
    out.append(_html_unexposed(c))
    out.append(f"<footer>Manifest <code>{_e(c.manifest)}</code> &middot; {_e(c.generator)} &middot; from "
               f"{_e('; '.join(c.sources))}</footer>")
    out.append("</main></body></html>")
    return "\n".join(out) + "\n"


def _badge(risk: str) -> str:
    return f'<span class="risk risk-{_e(risk)}">{_e(risk)}</span>'


def _html_summary(c: Catalog) -> str:
    counts = c.counts()
    cards = "".join(f'<div class="card" data-risk="{_e(r)}">{_badge(r)}<b>{counts[r]}</b>'
                    f'{"tool" if counts[r] == 1 else "tools"}</div>' for r in RISKS)
    return f'<h2>Summary by risk level</h2><div class="cards">{cards}</div>'


def _most_risky_first(c: Catalog) -> list[ToolEntry]:
    """The tools by risk, highest first, each risk in catalog order (a stable sort: no index lookups, which
    compared models pairwise and made an 11,422-tool catalog take minutes)."""
    return sorted(c.tools, key=lambda t: -RISK_ORDER[t.contract["risk"]])


def _html_index(c: Catalog) -> str:
    rows = []
    for t in _most_risky_first(c):
        k = t.contract
        effects = _joined(k["sideEffects"]) or "none"
        rows.append(f'<tr class="tool-row" data-tool="{_e(t.name)}"><td><a href="#tool-{_e(t.name)}"><code>'
                    f"{_e(t.name)}</code></a></td><td>{_badge(k['risk'])}</td><td>{_e(_approval(k))}</td>"
                    f"<td>{_e(k['dryRun'])}</td><td>{_e(effects)}</td><td>{_e(', '.join(k['permissions']) or '-')}"
                    "</td></tr>")
    head = ("<tr><th>Tool</th><th>Risk</th><th>Approval</th><th>Dry run</th><th>Side effects</th>"
            "<th>Permissions</th></tr>")
    return (f'<h2>All tools, most risky first</h2><table id="tools"><thead>{head}</thead><tbody>{"".join(rows)}'
            "</tbody></table>")


def _html_tool(t: ToolEntry) -> str:
    k = t.contract
    facts = [
        ("Approval", _approval(k) + ("" if k["autonomous"] else f" (confirmation: {k['confirmation']})")),
        ("Dry run", k["dryRun"]), ("Idempotency", k["idempotency"]),
        ("Permissions", ", ".join(k["permissions"]) or "none"), ("Step-up scope", k["stepUp"] or "none"),
        ("Category", k["category"] or "-"), ("Audit event", k["auditEvent"] or "-"),
    ]
    dl = "".join(f"<dt>{_e(a)}</dt><dd>{_e(b)}</dd>" for a, b in facts)
    effects = "".join(f"<li>{_e(e)}</li>" for e in k["sideEffects"]) or "<li>none</li>"
    calls = "".join(
        f"<tr><td>{_e(call.label or '-')}</td><td>{_html_requests(call.requests)}</td>"
        f"<td>{_badge(call.risk)}</td><td>{_e(call.confirmation)}</td><td>{_e(call.dry_run)}</td>"
        f"<td>{_e(_joined(call.side_effects) or '-')}</td></tr>" for call in t.calls)
    args = "".join(
        f"<tr><td><code>{_e(a.name)}</code></td><td>{_e(a.type)}</td><td>{'yes' if a.required else 'no'}</td>"
        f"<td>{_e(a.description)}</td><td>{_e('; '.join(a.bounds) or '-')}</td></tr>" for a in t.arguments)
    failures = ", ".join(
        f'<code class="{"retry" if retry else "final"}">{_e(code)}</code>' + (" (retryable)" if retry else "")
        for code, retry in _all_failures(k))
    title = f' <span class="muted">{_e(t.title)}</span>' if t.title else ""
    return (f'<section class="tool" id="tool-{_e(t.name)}" data-tool="{_e(t.name)}"><header><h3><code>{_e(t.name)}'
            f"</code>{title}</h3>{_badge(k['risk'])}</header>"
            f'<p class="desc">{_e(t.description)}</p><dl class="facts">{dl}</dl>'
            f"<p><b>Side effects</b></p><ul>{effects}</ul>"
            "<p><b>What it calls</b></p><table><thead><tr><th>Action / variant</th><th>Requests</th><th>Risk</th>"
            f"<th>Confirmation</th><th>Dry run</th><th>Side effects</th></tr></thead><tbody>{calls}</tbody></table>"
            "<p><b>Arguments</b></p>"
            + (f"<table><thead><tr><th>Name</th><th>Type</th><th>Required</th><th>Description</th><th>Bounds</th></tr>"
               f"</thead><tbody>{args}</tbody></table>" if args else "<p class=\"muted\">none</p>")
            + f"<p><b>Failure modes</b></p><p>{failures}</p></section>")


def _html_requests(requests: Iterable[str]) -> str:
    return "<br>".join(f"<code>{_e(r)}</code>" for r in requests)


def _all_failures(contract: dict[str, Any]) -> list[tuple[str, bool]]:
    """Every code the tool can return (its own and its branches'), sorted; retryable when any says so."""
    found: dict[str, bool] = dict(contract["failureModes"])
    for part in [*(contract.get("actions") or {}).values(), *(contract.get("variants") or [])]:
        for code, retry in part["failureModes"].items():
            found[code] = found.get(code, False) or retry
    return sorted(found.items())


def _html_forbidden(c: Catalog) -> str:
    if not c.forbidden:
        return "<h2>Forbidden tools</h2><p class=\"muted\">None.</p>"
    rows = "".join(f"<tr><td><code>{_e(f.name)}</code></td><td>{_html_requests(f.requests)}</td></tr>"
                   for f in c.forbidden)
    return ("<h2>Forbidden tools</h2><p>Never listed to an agent and never callable (seed 002: a hard "
            f'boundary).</p><table id="forbidden"><thead><tr><th>Tool</th><th>Requests</th></tr></thead><tbody>{rows}'
            "</tbody></table>")


def _html_unexposed(c: Catalog) -> str:
    if c.unexposed is None:
        return ("<h2>Operations not exposed</h2><p class=\"muted\">Not known: a Manifest records only what it serves. "
                "Run <code>openapi2mcp docs SPEC --overlay FILE</code> to list them.</p>")
    if not c.unexposed:
        return "<h2>Operations not exposed</h2><p class=\"muted\">None: every operation of the spec is used.</p>"
    rows = "".join(f"<tr><td><code>{_e(u.method)} {_e(u.path)}</code></td><td><code>{_e(u.id)}</code></td>"
                   f"<td>{_e(u.summary or '')}</td></tr>" for u in c.unexposed)
    return (f"<h2>Operations not exposed ({len(c.unexposed)})</h2><p>In the spec, but no tool or resource calls "
            f'them.</p><table id="unexposed"><thead><tr><th>Request</th><th>Operation</th><th>Summary</th></tr>'
            f"</thead><tbody>{rows}</tbody></table>")


# ============================================================================ Markdown

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#])")


def _m(value: Any) -> str:
    """Text for one Markdown line or table cell: markup and raw HTML escaped, line breaks folded."""
    text = html.escape(str(value), quote=False)  # <script> is shown, never run by a renderer that allows HTML
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return " ".join(text.split())


def _m_code(value: Any) -> str:
    text = " ".join(str(value).split()).replace("`", "'").replace("|", "\\|")  # GFM: a pipe ends a cell
    return f"`{text}`" if text else ""


def render_markdown(c: Catalog) -> str:
    counts = c.counts()
    out = [f"# {_m(_heading(c))}", "", f"{_m(c.server)} {_m(c.version)}, upstream {_m_code(c.upstream)}", "",
           _m(_summary_line(c)), "", "## Summary by risk level", "", "| Risk | Tools |", "|---|---:|"]
    out += [f"| {r} | {counts[r]} |" for r in RISKS]
    out += ["", "## All tools, most risky first", "",
            "| Tool | Risk | Approval | Dry run | Side effects | Permissions |", "|---|---|---|---|---|---|"]
    for t in _most_risky_first(c):
        k = t.contract
        out.append(f"| {_m_code(t.name)} | {k['risk']} | {_approval(k)} | {k['dryRun']} | "
                   f"{_m(_joined(k['sideEffects']) or 'none')} | {_m(', '.join(k['permissions']) or '-')} |")
    out += ["", "## Tools", "", _m(_NOTE), ""]
    for t in c.tools:
        out += _md_tool(t)
    out += ["## Forbidden tools", ""]
    if c.forbidden:
        out += ["Never listed to an agent and never callable.", "", "| Tool | Requests |", "|---|---|"]
        out += [f"| {_m_code(f.name)} | {'<br>'.join(_m_code(r) for r in f.requests)} |" for f in c.forbidden]
    else:
        out.append("None.")
    out += ["", "## Operations not exposed", ""]
    if c.unexposed is None:
        out.append("Not known: a Manifest records only what it serves. Run `openapi2mcp docs SPEC --overlay FILE` to "
                   "list them.")
    elif not c.unexposed:
        out.append("None: every operation of the spec is used.")
    else:
        out += [f"{len(c.unexposed)} operations of the spec that no tool or resource calls.", "",
                "| Request | Operation | Summary |", "|---|---|---|"]
        out += [f"| {_m_code(u.method + ' ' + u.path)} | {_m_code(u.id)} | {_m(u.summary or '')} |"
                for u in c.unexposed]
    out += ["", "---", "", f"Manifest {_m_code(c.manifest)}, {_m(c.generator)}, from {_m('; '.join(c.sources))}", ""]
    return "\n".join(out)


def _md_tool(t: ToolEntry) -> list[str]:
    k = t.contract
    approval = _approval(k) + ("" if k["autonomous"] else f" (confirmation: {k['confirmation']})")
    out = [f"### {_m_code(t.name)}" + (f" {_m(t.title)}" if t.title else ""), "",
           f"**Risk {k['risk']}**, {approval}; dry run: {k['dryRun']}; idempotency: {k['idempotency']}", ""]
    out += [f"> {_m(line)}" if line.strip() else ">" for line in t.description.splitlines()]
    out += ["", f"- Permissions: {_m(', '.join(k['permissions']) or 'none')}",
            f"- Step-up scope: {_m(k['stepUp'] or 'none')}",
            f"- Category: {_m(k['category'] or '-')}", f"- Audit event: {_m(k['auditEvent'] or '-')}",
            f"- Side effects: {_m(_joined(k['sideEffects']) or 'none')}", "", "What it calls:", "",
            "| Action / variant | Requests | Risk | Confirmation | Dry run | Side effects |",
            "|---|---|---|---|---|---|"]
    out += [f"| {_m(call.label or '-')} | {'<br>'.join(_m_code(r) for r in call.requests)} | {call.risk} | "
            f"{call.confirmation} | {call.dry_run} | {_m(_joined(call.side_effects) or '-')} |" for call in t.calls]
    out += ["", "Arguments:", ""]
    if t.arguments:
        out += ["| Name | Type | Required | Description | Bounds |", "|---|---|---|---|---|"]
        out += [f"| {_m_code(a.name)} | {_m(a.type)} | {'yes' if a.required else 'no'} | {_m(a.description)} | "
                f"{_m('; '.join(a.bounds) or '-')} |" for a in t.arguments]
    else:
        out.append("none")
    failures = ", ".join(f"{_m_code(code)}" + (" (retryable)" if retry else "") for code, retry in _all_failures(k))
    out += ["", f"Failure modes: {failures}", ""]
    return out


def catalog_files(manifest: Manifest, unexposed: Sequence[Unexposed] | None) -> dict[str, str]:
    """The catalog as the files `openapi2mcp build` puts into a package (catalog.html and catalog.md)."""
    catalog = build_catalog(manifest, unexposed)
    return {"catalog.html": render_html(catalog), "catalog.md": render_markdown(catalog)}


def render(c: Catalog, fmt: str) -> str:
    """The catalog as `html` or `md`."""
    return render_html(c) if fmt == "html" else render_markdown(c)


def catalog_format(path: str | None, given: str | None) -> str:
    """`html` or `md`: `--format`, else the output file's extension (.html/.htm, .md/.markdown), else md."""
    if given:
        return given
    suffix = path.rsplit(".", 1)[-1].lower() if path and "." in path else ""
    if suffix in ("html", "htm"):
        return "html"
    if suffix in ("md", "markdown") or not path or path == "-":
        return "md"
    raise InputError.at(f"cannot tell the catalog's format from {path!r}",
                        hint="name it .html or .md, or pass --format html|md")
