"""An overlay's data checked against its model; pydantic's errors as problems a person can act on.

Each problem names the file, the line and the key (`OverlayFile.location`), once per place
(pydantic reports every failed member of a union separately), and says what would do: the valid
keys with the nearest one to a typo (`did_you_mean`), the accepted values, the expected type.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Annotated, Any, Union

from pydantic import BaseModel, ValidationError

from openapi2mcp.errors import InputError, Problem, did_you_mean
from openapi2mcp.overlay.document import KeyPath, OverlayFile, format_path

_M = typing.TypeVar("_M", bound=BaseModel)


def validate(model: type[_M], data: dict[str, Any], doc: OverlayFile) -> _M:
    """`data` as a `model`; InputError with up to 20 located problems when it does not fit."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        # one problem per place: pydantic reports each failed member of a union separately
        by_loc: dict[KeyPath, list[Any]] = {}
        for err in e.errors():
            by_loc.setdefault(_clean_loc(err["loc"]), []).append(err)
        problems = [_problem(errs, model, doc) for errs in by_loc.values()]
        raise InputError(problems[:20], title=f"{doc.path}: invalid overlay") from None


def _problem(errs: list[Any], model: type[BaseModel], doc: OverlayFile) -> Problem:
    err = errs[0]
    loc = _clean_loc(err["loc"])
    kind = err["type"]
    where = format_path(loc[:-1], doc) or "the top level"
    last = loc[-1] if loc else ""
    if kind == "extra_forbidden":
        allowed = _allowed_keys(model, loc[:-1])
        hint = did_you_mean(str(last), allowed)
        msg = f"unknown key {last!r} in {where}" + (f"; {hint}" if hint else "")
        if " " in str(last):  # `{description: a, b}`: YAML reads " b" as a second key
            return doc.problem(loc, msg, hint="a comma inside {...} starts a new key: put the value in quotes")
        return doc.problem(loc, msg, hint=f"valid keys here: {', '.join(sorted(allowed))}" if allowed else None)
    if kind == "missing":
        return doc.problem(loc[:-1], f"missing required key {last!r} in {where}")
    if kind == "tool_kind_missing":
        return doc.problem(
            loc, f"missing required key 'operation' in {format_path(loc, doc)}",
            hint="a tool needs one of: operation (one call), actions (picked by an `action` argument), "
            "variants (picked by the arguments given), steps (a chain)",
        )
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        names = [a or b for a, b in re.findall(r"'([^']*)'|(\d+)", expected)]
        got = err.get("input")
        hint = did_you_mean(str(got), names) if names else None
        msg = f"{got!r} is not one of {', '.join(names) or expected}"
        return doc.problem(loc, msg + (f"; {hint}" if hint else ""))
    if kind == "string_pattern_mismatch" and last == "name":
        return doc.problem(
            loc, f"tool name {err.get('input')!r} is invalid",
            hint="use 1-64 characters of A-Z a-z 0-9 _ . - in the form domain_verb, e.g. notes_search",
        )
    if len(errs) > 1:  # a union: say what was given and what would do
        wanted = sorted({_expected(x) for x in errs})
        return doc.problem(loc, f"expected {' or '.join(wanted)}, got {_short(err.get('input'))}")
    msg = err["msg"].removeprefix("Value error, ")
    got = f" (got {_short(err.get('input'))})" if kind.endswith(("_type", "_parsing")) else ""
    return doc.problem(loc, msg[0].lower() + msg[1:] + got)


def _expected(err: Any) -> str:
    kind = str(err["type"])
    for key, word in (("float", "a number"), ("int", "an integer"), ("bool", "true or false"),
                      ("string", "a string"), ("dict", "a mapping"), ("model", "a mapping"),
                      ("list", "a list")):
        if key in kind:
            return word
    return str(err["msg"]).removeprefix("Input should be ")


def _clean_loc(loc: tuple[Any, ...]) -> KeyPath:
    """pydantic adds union-member tags ('float', 'TimeoutDef', 'function-after[...]'); drop them."""
    out: list[str | int] = []
    for part in loc:
        if isinstance(part, str) and (
            part in {"float", "int", "str", "bool", "TimeoutDef", "none"} or "[" in part
        ):
            continue
        out.append(part)
    return tuple(out)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _allowed_keys(model: type[BaseModel], path: KeyPath) -> list[str]:
    """Field names (with aliases) of the model that stands at `path` in the document."""
    current: Any = model
    for part in path:
        current = _child_type(current, part)
        if current is None:
            return []
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [info.alias or name for name, info in current.model_fields.items()]
    return []


def _child_type(tp: Any, part: str | int) -> Any:
    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        for name, info in tp.model_fields.items():
            if part in (name, info.alias):
                return info.annotation
        return None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is list and isinstance(part, int):
        return args[0]
    if origin is dict and isinstance(part, str):
        return args[1]
    return None


def _unwrap(tp: Any) -> Any:
    """Optional[X] / X | None / Annotated[X, ...] -> X (the first model member of a union)."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin in (Union, types.UnionType):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        return _unwrap(models[0] if models else members[0])
    return tp
