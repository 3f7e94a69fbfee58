"""The arguments of `openapi2mcp call` from the command line, typed by the tool's inputSchema.

The rules are httpie's request items, for JSON arguments:

    key=value      the value, typed by the tool's schema for `key` (below)
    key:=JSON      a JSON value as it is: key:=5, key:=true, key:='["a","b"]', key:=null
    key=@FILE      the text of a file, as a string
    key:=@FILE     the JSON in a file
    {"k": ...}     a JSON object of arguments, as the first word (or `-`: read it from stdin);
                   key=value items after it add to it or replace its keys

How `key=value` is typed, from the property's schema (its `type`, or the types of its
`anyOf`/`oneOf`/`enum`/`const`): a string when the schema takes a string (so `zip=01234` stays
"01234"; use `:=` for another type); else an integer, a number, a boolean (true/false, yes/no,
on/off, 1/0) or null (`null`) when the schema takes that; an object as JSON; an array as JSON
when the value starts with `[`, otherwise each `key=value` given is one item (typed by `items`),
so `tags=a tags=b` is ["a", "b"]. A key of no known property is a string (and the schema check
names it). A backslash makes a separator part of the key (`a\\=b=c` is the key "a=b") and `\\@`
at the start of a value is a literal @. NaN and Infinity are no JSON and are refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from openapi2mcp.errors import InputError

_INTEGER: Final = re.compile(r"-?(0|[1-9][0-9]*)")
_TRUE: Final = frozenset({"true", "yes", "on", "1"})
_FALSE: Final = frozenset({"false", "no", "off", "0"})
_TYPE_ORDER: Final = ("integer", "number", "boolean", "null", "object", "array")


@dataclass(frozen=True)
class Item:
    """One `key=value` (or `key:=JSON`) word, split."""

    key: str
    raw: bool  # `:=`: the value is JSON
    value: str
    word: str


def parse_arguments(words: Sequence[str], schema: Mapping[str, Any], *, stdin: str | None = None) -> dict[str, Any]:
    """The arguments object the words describe, typed by `schema` (InputError naming the word when one is bad)."""
    words = list(words)
    base: dict[str, Any] = {}
    if words and (words[0] == "-" or words[0].lstrip().startswith("{")):
        first = words.pop(0)
        base = _object(stdin if first == "-" else first, "stdin" if first == "-" else "the JSON argument")
    items = [split_item(word) for word in words]
    out = dict(base)
    given: set[str] = set()
    properties = _properties(schema)
    for item in items:
        prop = properties.get(item.key)
        value = _value(item, prop, schema)
        if item.raw or prop is None or "array" not in _types(prop, schema) or _starts_json_array(item):
            if item.key in given:
                raise InputError.at(f"{item.word!r}: {item.key} is given twice",
                                    hint=f"give it once (for several values {item.key}:='[...]')")
            out[item.key] = value
        else:  # one item of an array argument
            current = out[item.key] if item.key in given else []
            out[item.key] = [*current, value]
        given.add(item.key)
    return out


def split_item(word: str) -> Item:
    """`key=value` / `key:=json`: the first unescaped `=` ends the key (a `:` before it makes it `:=`)."""
    key: list[str] = []
    i = 0
    while i < len(word):
        char = word[i]
        if char == "\\" and i + 1 < len(word) and word[i + 1] in "=:@\\":
            key.append(word[i + 1])
            i += 2
            continue
        if char == "=":
            raw = bool(key) and key[-1] == ":" and not word[:i].endswith("\\:")
            name = "".join(key[:-1] if raw else key)
            if not name:
                break
            return Item(name, raw, word[i + 1:], word)
        key.append(char)
        i += 1
    raise InputError.at(
        f"{word!r} is not an argument: expected key=value, key:=JSON, or a JSON object first",
        hint="e.g. keyword=mcp limit:=3 (openapi2mcp call --help has the rules)",
    )


# ---------------------------------------------------------------------------- values


def _value(item: Item, prop: Mapping[str, Any] | None, root: Mapping[str, Any]) -> Any:
    text = item.value
    if text.startswith("@"):
        text = _read(text[1:], item)
    elif text.startswith("\\@"):
        text = text[1:]
    if item.raw:
        return _json(text, item)
    if prop is None:
        return text
    types = _types(prop, root)
    if "array" in types and not _starts_json_array(item):
        items = prop.get("items")
        return _typed(text, _resolve(items, root) if isinstance(items, Mapping) else {}, item, root, array_item=True)
    return _typed(text, prop, item, root)


def _typed(text: str, prop: Mapping[str, Any], item: Item, root: Mapping[str, Any], *,
           array_item: bool = False) -> Any:
    types = _types(prop, root)
    if not types or "string" in types:
        return text
    for kind in _TYPE_ORDER:
        if kind not in types:
            continue
        value = _as(kind, text)
        if value is not _NO:
            return value
    named = " or ".join(t for t in _TYPE_ORDER if t in types)
    what = f"an item of {item.key}" if array_item else item.key
    raise InputError.at(
        f"{item.word!r}: {what} takes {_article(named)}, not {text!r}",
        hint=f"give e.g. {item.key}={_example(types)}, or {item.key}:=JSON for any JSON value",
    )


_NO: Final = object()


def _as(kind: str, text: str) -> Any:
    lowered = text.strip().lower()
    if kind == "integer":
        return int(text) if _INTEGER.fullmatch(text.strip()) else _NO
    if kind == "number":
        try:
            value = json.loads(text, parse_constant=_refuse)
        except ValueError:
            return _NO
        return value if isinstance(value, int | float) and not isinstance(value, bool) else _NO
    if kind == "boolean":
        return True if lowered in _TRUE else False if lowered in _FALSE else _NO
    if kind == "null":
        return None if lowered == "null" else _NO
    try:
        value = json.loads(text, parse_constant=_refuse)
    except ValueError:
        return _NO
    wanted = dict if kind == "object" else list
    return value if isinstance(value, wanted) else _NO


def _starts_json_array(item: Item) -> bool:
    return not item.raw and item.value.lstrip().startswith("[")


def _json(text: str, item: Item) -> Any:
    try:
        return json.loads(text, parse_constant=_refuse)
    except ValueError as e:
        raise InputError.at(f"{item.word!r}: the value after := is not JSON ({e})",
                            hint=f"quote strings: {item.key}:='\"text\"', or use {item.key}=text") from None


def _object(text: str | None, where: str) -> dict[str, Any]:
    if text is None:
        raise InputError.at("`-` reads the arguments from stdin, but there is none")
    try:
        value = json.loads(text, parse_constant=_refuse)
    except ValueError as e:
        raise InputError.at(f"{where} is not JSON: {e}", hint='give an object, e.g. \'{"keyword": "mcp"}\'') from None
    if not isinstance(value, dict):
        raise InputError.at(f"{where} is JSON but not an object (the arguments are one object)",
                            hint='e.g. \'{"keyword": "mcp"}\'')
    return value


def _refuse(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _read(path: str, item: Item) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError.at(f"{item.word!r}: no file {path!r}",
                            hint=f"for a value that starts with @, write {item.key}=\\@...") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError.at(f"{item.word!r}: cannot read {path!r}: {e}") from None


# ---------------------------------------------------------------------------- schemas


def _properties(schema: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return {}
    return {k: _resolve(v, schema) for k, v in props.items() if isinstance(v, Mapping)}


def _resolve(prop: Mapping[str, Any], root: Mapping[str, Any] | None, depth: int = 0) -> Mapping[str, Any]:
    """A property with a local `$ref` (`#/$defs/...`) followed, so its type can be read."""
    ref = prop.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/") or root is None or depth > 8:
        return prop
    target: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        target = target.get(part) if isinstance(target, Mapping) else None
    return _resolve(target, root, depth + 1) if isinstance(target, Mapping) else prop


def _types(prop: Mapping[str, Any], root: Mapping[str, Any] | None) -> set[str]:
    """The JSON types a property takes (empty: any)."""
    declared = prop.get("type")
    types = {declared} if isinstance(declared, str) else {t for t in declared or [] if isinstance(t, str)}
    for key in ("anyOf", "oneOf"):
        for member in prop.get(key) or []:
            if isinstance(member, Mapping):
                types |= _types(_resolve(member, root), root) or {"any"}
    values = list(prop.get("enum") or []) + ([prop["const"]] if "const" in prop else [])
    for value in values:
        types.add(_json_type(value))
    if "number" in types:
        types.add("integer")
    return set() if "any" in types else types


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, dict):
        return "object"
    return "array" if isinstance(value, list) else "string"


def _article(kind: str) -> str:
    return ("an " if kind[:1] in "aeiou" else "a ") + kind


def _example(types: set[str]) -> str:
    for kind, example in (("integer", "3"), ("number", "2.5"), ("boolean", "true"), ("object", "'{\"k\": 1}'"),
                          ("array", "'[1, 2]'"), ("null", "null")):
        if kind in types:
            return example
    return "text"
