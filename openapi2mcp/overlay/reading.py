"""Reading an overlay file: bytes -> YAML with positions -> a validated `OverlayFile`.

YAML is read with ruamel.yaml because it keeps line numbers: every error names the file, the
line and the key. The document is untrusted input like a spec: at most `MAX_OVERLAY_BYTES`,
UTF-8, no duplicate keys, numbers checked as they are read and the parsed data held to the
limits of loader/untrusted.py (nesting, alias cycles and bombs). Which kind of overlay it is
decides the model it is validated against (validation.py).
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
from pathlib import Path
from typing import Any

from openapi2mcp.errors import InputError, did_you_mean
from openapi2mcp.loader import MAX_NESTING, NUMBER_HINT, check_document, number_problem
from openapi2mcp.overlay.document import KeyPath, OverlayFile, Position
from openapi2mcp.overlay.model import OaiOverlay, ToolOverlay
from openapi2mcp.overlay.validation import validate

MAX_OVERLAY_BYTES = 10 * 1024 * 1024  # hand-written files; ruamel needs ~100x their size in memory


def read_overlay(path: str | Path) -> OverlayFile:
    """Read, parse and validate one overlay file; InputError (with line numbers) on any problem."""
    p = Path(path)
    try:
        with p.open("rb") as handle:
            raw = handle.read(MAX_OVERLAY_BYTES + 1)
        if len(raw) > MAX_OVERLAY_BYTES:
            raise InputError.at(
                f"the overlay is larger than {MAX_OVERLAY_BYTES // 2**20} MiB", file=str(p),
                hint="an overlay names tools and patches; move bulk content into the spec",
            )
    except FileNotFoundError:
        raise InputError.at(f"overlay file not found: {p}", hint="check the --overlay path") from None
    except OSError as e:
        raise InputError.at(f"cannot read overlay file {p}: {e.strerror}") from None
    return parse_overlay(raw, str(p))


def parse_overlay(raw: bytes | str, name: str = "<overlay>") -> OverlayFile:
    try:
        text = raw.decode("utf-8-sig") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as e:
        assert isinstance(raw, bytes)
        raise InputError.at("the overlay is not UTF-8 text", file=name, line=raw.count(b"\n", 0, e.start) + 1,
                            hint="save it as UTF-8") from None
    if len(text) > MAX_OVERLAY_BYTES:
        raise InputError.at(f"the overlay is larger than {MAX_OVERLAY_BYTES // 2**20} MiB", file=name)
    data, positions = _load_yaml(text, name)
    sha = hashlib.sha256(text.encode()).hexdigest()
    if not isinstance(data, dict):
        raise InputError.at(
            "an overlay must be a YAML mapping", file=name, line=1,
            hint="start the file with `openapi2mcp: 1` (a tool overlay) or `overlay: 1.0.0` (an OAI Overlay)",
        )
    doc = OverlayFile(path=name, sha256=sha, positions=positions, data=data)
    if "openapi2mcp" in data:
        doc.tools = validate(ToolOverlay, data, doc)
    elif "overlay" in data:
        doc.oai = validate(OaiOverlay, data, doc)
    else:
        close = did_you_mean(next(iter(data), ""), ["openapi2mcp", "overlay"]) if data else None
        raise InputError.at(
            "not an overlay: the top level has neither `openapi2mcp: 1` nor `overlay: 1.x.x`"
            + (f" ({close})" if close else ""),
            file=name, line=1,
            hint="a tool overlay starts with `openapi2mcp: 1`; an OAI Overlay with `overlay: 1.0.0`",
        )
    return doc


def _load_yaml(text: str, name: str) -> tuple[Any, dict[KeyPath, Position]]:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    yaml.Constructor = _constructor()
    try:
        node = yaml.load(text)
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = (e.problem or e.context or "invalid YAML").strip()
        number = problem.startswith("invalid number")
        raise InputError.at(
            problem if number else f"invalid YAML: {problem}", file=name,
            line=mark.line + 1 if mark else None, column=mark.column + 1 if mark else None,
            hint=NUMBER_HINT if number else None,
        ) from None
    except YAMLError as e:
        raise InputError.at(f"invalid YAML: {e}", file=name) from None
    except RecursionError:  # ruamel's composer recurses per level
        raise InputError.at(
            f"the data is nested too deeply (the limit is {MAX_NESTING} levels)", file=name,
            hint="flatten the structure",
        ) from None
    check_document(node, size=len(text), file=name)  # alias bombs and cycles, nesting
    positions: dict[KeyPath, Position] = {}
    return _plain(node, (), positions), positions


@functools.cache
def _constructor() -> type[Any]:
    """ruamel's round-trip constructor, refusing numbers that are not JSON (untrusted.py)."""
    from ruamel.yaml.constructor import ConstructorError, RoundTripConstructor

    def checked(base: Any) -> Any:
        def construct(self: Any, node: Any) -> Any:
            problem = number_problem(str(node.value).replace("_", ""))
            if problem:
                raise ConstructorError(None, None, f"invalid number: {problem}", node.start_mark)
            return base(self, node)

        return construct

    class Constructor(RoundTripConstructor):
        pass

    for tag in ("int", "float"):
        key = f"tag:yaml.org,2002:{tag}"
        Constructor.add_constructor(key, checked(RoundTripConstructor.yaml_constructors[key]))
    return Constructor


def _plain(node: Any, path: KeyPath, positions: dict[KeyPath, Position]) -> Any:
    """ruamel's round-trip nodes -> plain JSON data, recording where each key stands."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(node, CommentedMap):
        out: dict[str, Any] = {}
        for key, value in node.items():
            skey = str(key)
            line, col = node.lc.key(key)
            positions[(*path, skey)] = (line + 1, col + 1)
            out[skey] = _plain(value, (*path, skey), positions)
        return out
    if isinstance(node, CommentedSeq):
        items = []
        for i, value in enumerate(node):
            line, col = node.lc.item(i)
            positions[(*path, i)] = (line + 1, col + 1)
            items.append(_plain(value, (*path, i), positions))
        return items
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, _dt.datetime | _dt.date):
        return node.isoformat()
    if isinstance(node, str):
        return str(node)
    return node
