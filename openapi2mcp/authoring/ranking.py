"""Which drafted tools `--max-tools` keeps: a score per tool, highest first.

    score = 3 * log2(1 + operations at or below the tool's resource)   # how central the resource is
          + 2 * log2(1 + operations the tool uses)                     # how much one tool covers
          + 3 (several reads: _find) | 2 (one read) | 1.5 (several writes: _manage) | 1 (one write)
          - 1 per path parameter before the resource (`/repos/{owner}/{repo}/issues`: 2)
          - 8 when the resource or its tags say test, sandbox, beta, alpha, preview, internal, legacy,
            experimental or deprecated; - 4 for a pre-release API version (v1beta1, v2alpha1)

Ties go to the name, so the ranking (and the draft) is the same on every run. Resources that
contain many operations (GitHub's `repos`, `issues`, `pulls`; Stripe's `customers`, `charges`,
`invoices`) rank first; test helpers and pre-release versions last.
"""

from __future__ import annotations

import math
import re

from openapi2mcp.authoring.facts import split_words
from openapi2mcp.authoring.tools import Tool

UNSTABLE = frozenset({"test", "tests", "testing", "sandbox", "beta", "alpha", "preview", "internal", "legacy",
                      "experimental", "deprecated", "helpers"})
_PRERELEASE = re.compile(r"^v\d+(alpha|beta)\d*$", re.I)


def score(tool: Tool, subtree: int) -> tuple[float, str]:
    """(score, the terms in words) of one tool."""
    reads = all(u.placed.read for u in tool.uses)
    kind = (3.0 if reads and len(tool.uses) > 1 else 2.0 if reads else 1.5 if len(tool.uses) > 1 else 1.0)
    depth = min(op.path.count("{") - _own_params(op.path) for op in tool.ops) if tool.ops else 0
    words = {w for part in tool.resource.key for w in split_words(part)} | {
        w for op in tool.ops for t in op.tags for w in split_words(t)}
    penalty = 8.0 if words & UNSTABLE else 0.0
    if any(_PRERELEASE.match(part) for part in tool.resource.key):
        penalty += 4.0
    value = 3 * math.log2(1 + subtree) + 2 * math.log2(1 + len(tool.uses)) + kind - depth - penalty
    why = (f"score {value:.1f}: {subtree} operation(s) at or below {tool.resource.name}, {len(tool.uses)} used"
           + (f", {depth} parent parameter(s)" if depth else "") + (f", -{penalty:g} unstable" if penalty else ""))
    return round(value, 3), why


def _own_params(path: str) -> int:
    """The item id of the path itself (`/issues/{n}`): not a parent's."""
    last = path.rstrip("/").rsplit("/", 1)[-1]
    return last.count("{")


def rank(tools: list[Tool], subtrees: dict[tuple[str, ...], int]) -> list[Tool]:
    for t in tools:
        t.score, t.rank_why = score(t, subtrees.get(t.resource.key, len(t.uses)))
    return sorted(tools, key=lambda t: (-t.score, t.name))
