"""What a tool says about itself: title, description, units, and the annotations its risk implies.

Overlay text wins; otherwise the operation's summary and description (raw tools cut to
RAW_DESCRIPTION_LIMIT). Units named by `units` or a parameter's `unit` go into the descriptions of
the arguments and result fields they name, and into one "Units:" line of the tool description.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Sequence
from typing import Any

from openapi2mcp.compiler.model import Arg, Operation
from openapi2mcp.compiler.schemas import trim, walk_properties
from openapi2mcp.errors import InputError, did_you_mean
from openapi2mcp.manifest import IDEMPOTENT_METHODS, RISK_ORDER, SAFE_METHODS, Risk
from openapi2mcp.overlay import KeyPath, OverlayFile, ToolDef

RAW_DESCRIPTION_LIMIT = 1024
_DEFAULT_RISK: dict[str, Risk] = {
    "GET": "low", "HEAD": "low", "OPTIONS": "low", "TRACE": "low",
    "POST": "medium", "PUT": "medium", "PATCH": "medium", "DELETE": "high",
}


# ============================================================================ risk


def default_risk(method: str) -> Risk:
    """The risk of a call the overlay gives none: reads low, writes medium, DELETE high."""
    return _DEFAULT_RISK.get(method, "medium")


def highest_risk(risks: list[Risk]) -> Risk:
    return max(risks, key=lambda r: RISK_ORDER[r])


# ============================================================================ titles and descriptions


def op_title(op: Operation) -> str | None:
    summary = op.node.get("summary")
    return _short(summary.strip(), 120) if isinstance(summary, str) and summary.strip() else None


def op_description(op: Operation, limit: int | None) -> str:
    parts = []
    summary, desc = op.node.get("summary"), op.node.get("description")
    if isinstance(summary, str) and summary.strip():
        parts.append(summary.strip().rstrip(".") + ".")
    if isinstance(desc, str) and desc.strip() and desc.strip() != (summary or "").strip():
        parts.append(desc.strip())
    text = "\n\n".join(parts) or f"{op.method} {op.path}"
    if op.node.get("deprecated") is True:
        text = "(Deprecated.) " + text
    return _short(text, limit) if limit else text


def branch_description(own: str | None, op: Operation) -> str:
    """One line for an action or variant: the overlay's, else the operation's first sentence."""
    if own:
        return " ".join(own.split())
    return _one_line(op_description(op, limit=None))


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    return first if len(first) <= 160 else first[:157] + "..."


def _short(text: str, limit: int | None) -> str:
    return trim(text, limit) if limit else text


# ============================================================================ annotations


def tool_annotations(
    calls: Sequence[tuple[str, Risk]], title: str | None, overrides: dict[str, Any]
) -> dict[str, Any]:
    """Behaviour hints derived from the (method, risk) of each call a tool may make.

    Read-only only if every call is (a safe method at risk low: seed 002's medium creates state, and a
    spec may declare `GET /views.publish`), destructive if any is, idempotent if all are. Hints only:
    the server enforces.
    """
    read_only = all(m in SAFE_METHODS and r == "low" for m, r in calls)
    out: dict[str, Any] = {}
    if title:
        out["title"] = title
    out["readOnlyHint"] = read_only
    if not read_only:
        out["destructiveHint"] = any(m in ("DELETE", "PUT", "PATCH") or RISK_ORDER[r] >= RISK_ORDER["high"]
                                     for m, r in calls)
        out["idempotentHint"] = all(m in IDEMPOTENT_METHODS for m, _ in calls)
    out["openWorldHint"] = True
    out.update(overrides)
    return out


def annotation_overrides(tdef: ToolDef) -> dict[str, Any]:
    """The hints the overlay sets itself; they win over the derived ones."""
    return tdef.annotations.model_dump(by_alias=True, exclude_none=True) if tdef.annotations else {}


# ============================================================================ units


def units_line(units: dict[str, str], args: Iterable[Arg]) -> str:
    """The tool description's unit summary: `units` plus the `unit` of each argument, once each."""
    merged = dict(units)
    for a in args:
        if a.unit and a.shown:
            merged.setdefault(a.name, a.unit)
    if not merged:
        return ""
    return "\nUnits: " + "; ".join(f"{k} = {v}" for k, v in merged.items()) + "."


def apply_units(
    input_schema: dict[str, Any], output_schema: dict[str, Any] | None, units: dict[str, str],
    doc: OverlayFile, at: KeyPath,
) -> dict[str, Any] | None:
    """Put each unit into the description of every input argument / output field it names.

    The input schema's properties are replaced in place (it is the tool's own); the output schema
    is returned as a copy when there are units, since converted schemas are shared between tools.
    """
    if not units:
        return output_schema
    output_schema = copy.deepcopy(output_schema)
    for name, unit in units.items():
        hit = False
        props = input_schema.get("properties", {})
        if name in props:
            props[name] = _with_unit(props[name], unit)
            hit = True
        if output_schema is not None:
            for prop_name, sub in list(walk_properties(output_schema)):
                if prop_name == name:
                    desc = sub.get("description", "")
                    if unit not in desc:
                        sub["description"] = (desc + f" Unit: {unit}.").strip()
                    hit = True
        if not hit:
            known = sorted({*props, *(n for n, _ in walk_properties(output_schema or {}))})
            hint = did_you_mean(name, known)
            raise InputError(doc.problem(
                (*at, name), f"unit for {name!r}, but no argument or result field has that name"
                + (f"; {hint}" if hint else ""),
            ))
    return output_schema


def _with_unit(schema: dict[str, Any], unit: str) -> dict[str, Any]:
    desc = schema.get("description", "")
    return schema if unit in desc else {**schema, "description": (desc + f" Unit: {unit}.").strip()}
