"""Inline suppressions: `# o2m: ignore[O2M105] -- the reason` in the tool overlay.

A comment on a finding's line or the line above it suppresses the named rules there; on a tool's
line (its `- name:` item) or the line above, it covers every finding inside that tool. The reason
after the brackets is kept (SARIF `suppressions[].justification`); a suppression without one,
or one that suppresses nothing, is a finding itself (O2M001, O2M002).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

# a YAML comment starts at the line's start or after white space (never inside a plain scalar)
_COMMENT = re.compile(r"(?:^|\s)#\s*o2m:\s*ignore\[([^\]]*)\](.*)$", re.I)
_RULE_ID = re.compile(r"^O2M\d{3}$")


@dataclass
class Suppression:
    line: int  # 1-based
    column: int
    rules: list[str]
    reason: str
    used: set[str] = field(default_factory=set)


def read_suppressions(path: str) -> list[Suppression]:
    """The `# o2m: ignore[...]` comments of an overlay file ([] when it cannot be read again)."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return []
    return parse_suppressions(text)


def parse_suppressions(text: str) -> list[Suppression]:
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        m = _COMMENT.search(line)
        if m is None:
            continue
        rules = [r.strip().upper() for r in m.group(1).split(",") if r.strip()]
        reason = m.group(2).strip().lstrip("-—–:").strip()
        out.append(Suppression(line=n, column=line.index("#", m.start()) + 1, rules=rules, reason=reason))
    return out


def is_rule_id(text: str) -> bool:
    return bool(_RULE_ID.match(text))


def covering(suppressions: list[Suppression], rule: str, lines: list[int]) -> Suppression | None:
    """The suppression of `rule` on one of `lines` or the line above one of them."""
    for s in suppressions:
        if rule in s.rules and any(s.line in (n, n - 1) for n in lines if n):
            return s
    return None
