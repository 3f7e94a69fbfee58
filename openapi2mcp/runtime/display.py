r"""How an argument value is shown to the person who confirms a call: all of it visible, nothing forged.

A confirmation is only as good as what the user reads. Arguments come from the model (and so,
through prompt injection, from anyone), so a value must not be able to hide part of itself or
pass for the server's own text. `show` renders a value so that:

* strings are quoted and escaped the way JSON escapes them (`\"`, `\\`, `\n`), so a value cannot
  end the quote early or start a new line ("What happens: nothing");
* characters a reader cannot see are spelled out: control characters, line and paragraph
  separators, bidi controls and zero-width characters (Unicode categories Cc, Cf, Zl, Zp, Co,
  Cn, Cs) and letters that render blank (U+3164 and its kin) become `\uXXXX`;
* runs of 3 or more spaces become `⟨200 spaces⟩` and runs of more than 3 combining marks
  `⟨40 combining marks⟩`, so "moon" + 200 spaces + "AND-EARTH" cannot push its tail out of view;
* a long value keeps its start and its end around `⟨… 4,850 characters not shown …⟩`, followed
  by its real length;
* the markers `⟨` and `⟩` in a value are escaped, so a value cannot fake a marker.

`show` also returns notes ("200 spaces in a row", "invisible formatting characters") that the
caller puts in a part of the message arguments cannot write. Objects and arrays are shown as
compact JSON with the same treatment.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Final

MAX_SHOWN: Final = 200  # characters of a value shown (before the length note)
_HEAD: Final = 140
_TAIL: Final = 50
_SPACE_RUN: Final = 3  # this many spaces in a row become a marker
_MARK_RUN: Final = 4  # ... and this many combining marks
_BLANK_LETTERS: Final = frozenset("\u115f\u1160\u3164\uffa0\u2800\u180e")  # letters that render as nothing
_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "\\": "\\\\"}
_HIDDEN_CATEGORIES: Final = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cn", "Cs"})


@dataclass
class Shown:
    """A value as the user reads it, and what it hid (empty when nothing)."""

    text: str
    notes: list[str] = field(default_factory=list)


def show(value: Any) -> Shown:
    """A string quoted, anything else as compact JSON; everything made visible (see the module doc)."""
    if isinstance(value, str):
        return show_text(value, quote=True)
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    except (ValueError, RecursionError):
        return Shown("(a value nested too deeply to show)", ["nested too deeply to show"])
    return show_text(text, quote=False)


def show_text(text: str, *, quote: bool) -> Shown:
    """`text` made visible; with `quote`, also in double quotes with `"` and `\\` escaped."""
    tokens: list[tuple[str, int]] = []  # (what is shown, how many characters of `text` it stands for)
    kinds: dict[str, None] = {}
    longest_spaces = 0
    i, n = 0, len(text)
    if text.isascii() and text.isprintable() and " " * _SPACE_RUN not in text:  # the common case, fast
        tokens = [(_NAMED[c] if quote and c in '"\\' else c, 1) for c in text]
        i = n
    while i < n:
        ch = text[i]
        if ch == " " or unicodedata.category(ch) == "Zs":
            j = i
            while j < n and (text[j] == " " or unicodedata.category(text[j]) == "Zs"):
                j += 1
            if j - i >= _SPACE_RUN:
                tokens.append((f"⟨{j - i} spaces⟩", j - i))
                longest_spaces = max(longest_spaces, j - i)
            else:
                tokens.extend((c, 1) for c in text[i:j])
            i = j
            continue
        if unicodedata.category(ch) in ("Mn", "Me"):
            j = i
            while j < n and unicodedata.category(text[j]) in ("Mn", "Me"):
                j += 1
            if j - i >= _MARK_RUN:
                tokens.append((f"⟨{j - i} combining marks⟩", j - i))
                kinds[f"{j - i} combining marks in a row"] = None
            else:
                tokens.extend((c, 1) for c in text[i:j])
            i = j
            continue
        tokens.append((_char(ch, quote, kinds), 1))
        i += 1
    if longest_spaces:
        kinds[f"{longest_spaces} spaces in a row" if longest_spaces > 1 else "spaces"] = None
    shown = _shorten(tokens, n)
    body = "".join(t for t, _ in shown)
    text = f'"{body}"' if quote else body
    if len(shown) < len(tokens):
        kinds[f"{n:,} characters (shortened)"] = None
        text += f" ({n:,} characters)"
    return Shown(text, list(kinds))


def _char(ch: str, quote: bool, kinds: dict[str, None]) -> str:
    if ch in _NAMED and (quote or ch not in '"\\'):
        if ch in "\n\r":
            kinds["line breaks"] = None
        elif ch == "\t":
            kinds["tabs"] = None
        return _NAMED[ch]
    if ch in "⟨⟩":
        return f"\\u{ord(ch):04x}"  # the markers stay the server's own
    category = unicodedata.category(ch)
    if category in _HIDDEN_CATEGORIES or ch in _BLANK_LETTERS:
        if category in ("Zl", "Zp") or ch == "\x85":
            kinds["line breaks"] = None
        elif category == "Cc":
            kinds["control characters"] = None
        else:
            kinds["invisible characters (bidi controls, zero-width or blank characters)"] = None
        return f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}"
    return ch


def _shorten(tokens: list[tuple[str, int]], length: int) -> list[tuple[str, int]]:
    """The tokens of the start and the end, with a marker for what is between (when too long)."""
    if sum(len(t) for t, _ in tokens) <= MAX_SHOWN:
        return tokens
    head: list[tuple[str, int]] = []
    size = 0
    for token in tokens:
        if size + len(token[0]) > _HEAD:
            break
        head.append(token)
        size += len(token[0])
    tail: list[tuple[str, int]] = []
    size = 0
    for token in reversed(tokens[len(head):]):
        if size + len(token[0]) > _TAIL:
            break
        tail.append(token)
        size += len(token[0])
    tail.reverse()
    hidden = length - sum(c for _, c in head) - sum(c for _, c in tail)
    return [*head, (f"⟨… {hidden:,} characters not shown …⟩", hidden), *tail]
