"""The upstream configuration with the environment applied, once, at start-up.

The base URL (`base_url`: `--base-url`, $OPENAPI2MCP_BASE_URL, the overlay, the spec's server)
and the auth and header secrets are expanded from the environment; a missing `${VAR}` is a
`ConfigError` naming the variable and the manifest key. Auth `env` (a spec without a security
scheme) reads OPENAPI2MCP_TOKEN or OPENAPI2MCP_USERNAME/_PASSWORD.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

import httpx2

from openapi2mcp import __version__
from openapi2mcp.manifest import (
    BASE_URL_VAR,
    AuthSpec,
    MissingVariable,
    UpstreamSpec,
    expand,
    optional,
    template_vars,
)
from openapi2mcp.upstream.credentials import OAuthSettings
from openapi2mcp.upstream.secrets import SECRET_HEADER, Redactor


class ConfigError(Exception):
    """The server cannot start: a one-line message naming the variable and the manifest key."""


USER_AGENT: Final = f"openapi2mcp/{__version__}"

# RFC 9110 field values: visible characters, spaces and tabs (no other control character).
HEADER_CONTROL: Final = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


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
    oauth: OAuthSettings | None = None  # a credential obtained while serving (credentials.py)

    @property
    def origin(self) -> tuple[str, str, int | None]:
        return origin(self.base_url)


def origin(url: httpx2.URL) -> tuple[str, str, int | None]:
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

    oauth = _oauth_settings(spec.auth, value) if spec.auth.dynamic else None
    if oauth is not None and oauth.kind != "forward" and not (oauth.client_id and oauth.client_secret):
        oauth = None  # `${X_CLIENT_SECRET:-}` not set: no credential is sent (a missing one is in `missing`)
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
        no_credential=None if sent or oauth else _no_credential(spec.auth),
        oauth=oauth,
    )


def _oauth_settings(auth: AuthSpec, value: Callable[..., str]) -> OAuthSettings:
    """The token endpoint and client of an OAuth `upstream.auth`, expanded; ConfigError for what cannot work."""
    if auth.type == "forward":
        return OAuthSettings(kind="forward", audience=value(auth.audience, "upstream.auth.audience", secret=False))
    url = value(auth.token_url, "upstream.auth.token_url", secret=False)
    if url:
        _check_token_url(url, auth.token_url or "")

    def optional_value(template: str | None, key: str) -> str | None:
        return value(template, key, secret=False) if template else None

    return OAuthSettings(
        kind=auth.type, token_url=url,
        client_id=value(auth.client_id, "upstream.auth.client_id", secret=False),
        client_secret=value(auth.client_secret, "upstream.auth.client_secret", secret=True),
        scopes=tuple(auth.scopes), audience=optional_value(auth.audience, "upstream.auth.audience"),
        resource=optional_value(auth.resource, "upstream.auth.resource"), auth_method=auth.auth_method,
    )


_LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "::1"})


def _check_token_url(url: str, template: str) -> None:
    """An absolute https URL (http only on loopback): the client secret travels in the request."""
    try:
        parsed = httpx2.URL(url)
    except Exception:
        raise ConfigError(f"upstream.auth.token_url is not a valid URL: {template!r}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host or parsed.userinfo:
        raise ConfigError(f"upstream.auth.token_url must be an absolute http(s) URL without user:password@, "
                          f"got {template!r}")
    if parsed.scheme == "http" and parsed.host not in _LOOPBACK_HOSTS:
        raise ConfigError(f"upstream.auth.token_url must be https ({template!r} is plain http to "
                          f"{parsed.host}): the client secret and the tokens would cross the network unencrypted")


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
    names = list(dict.fromkeys(n for t in (auth.value, auth.username, auth.password, auth.client_id, auth.client_secret)
                               if t for n in template_vars(t)))
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
        if HEADER_CONTROL.search(text) or not text.isascii():
            raise ConfigError(f"{key}: the value (from the environment) holds a line break, another control "
                              "character or non-ASCII text, which an HTTP header cannot carry")
    for i, cookie in enumerate(cookies):
        name, _, text = cookie.partition("=")
        cookies[i] = cookie = name + "=" + text.strip(" \t\r\n")
        if HEADER_CONTROL.search(cookie) or not cookie.isascii() or ";" in cookie:
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
