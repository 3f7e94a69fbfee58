"""Applying OAI Overlay 1.0/1.1 documents (`OaiOverlay`) to a spec, in order.

Targets are RFC 9535 JSONPath (jsonpath-rfc9535, the RFC the Overlay specification names). An
action whose target matches nothing is an error, never a silent no-op: it hides a typo or a
spec change. The result is checked for nesting again, since an `update` can put deep data into
a deep place.
"""

from __future__ import annotations

import copy
from typing import Any

from openapi2mcp.errors import InputError
from openapi2mcp.loader import check_document
from openapi2mcp.overlay.document import KeyPath, OverlayFile


def apply_oai_overlays(document: dict[str, Any], overlays: list[OverlayFile]) -> dict[str, Any]:
    """Apply OAI Overlay actions in order to a copy of the spec document.

    update merges (objects recursively, arrays append, scalars replace), remove deletes the
    targets, copy (1.1) merges the single node it selects into each target. A target that selects
    nothing is an error: a silent no-op hides a typo or a spec change.
    """
    import jsonpath_rfc9535 as jsonpath

    if not overlays:
        return document
    doc = copy.deepcopy(document)
    for ov in overlays:
        assert ov.oai is not None
        for i, action in enumerate(ov.oai.actions):
            where: KeyPath = ("actions", i, "target")
            try:
                nodes = list(jsonpath.find(action.target, doc))
            except Exception as e:  # the library raises its own syntax error types
                raise InputError(ov.problem(where, f"invalid JSONPath {action.target!r}: {e}")) from None
            if not nodes:
                raise InputError(ov.problem(
                    where, f"action target {action.target!r} matches nothing in the spec",
                    hint="fix the JSONPath (RFC 9535), or remove the action if the spec changed",
                ))
            if action.remove:
                # delete deepest-last-index first so earlier deletions do not shift later ones
                for node in sorted(nodes, key=lambda n: n.location, reverse=True):
                    _remove(doc, node.location)
                continue
            if action.copy_from is not None:
                sources = list(jsonpath.find(action.copy_from, doc))
                if len(sources) != 1:
                    raise InputError(ov.problem(
                        ("actions", i, "copy"),
                        f"copy source {action.copy_from!r} must select exactly one node, selects {len(sources)}",
                    ))
                value = copy.deepcopy(sources[0].value)
            else:
                value = action.update
            for node in nodes:
                merged = _merge(node.value, copy.deepcopy(value))
                if not node.location:
                    if not isinstance(merged, dict):
                        raise InputError(ov.problem(where, "the document root can only be merged with an object"))
                    doc = merged
                else:
                    _set(doc, node.location, merged)
        check_document(doc, size=0, file=ov.path, aliases=False)  # an update may nest deep data deep
    return doc


def _merge(target: Any, value: Any) -> Any:
    if isinstance(target, dict) and isinstance(value, dict):
        for k, v in value.items():
            target[k] = _merge(target[k], v) if k in target else v
        return target
    if isinstance(target, list):
        return [*target, *value] if isinstance(value, list) else [*target, value]
    return value


def _parent(doc: Any, location: tuple[Any, ...]) -> Any:
    node = doc
    for part in location[:-1]:
        node = node[part]
    return node


def _set(doc: Any, location: tuple[Any, ...], value: Any) -> None:
    _parent(doc, location)[location[-1]] = value


def _remove(doc: Any, location: tuple[Any, ...]) -> None:
    if location:
        del _parent(doc, location)[location[-1]]
