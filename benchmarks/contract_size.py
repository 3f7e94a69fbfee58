"""What the tool contract (`_meta["openapi2mcp/contract"]`, docs/contract.md) adds to tools/list.

    python benchmarks/contract_size.py [--markdown]

For the bundled examples and the curated GitHub overlay (overlays/github.yaml, with the corpus's
api.github.com.json): the tools/list payload as the wire carries it (compact JSON, all pages
joined) with and without the contract, in bytes and in tokens estimated as bytes/4 (what `inspect`
and `lint --max-tokens` count). Sizes are deterministic: one run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `benchmarks` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openapi2mcp.compiler import compile_files
from openapi2mcp.manifest import CONTRACT_KEY
from tests.local import EXAMPLES, ROOT, corpus_dir

CASES = [
    ("petstore", EXAMPLES / "petstore" / "openapi.yaml", EXAMPLES / "petstore" / "overlay.yaml"),
    ("petstore-tasks", EXAMPLES / "petstore" / "openapi.yaml", EXAMPLES / "petstore" / "overlay-tasks.yaml"),
    ("notes", EXAMPLES / "notes" / "openapi.yaml", EXAMPLES / "notes" / "overlay.yaml"),
    ("market", EXAMPLES / "market" / "openapi.yaml", EXAMPLES / "market" / "overlay.yaml"),
    ("mailfiles", EXAMPLES / "mailfiles" / "openapi.yaml", EXAMPLES / "mailfiles" / "overlay.yaml"),
    ("github (curated)", Path("github") / "api.github.com.json", ROOT / "overlays" / "github.yaml"),
]


def _size(definitions: list[dict[str, Any]]) -> int:
    return len(json.dumps({"tools": definitions}, ensure_ascii=False, separators=(",", ":")).encode())


def _without(definition: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in definition["_meta"].items() if k != CONTRACT_KEY}
    out = {k: v for k, v in definition.items() if k != "_meta"}
    return {**out, "_meta": meta} if meta else out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    corpus = corpus_dir()
    rows = []
    for name, spec, overlay in CASES:
        if not spec.is_absolute():
            if corpus is None:
                print(f"{name}: skipped (no corpus; .ci/fetch-corpus.sh)", file=sys.stderr)
                continue
            spec = corpus / spec
        m = compile_files(str(spec), [overlay]).compiled.manifest
        listed = [t.definition() for t in m.tools if t.risk != "forbidden"]
        after, before = _size(listed), _size([_without(d) for d in listed])
        rows.append((name, len(listed), before, after, after - before, (after - before) / before,
                     (after - before) // max(1, len(listed))))
    head = ("spec", "tools", "without contract (B)", "with contract (B)", "added (B)", "added", "per tool (B)")
    if args.markdown:
        print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
        for r in rows:
            added = f"+{r[4]:,} (~{r[4] // 4:,} tokens)"
            print(f"| {r[0]} | {r[1]} | {r[2]:,} | {r[3]:,} | {added} | +{r[5]:.0%} | {r[6]} |")
    else:
        for r in rows:
            print(f"{r[0]:<18} {r[1]:>3} tools  {r[2]:>8,} B -> {r[3]:>8,} B  +{r[4]:>7,} B (+{r[5]:.0%}, "
                  f"~{r[4] // 4:,} tokens, {r[6]} B a tool)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
