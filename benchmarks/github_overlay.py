"""The curated GitHub overlay vs the raw conversion and FastMCP: tools/list bytes and result bytes.

    python benchmarks/github_overlay.py [--no-fastmcp] [--markdown] [--json FILE]

1. tools/list size (compact JSON, all pages, as a server sends it) of
   * openapi2mcp with overlays/github.yaml (the curated, task-level tools),
   * openapi2mcp --all-operations on the same spec (one tool per operation),
   * FastMCP 4.2.3 `FastMCP.from_openapi` on the same spec (in its own venv, created on first
     use by benchmarks/_common.py; --no-fastmcp skips it).
   Target: the overlay at least 100x smaller than the raw conversions.
2. Result size of typical calls. A local stand-in for api.github.com answers every request with
   the spec's own response `examples` (list examples, which hold one item, are repeated to the
   requested page size, with a Link header to a next page, as GitHub pages). The real Runtime
   serves the overlay tools against it; the table compares the upstream JSON (compact) with the
   tool's structured result (what the model reads). Target: at least 10x smaller.

Sizes are deterministic; nothing here is timed. Exit status 0 even when a target is missed (the
table says so); 2 when the corpus is missing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _common as c
from benchmarks._list_child import compact, served_tools

OVERLAY = c.ROOT / "overlays" / "github.yaml"
REPO = {"owner": "octocat", "repo": "Hello-World"}
PAGES = 3  # the stand-in offers this many pages of every list

# (tool, arguments, the operation that answers) — what a model typically does with these tools
CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("issues_find", {**REPO, "issue_number": 1347}, "issues/get"),
    ("issues_find", {**REPO, "state": "open", "limit": 20}, "issues/list-for-repo"),
    ("issues_comments", {**REPO, "issue_number": 1347, "limit": 20}, "issues/list-comments"),
    ("pulls_find", {**REPO, "pull_number": 1347}, "pulls/get"),
    ("pulls_find", {**REPO, "limit": 20}, "pulls/list"),
    ("pulls_files", {**REPO, "pull_number": 1347, "limit": 20}, "pulls/list-files"),
    ("repos_get", dict(REPO), "repos/get"),
    ("repos_content", {**REPO, "path": "README.md"}, "repos/get-content"),
    ("repos_commits", {**REPO, "limit": 20}, "repos/list-commits"),
    ("search_run", {"action": "issues", "q": "repo:octocat/Hello-World is:open", "limit": 20},
     "search/issues-and-pull-requests"),
    ("search_run", {"action": "code", "q": "addClass repo:jquery/jquery", "limit": 20}, "search/code"),
    ("actions_runs", {**REPO, "limit": 20}, "actions/list-workflow-runs-for-repo"),
    ("actions_runs", {**REPO, "run_id": 30433642}, "actions/get-workflow-run"),
    ("actions_jobs", {**REPO, "run_id": 30433642, "limit": 20}, "actions/list-jobs-for-workflow-run"),
]
LIST_KEYS = ("items", "workflow_runs", "jobs")


# ============================================================================ 1. tools/list


def overlay_listing(spec: Path) -> tuple[int, int, Any]:
    """(tools, bytes, manifest) of the overlay, every tools/list page joined, as the server sends it."""
    from openapi2mcp.compiler import compile_manifest
    from openapi2mcp.loader import load_spec
    from openapi2mcp.overlay import read_overlay
    from openapi2mcp.runtime import Runtime, RuntimeOptions

    manifest = compile_manifest(load_spec(str(spec)), [read_overlay(OVERLAY)]).manifest
    rt = Runtime(manifest, RuntimeOptions(environ={"OPENAPI2MCP_SIGNING_KEY": "benchmark-only-key-" + "x" * 20}))
    tools = served_tools(rt)
    return len(tools), len(compact({"tools": tools})), manifest


def raw_listing(mode: str, spec: Path, fm: c.FastMCPEnv, timeout: float) -> tuple[int | None, int | None, str]:
    """(tools, bytes, note) of a raw conversion, measured by benchmarks/_list_child.py in a fresh process."""
    child = str(c.BENCH / "_list_child.py")
    if mode == "fastmcp":
        if not fm.available or fm.python is None:
            return None, None, fm.note
        run = c.run_child([fm.python, child, "fastmcp", str(spec)], timeout=timeout, env=c.fastmcp_env_vars(),
                          result_file=True)
    else:
        run = c.run_child([sys.executable, child, "ours-runtime", str(spec)], timeout=timeout, env=c.our_env(),
                          result_file=True)
    if not run.ok:
        return None, None, f"failed: {run.error}"
    return run.result.get("tools"), run.result.get("bytes"), f"{run.wall:.1f} s, {run.rss_mb:,.0f} MB"


# ============================================================================ 2. results of typical calls


def resolve(document: dict[str, Any], node: Any, depth: int = 0) -> Any:
    """`{"$ref": "#/components/..."}` anywhere in an example, replaced by its target."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/") and depth < 20:
            target: Any = document
            for part in ref[2:].split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            return resolve(document, target, depth + 1)
        return {k: resolve(document, v, depth) for k, v in node.items()}
    if isinstance(node, list):
        return [resolve(document, v, depth) for v in node]
    return node


def operations(document: dict[str, Any]) -> dict[str, tuple[str, str, dict[str, Any]]]:
    out = {}
    for path, item in document["paths"].items():
        for method, op in item.items():
            if isinstance(op, dict) and "operationId" in op:
                out[op["operationId"]] = (method.upper(), path, op)
    return out


def _follow(document: dict[str, Any], node: Any) -> Any:
    """A node, or the target of its top-level $ref (nested refs stay)."""
    while isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/"):
        target: Any = document
        for part in node["$ref"][2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        node = target
    return node


def example_of(document: dict[str, Any], op: dict[str, Any]) -> Any:
    responses = op["responses"]
    response = _follow(document, responses.get("200") or responses.get("201"))
    examples = response["content"]["application/json"]["examples"]
    example = _follow(document, next(iter(examples.values())))  # an Example Object
    value = example["value"]
    if isinstance(value, dict) and str(value.get("$ref", "")).startswith("#/components/examples/"):
        value = _follow(document, value)["value"]  # GitHub's `value: {$ref: <an Example Object>}`
    return resolve(document, value)


def page_of(example: Any, per_page: int, total: int) -> Any:
    """A page of `per_page` items made from a one-item list example."""
    if isinstance(example, list):
        return [example[i % len(example)] for i in range(per_page)] if example else []
    out = dict(example)
    for key in LIST_KEYS:
        if isinstance(out.get(key), list) and out[key]:
            out[key] = [out[key][i % len(out[key])] for i in range(per_page)]
            if "total_count" in out:
                out["total_count"] = total
            return out
    return out


def stand_in(document: dict[str, Any], chosen: list[str]) -> tuple[Any, list[int]]:
    """A Starlette app that answers the chosen operations with their examples; records bytes sent."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    ops = operations(document)
    routes = []
    for op_id in chosen:
        method, path, op = ops[op_id]
        pattern = re.compile("^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(path)) + "$")
        listed = isinstance(example_of(document, op), list) or any(
            isinstance(example_of(document, op).get(k), list) for k in LIST_KEYS)
        routes.append((method, pattern, example_of(document, op), listed, len(path)))
    routes.sort(key=lambda r: -r[4])  # the most specific template first
    sent: list[int] = []

    async def answer(request: Request) -> Response:
        for method, pattern, example, listed, _ in routes:
            if method == request.method and pattern.match(request.url.path):
                headers = {}
                body = example
                if listed:
                    per_page = int(request.query_params.get("per_page", "30"))
                    page = int(request.query_params.get("page", "1"))
                    body = page_of(example, per_page, per_page * PAGES)
                    if page < PAGES:
                        query = dict(request.query_params) | {"page": str(page + 1)}
                        nxt = request.url.replace(query="&".join(f"{k}={v}" for k, v in query.items()))
                        headers["Link"] = f'<{nxt}>; rel="next"'
                data = compact(body)
                sent.append(len(data))
                return Response(data, media_type="application/json", headers=headers)
        return Response(b'{"message":"Not Found"}', status_code=404, media_type="application/json")

    return Starlette(routes=[Route("/{rest:path}", answer, methods=["GET"])]), sent


async def measure_calls(document: dict[str, Any], manifest: Any, spec: Path) -> list[dict[str, Any]]:
    from examples import Upstream
    from openapi2mcp.runtime import Runtime, RuntimeOptions

    app, sent = stand_in(document, sorted({op for _, _, op in CALLS}))
    rows = []
    with Upstream.serve(app, name="github-examples", spec_path=spec) as up:
        env = {"GITHUB_API_URL": up.base_url, "OPENAPI2MCP_SIGNING_KEY": "benchmark-only-key-" + "x" * 20}
        rt = Runtime(manifest, RuntimeOptions(environ=env))
        try:
            for tool, arguments, op_id in CALLS:
                before = len(sent)
                result = await rt.call(tool, arguments)
                raw = sum(sent[before:])
                wire = len(result.model_dump_json(by_alias=True, exclude_none=True).encode())
                row: dict[str, Any] = {"tool": tool, "operation": op_id, "raw": raw, "wire": wire,
                                       "requests": len(sent) - before}
                if result.is_error:
                    row["error"] = result.structured_content
                else:
                    row["result"] = len(compact(result.structured_content))
                    items = result.structured_content.get("items")
                    row["items"] = len(items) if isinstance(items, list) else None
                rows.append(row)
        finally:
            await rt.aclose()
    return rows


# ============================================================================ report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timeout", type=float, default=600, help="seconds before a child process is killed")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument("--json", metavar="FILE", help="also write the measurements as JSON")
    c.add_fastmcp_options(parser)
    args = parser.parse_args(argv)
    corpus = c.corpus_dir()
    if corpus is None:
        print("github_overlay: no corpus; set OPENAPI2MCP_CORPUS or put it at ../shared/corpus", file=sys.stderr)
        return 2
    spec = corpus / "github" / "api.github.com.json"

    started = time.perf_counter()
    tools, size, manifest = overlay_listing(spec)
    c.progress(f"overlay: {tools} tools, {c.fmt_bytes(size)} ({time.perf_counter() - started:.1f} s)")
    fm = c.fastmcp_env(args)
    raw_tools, raw_size, raw_note = raw_listing("ours", spec, fm, args.timeout)
    c.progress(f"--all-operations: {raw_tools} tools, {c.fmt_bytes(raw_size)} ({raw_note})")
    fm_tools, fm_size, fm_note = raw_listing("fastmcp", spec, fm, args.timeout)
    c.progress(f"FastMCP: {fm_tools} tools, {c.fmt_bytes(fm_size)} ({fm_note})")

    def times(other: int | None) -> str:
        return f"{other / size:,.0f}x" if other else "–"

    listing_rows = [
        ["openapi2mcp + overlays/github.yaml", tools, f"{size:,}", "1x", ""],
        ["openapi2mcp --all-operations", raw_tools or "–", f"{raw_size:,}" if raw_size else "–", times(raw_size),
         "" if raw_size else raw_note],
        [f"FastMCP from_openapi ({fm.note})", fm_tools or "–", f"{fm_size:,}" if fm_size else "–", times(fm_size),
         "" if fm_size else fm_note],
    ]
    print(f"\nGitHub REST API ({spec.name}), tools/list (compact JSON, all pages); {c.machine_line()}\n")
    print(c.table(["server", "tools", "tools/list bytes", "vs overlay", "note"], listing_rows,
                  markdown=args.markdown, left=1))
    worst = min(x for x in (raw_size, fm_size, 10**12) if x) / size
    print(f"\ntarget: >= 100x fewer bytes than the raw conversions: {'met' if worst >= 100 else 'NOT met'} "
          f"(smallest ratio {worst:,.0f}x)")

    import anyio

    document = json.loads(spec.read_bytes())
    calls = anyio.run(measure_calls, document, manifest, spec)
    call_rows = []
    ratios = []
    for row in calls:
        if "error" in row:
            call_rows.append([row["tool"], row["operation"], f"{row['raw']:,}", "error", "",
                              row["error"].get("code", "?"), ""])
            continue
        ratio = row["raw"] / row["result"]
        ratios.append(ratio)
        call_rows.append([row["tool"], row["operation"], f"{row['raw']:,}", f"{row['result']:,}", f"{ratio:,.1f}x",
                          f"{row['wire']:,}", row["items"] if row["items"] is not None else ""])
    print(f"\nTypical calls, the spec's response examples as upstream data (lists: {PAGES} pages of the requested "
          "size)\n")
    print(c.table(["tool", "upstream operation", "upstream JSON bytes", "result bytes", "smaller by",
                   "CallToolResult bytes", "items"], call_rows, markdown=args.markdown, left=2))
    if ratios:
        total_raw = sum(r["raw"] for r in calls if "result" in r)
        total_ours = sum(r["result"] for r in calls if "result" in r)
        geo = 1.0
        for r in ratios:
            geo *= r
        geo **= 1 / len(ratios)
        overall = total_raw / total_ours
        print(f"\nall calls: {total_raw:,} upstream bytes -> {total_ours:,} result bytes ({overall:,.1f}x smaller; "
              f"geometric mean {geo:,.1f}x, smallest {min(ratios):,.1f}x)")
        print(f"target: results >= 10x smaller than the upstream JSON: {'met' if overall >= 10 else 'NOT met'} "
              "(over all calls)")
        print("(result bytes: the structured content, as compact JSON; a CallToolResult carries it twice, as "
              "structuredContent and as text, plus _meta provenance)")
    if args.json:
        c.write_json(args.json, {
            "listing": {"overlay": {"tools": tools, "bytes": size}, "all_operations": {"tools": raw_tools,
                        "bytes": raw_size}, "fastmcp": {"tools": fm_tools, "bytes": fm_size, "note": fm_note}},
            "calls": calls,
        })
    return 0


if __name__ == "__main__":
    sys.exit(main())
