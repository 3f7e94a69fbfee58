"""What `init` knows about each operation: the spec's own words plus the arguments a model would see.

Two sources, each for what it is good at:

* the spec's own words, read by specdoc.py (the reader lint shares), for what the compiler does
  not keep: tags, summaries, deprecation, response headers, the success response's schema, the
  security requirements;
* the raw conversion (`compile_manifest(..., all_operations=True)`, one tool per operation) for
  the arguments exactly as the compiler names them (sanitised names, `body_<name>` for a body
  property that collides with a parameter, auth parameters removed), the operation id the
  compiler resolves (`operationId`, or `"METHOD /path"` for a missing or duplicate one) and the
  size of each raw tool, the baseline of the summary.

So the draft never guesses an argument name the compiler would not accept.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from openapi2mcp.authoring.specdoc import Arg, SpecDoc, SpecOperation
from openapi2mcp.manifest import Manifest, ToolSpec


@dataclass
class Op:
    """One operation of the spec, with what the draft needs to know about it."""

    ref: str  # what `operation:` says: the compiler's id for it
    method: str  # upper case
    path: str
    tags: list[str]
    summary: str  # one line, may be empty
    description: str
    deprecated: bool
    args: dict[str, Arg]
    response: dict[str, Any] | None  # the success response's JSON schema, refs resolved at the top
    response_headers: list[str]  # of the success response, as written
    raw_bytes: int  # its raw tool's definition, as JSON
    security_optional: bool  # a call without credentials is allowed (`security: []` or `{}` listed)
    words: list[str] = field(default_factory=list)  # operationId, summary and static path words, lower case

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}"

    def required_args(self) -> set[str]:
        return {a.name for a in self.args.values() if a.required}


def read_ops(doc: SpecDoc, raw: Manifest) -> tuple[list[Op], list[tuple[str, str]]]:
    """Every operation the compiler knows, in spec order, and those of the document it skipped
    (`(METHOD /path, why)`): a path item it could not read."""
    by_key: dict[str, ToolSpec] = {}
    for tool in raw.tools:
        op = tool.branches[0].steps[0].operation
        by_key[f"{op.method} {op.path}"] = tool
    global_security = doc.document.get("security")
    ops: list[Op] = []
    skipped: list[tuple[str, str]] = []
    for spec_op in doc.operations():
        found = by_key.get(spec_op.key)
        if found is None:
            skipped.append((spec_op.key, "the compiler skipped it (see `openapi2mcp inspect --warnings`)"))
            continue
        ops.append(_op(doc, spec_op, found, global_security))
    return ops, skipped


def _op(doc: SpecDoc, spec_op: SpecOperation, tool: ToolSpec, global_security: Any) -> Op:
    spec = tool.branches[0].steps[0].operation
    props = tool.input_schema.get("properties") or {}
    required = set(tool.input_schema.get("required") or [])
    args: dict[str, Arg] = {}
    for p in spec.params:
        if p.arg and p.arg in props:
            args[p.arg] = Arg(p.arg, p.name, p.location, p.arg in required or p.required, props[p.arg])
    if spec.body is not None:
        for arg, prop in spec.body.properties.items():
            if arg in props:
                args[arg] = Arg(arg, prop, "body", arg in required, props[arg])
        if spec.body.arg and spec.body.arg in props:
            args[spec.body.arg] = Arg(spec.body.arg, spec.body.arg, "body", spec.body.arg in required,
                                      props[spec.body.arg])
    for name, schema in props.items():  # anything else the raw tool takes (nested or fixed forms)
        args.setdefault(name, Arg(name, name, "body", name in required, schema))
    node = spec_op.node
    success = doc.success(spec_op)
    security = node.get("security", global_security)
    optional = not security or any(isinstance(r, dict) and not r for r in security)
    name = named(spec_op, spec.id)
    return Op(
        ref=name.ref, method=spec_op.method, path=name.path, tags=name.tags, summary=summary_line(node),
        description=str(node.get("description") or ""), deprecated=node.get("deprecated") is True,
        args=args, response=success.schema, response_headers=success.headers,
        raw_bytes=len(json.dumps(tool.definition(), ensure_ascii=False).encode()),
        security_optional=optional, words=name.words,
    )


@dataclass(frozen=True)
class Named:
    """What an operation is called, all the risk words read (risk.py): init's `Op` has the same fields, and
    lint makes one for an operation an overlay exposes (so both judge it by the same words)."""

    ref: str  # the compiler's id for it
    path: str
    tags: list[str]
    words: list[str]  # operationId, summary and static path words, lower case


def named(op: SpecOperation, ref: str | None = None) -> Named:
    """The names of an operation as the spec writes it (`ref`: the compiler's id, default the operation's)."""
    node = op.node
    op_id = str(node["operationId"]) if isinstance(node.get("operationId"), str) else ""
    statics = [s for s in op.path.split("/") if s and "{" not in s]
    tags = [t for t in node.get("tags") or [] if isinstance(t, str) and t.strip()]
    return Named(ref=op.id if ref is None else ref, path=op.path, tags=tags,
                 words=split_words(" ".join([op_id, summary_line(node), *statics])))


def summary_line(node: dict[str, Any]) -> str:
    """The operation's summary (else its description) in one line."""
    return first_line(node.get("summary")) or first_line(node.get("description"))


def first_line(text: Any, limit: int = 160) -> str:
    """The first sentence or line of a text, without Markdown links, at most `limit` characters."""
    if not isinstance(text, str):
        return ""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text.strip())
    first = text.split("\n\n", 1)[0].replace("\n", " ").strip()
    first = re.split(r"(?<=[.!?])\s", first, maxsplit=1)[0]
    first = re.sub(r"\s+", " ", first)
    return first if len(first) <= limit else first[: limit - 3].rsplit(" ", 1)[0] + "..."


_WORD = re.compile(r"[A-Z]+\d*(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z0-9]+")


def ascii_fold(text: str) -> str:
    """Letters without their accents (`Ünïcode` -> `Unicode`), others dropped: names are ASCII."""
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def split_words(text: str) -> list[str]:
    """Words of identifiers and prose, lower case: `listPetsByID`, `list-pets_by.id` -> list, pets, by,
    id; `v1beta1` and `k8s` stay whole."""
    return [w.lower() for w in _WORD.findall(ascii_fold(text))]


def snake(text: str) -> str:
    """An identifier in snake_case from any spelling ('postMessage' -> 'post_message')."""
    return "_".join(split_words(text))
