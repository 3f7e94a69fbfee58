"""YAML or JSON text -> a tree of plain JSON data, with the place of every syntax error.

* JSON with pydantic-core's parser straight from the bytes when no number in them needs a check
  (see `_fast_json`), else with `json`; YAML with libyaml (`CSafeLoader`: 5x faster than
  pure-Python YAML on the 3 MB OpenAI spec) and YAML 1.2 scalars, so `on`/`yes` and dates stay
  strings and a `200:` key is the string "200" as written. The format is told by the content
  (a leading `{` or `[` is JSON), not only by the extension; a `{...}` file that is not JSON is
  tried as YAML unless its name or content type says JSON.
* Numbers are checked as they are read (untrusted.py's `number_problem`): huge integers and
  numbers that are not finite are refused with their line and column.
* The result passes untrusted.py's `check_document` (nesting, alias cycles and bombs; on the fast
  JSON path pydantic-core's recursion limit bounds the nesting instead), and YAML aliases are
  copied apart into a tree, since later stages patch the document in place.
"""

from __future__ import annotations

import codecs
import functools
import json
import re
from typing import Any

import pydantic_core
import yaml

from openapi2mcp.errors import InputError
from openapi2mcp.loader.tree import copy_json
from openapi2mcp.loader.untrusted import MAX_NESTING, NUMBER_HINT, check_document, number_problem


class _YamlLoader(yaml.CSafeLoader):
    """libyaml with YAML 1.2 core-schema scalars and string keys: an OpenAPI document is JSON data.

    YAML 1.1 (PyYAML's default) reads `on`/`yes`/`no` as booleans, `2024-01-01` as a date,
    `12:30` as 750 and `0755` as octal; a spec means strings and decimals by them.
    """

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 - PyYAML's class-level registry

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):
            raise yaml.constructor.ConstructorError(
                None, None, f"expected a mapping, found {type(node).__name__}", node.start_mark
            )
        self.flatten_mapping(node)  # `<<` merge keys
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping", node.start_mark,
                    "found a list or mapping as a key (JSON keys are strings)", key_node.start_mark,
                )  # fmt: skip
            mapping[key_node.value] = self.construct_object(value_node, deep=deep)  # the key as written
        return mapping


def _number_text(loader: _YamlLoader, node: yaml.ScalarNode) -> str:
    """A number's text, once it passes untrusted.py's number guard."""
    text = loader.construct_scalar(node)
    problem = number_problem(text)
    if problem:
        raise yaml.constructor.ConstructorError(None, None, f"invalid number: {problem}", node.start_mark)
    return text


def _construct_int(loader: _YamlLoader, node: yaml.ScalarNode) -> int:
    text = _number_text(loader, node)
    try:
        return int(text, 10)  # YAML 1.2: a leading zero is decimal
    except ValueError:
        try:
            return int(text, 0)
        except ValueError:
            raise yaml.constructor.ConstructorError(None, None, f"invalid integer {text!r}", node.start_mark) from None


def _construct_float(loader: _YamlLoader, node: yaml.ScalarNode) -> float:
    text = _number_text(loader, node)
    try:
        return float(text)
    except ValueError:
        raise yaml.constructor.ConstructorError(None, None, f"invalid number {text!r}", node.start_mark) from None


def _construct_str(loader: _YamlLoader, node: yaml.ScalarNode) -> str:
    return loader.construct_scalar(node)


def _construct_set(loader: _YamlLoader, node: yaml.MappingNode) -> list[Any]:
    return list(loader.construct_mapping(node))


def _construct_pairs(loader: _YamlLoader, node: yaml.SequenceNode) -> list[Any]:
    return loader.construct_sequence(node, deep=True)


for _tag, _pattern, _first in (
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("int", r"^(?:[-+]?[0-9]+|0x[0-9a-fA-F]+)$", list("-+0123456789")),
    ("float", r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$", list("-+.0123456789")),
    ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("merge", r"^(?:<<)$", ["<"]),
):
    _YamlLoader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(_pattern), _first)
_YamlLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_YamlLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)
_YamlLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_str)  # dates stay text
_YamlLoader.add_constructor("tag:yaml.org,2002:binary", _construct_str)  # base64 stays text
_YamlLoader.add_constructor("tag:yaml.org,2002:set", _construct_set)
_YamlLoader.add_constructor("tag:yaml.org,2002:omap", _construct_pairs)
_YamlLoader.add_constructor("tag:yaml.org,2002:pairs", _construct_pairs)

_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_FIRST_CHAR = re.compile(r"\s*+(\S)")


def _decode(data: bytes, display: str) -> str:
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(codec)
            except UnicodeDecodeError:
                break
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError.at(
            "the file is not UTF-8 text",
            file=display,
            line=line,
            column=column,
            hint="save it as UTF-8 (OpenAPI documents are UTF-8 JSON or YAML)",
        ) from exc


def parse_document(data: bytes, display: str, content_type: str | None = None) -> tuple[Any, str | bytes]:
    """Parse JSON or YAML, told apart by content; returns the data and its text (the bytes, for fast JSON)."""
    fast = _fast_json(data)
    if fast is not None:  # within MAX_NESTING, as check_document would ask
        return fast, data
    text = _decode(data, display)
    first = _FIRST_CHAR.match(text)
    if first is None:
        raise InputError.at("the file is empty", file=display, hint="give the path or URL of an OpenAPI document")
    if first.group(1) not in "{[":
        return _parse_yaml(text, display), text
    try:
        document = json.loads(text, parse_int=_json_int, parse_float=_json_float, parse_constant=_json_float)
        check_document(document, size=len(text), file=display, aliases=False)  # JSON shares nothing
        return document, text
    except _BadNumber as exc:
        line, column = _position(text, exc.literal)
        raise InputError.at(
            f"invalid number: {exc}", file=display, line=line, column=column, hint=NUMBER_HINT
        ) from None
    except json.JSONDecodeError as exc:
        json_error = InputError.at(
            f"invalid JSON: {exc.msg}",
            file=display,
            line=exc.lineno,
            column=exc.colno,
            hint="fix the syntax at that position (a JSON linter such as `python -m json.tool` shows it)",
        )
    says_json = display.lower().endswith(".json") or "json" in (content_type or "")
    if says_json:
        raise json_error
    try:  # YAML's flow style is a superset of JSON: a `{...}` YAML document is still fine
        return _parse_yaml(text, display), text
    except InputError:
        raise json_error from None


# Digits as 0 and E as e, so that two literal searches find every number that may need a check.
_NUMBER_SHAPE = bytes.maketrans(b"0123456789E", b"0000000000e")
_LONG_DIGITS = b"0" * 200  # fewer digits and an exponent under 100 stay below 1e299: no overflow
_BIG_EXPONENTS = (b"e000", b"e+000")  # 3+ digits: may overflow (a negative one only rounds to 0)


def _fast_json(data: bytes) -> Any:
    """A JSON object or array parsed straight from UTF-8 bytes by pydantic-core (Rust), or None.

    GitHub's 13 MB spec: 0.09 s plus 0.03 s for the number scan, where decoding (to a 52 MB
    string: one emoji makes every character 4 bytes), `json.loads` and the nesting walk took
    0.33 s. Same values: the last duplicate key wins, integers exact, floats correctly rounded.
    Everything else goes the `json` way, which decides as before: a BOM or another encoding,
    YAML, NaN or Infinity, a number that may overflow or pass the digit limit (pydantic-core
    would make it inf silently; `json`'s hooks name its line and column), a lone surrogate,
    nesting near or past MAX_NESTING, a syntax error.
    """
    if not data[:64].lstrip().startswith((b"{", b"[")) or not _padding_limits_nesting():
        return None
    if _may_need_number_check(data):
        return None
    try:
        parsed = pydantic_core.from_json(_PAD_OPEN + data + _PAD_CLOSE, allow_inf_nan=False)
    except ValueError:  # invalid, or nested deeper than MAX_NESTING allows
        return None
    for _ in range(_NEST_PAD):
        if len(parsed) != 1:  # `{...}, {...}`: two values, which only the padding made one
            return None
        parsed = parsed[0]
    return parsed


# pydantic-core refuses values nested past its recursion limit (201 in 2.x), so the bytes parsed
# inside _NEST_PAD more arrays cannot nest past MAX_NESTING: that replaces check_document's walk
# (0.1 s on GitHub's spec). A probe confirms it once; another limit only loses the fast path.
_NEST_PAD = 101
_PAD_OPEN, _PAD_CLOSE = b"[" * _NEST_PAD, b"]" * _NEST_PAD


@functools.cache
def _padding_limits_nesting() -> bool:
    def parses(nested: int) -> bool:
        try:
            pydantic_core.from_json(_PAD_OPEN + b"[" * nested + b"]" * nested + _PAD_CLOSE)
        except ValueError:
            return False
        return True

    return parses(MAX_NESTING - 1) and not parses(MAX_NESTING + 1)


def _may_need_number_check(data: bytes) -> bool:
    """True when a long digit run or a 3-digit exponent may be a number value, not text in a string.

    A value follows `:` `,` or `[` (and blanks); hex ids and UUIDs in strings (`550e8400-...`:
    734 of them in GitHub's spec) do not, so they keep the fast path. A false True only costs time.
    """
    shape = data.translate(_NUMBER_SHAPE)
    if shape.find(_LONG_DIGITS) >= 0:
        return True
    for exponent in _BIG_EXPONENTS:
        at = shape.find(exponent)
        while at >= 0:
            start = at
            while start > 0 and shape[start - 1] in b"0.":
                start -= 1
            if start > 0 and shape[start - 1] == ord("-"):
                start -= 1
            before = shape[max(0, start - 64) : start].rstrip(b" \t\r\n")[-1:]  # b"": unsure, check
            if start < at and before in (b"", b":", b",", b"["):
                return True
            at = shape.find(exponent, at + 1)
    return False


class _BadNumber(ValueError):
    def __init__(self, literal: str, problem: str) -> None:
        self.literal = literal
        super().__init__(problem)


def _json_int(literal: str) -> int:
    problem = number_problem(literal)
    if problem:
        raise _BadNumber(literal, problem)
    return int(literal)


def _json_float(literal: str) -> float:
    problem = number_problem(literal)
    if problem:
        raise _BadNumber(literal, problem)
    return float(literal)


def _position(text: str, literal: str) -> tuple[int | None, int | None]:
    """Line and column of a number literal in JSON text (first occurrence outside a longer token)."""
    found = re.search(r"(?<![\w.+\-\"])" + re.escape(literal) + r"(?![\w.\"])", text)
    if found is None:
        return None, None
    start = found.start()
    return text.count("\n", 0, start) + 1, start - (text.rfind("\n", 0, start) + 1) + 1


_SYNTAX_HINT = "fix the syntax at that position (often indentation, a tab, or an unquoted ': ')"
NESTING_HINT = "flatten the structure (move deep inline schemas into components)"


def _parse_yaml(text: str, display: str) -> Any:
    try:
        document = yaml.load(text, Loader=_YamlLoader)  # a CSafeLoader: no arbitrary objects
    except yaml.MarkedYAMLError as exc:
        mark, start = exc.problem_mark or exc.context_mark, exc.context_mark
        what = exc.problem or exc.context or "syntax error"
        if exc.context and exc.problem:  # e.g. "while parsing a flow sequence" that started earlier
            moved = start and mark and (start.line, start.column) != (mark.line, mark.column)
            where = f" at line {start.line + 1}, column {start.column + 1}" if start and moved else ""
            what = f"{exc.problem} ({exc.context}{where})"
        if what.startswith("invalid number"):
            what, hint = what, NUMBER_HINT
        elif "nesting depth" in what:  # libyaml's own limit (1,000 levels)
            what, hint = f"nested too deeply: {what}", NESTING_HINT
        else:
            what, hint = f"invalid YAML: {what}", _SYNTAX_HINT
        raise InputError.at(
            what,
            file=display,
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
            hint=hint,
        ) from exc
    except yaml.YAMLError as exc:
        raise InputError.at(
            f"invalid YAML: {exc}", file=display, hint="save the file as UTF-8 YAML or JSON text"
        ) from exc
    return _as_tree(document, len(text), display)


def _as_tree(document: Any, size: int, display: str) -> Any:
    """The document as a tree of plain data, once it passes the limits of untrusted.py.

    An alias makes one object appear in several places; later stages patch the document in
    place, so shared parts are copied apart (a bomb or a cycle never gets this far).
    """
    return copy_json(document) if check_document(document, size=size, file=display) else document
