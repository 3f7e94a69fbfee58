"""RFC 6570 URI templates: the small subset MCP resource templates need, both directions.

Two kinds of expression, one variable each:

* `{var}`  simple expansion: every reserved character of the value is percent-encoded, so the
  value is one segment (`a/b.md` expands to `a%2Fb.md`). Matching a URI, it spans no `/`, `?`
  or `#`.
* `{+var}` reserved expansion: reserved characters stay (`a/b.md` stays `a/b.md`), so a value
  can be a path. Matching, it spans anything.

Matching is the inverse of expansion: the literal parts must be equal and each variable's text
is percent-decoded, so `notes://a%2Fb.md` and `notes://a/b.md` both give `a/b.md` for
`notes://{+path}`. Anything else RFC 6570 has (`{?q}`, `{a,b}`, `{a*}`, `{a:3}`) is refused
when the template is parsed, with a message that says what is supported.

Shared by both halves of the pipeline (the compiler checks templates, the runtime matches and
expands them), so it imports nothing but the standard library.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote

# RFC 3986 reserved characters: kept by `{+var}`.
RESERVED = ":/?#[]@!$&'()*+,;="
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_VARNAME = re.compile(r"(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})+(?:\.(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})+)*")
_BAD_LITERAL = re.compile(r"[\s\"<>\\^`|{}]")


class TemplateError(ValueError):
    """The text is not a URI template this module supports; the message says why."""


@dataclass(frozen=True)
class Variable:
    name: str
    reserved: bool  # `{+name}`


@dataclass(frozen=True)
class UriTemplate:
    """A parsed template: literal strings and variables, in order, plus the matching regex."""

    text: str
    parts: tuple[str | Variable, ...]
    regex: re.Pattern[str]

    @classmethod
    def parse(cls, text: str) -> UriTemplate:
        parts: list[str | Variable] = []
        pattern = ""
        pos = 0
        seen: set[str] = set()
        for m in re.finditer(r"\{([^{}]*)\}", text):
            literal = text[pos : m.start()]
            _check_literal(literal, text)
            if literal:
                parts.append(literal)
                pattern += re.escape(literal)
            elif parts and isinstance(parts[-1], Variable):
                raise TemplateError(
                    f"{{{parts[-1].name}}} and {m.group(0)} are adjacent: separate variables with literal "
                    "text (e.g. a `/`), or a URI cannot be split back into values"
                )
            var = _variable(m.group(1), m.group(0))
            if var.name in seen:
                raise TemplateError(f"variable {var.name!r} appears twice")
            seen.add(var.name)
            parts.append(var)
            pattern += f"(?P<v{len(seen) - 1}>{'.+' if var.reserved else '[^/?#]+'})"
            pos = m.end()
        tail = text[pos:]
        _check_literal(tail, text)
        if tail:
            parts.append(tail)
            pattern += re.escape(tail)
        if not parts or not isinstance(parts[0], str) or not _SCHEME.match(parts[0]):
            raise TemplateError(
                "a resource URI starts with a literal scheme such as `notes://` or `https://` "
                "(RFC 3986: a letter, then letters, digits, + . -, then `:`)"
            )
        return cls(text=text, parts=tuple(parts), regex=re.compile(pattern, re.DOTALL))

    @property
    def variables(self) -> list[Variable]:
        return [p for p in self.parts if isinstance(p, Variable)]

    @property
    def names(self) -> list[str]:
        return [v.name for v in self.variables]

    @property
    def is_template(self) -> bool:
        return any(isinstance(p, Variable) for p in self.parts)

    def expand(self, values: Mapping[str, str]) -> str:
        """The URI for these values (every variable needs one)."""
        out = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
            else:
                out.append(quote(values[part.name], safe=RESERVED if part.reserved else ""))
        return "".join(out)

    def match(self, uri: str) -> dict[str, str] | None:
        """The decoded variable values when `uri` fits this template, else None."""
        raw = self.match_raw(uri)
        return None if raw is None else {name: unquote(text, errors="strict") for name, text in raw.items()}

    def match_raw(self, text: str) -> dict[str, str] | None:
        """Like `match`, but the captured text is returned as is (for checking other templates)."""
        m = self.regex.fullmatch(text)
        if m is None:
            return None
        return {v.name: m.group(f"v{i}") for i, v in enumerate(self.variables)}


def _variable(inner: str, expression: str) -> Variable:
    reserved = inner.startswith("+")
    name = inner[1:] if reserved else inner
    if name[:1] in set("#./;?&=,!@|"):
        raise TemplateError(
            f"{expression}: the RFC 6570 operator {name[0]!r} is not supported; use {{name}} (one segment) "
            "or {+name} (may contain `/`)"
        )
    if "," in name:
        raise TemplateError(f"{expression}: one variable per expression, e.g. {{a}}/{{b}}")
    if name.endswith("*") or ":" in name:
        raise TemplateError(f"{expression}: modifiers (`*`, `:n`) are not supported; use {{name}} or {{+name}}")
    if not _VARNAME.fullmatch(name):
        raise TemplateError(f"{expression}: {name!r} is not a valid variable name (letters, digits, _ and .)")
    return Variable(name=name, reserved=reserved)


def _check_literal(literal: str, text: str) -> None:
    bad = _BAD_LITERAL.search(literal)
    if bad:
        what = "an unmatched brace" if bad.group(0) in "{}" else f"the character {bad.group(0)!r}"
        raise TemplateError(f"{text!r} has {what}, which a URI (template) cannot contain")
