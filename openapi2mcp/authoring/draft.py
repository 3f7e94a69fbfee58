"""`openapi2mcp init`: a draft curated overlay that compiles as is, and its summary.

    draft_overlay(spec, max_tools=30, name="overlay.yaml") -> Draft(text, summary, manifest)

1. The raw conversion (every operation 1:1) gives the arguments as the compiler names them and
   the baseline size (facts.py).
2. Operations are grouped by resource into `_find` / `_manage` tools (grouping.py, tools.py);
   forbidden-looking ones become `risk: forbidden` entries, administrative, deprecated and
   HEAD/OPTIONS/TRACE operations are left out with the reason (risk.py).
3. The tools are ranked and the first `max_tools` kept (ranking.py); the others' operations are
   listed as not exposed, with the tool they would have been.
4. The draft is written (writer.py) and compiled with the real compiler. What it refuses is
   repaired, each repair stated in a comment: a paging or `select` guess is dropped, a `params`
   entry removed, an action or variant that does not fit its tool moved into a tool of its own, and
   an operation that still does not compile listed as not exposed with the compiler's message.
   So the file written always compiles, with `inspect`, `compile` and `serve` alike.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from openapi2mcp.authoring.facts import Op, read_ops
from openapi2mcp.authoring.grouping import NON_TASK_METHODS, Placed, group, subtree_sizes
from openapi2mcp.authoring.ranking import rank
from openapi2mcp.authoring.risk import admin_reason, forbidden_reason
from openapi2mcp.authoring.setup import draft_setup
from openapi2mcp.authoring.shaping import Shape
from openapi2mcp.authoring.specdoc import SpecDoc
from openapi2mcp.authoring.tools import (
    Tool,
    Use,
    action_name,
    build_tools,
    describe,
    fill_units,
    forbidden_tool,
    labels,
)
from openapi2mcp.authoring.writer import NotExposed, render
from openapi2mcp.compiler import compile_manifest
from openapi2mcp.errors import InputError, Problem
from openapi2mcp.overlay import parse_overlay

if TYPE_CHECKING:
    from openapi2mcp.loader import LoadedSpec
    from openapi2mcp.manifest import Manifest

DEFAULT_MAX_TOOLS = 30
MAX_ROUNDS = 25
TOOL_BUDGET = 12_000  # bytes of one tool's definition in tools/list: larger ones lose their largest optional arguments
REQUIRED_LIMIT = 16_000  # bytes of a required argument's schema (the raw conversion's input budget)
_WHERE = re.compile(r"^tools\[(\d+)\](?:\([^)]*\))?(.*)$")
# the compiler's words for an argument two branches of one tool cannot share
_PAIR = re.compile(r"in (?:action|variant) '([^']+)' and (?:action|variant) '([^']+)'")
_CLASH = re.compile(r"argument '([^']+)' means different things|has an argument called '([^']+)', which is the "
                    r"argument")


@dataclass
class Summary:
    """What the draft holds, and what it saves against the raw conversion."""

    spec: str
    title: str
    operations: int
    covered: int  # operations an exposed tool uses
    tools: int  # listed (exposed) tools
    forbidden: int
    not_exposed: int
    listed_bytes: int
    raw_bytes: int
    tool_names: list[str] = field(default_factory=list)
    repairs: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)  # per listed tool: name, risk, operations, bytes

    @property
    def listed_tokens(self) -> int:
        return tokens(self.listed_bytes)

    @property
    def raw_tokens(self) -> int:
        return tokens(self.raw_bytes)

    @property
    def ratio(self) -> float:
        return round(self.raw_bytes / self.listed_bytes, 1) if self.listed_bytes else 0.0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(listed_tokens=self.listed_tokens, raw_tokens=self.raw_tokens, ratio=self.ratio)
        return data


@dataclass
class Draft:
    text: str
    summary: Summary
    manifest: Manifest


def tokens(size: int) -> int:
    """The estimate `inspect` prints: bytes / 4."""
    return max(1, round(size / 4))


def listing_bytes(manifest: Manifest) -> int:
    """The size of tools/list as a client receives it (forbidden tools are never listed)."""
    definitions = [t.definition() for t in manifest.tools if t.risk != "forbidden"]
    return len(json.dumps({"tools": definitions}, ensure_ascii=False).encode())


def draft_overlay(spec: LoadedSpec, *, max_tools: int = DEFAULT_MAX_TOOLS, name: str = "overlay.yaml") -> Draft:
    """Draft an overlay for `spec`; InputError when the spec cannot be used at all."""
    if max_tools < 1:
        raise InputError.at(f"--max-tools must be at least 1, got {max_tools}")
    raw = compile_manifest(spec, all_operations=True).manifest
    doc = SpecDoc(spec.document)
    ops, skipped = read_ops(doc, raw)
    hidden = [NotExposed(key, key, why, "skipped by the compiler") for key, why in skipped]
    candidates: list[Tool] = []
    forbidden: list[Tool] = []
    for resource in group(ops, doc):
        reads: list[Placed] = []
        writes: list[Placed] = []
        for p in resource.placed:
            bad = forbidden_reason(p.op) if p.op.method not in NON_TASK_METHODS else None
            why = _left_out(p.op)
            if bad is not None:
                forbidden.append(forbidden_tool(p, resource, bad))
            elif why is not None:
                hidden.append(NotExposed(p.op.ref, p.op.key, why[1], why[0]))
            else:
                (reads if p.read else writes).append(p)
        candidates.extend(build_tools(resource, reads, writes, doc))
    _unique_names([*candidates, *forbidden])
    ranked = rank(candidates, subtree_sizes(group(ops, doc)))
    exposed, over = ranked[:max_tools], ranked[max_tools:]
    hidden.extend(_over(over, max_tools))
    setup = draft_setup(spec.document, raw, ops)
    repairs = 0
    for round_ in range(MAX_ROUNDS):
        _finish(setup.server, exposed)
        text = render(setup, exposed, forbidden, hidden, header=[], sha256=spec.sha256)
        try:
            compiled = compile_manifest(spec, [parse_overlay(text, name)]).manifest
        except InputError as e:
            drastic = round_ >= MAX_ROUNDS - 3  # still failing: leave the failing tools out whole
            fixed = _repair(e.problems, exposed, forbidden, hidden, setup.upstream, drastic=drastic)
            if not fixed:
                raise
            repairs += fixed
            extra = len(exposed) - max_tools
            if extra > 0:  # splits made more tools than asked for: the lowest ranked go
                exposed.sort(key=lambda t: (-t.score, t.name))
                hidden.extend(_over(exposed[max_tools:], max_tools))
                del exposed[max_tools:]
            continue
        trimmed = _trim(compiled, exposed, hidden)
        if not trimmed:
            break
        repairs += trimmed
    else:
        raise InputError.at(f"the draft did not compile after {MAX_ROUNDS} rounds of repairs",
                            hint="this is a bug in openapi2mcp init; please report it with the spec")
    used = {op.key for t in exposed for op in t.ops}
    summary = Summary(
        spec=spec.source.rstrip("/").rsplit("/", 1)[-1], title=str(compiled.server.title or compiled.server.name),
        operations=len(ops) + len(skipped), covered=len(used), tools=len(exposed), forbidden=len(forbidden),
        not_exposed=len(hidden), listed_bytes=listing_bytes(compiled), raw_bytes=listing_bytes(raw),
        tool_names=[t.name for t in exposed], repairs=repairs, rows=_rows(compiled),
    )
    text = render(setup, exposed, forbidden, hidden, header=_header(summary, name, max_tools), sha256=spec.sha256)
    _check_accounting(ops, exposed, forbidden, hidden)
    return Draft(text=text, summary=summary, manifest=compiled)


def _rows(manifest: Manifest) -> list[dict[str, Any]]:
    return [{"name": t.name, "risk": t.risk, "operations": len({s.operation.id for b in t.branches for s in b.steps}),
             "bytes": len(json.dumps(t.definition(), ensure_ascii=False).encode())}
            for t in manifest.tools if t.risk != "forbidden"]


def _left_out(op: Op) -> tuple[str, str] | None:
    """(group, reason) of an operation the draft does not use, or None."""
    if op.method in NON_TASK_METHODS:
        return "protocol-level methods", f"{op.method} is part of HTTP, not a task"
    admin = admin_reason(op)
    if admin is not None:
        return "administrative", admin
    if op.deprecated:
        return "deprecated", "deprecated in the spec"
    return None


def _unique_names(tools: list[Tool]) -> None:
    seen: set[str] = set()
    for t in tools:
        base = t.name[:56]  # room for a `_NNN` suffix within 64
        name, n = base, 2
        while name in seen:
            name, n = f"{base}_{n}", n + 1
        seen.add(name)
        t.name = name


def _over(tools: list[Tool], max_tools: int) -> list[NotExposed]:
    group = f"over --max-tools {max_tools} (ranked lower; raise --max-tools or add the tool by hand)"
    return [NotExposed(op.ref, op.key, f"would be {t.name} ({t.rank_why})", group) for t in tools for op in t.ops]


def _finish(server: dict[str, Any], exposed: list[Tool]) -> None:
    for t in exposed:
        fill_units(t)
    paged = any(u.paging is not None for t in exposed for u in t.uses)
    text = str(server.get("instructions") or "")
    sentence = " Lists come in pages: pass next_cursor back as `cursor` (same other arguments) to continue."
    text = text.replace(sentence, "")
    server["instructions"] = (text + sentence) if paged else text


def _header(s: Summary, name: str, max_tools: int) -> list[str]:
    prose = [
        f"A draft tool overlay for {s.title}, written by `openapi2mcp init` from {s.spec} (pinned below). "
        "It compiles as is; now read it and edit: descriptions, risk, hidden arguments, `select`, and which "
        "operations to expose. The comments say how each guess was made (docs/authoring.md).",
        f"{s.tools} tool(s) (at most {max_tools}) use {s.covered} of {s.operations} operations; {s.forbidden} "
        f"forbidden, {s.not_exposed} not exposed (listed at the end with the reason). tools/list: "
        f"{s.listed_bytes:,} bytes, ~{s.listed_tokens:,} tokens; the raw conversion (--all-operations): "
        f"{s.raw_bytes:,} bytes, ~{s.raw_tokens:,} tokens ({s.ratio:g}x).",
    ]
    wrapped = [textwrap.wrap(p, 96, break_long_words=False, break_on_hyphens=False) for p in prose]
    return [*wrapped[0], "",
            f"  openapi2mcp inspect {s.spec} --overlay {name}   # the tools exactly as a client sees them",
            f"  openapi2mcp serve {s.spec} --overlay {name}", "", *wrapped[1]]


# ============================================================================ repairs


def _repair(problems: list[Problem], exposed: list[Tool], forbidden: list[Tool], hidden: list[NotExposed],
            upstream: dict[str, Any], drastic: bool = False) -> int:
    """Change the draft so that these problems go away; the number of changes (0: none applied)."""
    tools = [*exposed, *forbidden]
    done = 0
    touched: set[int] = set()
    for problem in problems:
        where = problem.location.pointer or ""
        message = problem.message
        m = _WHERE.match(where)
        if m is None:
            if where.startswith("upstream.") and (key := where.split(".")[1]) in upstream and key != "base_url":
                del upstream[key]
                done += 1
            continue
        index, rest = int(m.group(1)), _parts(m.group(2))
        if index >= len(tools) or index in touched:
            continue  # one repair per tool and round (renames aside): its other problems may go with it
        if drastic:
            touched.add(index)
            for use in list(tools[index].uses):
                _drop(tools[index], use, f"the compiler said: {message}", exposed, forbidden, hidden)
            done += 1
            continue
        fixed = _rename(tools[index], rest, message)
        if not fixed:
            touched.add(index)
            fixed = _repair_tool(tools[index], rest, message, exposed, forbidden, hidden)
        done += fixed
    return done


def _parts(rest: str) -> list[str]:
    return [p for p in re.sub(r"\[(\d+)\]", r".\1", rest).split(".") if p]


def _branch(tool: Tool, parts: list[str]) -> tuple[Use | None, list[str]]:
    """The use a problem's key path is in, and the rest of the path."""
    if tool.dispatch == "single":
        return tool.uses[0], parts
    if parts[:1] == ["actions"] and len(parts) > 1:
        return next((u for u in tool.uses if u.label == parts[1]), None), parts[2:]
    if parts[:1] == ["variants"] and len(parts) > 1 and parts[1].isdigit() and int(parts[1]) < len(tool.uses):
        return tool.uses[int(parts[1])], parts[2:]
    return None, parts


def _rename(tool: Tool, parts: list[str], message: str) -> int:
    """An argument two branches of one tool cannot share: this branch's gets a name of its own."""
    clash = _CLASH.search(message)
    name = (clash.group(1) or clash.group(2)) if clash else ""
    if not name or tool.dispatch == "single":
        return 0
    here, _ = _branch(tool, parts)
    pair = _PAIR.search(message)
    other = pair.group(1) if pair else None  # the first branch the message names
    candidates = [here, *(u for u in tool.uses if other in (u.label, u.op.ref))]
    for use in candidates:  # this branch's own argument, or else the other's (the paging's `limit` is no one's)
        if use is None or name not in use.visible_args() or "rename" in use.params.get(name, {}):
            continue
        use.params[name] = {**use.params.get(name, {}), "rename": f"{use.label}_{name}"}
        use.param_why[name] = "renamed: " + ("`action` picks the action" if name == "action" else
                                             "another branch's argument of this name means something else")
        return 1
    return 0


def _repair_tool(tool: Tool, parts: list[str], message: str, exposed: list[Tool], forbidden: list[Tool],
                 hidden: list[NotExposed]) -> int:
    why = f"the compiler said: {message}"
    use, sub = _branch(tool, parts)
    if parts[:1] == ["units"]:
        named = re.search(r"unit for '([^']+)'", message)
        if named and named.group(1) not in tool.refused_units:
            tool.refused_units.add(named.group(1))
            tool.notes.append(f"unit of {named.group(1)} dropped ({why})")
        else:
            tool.units_off = True
            tool.notes.append(f"units dropped ({why})")
        return 1
    if use is None:
        if tool.forbidden or len(tool.uses) == 1:
            _drop(tool, tool.uses[0], why, exposed, forbidden, hidden)
        else:
            _split(tool, exposed, why)
        return 1
    if sub[:1] == ["pagination"] and use.paging is not None:
        use.paging = None
        use.paging_why = ""
        use.shape = Shape(None)
        use.notes.append(f"paging guess dropped, and its per-item select ({why})")
        return 1
    if sub[:1] == ["response"] and use.shape.select:
        use.shape = Shape(None)
        use.notes.append(f"select guess dropped ({why})")
        return 1
    if sub[:1] == ["params"] and len(sub) > 1 and sub[1] in use.params:
        key = ".".join(sub[1:]) if ".".join(sub[1:]) in use.params else sub[1]
        use.params.pop(key, None)
        use.param_why.pop(key, None)
        use.notes.append(f"params.{key} dropped ({why})")
        return 1
    if tool.dispatch != "single":
        _move_out(tool, use, exposed, why)
        return 1
    if use.paging is not None or use.shape.select or use.params:
        use.paging, use.shape, use.params, use.param_why = None, Shape(None), {}, {}
        use.notes.append(f"paging, select and params guesses dropped ({why})")
        return 1
    _drop(tool, use, why, exposed, forbidden, hidden)
    return 1


def _trim(compiled: Manifest, exposed: list[Tool], hidden: list[NotExposed]) -> int:
    """Tools over TOOL_BUDGET bytes: hide their largest optional arguments until they fit (a model
    reads every tool's schema on every turn). An operation whose required argument alone is over
    REQUIRED_LIMIT (a Kubernetes object as the whole body) is left out. The number of changes."""
    by_name = {t.name: t for t in compiled.tools}
    done = 0
    for tool in list(exposed):
        spec = by_name.get(tool.name)
        if spec is None:
            continue
        size = len(json.dumps(spec.definition(), ensure_ascii=False).encode())
        if size <= TOOL_BUDGET:
            continue
        props = spec.input_schema.get("properties") or {}
        optional, required = _argument_owners(tool)
        costs = sorted(((len(json.dumps(schema, ensure_ascii=False).encode()), name) for name, schema in props.items()),
                       reverse=True)
        for cost, name in costs:
            if size <= TOOL_BUDGET or cost < 400:
                break
            if name in required and cost > REQUIRED_LIMIT:
                for use in required[name]:
                    _leave_out(tool, use, f"its required argument {name!r} alone has a {cost:,}-byte schema; expose "
                               "it by hand if a model must send that", exposed, hidden)
            elif name in optional:
                for use, arg in optional[name]:
                    use.params[arg] = {"hidden": True}
                    use.param_why[arg] = (f"hidden to keep the tool small: its schema is {cost:,} bytes (the tool "
                                          f"{size:,}); unhide it if a model needs it")
            else:
                continue
            size -= cost
            done += 1
    return done


def _argument_owners(tool: Tool) -> tuple[dict[str, list[tuple[Use, str]]], dict[str, list[Use]]]:
    """Served argument -> (the uses that take it optionally, with its name there), and -> the uses that
    require it. An argument some use requires cannot be hidden."""
    optional: dict[str, list[tuple[Use, str]]] = {}
    required: dict[str, list[Use]] = {}
    for use in tool.uses:
        for arg in use.visible_args():
            served = str(use.params.get(arg, {}).get("rename") or arg)
            if use.op.args[arg].required:
                required.setdefault(served, []).append(use)
            else:
                optional.setdefault(served, []).append((use, arg))
    return {k: v for k, v in optional.items() if k not in required}, required


def _leave_out(tool: Tool, use: Use, why: str, exposed: list[Tool], hidden: list[NotExposed]) -> None:
    """One operation out of its tool, into the not-exposed list."""
    if use not in tool.uses:
        return
    tool.uses.remove(use)
    hidden.append(NotExposed(use.op.ref, use.op.key, f"would be in {tool.name}, but {why}", "too large to draft"))
    _after_removal(tool, exposed)


def _drop(tool: Tool, use: Use, why: str, exposed: list[Tool], forbidden: list[Tool], hidden: list[NotExposed]) -> None:
    for pool in (exposed, forbidden):
        if tool in pool:
            pool.remove(tool)
    hidden.append(NotExposed(use.op.ref, use.op.key, f"would be {tool.name}, but {why}", "did not compile as drafted"))


def _split(tool: Tool, exposed: list[Tool], why: str) -> None:
    """A tool whose problem names no action or variant: each operation a tool of its own."""
    for use in list(tool.uses):
        _move_out(tool, use, exposed, why)


def _move_out(tool: Tool, use: Use, exposed: list[Tool], why: str) -> None:
    """Take one action or variant out of its tool, into a single-operation tool ranked just below."""
    tool.uses.remove(use)
    use.when = []
    label = use.label or action_name(use.placed.kind)
    taken = {t.name for t in exposed}
    base = f"{tool.resource.name}_{label}"[:56]
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    use.notes.append(f"moved out of {tool.name} ({why})")
    single = Tool(name, tool.resource, "single", [use], title=use.description[:60].rstrip(".") or name,
                  category=tool.category, read_only=use.placed.read and
                  use.op.method != "GET", why=f"moved out of {tool.name}: {why}", score=tool.score - 0.001,
                  rank_why=tool.rank_why)
    describe(single)
    position = exposed.index(tool) + 1 if tool in exposed else len(exposed)
    exposed.insert(position, single)
    _after_removal(tool, exposed)


def _after_removal(tool: Tool, exposed: list[Tool]) -> None:
    """A tool that lost an operation: gone when empty, single with one left, by action without its fallback."""
    if not tool.uses:
        if tool in exposed:
            exposed.remove(tool)
        return
    if len(tool.uses) == 1:
        tool.dispatch = "single"
        tool.uses[0].when = []
    elif tool.dispatch == "variants" and tool.uses[-1].when:  # the fallback left: pick by action instead
        tool.dispatch = "actions"
        for u in tool.uses:
            u.when = []
        labels(tool.uses, tool.resource)
    describe(tool)


def _check_accounting(ops: list[Op], exposed: list[Tool], forbidden: list[Tool], hidden: list[NotExposed]) -> None:
    """Every operation exactly once: in a tool, or in the not-exposed list (a bug otherwise)."""
    seen: dict[str, int] = {}
    for key in [op.key for t in [*exposed, *forbidden] for op in t.ops] + [h.key for h in hidden]:
        seen[key] = seen.get(key, 0) + 1
    wrong = sorted(k for k in {op.key for op in ops} if seen.get(k) != 1)
    if wrong:
        raise AssertionError(f"operations not accounted for exactly once: {', '.join(wrong[:5])}")
