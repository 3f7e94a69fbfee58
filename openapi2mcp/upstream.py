"""Forwarding: one tool step becomes one HTTP request to the upstream REST API (httpx2).

* Configuration (`resolve_settings`): the base URL and the auth/header secrets are expanded
  from the environment once, at start-up; a missing `${VAR}` is a `ConfigError` naming the
  variable and the manifest key.
* Serialisation: every parameter exactly as OpenAPI 3 says (path simple/label/matrix, query
  form/spaceDelimited/pipeDelimited/deepObject, header simple, cookie form, `content` params as
  JSON) and every body encoding (JSON, form, multipart, text, octet-stream, as-is). Path values
  are percent-encoded completely, so no argument can change the route, and the URL is always the
  configured origin plus an encoded path: no argument can change scheme, host or port. A value
  HTTP cannot carry (a lone surrogate, a non-ASCII header) is ARGUMENT_INVALID, not a crash.
* Sending: a pooled client, no automatic redirects (a few same-origin ones are followed for
  GET/HEAD), the body streamed and refused past `max_response_bytes`. `Upstream.fetch` is the one
  path of tool steps and resource reads: send, retry (retry.py), record, map errors, decode.
* Errors: HTTP status -> stable `ErrorCode` (the overlay's `failure_modes` first), quoting the
  upstream's own message, short; transport failures -> UPSTREAM_TIMEOUT / UPSTREAM_UNAVAILABLE.

Secrets never leave this module un-redacted: provenance URLs show `***` for auth query values and
`Redactor` scrubs known secret values from anything the runtime returns or logs.
"""

from __future__ import annotations

import base64
import binascii
import email.utils
import json
import re
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal
from urllib.parse import quote, urlencode

import anyio
import httpx2

from openapi2mcp import __version__
from openapi2mcp.errors import ErrorCode, ToolFailure
from openapi2mcp.manifest import (
    IDEMPOTENT_METHODS,
    BodySpec,
    FailureMode,
    MissingVariable,
    OperationSpec,
    ParamSpec,
    RetrySpec,
    UpstreamSpec,
    expand,
    optional,
    template_vars,
)


class ConfigError(Exception):
    """The server cannot start: a one-line message naming the variable and the manifest key."""


MAX_REDIRECTS: Final = 3
QUOTE_LIMIT: Final = 300
USER_AGENT: Final = f"openapi2mcp/{__version__}"

Evaluate = Callable[[str], Any]  # a JMESPath expression over the call's {inputs, steps}


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


def _invalid(message: str, field: str | None = None) -> ToolFailure:
    return ToolFailure.of(ErrorCode.ARGUMENT_INVALID, message, field=field)


# ============================================================================ settings & secrets

# Header names whose values are credentials even when they are not `auth`.
_SECRET_HEADER = re.compile(r"auth|key|token|secret|session|cookie|signature|credential|password", re.I)
_MIN_SECRET = 6  # shorter values would be scrubbed out of ordinary data


class Redactor:
    """Replaces known secret values with `***` in text and in JSON values."""

    def __init__(self, secrets: set[str]) -> None:
        self.secrets = tuple(sorted((s for s in secrets if len(s) >= _MIN_SECRET), key=len, reverse=True))
        # each secret as it appears inside serialised JSON (quotes, backslashes, control characters escaped)
        self._in_json = tuple(_json(s)[1:-1] for s in self.secrets)

    def text(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, "***")
        return text

    def value(self, value: Any) -> Any:
        """`value` with secrets replaced in every string and key; `value` itself when it holds none.

        Every upstream body passes here: one serialisation (C speed) finds out whether a secret
        occurs at all, so the node-by-node walk runs only for the rare body that has one.
        """
        if not self.secrets:
            return value
        try:
            text = _json(value)
        except (TypeError, ValueError):  # not plain JSON data: walk it
            return self._walk(value)
        return self._walk(value) if any(s in text for s in self._in_json) else value

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        if isinstance(value, dict):
            return {self.text(k): self._walk(v) for k, v in value.items()}
        return value


@dataclass(frozen=True)
class Settings:
    """The upstream configuration with the environment applied."""

    base_url: httpx2.URL
    headers: dict[str, str]  # static + auth headers
    query_auth: tuple[str, str] | None  # (name, value)
    cookies: list[str]  # "name=value" from auth
    redactor: Redactor
    missing: str | None = None  # set when a secret is missing and calls must fail

    @property
    def origin(self) -> tuple[str, str, int | None]:
        return _origin(self.base_url)


def _origin(url: httpx2.URL) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return (url.scheme, url.host, url.port or default)


def _secret_values(template: str, expanded: str, env: Mapping[str, str]) -> set[str]:
    found = {expanded}
    found.update(env[v] for v in template_vars(template) if env.get(v))
    return found


def resolve_settings(spec: UpstreamSpec, env: Mapping[str, str], *, require_secrets: bool = True) -> Settings:
    """Expand the upstream templates; raise ConfigError for what cannot be served.

    A missing base-URL variable always stops start-up. A missing secret stops start-up too
    unless `require_secrets` is False: then tools are listed and every call fails with
    CONFIGURATION_ERROR naming the variable.
    """
    try:
        raw = expand(spec.base_url, env)
    except MissingVariable as e:
        raise ConfigError(
            f"environment variable {e.name} is not set; upstream.base_url needs it ({spec.base_url!r})"
        ) from None
    base = _parse_base(raw, spec.base_url)

    secrets: set[str] = set()
    headers: dict[str, str] = {"User-Agent": USER_AGENT}
    query_auth: tuple[str, str] | None = None
    cookies: list[str] = []
    missing: list[str] = []

    def value(template: str | None, key: str, *, secret: bool) -> str:
        if template is None:
            raise ConfigError(f"{key} is not set in the manifest")
        try:
            out = expand(template, env)
        except MissingVariable as e:
            missing.append(f"environment variable {e.name} is not set; {key} needs it ({template!r})")
            return ""
        if secret:
            if not out.strip():
                if optional(template):  # `${TOKEN:-}`: the credential is optional; send none
                    return ""
                # set but empty: as good as missing, never send "Bearer "
                missing.append(f"{key} is empty ({template!r}); set the environment variable it names")
            secrets.update(_secret_values(template, out, env))
        return out

    for name, template in spec.headers.items():
        headers[name] = value(template, f"upstream.headers.{name}", secret=bool(_SECRET_HEADER.search(name)))

    for name in [n for n, v in headers.items() if v == "" and n != "User-Agent"]:
        del headers[name]  # an optional header secret that is not set: not sent
    auth = spec.auth
    if auth.type in ("bearer", "header", "query", "cookie"):
        secret = value(auth.value, "upstream.auth.value", secret=True)
        if not secret:
            pass  # optional and not set: no credential is sent
        elif auth.type == "bearer":
            headers["Authorization"] = "Bearer " + secret
        elif auth.type == "header":
            headers[auth.name or "X-API-Key"] = secret
        elif auth.type == "query":
            query_auth = (auth.name or "api_key", secret)
        else:
            cookies.append(f"{auth.name or 'session'}={secret}")
    elif auth.type == "basic":
        user = value(auth.username, "upstream.auth.username", secret=False)
        password = value(auth.password, "upstream.auth.password", secret=True)
        if user or password:
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            secrets.add(token)
            headers["Authorization"] = "Basic " + token

    if missing and require_secrets:
        raise ConfigError(missing[0])
    return Settings(
        base_url=base,
        headers=headers,
        query_auth=query_auth,
        cookies=cookies,
        redactor=Redactor(secrets),
        missing=missing[0] if missing else None,
    )


def _parse_base(raw: str, template: str) -> httpx2.URL:
    try:
        url = httpx2.URL(raw)
    except Exception:
        raise ConfigError(f"upstream.base_url is not a valid URL: {template!r}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigError(
            f"upstream.base_url must be an absolute http(s) URL like https://api.example.com/v1, got {template!r}"
        )
    if url.fragment:
        raise ConfigError(f"upstream.base_url must not have a #fragment: {template!r}")
    return url


# ============================================================================ serialisation

# allowReserved keeps RFC 3986 reserved characters except those that would split the query.
_RESERVED_OK: Final = ":/?[]@!$'()*,;"


def _scalar(value: Any) -> str:
    """A primitive as OpenAPI writes it: true/false, numbers as JSON, nested values as JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _pct(value: Any, safe: str = "") -> str:
    return quote(_scalar(value), safe=safe)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def path_value(p: ParamSpec, value: Any) -> str:
    """One path parameter, fully percent-encoded (`/`, `?`, `#`, `%` can never reach the route)."""
    if p.content_type:
        value = _json(value)
    name = _pct(p.name)
    style = p.style if p.style in ("simple", "label", "matrix") else "simple"
    if isinstance(value, list):
        items = [_pct(v) for v in value]
        if style == "label":
            return "." + ("." if p.explode else ",").join(items)
        if style == "matrix":
            return "".join(f";{name}={i}" for i in items) if p.explode else f";{name}=" + ",".join(items)
        return ",".join(items)
    if isinstance(value, dict):
        pairs = [(_pct(k), _pct(v)) for k, v in value.items()]
        flat = ",".join(f"{k},{v}" for k, v in pairs)
        if style == "label":
            return "." + (".".join(f"{k}={v}" for k, v in pairs) if p.explode else flat)
        if style == "matrix":
            return "".join(f";{k}={v}" for k, v in pairs) if p.explode else f";{name}={flat}"
        return ",".join(f"{k}={v}" for k, v in pairs) if p.explode else flat
    text = _pct(value)
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
    name = _pct(p.name)

    def enc(v: Any) -> str:
        return _pct(v, safe)

    if p.content_type:
        return [(name, enc(_json(value)))]
    if p.style == "deepObject" and isinstance(value, dict):
        return _deep_object(p.name, value, enc)
    delimiter = {"spaceDelimited": "%20", "pipeDelimited": "%7C"}.get(p.style, ",")
    if isinstance(value, list):
        if p.explode:
            return [(name, enc(v)) for v in value]
        return [(name, delimiter.join(enc(v) for v in value))]
    if isinstance(value, dict):
        if p.explode:
            return [(_pct(k), enc(v)) for k, v in value.items()]
        return [(name, delimiter.join(f"{enc(k)}{delimiter}{enc(v)}" for k, v in value.items()))]
    return [(name, enc(value))]


def _deep_object(prefix: str, value: dict[str, Any], enc: Callable[[Any], str]) -> list[tuple[str, str]]:
    # Nested objects recurse (a[b][c]=v); arrays repeat the key. Brackets stay literal, as the
    # OpenAPI examples and most servers expect.
    out: list[tuple[str, str]] = []
    for key, item in value.items():
        name = f"{prefix}[{key}]"
        if isinstance(item, dict):
            out += _deep_object(name, item, enc)
        elif isinstance(item, list):
            out += [(_deep_name(name), enc(v)) for v in item]
        else:
            out.append((_deep_name(name), enc(item)))
    return out


def _deep_name(name: str) -> str:
    return quote(name, safe="[]")


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
    if any(c in text for c in "\r\n\0"):
        raise _invalid(f"{p.arg or p.name}: header values cannot contain line breaks", p.arg)
    if not text.isascii():
        raise _invalid(f"{p.arg or p.name}: header values are ASCII text only (HTTP sends no other characters)", p.arg)
    return text


def cookie_pairs(p: ParamSpec, value: Any) -> list[str]:
    if p.content_type:
        return [f"{p.name}={_pct(_json(value))}"]
    if isinstance(value, list):
        if p.explode:
            return [f"{p.name}={_pct(v)}" for v in value]
        return [f"{p.name}=" + ",".join(_pct(v) for v in value)]
    if isinstance(value, dict):
        if p.explode:
            return [f"{_pct(k)}={_pct(v)}" for k, v in value.items()]
        return [f"{p.name}=" + ",".join(f"{_pct(k)},{_pct(v)}" for k, v in value.items())]
    return [f"{p.name}={_pct(value)}"]


# ----------------------------------------------------------------------------- bodies


@dataclass(frozen=True)
class EncodedBody:
    """A request body ready for httpx2: raw content, or form fields plus file parts."""

    content: bytes | None = None
    content_type: str | None = None
    data: dict[str, str | list[str]] | None = None
    files: list[tuple[str, tuple[str | None, bytes, str]]] | None = None


def is_json_media(media_type: str) -> bool:
    mt = media_type.split(";")[0].strip().lower()
    return mt == "application/json" or mt.endswith("+json")


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
    if mt == "application/octet-stream":
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


def _body_value(spec: BodySpec, inputs: Mapping[str, Any], evaluate: Evaluate) -> Any:
    if spec.arg is not None or spec.expr is not None:
        value = inputs.get(spec.arg) if spec.arg is not None else evaluate(spec.expr or "")
        if value is None:
            if spec.required:
                raise _invalid(f"{spec.arg or 'the request body'} is required", spec.arg)
            return MISSING
        return value
    if spec.value is not None and not (spec.properties or spec.fixed or spec.exprs):
        return spec.value  # a fixed whole body
    body: dict[str, Any] = {}
    for arg, prop in spec.properties.items():
        if inputs.get(arg) is not None:
            body[prop] = inputs[arg]
    for prop, expr in spec.exprs.items():
        computed = evaluate(expr)
        if computed is not None:
            body[prop] = computed
    body.update(spec.fixed)
    if not body and not spec.required:
        return MISSING
    return body


# Per OpenAPI, header parameters with these names are ignored; the rest protect the transport.
_RESERVED_HEADERS: Final = frozenset(
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

    for p in op.params:
        value = _param_value(p, inputs, evaluate)
        if value is MISSING:
            if p.location == "path":
                raise _invalid(f"{p.arg or p.name} is required", p.arg)
            continue
        if p.location == "path":
            encoded = path_value(p, value)
            if encoded in ("", ".", ";" + _pct(p.name)):
                raise _invalid(f"{p.arg or p.name} must not be empty (it is part of the URL path)", p.arg)
            path_values[p.name] = encoded
        elif p.location == "query":
            query += query_pairs(p, value)
        elif p.location == "header":
            if p.name.lower() not in _RESERVED_HEADERS:
                headers[p.name] = header_value(p, value)
        else:
            cookies += cookie_pairs(p, value)
    if cookies:
        headers["Cookie"] = "; ".join(cookies)

    body: EncodedBody | None = None
    if op.body is not None:
        value = _body_value(op.body, inputs, evaluate)
        if value is not MISSING:
            body = encode_body(op.body, value)
            if body.content_type:
                headers["Content-Type"] = body.content_type

    path = render_path(op.path, path_values)
    url, shown = _compose_url(settings, path, query)
    return Prepared(op.method.upper(), url, settings.redactor.text(shown), headers, body)


def _compose_url(settings: Settings, path: str, query: list[tuple[str, str]]) -> tuple[str, str]:
    """The real URL and its display form (no userinfo, auth query value as ***)."""
    base = settings.base_url
    prefix = base.raw_path.split(b"?")[0].decode("ascii").rstrip("/")
    if not path.startswith("/"):
        path = "/" + path
    port = f":{base.port}" if base.port else ""
    host = f"[{base.host}]" if ":" in base.host else base.host
    userinfo = base.userinfo.decode("ascii") + "@" if base.userinfo else ""
    tail = f"{host}{port}{prefix}{path}"
    parts = [base.query.decode("ascii")] if base.query else []
    parts += [f"{k}={v}" for k, v in query]
    shown_parts = list(parts)
    if settings.query_auth:
        name, value = settings.query_auth
        parts.append(f"{_pct(name)}={_pct(value)}")
        shown_parts.append(f"{_pct(name)}=***")
    url = f"{base.scheme}://{userinfo}{tail}" + ("?" + "&".join(parts) if parts else "")
    shown = f"{base.scheme}://{tail}" + ("?" + "&".join(shown_parts) if shown_parts else "")
    return url, shown


# ============================================================================ responses


@dataclass(frozen=True)
class UpstreamResponse:
    status: int
    reason: str
    headers: httpx2.Headers
    body: bytes
    method: str
    url: str  # redacted
    operation: str
    elapsed_ms: int

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def media_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def charset(self) -> str | None:
        m = re.search(r"charset=\"?([\w.:-]+)", self.headers.get("content-type", ""), re.I)
        return m.group(1) if m else None

    def provenance(self, step: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"operation": self.operation, "method": self.method, "url": self.url}
        out["status"] = self.status
        out["ms"] = self.elapsed_ms
        if step is not None:
            out["step"] = step
        return out


@dataclass(frozen=True)
class Payload:
    """A decoded body: JSON value, text, bytes, or nothing."""

    kind: Literal["json", "text", "binary", "empty"]
    value: Any
    media_type: str = ""
    raw: bytes = field(default=b"", repr=False)


_TEXT_TYPES: Final = frozenset(
    {
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/javascript",
        "application/graphql",
    }
)


def _is_text(mt: str) -> bool:
    return mt.startswith("text/") or mt in _TEXT_TYPES or mt.endswith(("+xml", "+yaml"))


# A lone surrogate: valid JSON ("\ud83d" of an emoji cut in half, as UTF-16 string APIs do), no valid
# Unicode. It would fail every later step (UTF-8 encoding for sizes, URLs, the MCP response), so
# decoding replaces it with U+FFFD, as invalid UTF-8 in a text body is replaced.
_SURROGATE: Final = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")


def _loads(body: bytes) -> Any:
    value = json.loads(body)
    return _whole_characters(value) if _SURROGATE.search(body) else value


def _whole_characters(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_whole_characters(v) for v in value]
    if isinstance(value, dict):
        return {_whole_characters(k): _whole_characters(v) for k, v in value.items()}
    return value


def decode(resp: UpstreamResponse) -> Payload:
    mt = resp.media_type
    if not resp.body or resp.method == "HEAD":
        return Payload("empty", None, mt)
    if is_json_media(mt):
        try:
            return Payload("json", _loads(resp.body), mt)
        except ValueError:
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_INVALID_RESPONSE,
                f"the upstream sent invalid JSON ({mt}, {len(resp.body)} bytes)",
                status=resp.status,
            ) from None
    if _is_text(mt):
        return Payload("text", resp.body.decode(resp.charset or "utf-8", "replace"), mt)
    if not mt:  # undeclared: JSON if it parses, text if it decodes, else bytes
        try:
            return Payload("json", _loads(resp.body), "application/json")
        except ValueError:
            pass
        try:
            return Payload("text", resp.body.decode("utf-8"), "text/plain")
        except UnicodeDecodeError:
            return Payload("binary", resp.body, "application/octet-stream", resp.body)
    return Payload("binary", resp.body, mt, resp.body)


# ============================================================================ forwarded inbound headers

# The allowlisted headers of the inbound MCP request being served (overlay upstream.forward_headers;
# set by the runtime around one tool call). They never replace a header the request already has.
FORWARDED_HEADERS: ContextVar[Mapping[str, str] | None] = ContextVar("openapi2mcp_forwarded_headers", default=None)


def add_forwarded(headers: dict[str, str]) -> None:
    forwarded = FORWARDED_HEADERS.get()
    if not forwarded:
        return
    present = {h.lower() for h in headers}
    for name, value in forwarded.items():
        if name.lower() not in present and name.lower() not in _RESERVED_HEADERS:
            headers[name] = value


# ============================================================================ the client


class Upstream:
    """One pooled httpx2 client per Runtime; created lazily inside the serving event loop."""

    def __init__(self, spec: UpstreamSpec, env: Mapping[str, str], *, require_secrets: bool = True) -> None:
        self.spec = spec
        self.settings = resolve_settings(spec, env, require_secrets=require_secrets)
        self._client: httpx2.AsyncClient | None = None

    @property
    def redactor(self) -> Redactor:
        return self.settings.redactor

    @property
    def client(self) -> httpx2.AsyncClient:
        if self._client is None:
            t = self.spec.timeout
            self._client = httpx2.AsyncClient(
                timeout=httpx2.Timeout(t.read, connect=t.connect, pool=t.connect),
                # under the common 5 s keep-alive of servers (uvicorn, Node): reuse only connections
                # the upstream has not yet closed
                limits=httpx2.Limits(keepalive_expiry=4.0),
                verify=self.spec.verify_tls,
                follow_redirects=False,  # redirects are followed by hand, same origin only
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    def preview(
        self, op: OperationSpec, inputs: Mapping[str, Any], evaluate: Evaluate, *,
        headers: Mapping[str, str] | None = None,
    ) -> Prepared:
        """The request `send` would make, not sent (dry runs show it; `headers`: e.g. the idempotency key)."""
        if self.settings.missing:
            raise ToolFailure.of(
                ErrorCode.CONFIGURATION_ERROR,
                f"the server is not configured to call the upstream: {self.settings.missing}",
            )
        try:
            prepared = prepare(self.settings, op, inputs, evaluate)
        except UnicodeEncodeError as e:
            raise _unsendable(e, inputs) from None
        prepared.headers.update(headers or {})
        add_forwarded(prepared.headers)
        return prepared

    async def send(
        self, op: OperationSpec, inputs: Mapping[str, Any], evaluate: Evaluate, *,
        headers: Mapping[str, str] | None = None,
    ) -> UpstreamResponse:
        prepared = self.preview(op, inputs, evaluate, headers=headers)
        client = self.client
        body = prepared.body or EncodedBody()
        try:
            request = client.build_request(
                prepared.method,
                prepared.url,
                headers=prepared.headers,
                content=body.content,
                data=body.data,
                files=body.files,
            )
        except UnicodeEncodeError as e:  # form fields are encoded here
            raise _unsendable(e, inputs) from None
        shown = prepared.shown
        started = time.monotonic()
        for hop in range(MAX_REDIRECTS + 1):
            response = await self._send(client, request)
            try:
                if response.is_redirect and prepared.method in ("GET", "HEAD"):
                    if hop == MAX_REDIRECTS:
                        raise ToolFailure.of(
                            ErrorCode.UPSTREAM_ERROR,
                            f"the upstream redirected more than {MAX_REDIRECTS} times; not followed",
                            status=response.status_code,
                        )
                    request, shown = self._redirect(client, request, response)
                    continue
                content = await self._read(response)
            finally:
                await response.aclose()
            return UpstreamResponse(
                status=response.status_code,
                reason=response.reason_phrase,
                headers=response.headers,
                body=content,
                method=prepared.method,
                url=shown,
                operation=op.id,
                elapsed_ms=int((time.monotonic() - started) * 1000),
            )
        raise AssertionError("unreachable")  # pragma: no cover

    async def fetch(
        self, op: OperationSpec, inputs: Mapping[str, Any], evaluate: Evaluate, *,
        requests: list[dict[str, Any]], headers: Mapping[str, str] | None = None, retries: RetrySpec | None = None,
        failure_modes: Mapping[str, FailureMode] | None = None, step: str | None = None,
    ) -> tuple[UpstreamResponse, Payload]:
        """One operation as tool steps and resource reads run it, start to finish.

        Sent, and retried when retry.py allows (`headers` holding an idempotency key make a write
        retryable; `retries`: the tool's, else the upstream's); every attempt is recorded in
        `requests` (labelled with `step` when given); an answer that is not 2xx is raised as its
        stable error (`failure_modes` first); the body comes back decoded.
        """
        from openapi2mcp import retry  # retry.py builds on this module

        plan = retry.plan(op.method, keyed=bool(headers), tool=retries, upstream=self.spec.retries)

        def retried(entry: dict[str, Any]) -> None:
            shown = {"operation": op.id, "method": op.method.upper(), **entry, "retried": True}
            requests.append({**shown, "step": step} if step else shown)

        try:
            resp = await retry.send(lambda: self.send(op, inputs, evaluate, headers=headers), plan, on_retry=retried)
        except anyio.get_cancelled_exc_class():  # the call was cancelled: the request may have reached the upstream
            entry = {"operation": op.id, "method": op.method.upper(), "status": None, "cancelled": True}
            requests.append({**entry, "step": step} if step else entry)
            raise
        requests.append(resp.provenance(step))
        if not resp.ok:
            raise self.failure(resp, op, failure_modes or {})
        return resp, decode(resp)

    async def _send(self, client: httpx2.AsyncClient, request: httpx2.Request) -> httpx2.Response:
        try:
            try:
                return await client.send(request, stream=True)
            except (httpx2.RemoteProtocolError, httpx2.ReadError, httpx2.WriteError):
                # A pooled keep-alive connection the upstream closed just as we reused it: the
                # request never got an answer. Safe to send once more, on a fresh connection,
                # when repeating it cannot do anything twice.
                if request.method not in IDEMPOTENT_METHODS:
                    raise
                return await client.send(request, stream=True)
        except httpx2.ConnectTimeout:
            raise _unavailable("the upstream did not accept a connection in time") from None
        except httpx2.TimeoutException:
            raise _timeout() from None
        except httpx2.TransportError as e:
            raise _unavailable(f"could not reach the upstream ({type(e).__name__})") from None

    def _redirect(
        self, client: httpx2.AsyncClient, request: httpx2.Request, response: httpx2.Response
    ) -> tuple[httpx2.Request, str]:
        target = request.url.join(response.headers["location"])
        if _origin(target) != self.settings.origin:
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_ERROR,
                "the upstream redirected to another origin; not followed",
                status=response.status_code,
            )
        shown_params = list(target.params.multi_items())
        if self.settings.query_auth:  # keep the API key on same-origin hops, never show it
            name, value = self.settings.query_auth
            kept = [(k, v) for k, v in shown_params if k != name]
            target = target.copy_with(params=[*kept, (name, value)])
            shown_params = [*kept, (name, "***")]
        shown = str(target.copy_with(username=None, password=None, query=None))
        if shown_params:
            shown += "?" + "&".join(f"{_pct(k)}={v if v == '***' else _pct(v)}" for k, v in shown_params)
        new = client.build_request(request.method, target, headers=request.headers)
        return new, self.redactor.text(shown)

    async def _read(self, response: httpx2.Response) -> bytes:
        cap = self.spec.max_response_bytes
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > cap:
            raise _too_large(cap, response.status_code)
        chunks: list[bytes] = []
        total = 0
        try:
            async for chunk in response.aiter_bytes():
                total += len(chunk)
                if total > cap:
                    raise _too_large(cap, response.status_code)
                chunks.append(chunk)
        except httpx2.TimeoutException:
            raise _timeout() from None
        except httpx2.DecodingError:
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_INVALID_RESPONSE,
                "the upstream sent a body that could not be decoded (bad compression)",
                status=response.status_code,
            ) from None
        except httpx2.TransportError as e:
            raise _unavailable(
                f"the upstream connection broke while reading the response ({type(e).__name__})"
            ) from None
        return b"".join(chunks)

    def failure(self, resp: UpstreamResponse, op: OperationSpec, modes: Mapping[str, FailureMode]) -> ToolFailure:
        return status_failure(resp, op, modes, self.redactor)


def _unsendable(error: UnicodeEncodeError, inputs: Mapping[str, Any]) -> Exception:
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


def _timeout() -> ToolFailure:
    return ToolFailure.of(
        ErrorCode.UPSTREAM_TIMEOUT,
        "the upstream did not answer in time; retry later (the request may or may not have taken effect)",
        retryable=True,
    )


def _unavailable(message: str) -> ToolFailure:
    return ToolFailure.of(ErrorCode.UPSTREAM_UNAVAILABLE, message + "; retry later", retryable=True)


def _too_large(cap: int, status: int) -> ToolFailure:
    return ToolFailure.of(
        ErrorCode.RESPONSE_TOO_LARGE,
        f"the upstream response is larger than this server's limit of {cap} bytes; "
        "ask for less (filters, a smaller page or limit, fewer fields)",
        status=status,
    )


# ============================================================================ status -> error

_BUILTIN: Final[dict[int, tuple[ErrorCode, str, str]]] = {
    400: (ErrorCode.ARGUMENT_INVALID, "the upstream rejected the request", "Check the arguments."),
    422: (ErrorCode.ARGUMENT_INVALID, "the upstream rejected the request", "Check the arguments."),
    401: (
        ErrorCode.UNAUTHORIZED,
        "the upstream refused the server's credentials",
        "The server's API credential is missing, wrong or expired; changing arguments will not help.",
    ),
    403: (
        ErrorCode.FORBIDDEN,
        "the upstream denied access",
        "The server's credential lacks permission for this operation or resource.",
    ),
    404: (ErrorCode.NOT_FOUND, "not found", "Check the identifiers, or list or search first."),
    409: (
        ErrorCode.CONFLICT,
        "conflict",
        "The resource changed or already exists; read it again before retrying.",
    ),
    412: (
        ErrorCode.PRECONDITION_FAILED,
        "precondition failed",
        "The resource changed since it was read; read it again.",
    ),
    413: (ErrorCode.PAYLOAD_TOO_LARGE, "the request is too large for the upstream", "Send less data."),
    429: (ErrorCode.RATE_LIMITED, "rate limited by the upstream", "Wait, then retry."),
}


def _builtin(status: int) -> tuple[ErrorCode, bool, str, str]:
    if status in _BUILTIN:
        code, what, advice = _BUILTIN[status]
        return code, status == 429, what, advice
    if status >= 500:
        retry = status in (502, 503, 504)
        return ErrorCode.UPSTREAM_ERROR, retry, "the upstream failed", "Retry later." if retry else ""
    if 300 <= status < 400:
        return (
            ErrorCode.UPSTREAM_ERROR,
            False,
            "the upstream answered with a redirect, which is not followed",
            "",
        )
    return ErrorCode.UPSTREAM_ERROR, False, "the upstream refused the request", ""


def _failure_mode(status: int, modes: Mapping[str, FailureMode]) -> FailureMode | None:
    for key in (str(status), f"{status // 100}XX", f"{status // 100}xx", "default"):
        if key in modes:
            return modes[key]
    return None


def status_failure(
    resp: UpstreamResponse, op: OperationSpec, modes: Mapping[str, FailureMode], redactor: Redactor
) -> ToolFailure:
    """Map a non-2xx response to a ToolFailure; the overlay's failure_modes win."""
    status = resp.status
    document = _json_document(resp)
    said = upstream_message(resp, document)
    said = clip_quote(redactor.text(said)) if said else ""
    code, retryable, what, advice = _builtin(status)
    mode = _failure_mode(status, modes)
    if mode is not None:
        code_text = mode.code
        retryable = mode.retryable if mode.retryable is not None else retryable
        message = mode.message or f"{what} ({op.method} {op.path} returned {status})"
        if said:
            message += f" (upstream said: {said})"
    else:
        code_text = str(code)
        message = f"{what} ({op.method} {op.path} returned {status})"
        if said:
            message += f": {said.rstrip('.')}"
        if advice:
            message += f". {advice}"
    retry_after = _retry_after(resp.headers) if status in (429, 503) else None
    field = _field_hint(document, op) if code_text == ErrorCode.ARGUMENT_INVALID else None
    return ToolFailure.of(code_text, message, retryable=retryable, field=field, status=status, retry_after=retry_after)


def clip_quote(text: str, limit: int = QUOTE_LIMIT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json_document(resp: UpstreamResponse) -> Any:
    if not resp.body or len(resp.body) > 1_000_000:
        return None
    if resp.media_type and not is_json_media(resp.media_type):
        return None
    try:
        return _loads(resp.body)
    except ValueError:
        return None


def _dig(document: Any, *path: str | int) -> Any:
    for part in path:
        if isinstance(part, int):
            if not isinstance(document, list) or len(document) <= part:
                return None
            document = document[part]
        else:
            if not isinstance(document, dict):
                return None
            document = document.get(part)
    return document


# Where APIs put their error text, most specific first.
_MESSAGE_PATHS: Final[tuple[tuple[str | int, ...], ...]] = (
    ("error", "message"),
    ("message",),
    ("error_description",),
    ("detail", 0, "msg"),  # FastAPI 422
    ("errors", 0, "message"),
    ("errors", 0, "detail"),
    ("error",),
    ("detail",),
    ("title",),
)


def upstream_message(resp: UpstreamResponse, document: Any = None) -> str:
    """The upstream's own explanation, if it gave one (JSON error bodies, RFC 7807, short text)."""
    if document is None:
        document = _json_document(resp)
    if isinstance(document, dict):
        title, detail = document.get("title"), document.get("detail")
        if resp.media_type == "application/problem+json" and isinstance(title, str) and isinstance(detail, str):
            return f"{title}: {detail}"
        for path in _MESSAGE_PATHS:
            found = _dig(document, *path)
            if isinstance(found, str) and found.strip():
                return found
        return ""
    if resp.media_type in ("text/plain", "") and resp.body and len(resp.body) < 10_000:
        text = resp.body.decode("utf-8", "replace").strip()
        return text.splitlines()[0] if text else ""
    return ""


def _field_hint(document: Any, op: OperationSpec) -> str | None:
    """The argument an upstream validation error names, mapped back from the wire name."""
    wire = None
    for path in (
        ("error", "param"),
        ("error", "field"),
        ("errors", 0, "field"),
        ("errors", 0, "param"),
        ("invalid_params", 0, "name"),
    ):
        found = _dig(document, *path)
        if isinstance(found, str):
            wire = found
            break
    loc = _dig(document, "detail", 0, "loc")
    if wire is None and isinstance(loc, list) and loc and isinstance(loc[-1], str):
        wire = loc[-1]
    if wire is None:
        return None
    for p in op.params:
        if p.name == wire and p.arg:
            return p.arg
    if op.body is not None:
        for arg, prop in op.body.properties.items():
            if prop == wire:
                return arg
    return None


def _retry_after(headers: httpx2.Headers) -> float | None:
    value = headers.get("retry-after", "").strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, round((when - datetime.now(UTC)).total_seconds(), 1))
