"""Serialisation: one operation and the call's arguments become one HTTP request (`prepare`).

Every parameter exactly as OpenAPI 3 says (path simple/label/matrix, query form/spaceDelimited/
pipeDelimited/deepObject, header simple, cookie form, `content` params as JSON) and every body
encoding (JSON, form, multipart, text, octet-stream, as-is). Path values are percent-encoded
completely, so no argument can change the route, and the URL is always the configured origin
plus an encoded path: no argument can change scheme, host or port. A value HTTP cannot carry (a
lone surrogate, a non-ASCII header, NaN) is ARGUMENT_INVALID, not a crash; an argument cannot add a
second value for a name the server sets (`_Names`).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, unquote, urlencode

from openapi2mcp.errors import ErrorCode, ToolFailure
from openapi2mcp.manifest import BodySpec, OperationSpec, ParamSpec
from openapi2mcp.upstream.response import MAX_JSON_DEPTH, is_json_media, json_depth_exceeds
from openapi2mcp.upstream.settings import HEADER_CONTROL, Settings

Evaluate = Callable[[str], Any]  # a JMESPath expression over the call's {inputs, steps}


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


def _invalid(message: str, field: str | None = None) -> ToolFailure:
    return ToolFailure.of(ErrorCode.ARGUMENT_INVALID, message, field=field)


# ============================================================================ serialisation

# allowReserved keeps RFC 3986 reserved characters except those that would split the query.
_RESERVED_OK: Final = ":/?[]@!$'()*,;"


def _scalar(value: Any) -> str:
    """A primitive as OpenAPI writes it: true/false, numbers as JSON, nested values as JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        # JSON Schema counts 1e3 and 2.0 as integers; in a URL an integer parameter must read as one
        return str(int(value))
    return _json(value)


def pct(value: Any, safe: str = "") -> str:
    return quote(_scalar(value), safe=safe)


def _json(value: Any) -> str:
    """Compact JSON as it is sent: NaN and Infinity are no JSON, and never go upstream."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        raise _invalid("a number that is not finite (NaN or Infinity) cannot be sent: JSON has no such numbers") \
            from None


def check_json_arguments(arguments: Mapping[str, Any]) -> None:
    """ARGUMENT_INVALID for a NaN or ±Infinity anywhere in `arguments`, or nesting past MAX_JSON_DEPTH.

    Python's json module, and so a raw JSON-RPC request, accepts `NaN` and `Infinity`; every
    comparison with NaN is false, so it would pass any range check. Nesting is capped as for
    upstream JSON: what is sent comes back in results (echoes, dry-run previews).
    """
    try:
        text = json.dumps(arguments, allow_nan=False)
    except ValueError:
        where = _non_finite(arguments)
        raise _invalid(f"{where or 'the arguments'}: NaN and Infinity are not numbers JSON can carry; send a finite "
                       "number", where or None) from None
    except TypeError:  # not JSON data (a caller in Python): nothing to check here
        return
    if json_depth_exceeds(text.encode()):
        raise _invalid(f"the arguments are nested deeper than {MAX_JSON_DEPTH} levels; send flatter values")


def _non_finite(value: Any) -> str | None:
    """The path (`a.b[2]`, "" for the value itself) of the first NaN or ±Infinity in `value`, or None."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return where
        if isinstance(item, dict):
            stack += [(f"{where}.{k}" if where else str(k), v) for k, v in item.items()]
        elif isinstance(item, list | tuple):
            stack += [(f"{where}[{i}]", v) for i, v in enumerate(item)]
    return None


def path_value(p: ParamSpec, value: Any) -> str:
    """One path parameter, fully percent-encoded (`/`, `?`, `#`, `%` can never reach the route)."""
    if p.content_type:
        value = _json(value)
    name = pct(p.name)
    style = p.style if p.style in ("simple", "label", "matrix") else "simple"
    if isinstance(value, list):
        _no_delimiter(p, value, "." if style == "label" and p.explode else ",")
        items = [pct(v) for v in value]
        if style == "label":
            return "." + ("." if p.explode else ",").join(items)
        if style == "matrix":
            return "".join(f";{name}={i}" for i in items) if p.explode else f";{name}=" + ",".join(items)
        return ",".join(items)
    if isinstance(value, dict):
        _no_delimiter(p, [*value, *value.values()], ",")
        pairs = [(pct(k), pct(v)) for k, v in value.items()]
        flat = ",".join(f"{k},{v}" for k, v in pairs)
        if style == "label":
            return "." + (".".join(f"{k}={v}" for k, v in pairs) if p.explode else flat)
        if style == "matrix":
            return "".join(f";{k}={v}" for k, v in pairs) if p.explode else f";{name}={flat}"
        return ",".join(f"{k}={v}" for k, v in pairs) if p.explode else flat
    text = pct(value)
    if style == "label":
        return "." + text
    if style == "matrix":
        return f";{name}={text}" if text else f";{name}"
    return text


_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")


def render_path(template: str, values: Mapping[str, str]) -> str:
    """Fill a path template; dot-only segments are encoded so nothing can climb the tree."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in values:
            raise _invalid(f"the path parameter {name} has no value")
        return values[name]

    path = _PLACEHOLDER.sub(sub, template)
    segments = [s.replace(".", "%2E") if s and set(s) == {"."} else s for s in path.split("/")]
    return "/".join(segments)


def query_pairs(p: ParamSpec, value: Any) -> list[tuple[str, str]]:
    """One query parameter as encoded (name, value) pairs."""
    safe = _RESERVED_OK if p.allow_reserved else ""
    name = pct(p.name)

    def enc(v: Any) -> str:
        return pct(v, safe)

    if p.content_type:
        return [(name, enc(_json(value)))]
    if p.style == "deepObject" and isinstance(value, dict):
        return _deep_object(name, value, enc)
    delimiter = {"spaceDelimited": "%20", "pipeDelimited": "%7C"}.get(p.style, ",")
    if value in ([], {}):  # RFC 6570: an empty list or map is undefined, so not sent (not `name=`)
        return []
    if isinstance(value, list):
        if p.explode:
            return [(name, enc(v)) for v in value]
        _no_delimiter(p, value, unquote(delimiter))
        return [(name, delimiter.join(enc(v) for v in value))]
    if isinstance(value, dict):
        if p.explode:
            return [(pct(k), enc(v)) for k, v in value.items()]
        _no_delimiter(p, [*value, *value.values()], unquote(delimiter))
        return [(name, delimiter.join(f"{enc(k)}{delimiter}{enc(v)}" for k, v in value.items()))]
    return [(name, enc(value))]


def _no_delimiter(p: ParamSpec, items: list[Any], delimiter: str) -> None:
    """Items joined by `delimiter` into one value must not hold it: servers decode the value before
    they split it, so an encoded delimiter splits too (`[","]` would arrive as two empty items)."""
    for i, item in enumerate(items):
        if delimiter in _scalar(item):
            who = p.arg or p.name
            raise _invalid(f"{who}[{i}]: may not contain {delimiter!r}, which separates the items of {who} "
                           "on the wire", f"{who}[{i}]")


def _deep_object(prefix: str, value: dict[str, Any], enc: Callable[[Any], str]) -> list[tuple[str, str]]:
    # Nested objects recurse (a[b][c]=v); arrays repeat the key. The structural brackets stay
    # literal, as the OpenAPI examples and most servers expect; brackets inside a key are encoded,
    # so that no key can add a level (`{"x][y": 1}` is `a[x%5D%5By]`, not `a[x][y]`).
    out: list[tuple[str, str]] = []
    for key, item in value.items():
        name = f"{prefix}[{pct(key)}]"
        if isinstance(item, dict):
            out += _deep_object(name, item, enc)
        elif isinstance(item, list):
            out += [(name, enc(v)) for v in item]
        else:
            out.append((name, enc(item)))
    return out


def header_value(p: ParamSpec, value: Any) -> str:
    if p.content_type:
        text = _json(value)
    elif isinstance(value, list):
        text = ",".join(_scalar(v) for v in value)
    elif isinstance(value, dict):
        sep = "=" if p.explode else ","
        text = ",".join(f"{k}{sep}{_scalar(v)}" for k, v in value.items())
    else:
        text = _scalar(value)
    who = p.arg or p.name
    if any(c in text for c in "\r\n\0"):
        raise _invalid(f"{who}: header values cannot contain line breaks", p.arg)
    if not text.isascii():
        raise _invalid(f"{who}: header values are ASCII text only (HTTP sends no other characters)", p.arg)
    control = HEADER_CONTROL.search(text)
    if control:
        raise _invalid(f"{who}: header values cannot contain control characters (found {control.group()!r}); "
                       "send printable text", p.arg)
    if len(text) > MAX_HEADER_LENGTH:
        raise _invalid(f"{who}: {len(text)} characters is too long for an HTTP header (this server sends at most "
                       f"{MAX_HEADER_LENGTH}); send less", p.arg)
    return text.strip(" \t")  # HTTP drops spaces around a value; h11 refuses to send them


# RFC 9110 field values: visible characters, spaces and tabs (no other control character).
MAX_HEADER_LENGTH: Final = 16_384  # a common server limit for one header (uvicorn, Node, nginx's buffers)
MAX_URL_LENGTH: Final = 65_536  # httpx2 refuses longer URLs; most servers stop at 8 to 64 KB


def cookie_pairs(p: ParamSpec, value: Any) -> list[str]:
    if p.content_type:
        return [f"{p.name}={pct(_json(value))}"]
    if isinstance(value, list):
        if p.explode:
            return [f"{p.name}={pct(v)}" for v in value]
        return [f"{p.name}=" + ",".join(pct(v) for v in value)]
    if isinstance(value, dict):
        if p.explode:
            return [f"{pct(k)}={pct(v)}" for k, v in value.items()]
        return [f"{p.name}=" + ",".join(f"{pct(k)},{pct(v)}" for k, v in value.items())]
    return [f"{p.name}={pct(value)}"]


# ----------------------------------------------------------------------------- bodies


@dataclass(frozen=True)
class EncodedBody:
    """A request body ready for httpx2: raw content, or form fields plus file parts."""

    content: bytes | None = None
    content_type: str | None = None
    data: dict[str, str | list[str]] | None = None
    files: list[tuple[str, tuple[str | None, bytes, str]]] | None = None


def _b64(value: Any, what: str, arg: str | None) -> bytes:
    if not isinstance(value, str):
        raise _invalid(f"{what} must be a base64 string, got {type(value).__name__}", arg)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise _invalid(f"{what} is not valid base64", arg) from None


def encode_body(spec: BodySpec, value: Any) -> EncodedBody:
    """Encode a body value for `spec.media_type`."""
    mt = spec.media_type.split(";")[0].strip().lower()
    if spec.base64:
        return EncodedBody(_b64(value, spec.arg or "body", spec.arg), spec.media_type)
    if is_json_media(mt):
        return EncodedBody(_json(value).encode(), spec.media_type)
    if mt == "application/x-www-form-urlencoded":
        if not isinstance(value, dict):
            raise _invalid(f"{spec.arg or 'body'}: a form body must be an object", spec.arg)
        pairs: list[tuple[str, str]] = []
        for key, item in value.items():
            items = item if isinstance(item, list) else [item]
            pairs += [(key, _scalar(i) if not isinstance(i, dict) else _json(i)) for i in items]
        return EncodedBody(urlencode(pairs).encode(), spec.media_type)
    if mt == "multipart/form-data":
        if not isinstance(value, dict):
            raise _invalid(f"{spec.arg or 'body'}: a multipart body must be an object", spec.arg)
        return _multipart(spec, value)
    if mt == "application/octet-stream" and isinstance(value, str):  # a Manifest from before `base64`
        return EncodedBody(_b64(value, spec.arg or "body", spec.arg), spec.media_type)
    # text/plain, XML, any other media type: a string is sent as-is, anything else as JSON.
    text = value if isinstance(value, str) else _json(value)
    return EncodedBody(text.encode(), spec.media_type)


def _multipart(spec: BodySpec, value: dict[str, Any]) -> EncodedBody:
    """Binary properties become file parts, objects JSON parts, the rest plain fields.

    `spec.content_types` (the spec's `encoding.contentType`) overrides a part's content type.
    """
    data: dict[str, str | list[str]] = {}
    files: list[tuple[str, tuple[str | None, bytes, str]]] = []
    for key, item in value.items():
        declared = spec.content_types.get(key)
        if key in spec.binary:  # a bad value is named by its tool argument
            arg = next((a for a, prop in spec.properties.items() if prop == key), key)
            files.append((key, (key, _b64(item, arg, arg), declared or "application/octet-stream")))
        elif isinstance(item, dict) or (isinstance(item, list) and any(isinstance(i, dict | list) for i in item)):
            files.append((key, (None, _json(item).encode(), declared or "application/json")))
        elif declared:
            for part in item if isinstance(item, list) else [item]:
                files.append((key, (None, _scalar(part).encode(), declared)))
        elif isinstance(item, list):
            data[key] = [_scalar(i) for i in item]
        else:
            data[key] = _scalar(item)
    return EncodedBody(data=data, files=files or None)


# ============================================================================ building a request


@dataclass(frozen=True)
class Prepared:
    method: str
    url: str  # the real URL (may hold an auth query value)
    shown: str  # the same with secrets replaced by ***, for provenance and logs
    headers: dict[str, str]
    body: EncodedBody | None


def _param_value(p: ParamSpec, inputs: Mapping[str, Any], evaluate: Evaluate) -> Any:
    if p.arg is not None:
        value = inputs.get(p.arg)
    elif p.expr is not None:
        value = evaluate(p.expr)
        if value is None and p.required:
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_INVALID_RESPONSE,
                f"the {p.location} parameter {p.name} came out empty (expression {p.expr!r}); "
                "an earlier step did not return what this step needs",
            )
    else:
        value = p.value
    if value is None:
        if p.required:
            who = p.arg or p.name
            raise _invalid(f"{who} is required", p.arg)
        return MISSING
    return value


def body_value(spec: BodySpec, inputs: Mapping[str, Any], evaluate: Evaluate) -> Any:
    if spec.arg is not None or spec.expr is not None:
        value = inputs.get(spec.arg) if spec.arg is not None else evaluate(spec.expr or "")
        if value is None:
            if spec.required and not spec.fields:
                raise _invalid(f"{spec.arg or 'the request body'} is required", spec.arg)
            return _with_fields(spec, {}, {}, inputs) if spec.fields else MISSING
        if spec.fields:
            if not isinstance(value, dict):
                raise _invalid(f"{spec.arg or 'the request body'} must be an object here", spec.arg)
            return _with_fields(spec, dict(value), dict.fromkeys(value, spec.arg or "the body"), inputs)
        return value
    if spec.value is not None and not (spec.properties or spec.fixed or spec.exprs):
        if spec.fields and isinstance(spec.value, dict):
            return _with_fields(spec, dict(spec.value), {}, inputs)
        return spec.value  # a fixed whole body
    body: dict[str, Any] = {}
    owners: dict[str, str] = {}  # top-level key -> the argument that gave it (for conflict messages)
    for arg, prop in spec.properties.items():
        if inputs.get(arg) is not None or (arg in spec.nulls and arg in inputs):  # null_means: clear
            body[prop] = inputs[arg]
            owners[prop] = arg
    for prop, expr in spec.exprs.items():
        computed = evaluate(expr)
        if computed is not None:
            body[prop] = computed
    body.update(spec.fixed)
    if spec.fields:
        body = _with_fields(spec, body, owners, inputs)
    if not body and not spec.required:
        return MISSING
    if isinstance(body, dict) and len(body) < spec.min_properties:
        args = list(spec.properties)
        raise _invalid(f"give at least {spec.min_properties} of {', '.join(args)} (the request body may not be "
                       f"{'empty' if not body else 'this short'})", args[0] if args else None)
    return body


def _with_fields(spec: BodySpec, body: dict[str, Any], owners: dict[str, str], inputs: Mapping[str, Any]) -> Any:
    """Set each nested field (BodySpec.fields) into the body, creating the objects on the way.

    Objects an argument gave are copied before a field goes in (the arguments stay as given);
    a field that would overwrite a different value, or go into a non-object, is refused.
    """
    for f in spec.fields:
        if f.arg is not None:
            value = inputs.get(f.arg)
            if value is None and not (f.arg in spec.nulls and f.arg in inputs):  # null_means: clear sends it
                continue
        else:
            value = f.value
        who = f.arg or "a fixed value"
        node = body
        for depth, key in enumerate(f.path[:-1]):
            child = node.get(key)
            if child is None:
                child = {}
            elif not isinstance(child, dict):
                owner = owners.get(f.path[0], "a fixed value")
                raise _invalid(
                    f"{who} goes into the request body at {'.'.join(f.path)}, but {owner} sets "
                    f"{'.'.join(f.path[:depth + 1])} to a {type(child).__name__}, not an object; give only one of them",
                    f.arg,
                )
            else:
                child = dict(child)
            node[key] = child
            node = child
        leaf, current = f.path[-1], node.get(f.path[-1], MISSING)
        if isinstance(current, dict) and isinstance(value, dict) and not (current and value):
            value = {**current, **value}  # an empty object (a required container) meets its contents
        elif current is not MISSING and current != value:
            owner = owners.get(f.path[0], "a fixed value")
            raise _invalid(
                f"{who} and {owner} both set {'.'.join(f.path)} in the request body, to different values; "
                "give only one of them",
                f.arg,
            )
        node[leaf] = value
    return body


# Per OpenAPI, header parameters with these names are ignored; the rest protect the transport.
RESERVED_HEADERS: Final = frozenset(
    {
        "accept",
        "content-type",
        "authorization",
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "cookie",
    }
)


def prepare(settings: Settings, op: OperationSpec, inputs: Mapping[str, Any], evaluate: Evaluate) -> Prepared:
    """Build the request for one operation; raises ToolFailure(ARGUMENT_INVALID) on bad values."""
    path_values: dict[str, str] = {}
    query: list[tuple[str, str]] = []
    headers: dict[str, str] = dict(settings.headers)
    cookies: list[str] = list(settings.cookies)
    if op.accept:
        headers["Accept"] = op.accept
    names = _Names(settings, op)

    for p in op.params:
        value = _param_value(p, inputs, evaluate)
        if value is MISSING:
            if p.location == "path":
                raise _invalid(f"{p.arg or p.name} is required", p.arg)
            continue
        if p.location == "path":
            encoded = path_value(p, value)
            if encoded in ("", ".", ";" + pct(p.name)):
                raise _invalid(f"{p.arg or p.name} must not be empty (it is part of the URL path)", p.arg)
            path_values[p.name] = encoded
        elif p.location == "query":
            if value == "" and p.arg is not None and not p.allow_empty:  # OpenAPI: `?q=` only with allowEmptyValue
                raise _invalid(f"{p.arg}: may not be empty" + ("" if p.required else " (leave it out instead)"), p.arg)
            names.check(p, value)
            query += query_pairs(p, value)
        elif p.location == "header":
            if p.name.lower() in RESERVED_HEADERS:
                continue
            if names.server_header(p):
                continue  # the server's own header (static, auth) wins over a fixed or computed one
            headers[p.name] = header_value(p, value)
        else:
            names.check(p, value)
            cookies += cookie_pairs(p, value)
    if cookies:
        headers["Cookie"] = "; ".join(cookies)

    body: EncodedBody | None = None
    if op.body is not None:
        value = body_value(op.body, inputs, evaluate)
        if value is not MISSING:
            body = encode_body(op.body, value)
            if body.content_type:
                headers["Content-Type"] = body.content_type

    path = render_path(op.path, path_values)
    url, shown = _compose_url(settings, path, query, op.query)
    if len(url) > MAX_URL_LENGTH:
        raise _url_too_long(op, inputs, len(url))
    return Prepared(op.method.upper(), url, settings.redactor.text(shown), headers, body)


def _wire_name(name: str) -> str:
    """A query or cookie name as lenient servers read it: case-insensitive (ASP.NET), `.` and space
    as `_` (PHP), `a[...]` as `a` (PHP, Rails)."""
    name = unquote(name).casefold().replace(".", "_").replace(" ", "_")
    return name.split("[", 1)[0]


class _Names:
    """The query and cookie names of one request that arguments must not add a second value for.

    An exploded object (form `explode: true`, cookie form) turns its keys into names on the wire:
    a key that reads as another parameter, a fixed value or the server's credential would send
    a second copy of it, and many frameworks read the first (`?raw=tenant-evil&raw=tenant-acme`).
    """

    def __init__(self, settings: Settings, op: OperationSpec) -> None:
        self.declared: dict[str, dict[str, ParamSpec]] = {"query": {}, "cookie": {}}
        for p in op.params:
            if p.location in self.declared:
                self.declared[p.location][_wire_name(p.name)] = p
        self.server: dict[str, set[str]] = {"query": set(), "cookie": set()}
        if settings.query_auth:
            self.server["query"].add(_wire_name(settings.query_auth[0]))
        self.server["query"].update(_wire_name(k) for k, _ in settings.base_url.params.multi_items())
        self.server["cookie"].update(_wire_name(c.split("=", 1)[0]) for c in settings.cookies)
        self.server_headers = {h.lower() for h in settings.headers if h.lower() != "user-agent"}
        self.keys: dict[str, dict[str, str]] = {"query": {}, "cookie": {}}  # exploded key -> its argument

    def check(self, p: ParamSpec, value: Any) -> None:
        where = p.location
        own = _wire_name(p.name)
        if p.arg is not None and own in self.server[where]:
            raise _invalid(f"{p.arg}: the {where} parameter {p.name} is set by this server, not by arguments", p.arg)
        exploded = isinstance(value, dict) and p.explode and not p.content_type and (
            (where == "query" and p.style == "form") or where == "cookie")
        if not exploded:
            return
        who = p.arg or p.name
        for key in value:
            name = _wire_name(str(key))
            if name in self.server[where]:
                taken = f"the {where} parameter this server sets itself"
            elif name in self.declared[where] and name != own:
                other = self.declared[where][name]
                server = other.arg is None or other.arg.startswith("$")  # fixed, computed or internal ($dryRun)
                taken = "a value fixed by this server" if server else f"the argument {other.arg}"
                taken = f"the {where} parameter {other.name} ({taken})"
            elif name in self.keys[where]:
                taken = f"a key of the argument {self.keys[where][name]}"
            else:
                self.keys[where][name] = who
                continue
            raise _invalid(f"{who}.{key}: this key would be sent as {taken}; use another key", f"{who}.{key}")

    def server_header(self, p: ParamSpec) -> bool:
        """True for a fixed or computed header the server sets itself; an argument for one is refused."""
        if p.name.lower() not in self.server_headers:
            return False
        if p.arg is not None:
            raise _invalid(f"{p.arg}: the header {p.name} is set by this server, not by arguments", p.arg)
        return True


def _url_too_long(op: OperationSpec, inputs: Mapping[str, Any], length: int) -> ToolFailure:
    feeding = [p.arg for p in op.params if p.arg and p.location in ("path", "query") and inputs.get(p.arg) is not None]
    longest = max(feeding, key=lambda a: len(_scalar(inputs[a])), default=None)
    named = f" (the longest part: {longest}, {len(_scalar(inputs[longest]))} characters)" if longest else ""
    return _invalid(f"the request URL would be {length} characters{named}, over the limit of {MAX_URL_LENGTH}; "
                    "send shorter values", longest)


def _compose_url(
    settings: Settings, path: str, query: list[tuple[str, str]], raw_query: str | None = None
) -> tuple[str, str]:
    """The real URL and its display form (the auth query value as ***); base URLs hold no userinfo.

    `raw_query` (a followed next-page URL's query) is sent exactly as the upstream wrote it.
    """
    base = settings.base_url
    prefix = base.raw_path.split(b"?")[0].decode("ascii").rstrip("/")
    if not path.startswith("/"):
        path = "/" + path
    port = f":{base.port}" if base.port else ""
    host = f"[{base.host}]" if ":" in base.host else base.host
    tail = f"{host}{port}{prefix}{path}"
    parts = [base.query.decode("ascii")] if base.query else []
    parts += [raw_query] if raw_query else []
    parts += [f"{k}={v}" for k, v in query]
    shown_parts = list(parts)
    if settings.query_auth:
        name, value = settings.query_auth
        parts.append(f"{pct(name)}={pct(value)}")
        shown_parts.append(f"{pct(name)}=***")
    url = f"{base.scheme}://{tail}" + ("?" + "&".join(parts) if parts else "")
    shown = f"{base.scheme}://{tail}" + ("?" + "&".join(shown_parts) if shown_parts else "")
    return url, shown


def unsendable(error: UnicodeEncodeError, inputs: Mapping[str, Any]) -> Exception:
    """ARGUMENT_INVALID for an argument holding a lone surrogate (JSON allows "\\ud800", UTF-8 does not)."""
    field = next((k for k, v in inputs.items() if _lone_surrogate(v)), None)
    if field is None:
        return error  # not an argument's fault
    return _invalid(f"{field}: holds half of a UTF-16 character pair (a lone surrogate such as \\ud83d), "
                    "which cannot be sent; send whole characters", field)


def _lone_surrogate(value: Any) -> bool:
    try:
        _json(value).encode()
    except UnicodeEncodeError:
        return True
    return False
