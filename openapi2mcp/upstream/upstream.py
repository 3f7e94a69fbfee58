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

Secrets never leave this module un-redacted: provenance URLs show `***` for auth query values,
`Redactor` scrubs every known secret, in every encoding an upstream may echo it in, from anything
the runtime returns, a binary body holding one is refused, and `redact_logs` scrubs every log
record of the process. What arguments cannot do (collide with server-set names, carry NaN) and
what upstream input is refused (over-deep JSON, broken redirects): docs/security.md, "Upstream
input, secrets and encodings".
"""

from __future__ import annotations

import base64
import binascii
import codecs
import email.utils
import itertools
import json
import logging
import math
import operator
import re
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal
from urllib.parse import quote, unquote, urlencode

import anyio
import httpx2

from openapi2mcp import __version__
from openapi2mcp.errors import ErrorCode, ToolFailure
from openapi2mcp.manifest import (
    BASE_URL_VAR,
    IDEMPOTENT_METHODS,
    AuthSpec,
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
from openapi2mcp.upstream.errorbody import Complaint, read_complaint


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
SECRET_HEADER = re.compile(r"auth|key|token|secret|session|cookie|signature|credential|password", re.I)
_MIN_SECRET = 6  # shorter values would be scrubbed out of ordinary data


class Redactor:
    """Replaces every known secret, in every form it can come back in, with `***`.

    A secret sent upstream comes back the way the upstream writes what it received: raw, in a
    URL percent-encoded (`quote` and `quote_plus`, upper- or lower-case hex, even twice), in JSON
    escaped (`\\uXXXX`, `\\/`), in HTML as entities, and base64-encoded (an echoed Basic header,
    a whole request as a blob) at any byte alignment. `secret_pattern` matches each character of
    a secret in any of these forms, so a mix of them is found too. What no list of encodings can
    catch: an upstream that transforms the secret on purpose (reversed, encrypted) — see
    docs/security.md#upstream-input-secrets-and-encodings.
    """

    def __init__(self, secrets: set[str]) -> None:
        self.secrets = tuple(sorted((s for s in secrets if len(s) >= _MIN_SECRET), key=len, reverse=True))
        self._pattern: re.Pattern[str] | None = None
        self._bytes: re.Pattern[bytes] | None = None
        # Scanning with the pattern costs ~0.3 s a MB; a substring search for the anchors, ~1 ms.
        self._anchors: tuple[str, ...] | None = ()
        self._byte_anchors: tuple[bytes, ...] | None = ()
        if self.secrets:
            source = secret_pattern(self.secrets)
            self._pattern = re.compile(source)
            self._bytes = re.compile(_utf8(source))
            self._anchors = _anchors(self.secrets)
            self._byte_anchors = tuple(a.encode("ascii") for a in self._anchors) if self._anchors is not None else None

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def _maybe(self, text: str) -> bool:
        return self._pattern is not None and (self._anchors is None or any(a in text for a in self._anchors))

    def text(self, text: str) -> str:
        return self._pattern.sub("***", text) if self._pattern is not None and self._maybe(text) else text

    def found(self, data: bytes | str) -> bool:
        """Whether `data` (raw bytes of a body, or text) holds a secret in any known form."""
        if isinstance(data, str):
            return self._maybe(data) and self._pattern is not None and self._pattern.search(data) is not None
        if self._bytes is None:
            return False
        if self._byte_anchors is not None and not any(a in data for a in self._byte_anchors):
            return False
        return self._bytes.search(data) is not None

    def value(self, value: Any) -> Any:
        """`value` with secrets replaced in every string and key; `value` itself when it holds none.

        Every upstream body passes here: one serialisation (C speed) and one scan find out
        whether a secret occurs at all, so the node-by-node walk runs only for the rare body
        that has one (the pattern also knows the JSON-escaped forms the serialisation writes).
        """
        if self._pattern is None:
            return value
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError):  # not plain JSON data: walk it
            return self._walk(value)
        return self._walk(value) if self.found(text) else value

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        if isinstance(value, dict):
            return {self.text(k): self._walk(v) for k, v in value.items()}
        return value


def _hex(value: int, width: int = 2) -> str:
    """A number as hex digits in either case, as a pattern (`2[bB]`)."""
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{value:0{width}x}")


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8", "surrogateescape")  # undecodable bytes of an environment variable
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


_JSON_SHORT: Final = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n",
                      "\r": "\\r", "\t": "\\t"}
_HTML_NAMED: Final = {"&": "amp", "<": "lt", ">": "gt", '"': "quot", "'": "apos", "+": "plus", "/": "sol",
                      "=": "equals"}


_UNRESERVED: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _char_forms(c: str) -> str:
    """A pattern for one character of a secret in every form an upstream may echo it.

    Letters, digits and `-._~` stay as they are in every encoding in use (percent-encoding,
    JSON, HTML), which also makes the runs of them the anchors of the fast check.
    """
    if c in _UNRESERVED:
        return re.escape(c)
    code = ord(c)
    forms = [re.escape(c), "".join(f"%(?:25)?{_hex(b)}" for b in _utf8(c))]  # percent-encoded, also twice
    if c == " ":
        forms.append(r"\+")  # quote_plus
    elif c == "+":
        forms.append(" ")  # a raw `+` read back as form data (PHP's $_COOKIE, parse_qs)
    if code > 0xFFFF:  # JSON writes it as a UTF-16 surrogate pair
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        forms.append(rf"\\u{_hex(high, 4)}\\u{_hex(low, 4)}")
    else:
        forms.append(rf"\\u{_hex(code, 4)}")
    if c in _JSON_SHORT:
        forms.append(re.escape(_JSON_SHORT[c]))
    forms.append(f"&#(?:0*{code}|[xX]0*{_hex(code, 1)});")  # HTML character references
    if c in _HTML_NAMED:
        forms.append(f"&{_HTML_NAMED[c]};")
    return "(?:" + "|".join(forms) + ")"


def _base64_fragments(secret: str) -> set[str]:
    """What base64 of any byte stream holding `secret` contains of it, whatever its alignment.

    At byte offset k within the stream, the base64 characters fully determined by the secret's
    bytes are those from ceil(8k/6) to floor(8(k+n)/6): computed for k = 0, 1, 2, in the standard
    and the URL-safe alphabet.
    """
    raw = _utf8(secret)
    out: set[str] = set()
    for k in range(3):
        encoded = base64.b64encode(b"\0" * k + raw).decode("ascii")
        middle = encoded[-(-8 * k // 6): (8 * (k + len(raw))) // 6]
        if len(middle) >= _MIN_SECRET:
            out.add(middle)
            out.add(middle.replace("+", "-").replace("/", "_"))
    return out


def _secret_forms(secrets: tuple[str, ...]) -> list[str]:
    """The secrets and their base64 fragments, longest first."""
    forms = set(secrets)
    for secret in secrets:
        forms |= _base64_fragments(secret)
    return sorted(forms, key=lambda f: (-len(f), f))


def secret_pattern(secrets: tuple[str, ...]) -> str:
    """One regular expression matching every secret and its base64 fragments, each in every form."""
    return "|".join("".join(_char_forms(c) for c in form) for form in _secret_forms(secrets))


_ANCHOR_MIN: Final = 4


def _anchors(secrets: tuple[str, ...]) -> tuple[str, ...] | None:
    """The longest run of letters and digits of every form: each is in the text whenever that form is.

    None when some form has no run of `_ANCHOR_MIN` characters: then every text is scanned.
    """
    out: set[str] = set()
    for form in _secret_forms(secrets):
        runs = re.findall(r"[A-Za-z0-9._~-]+", form)
        best = max(runs, key=len, default="")
        if len(best) < _ANCHOR_MIN:
            return None
        out.add(best)
    return tuple(out)


@dataclass(frozen=True)
class Settings:
    """The upstream configuration with the environment applied."""

    base_url: httpx2.URL
    headers: dict[str, str]  # static + auth headers
    query_auth: tuple[str, str] | None  # (name, value)
    cookies: list[str]  # "name=value" from auth
    redactor: Redactor
    missing: str | None = None  # set when a secret is missing and calls must fail
    no_credential: str | None = None  # set when no credential is sent: why, and what to set

    @property
    def origin(self) -> tuple[str, str, int | None]:
        return _origin(self.base_url)


def _origin(url: httpx2.URL) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return (url.scheme, url.host, url.port or default)


def _secret_values(template: str, expanded: str, env: Mapping[str, str]) -> set[str]:
    found = {expanded}
    found.update(env[v].strip(" \t\r\n") for v in template_vars(template) if env.get(v))
    return found


def resolve_settings(spec: UpstreamSpec, env: Mapping[str, str], *, require_secrets: bool = True) -> Settings:
    """Expand the upstream templates; raise ConfigError for what cannot be served.

    A missing base-URL variable always stops start-up. A missing secret stops start-up too
    unless `require_secrets` is False: then tools are listed and every call fails with
    CONFIGURATION_ERROR naming the variable.
    """
    base = _parse_base(*base_url(spec, env))

    secrets: set[str] = _base_url_secrets(base, spec.base_url, env)
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
            out = out.strip(" \t\r\n")  # a credential read with `$(cat file)` keeps its newline: never meant
            if not out:
                if optional(template):  # `${TOKEN:-}`: the credential is optional; send none
                    return ""
                # set but empty: as good as missing, never send "Bearer "
                missing.append(f"{key} is empty ({template!r}); set the environment variable it names")
            secrets.update(_secret_values(template, out, env))
        return out

    for name, template in spec.headers.items():
        headers[name] = value(template, f"upstream.headers.{name}", secret=bool(SECRET_HEADER.search(name)))

    for name in [n for n, v in headers.items() if v == "" and n != "User-Agent"]:
        del headers[name]  # an optional header secret that is not set: not sent
    auth = _auth_from_environment(env) if spec.auth.type == "env" else spec.auth
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

    _check_header_values(headers, cookies, spec)
    if missing and require_secrets:
        raise ConfigError(missing[0])
    sent = bool(query_auth or cookies or "Authorization" in headers or secrets)
    return Settings(
        base_url=base,
        headers=headers,
        query_auth=query_auth,
        cookies=cookies,
        redactor=Redactor(secrets),
        missing=missing[0] if missing else None,
        no_credential=None if sent else _no_credential(spec.auth),
    )


_ENV_TOKEN: Final = "OPENAPI2MCP_TOKEN"
_ENV_USER: Final = "OPENAPI2MCP_USERNAME"
_ENV_PASSWORD: Final = "OPENAPI2MCP_PASSWORD"


def _auth_from_environment(env: Mapping[str, str]) -> AuthSpec:
    """Auth `env`: a bearer token or basic credentials, by which variables are set; else none."""
    token = env.get(_ENV_TOKEN, "").strip()
    basic = any(env.get(v, "").strip() for v in (_ENV_USER, _ENV_PASSWORD))
    if token and basic:
        raise ConfigError(f"both {_ENV_TOKEN} and {_ENV_USER}/{_ENV_PASSWORD} are set; the spec declares no "
                          "security scheme to choose between them: set one, or upstream.auth in an overlay")
    if token:
        return AuthSpec(type="bearer", value="${" + _ENV_TOKEN + "}")
    if basic:
        return AuthSpec(type="basic", username="${" + _ENV_USER + ":-}", password="${" + _ENV_PASSWORD + ":-}")
    return AuthSpec()


def _no_credential(auth: AuthSpec) -> str:
    """Why no credential is sent, and how to send one: said when the upstream answers 401."""
    if auth.type == "env":
        return (f"no credential is configured: the spec declares no security scheme; set {_ENV_TOKEN} (sent as a "
                f"bearer token) or {_ENV_USER} and {_ENV_PASSWORD} (basic auth), or upstream.auth in an overlay")
    if auth.type == "none":
        return "no credential is configured (upstream.auth is none); set upstream.auth in the overlay"
    names = list(dict.fromkeys(n for t in (auth.value, auth.username, auth.password) if t for n in template_vars(t)))
    return ("no credential was sent: " + (" and ".join(names) + " is not set" if len(names) == 1 else
                                          " and ".join(names) + " are not set") if names else
            "no credential was sent: upstream.auth is empty")


def base_url(spec: UpstreamSpec, env: Mapping[str, str]) -> tuple[str, str]:
    """The URL requests are sent to, and where it came from (for messages).

    One meaning for every way of giving it: `serve --base-url` (which sets the variable),
    $OPENAPI2MCP_BASE_URL, then `upstream.base_url` of the overlay, then the spec's servers[0].
    It is used as given: nothing is joined to it, whether the spec's server is relative or not.
    """
    given = env.get(BASE_URL_VAR, "").strip()
    if given:
        return given, "${" + BASE_URL_VAR + "}"
    try:
        return expand(spec.base_url, env), spec.base_url
    except MissingVariable as e:
        if e.name == BASE_URL_VAR:
            where = (f"the spec's server URL is relative ({spec.spec_server!r})" if spec.spec_server
                     else "the spec names no server")
            example = "http://127.0.0.1:8000" + (spec.spec_server.rstrip("/") if spec.spec_server else "")
            raise ConfigError(
                f"the upstream API's URL is not known: {where}. Pass --base-url URL or set {BASE_URL_VAR} to the URL "
                f"requests are sent to (e.g. {example}), or set upstream.base_url in the overlay"
            ) from None
        raise ConfigError(
            f"environment variable {e.name} is not set; upstream.base_url needs it ({spec.base_url!r})"
        ) from None


def relative_server_notice(spec: UpstreamSpec, url: httpx2.URL) -> str | None:
    """A hint when the base URL in use leaves out the spec's relative server path (`/api`)."""
    wanted = (spec.spec_server or "").strip().rstrip("/")
    if not wanted.startswith("/") or url.path.rstrip("/").endswith(wanted):
        return None
    shown = str(url.copy_with(path=url.path.rstrip("/") + wanted))
    return (f"the spec's server is {spec.spec_server!r} (relative) and requests go to {url} + the operation's path; "
            f"if the API is served under {wanted}, use --base-url {shown}")


def _check_header_values(headers: dict[str, str], cookies: list[str], spec: UpstreamSpec) -> None:
    """Header and cookie values HTTP can carry, or a ConfigError naming the key (never the value).

    Spaces around a value are dropped, as HTTP does; a control character or non-ASCII inside it
    would fail every call.
    """
    for name, text in list(headers.items()):
        headers[name] = text = text.strip(" \t\r\n")
        key = f"upstream.headers.{name}" if name in spec.headers else "upstream.auth"
        if _HEADER_CONTROL.search(text) or not text.isascii():
            raise ConfigError(f"{key}: the value (from the environment) holds a line break, another control "
                              "character or non-ASCII text, which an HTTP header cannot carry")
    for i, cookie in enumerate(cookies):
        name, _, text = cookie.partition("=")
        cookies[i] = cookie = name + "=" + text.strip(" \t\r\n")
        if _HEADER_CONTROL.search(cookie) or not cookie.isascii() or ";" in cookie:
            raise ConfigError("upstream.auth: the cookie value (from the environment) holds a line break, a `;`, "
                              "another control character or non-ASCII text, which a cookie cannot carry")


_USERINFO: Final = re.compile(r"(?<=//)[^/?#@]*@")


def _parse_base(raw: str, template: str) -> httpx2.URL:
    shown = _USERINFO.sub("***@", template)  # never repeat a password in an error message
    try:
        url = httpx2.URL(raw)
    except Exception:
        raise ConfigError(f"upstream.base_url is not a valid URL: {shown!r}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigError(
            f"upstream.base_url must be an absolute http(s) URL like https://api.example.com/v1, got {shown!r}"
        )
    if url.userinfo:
        raise ConfigError(
            f"upstream.base_url must not hold a user name or password (user:password@host), got {shown!r}: it "
            "would be sent as Basic auth that nothing redacts. Remove it from the base URL (--base-url, "
            "OPENAPI2MCP_BASE_URL or the overlay's upstream.base_url) and put the credential in the overlay: "
            "upstream: {auth: {type: basic, username: NAME, password: ${PASSWORD_VARIABLE}}}"
        )
    if url.fragment:
        raise ConfigError(f"upstream.base_url must not have a #fragment: {shown!r}")
    return url


def _base_url_secrets(url: httpx2.URL, template: str, env: Mapping[str, str]) -> set[str]:
    """Query values of the base URL that are credentials: named like one, or taken from a variable."""
    from_env = {env[v] for v in template_vars(template) if env.get(v)}
    query = url.query.decode("ascii")
    found = {v for v in from_env if v in unquote(query)}
    for pair in query.split("&"):
        name, _, value = pair.partition("=")
        if value and SECRET_HEADER.search(unquote(name)):
            found.add(unquote(value))
    return found


# ============================================================================ logs

# Every log record of the process (ours, httpx2's request lines, httpcore2, uvicorn's access log,
# the MCP SDK) is scrubbed when it is made, before any handler sees it: the known secrets of every
# live Upstream in all their forms, plus what looks like a credential whoever sent it (a query
# value named like one, a Bearer/Basic/Digest credential, a URL's userinfo).
_LOG_REDACTORS: list[weakref.ref[Redactor]] = []
_LOG_GENERIC: Final = (
    (re.compile(r"(?i)((?:^|[?&;\s])[^=&;\s\"'#]*(?:key|token|secret|passw|pwd|signature|credential|session|auth)"
                r"[^=&;\s\"'#]*=)[^&;\s\"'#]+"), r"\1***"),
    # an HTTP auth scheme's credential: 8+ token characters with a digit, a symbol or a lower-upper
    # hump (base64, JWTs, hex), so that plain words ("bearer authentication") stay
    (re.compile(r"\b((?i:bearer|basic|digest))(\s+)(?=[A-Za-z0-9._~+/=-]*(?:[0-9._~+/=-]|[a-z][A-Z]))"
                r"[A-Za-z0-9._~+/=-]{8,}"), r"\1\2***"),
    (re.compile(r"(?<=://)[^/?#@\s]+@"), "***@"),
)
_log_lock = threading.Lock()


def scrub_log_text(text: str) -> str:
    for ref in _LOG_REDACTORS:
        redactor = ref()
        if redactor is not None:
            text = redactor.text(text)
    for pattern, replacement in _LOG_GENERIC:
        text = pattern.sub(replacement, text)
    return text


def _scrub_arg(arg: Any) -> Any:
    if arg is None or isinstance(arg, int | float):
        return arg  # numbers keep %d and %f working
    try:
        text = str(arg)
    except Exception:
        return arg
    clean = scrub_log_text(text)
    return arg if clean == text else clean


def _scrub_record(record: logging.LogRecord) -> None:
    if isinstance(record.msg, str):
        record.msg = scrub_log_text(record.msg)
    if isinstance(record.args, Mapping):
        record.args = {k: _scrub_arg(v) for k, v in record.args.items()}
    elif record.args:
        record.args = tuple(_scrub_arg(a) for a in record.args)  # uvicorn's access formatter reads the tuple
    if record.exc_info and not record.exc_text:
        record.exc_text = scrub_log_text(logging.Formatter().formatException(record.exc_info))
    if record.stack_info:
        record.stack_info = scrub_log_text(record.stack_info)


def redact_logs(redactor: Redactor) -> None:
    """Scrub `redactor`'s secrets from every log record from now on (for as long as it lives)."""
    with _log_lock:
        live = [ref for ref in _LOG_REDACTORS if ref() is not None and ref() is not redactor]
        _LOG_REDACTORS[:] = [*live, weakref.ref(redactor)] if redactor else live
        factory = logging.getLogRecordFactory()
        if getattr(factory, "_openapi2mcp", False):
            return
        previous = factory

        def scrubbed(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            _scrub_record(record)
            return record

        scrubbed._openapi2mcp = True  # type: ignore[attr-defined]
        logging.setLogRecordFactory(scrubbed)


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


def _pct(value: Any, safe: str = "") -> str:
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
    name = _pct(p.name)
    style = p.style if p.style in ("simple", "label", "matrix") else "simple"
    if isinstance(value, list):
        _no_delimiter(p, value, "." if style == "label" and p.explode else ",")
        items = [_pct(v) for v in value]
        if style == "label":
            return "." + ("." if p.explode else ",").join(items)
        if style == "matrix":
            return "".join(f";{name}={i}" for i in items) if p.explode else f";{name}=" + ",".join(items)
        return ",".join(items)
    if isinstance(value, dict):
        _no_delimiter(p, [*value, *value.values()], ",")
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
            return [(_pct(k), enc(v)) for k, v in value.items()]
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
        name = f"{prefix}[{_pct(key)}]"
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
    control = _HEADER_CONTROL.search(text)
    if control:
        raise _invalid(f"{who}: header values cannot contain control characters (found {control.group()!r}); "
                       "send printable text", p.arg)
    if len(text) > MAX_HEADER_LENGTH:
        raise _invalid(f"{who}: {len(text)} characters is too long for an HTTP header (this server sends at most "
                       f"{MAX_HEADER_LENGTH}); send less", p.arg)
    return text.strip(" \t")  # HTTP drops spaces around a value; h11 refuses to send them


# RFC 9110 field values: visible characters, spaces and tabs (no other control character).
_HEADER_CONTROL: Final = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
MAX_HEADER_LENGTH: Final = 16_384  # a common server limit for one header (uvicorn, Node, nginx's buffers)
MAX_URL_LENGTH: Final = 65_536  # httpx2 refuses longer URLs; most servers stop at 8 to 64 KB


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
    names = _Names(settings, op)

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
            if value == "" and p.arg is not None and not p.allow_empty:  # OpenAPI: `?q=` only with allowEmptyValue
                raise _invalid(f"{p.arg}: may not be empty" + ("" if p.required else " (leave it out instead)"), p.arg)
            names.check(p, value)
            query += query_pairs(p, value)
        elif p.location == "header":
            if p.name.lower() in _RESERVED_HEADERS:
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
        value = _body_value(op.body, inputs, evaluate)
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
        parts.append(f"{_pct(name)}={_pct(value)}")
        shown_parts.append(f"{_pct(name)}=***")
    url = f"{base.scheme}://{tail}" + ("?" + "&".join(parts) if parts else "")
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
        # text by another name: decoded, and scrubbed of secrets like any text (not refused as binary)
        "application/x-ndjson",
        "application/ndjson",
        "application/jsonl",
        "application/x-jsonlines",
        "application/json-seq",
        "application/x-www-form-urlencoded",
        "application/csv",
        "application/sql",
    }
)


def _is_text(mt: str) -> bool:
    return mt.startswith("text/") or mt in _TEXT_TYPES or mt.endswith(("+xml", "+yaml", "+json-seq"))


# A lone surrogate: valid JSON ("\ud83d" of an emoji cut in half, as UTF-16 string APIs do), no valid
# Unicode. It would fail every later step (UTF-8 encoding for sizes, URLs, the MCP response), so
# decoding replaces it with U+FFFD, as invalid UTF-8 in a text body is replaced.
_SURROGATE: Final = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")

# Deeper upstream JSON is refused: the MCP SDK serialises at most 255 levels (a result wraps the
# body in a few), and every walk over a result recurses. Real APIs stay far below (GitHub: ~10).
MAX_JSON_DEPTH: Final = 128
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b'"[]{}')
_DEPTH_STEPS: Final = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


class JsonTooDeep(ValueError):
    """Upstream JSON nested deeper than MAX_JSON_DEPTH."""


def _brackets(body: bytes) -> bytes:
    """The brackets of a JSON text that are not inside strings, in order (C-speed byte operations)."""
    if b"\\" in body:
        body = body.replace(b"\\\\", b"").replace(b'\\"', b"")  # escaped quotes end no string
    kept = body.translate(None, _NOT_BRACKETS).replace(b'""', b"")  # strings without brackets vanish
    return re.sub(rb'"[^"]*"', b"", kept) if b'"' in kept else kept


def json_depth_exceeds(body: bytes) -> bool:
    """Whether the JSON text `body` nests arrays/objects deeper than MAX_JSON_DEPTH, without parsing it.

    Each pass deletes the innermost pairs, one or two levels (`[]` then `{}`), so a text that
    empties in n passes is between n and 2n deep; only in between is the depth counted exactly.
    """
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH:
        return False
    brackets = rest = _brackets(body)
    passes = 0
    while rest:
        shorter = rest.replace(b"[]", b"").replace(b"{}", b"")
        if len(shorter) == len(rest):
            break  # unbalanced: not JSON, which parsing reports
        rest, passes = shorter, passes + 1
        if passes > MAX_JSON_DEPTH:
            return True
    if 2 * passes <= MAX_JSON_DEPTH:
        return False
    # depth at each bracket = 2 * (opening brackets so far) - (brackets so far)
    deepest: int = max(map(operator.sub, itertools.accumulate(brackets.translate(_DEPTH_STEPS)), itertools.count(1)))
    return deepest > MAX_JSON_DEPTH


def _no_constant(name: str) -> None:
    """NaN and ±Infinity are not JSON; Python and JavaScript servers write them. They become null."""


def _loads(body: bytes) -> Any:
    if json_depth_exceeds(body):
        raise JsonTooDeep(f"nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(body, parse_constant=_no_constant)
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise JsonTooDeep(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    return _whole_characters(value) if _SURROGATE.search(body) else value


def _whole_characters(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_whole_characters(v) for v in value]
    if isinstance(value, dict):
        return {_whole_characters(k): _whole_characters(v) for k, v in value.items()}
    return value


def _json_payload(resp: UpstreamResponse, media_type: str) -> Payload:
    try:
        return Payload("json", _loads(resp.body), media_type)
    except JsonTooDeep:
        raise ToolFailure.of(
            ErrorCode.UPSTREAM_INVALID_RESPONSE,
            f"the upstream sent JSON nested deeper than {MAX_JSON_DEPTH} levels ({len(resp.body)} bytes), more "
            "than this server passes on; ask for less (fewer fields, no expansion of nested objects)",
            status=resp.status,
        ) from None


def _text(resp: UpstreamResponse) -> str:
    """The body as text in its declared charset (UTF-8 when none); an unknown one is an upstream fault."""
    charset = resp.charset or "utf-8"
    try:
        codecs.lookup(charset)
    except LookupError:
        try:
            return resp.body.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_INVALID_RESPONSE,
                f"the upstream declared the character set {clip_quote(charset, 60)!r} ({resp.media_type}), "
                "which this server does not know, and the body is not UTF-8",
                status=resp.status,
            ) from None
    return resp.body.decode(charset, "replace")


def decode(resp: UpstreamResponse) -> Payload:
    mt = resp.media_type
    if not resp.body or resp.method == "HEAD":
        return Payload("empty", None, mt)
    if is_json_media(mt):
        try:
            return _json_payload(resp, mt)
        except ValueError:
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_INVALID_RESPONSE,
                f"the upstream sent invalid JSON ({mt}, {len(resp.body)} bytes)",
                status=resp.status,
            ) from None
    if _is_text(mt):
        return Payload("text", _text(resp), mt)
    if not mt:  # undeclared: JSON if it parses, text if it decodes, else bytes
        try:
            return _json_payload(resp, "application/json")
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
        redact_logs(self.settings.redactor)

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
        for name, value in (headers or {}).items():  # the server's (idempotency key) replace any spelling
            for same in [h for h in prepared.headers if h.lower() == name.lower()]:
                del prepared.headers[same]
            prepared.headers[name] = value
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
        from openapi2mcp.upstream import retry  # retry.py builds on this module

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
        payload = decode(resp)
        if payload.kind == "binary" and self.redactor.found(payload.raw):
            # Bytes cannot be scrubbed without breaking the file, and a file holding the server's
            # credential is an echo, not a document: refused (JSON and text are scrubbed instead).
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_INVALID_RESPONSE,
                f"the upstream's {payload.media_type or 'binary'} response holds a credential this server sends "
                "upstream (it echoes the request); it is withheld",
                status=resp.status,
            )
        return resp, payload

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
        location = response.headers.get("location", "").strip()
        if not location:
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_ERROR,
                f"the upstream answered {response.status_code} (a redirect) without a Location header; not followed",
                status=response.status_code,
            )
        try:
            target = request.url.join(location)
            if target.scheme not in ("http", "https") or not target.host:
                raise ValueError(location)
        except Exception:  # httpx2.InvalidURL, ValueError, UnicodeError: whatever the parser makes of it
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_ERROR,
                f"the upstream answered {response.status_code} (a redirect) with a Location that is not an http(s) "
                f"URL ({clip_quote(self.redactor.text(location), 120)!r}); not followed",
                status=response.status_code,
            ) from None
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
        return status_failure(resp, op, modes, self.redactor, no_credential=self.settings.no_credential)


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
    resp: UpstreamResponse, op: OperationSpec, modes: Mapping[str, FailureMode], redactor: Redactor, *,
    no_credential: str | None = None,
) -> ToolFailure:
    """Map a non-2xx response to a ToolFailure; the overlay's failure_modes win.

    `no_credential`: why no credential was sent, which is the advice a 401 then gets.
    """
    status = resp.status
    complaint = upstream_complaint(resp, op)
    said = clip_quote(redactor.text(complaint.message)) if complaint.message else ""
    code, retryable, what, advice = _builtin(status)
    if status == 401 and no_credential:
        what, advice = "the upstream requires credentials", no_credential[0].upper() + no_credential[1:] + "."
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
    field = complaint.field if code_text == ErrorCode.ARGUMENT_INVALID else None
    return ToolFailure.of(code_text, message, retryable=retryable, field=field, status=status, retry_after=retry_after)


def clip_quote(text: str, limit: int = QUOTE_LIMIT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def upstream_complaint(resp: UpstreamResponse, op: OperationSpec | None = None) -> Complaint:
    """The upstream's own explanation of a failure and the argument it is about (errorbody.py)."""
    body = resp.body
    if not body or len(body) > 1_000_000:
        return Complaint("")
    document = None
    if not resp.media_type or is_json_media(resp.media_type):
        try:
            document = _loads(body)
        except ValueError:  # not JSON whatever its label says (Jupyter's 404 is text): quote the text
            document = None
    text = None
    textual = not resp.media_type or resp.media_type.startswith("text/") or is_json_media(resp.media_type)
    if document is None and textual and len(body) < 10_000:
        text = body.decode(resp.charset if resp.charset and _known_charset(resp.charset) else "utf-8", "replace")
    return read_complaint(document, text, resp.media_type, op)


def _known_charset(name: str) -> bool:
    try:
        codecs.lookup(name)
    except LookupError:
        return False
    return True


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
