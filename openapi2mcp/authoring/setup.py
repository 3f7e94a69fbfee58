"""The draft's `server` and `upstream` sections: names, base URL and credentials as `${VAR}` templates.

* The server name is the spec title's first distinctive word, or two of a short title
  (`GitHub's official OpenAPI spec` -> github; `Docker Engine API` -> docker-engine); variables
  are named after it (GITHUB_URL, GITHUB_TOKEN).
* The base URL is what the compiler resolves from `servers[0]` (variables at their defaults, a
  relative server resolved against a spec fetched by URL), as the default of `${NAME_URL:-...}`;
  a relative server read from a file has no default, so the variable must be set.
* Credentials come from the security scheme the spec asks for first (its global `security`, then
  the order of `securitySchemes`): an oauth2 clientCredentials flow -> `oauth2_client_credentials`
  with `${NAME_CLIENT_ID}` / `${NAME_CLIENT_SECRET}` (token URL and scopes from the flow); http
  bearer, other oauth2 flows and openIdConnect -> `bearer` with `${NAME_TOKEN}`; http basic ->
  `basic` with `${NAME_USERNAME}` / `${NAME_PASSWORD}`; apiKey -> `header` / `query` / `cookie`
  with its name and `${NAME_API_KEY}`. When the spec lets some
  call go without credentials (`security: []`, `{}`), the templates get an empty default
  (`${NAME_TOKEN:-}`): unset, nothing is sent. No scheme at all: no `auth` (the compiler then
  takes `$OPENAPI2MCP_TOKEN` or user name and password, whichever is set).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from openapi2mcp.authoring.facts import Op, ascii_fold
from openapi2mcp.authoring.specdoc import SpecDoc
from openapi2mcp.manifest import Manifest

STOP_WORDS = frozenset({"api", "apis", "rest", "restful", "openapi", "swagger", "http", "https", "web", "service",
                        "services", "server", "spec", "specification", "the", "a", "an", "for", "and", "of",
                        "public", "v", "json", "reference", "documentation", "definition", "interface",
                        "official", "unofficial", "extension", "extensions", "sdk", "sdks", "version"})


@dataclass
class Setup:
    server: dict[str, Any]
    upstream: dict[str, Any]
    notes: dict[str, str] = field(default_factory=dict)  # key -> comment


def server_name(title: str) -> str:
    """The title's distinctive words (`GitHub v3 REST API` -> github, `Docker Engine API` ->
    docker-engine): two of a title of at most four words, else one."""
    every = re.findall(r"[a-z0-9]+", re.sub(r"'s\b", "", ascii_fold(title).lower()))
    words = [w for w in every if w not in STOP_WORDS and not re.fullmatch(r"v?\d+", w)]
    return "-".join(words[:2] if len(every) <= 4 else words[:1])[:30].strip("-") or "api"


def draft_setup(document: dict[str, Any], raw: Manifest, ops: list[Op]) -> Setup:
    info = document.get("info") if isinstance(document.get("info"), dict) else {}
    assert isinstance(info, dict)
    title = str(info.get("title") or "API").strip()
    name = server_name(title)
    var = re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_") or "API"
    notes: dict[str, str] = {}
    server: dict[str, Any] = {"name": name, "title": title[:80]}
    about = _first_sentence(info.get("description"))
    server["instructions"] = about or f"Tools of {title}."
    notes["server"] = "drafted from info.title and info.description: say what the tools are for and when to use them"
    upstream: dict[str, Any] = {}
    base = raw.upstream.base_url
    if raw.upstream.spec_server is None and "{" not in base.replace("${", "") and "}" not in base:
        upstream["base_url"] = "${" + var + "_URL:-" + base + "}"
        notes["base_url"] = "the spec's servers[0]"
    else:
        upstream["base_url"] = "${" + var + "_URL}"
        notes["base_url"] = (f"the spec's server is relative ({raw.upstream.spec_server!r}): set {var}_URL to the "
                             "API's full URL (or pass --base-url)")
    auth, why = _auth(document, var, ops)
    if auth is not None:
        upstream["auth"] = auth
        notes["auth"] = why
    else:
        notes["no_auth"] = ("the spec declares no security scheme: without `auth`, $OPENAPI2MCP_TOKEN (bearer) or "
                            "$OPENAPI2MCP_USERNAME and $OPENAPI2MCP_PASSWORD (basic) are sent when set; write `auth` "
                            "if the API needs another kind")
    upstream["timeout"] = {"connect": 5, "read": 30, "total": 60}
    return Setup(server=server, upstream=upstream, notes=notes)


def _first_sentence(text: Any) -> str:
    if not isinstance(text, str):
        return ""
    text = re.sub(r"<[^>]+>|`|\*\*|^[#>]+\s*", "", text.strip(), flags=re.M).strip()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    first = re.split(r"(?<=[.!?])\s|\n\n", text, maxsplit=1)[0].replace("\n", " ").strip()
    if not first or len(first) > 200:
        return ""
    return first if first[-1] in ".!?" else first + "."


def _auth(document: dict[str, Any], var: str, ops: list[Op]) -> tuple[dict[str, Any] | None, str]:
    doc = SpecDoc(document)
    components = document.get("components") if isinstance(document.get("components"), dict) else {}
    assert isinstance(components, dict)
    schemes = components.get("securitySchemes") if isinstance(components.get("securitySchemes"), dict) else {}
    assert isinstance(schemes, dict)
    order: list[str] = []
    for req in document.get("security") or []:
        if isinstance(req, dict):
            order.extend(k for k in req if k not in order)
    order.extend(k for k in schemes if k not in order)
    optional = any(op.security_optional for op in ops)
    tail = ":-}" if optional else "}"
    why_optional = ("; some operations need no credentials, so an unset variable sends none" if optional else
                    "; set it before serving")
    others = len([n for n in order if isinstance(doc.resolve(schemes.get(n)), dict)]) - 1
    also = f" ({others} other scheme(s) in the spec)" if others > 0 else ""
    for name in order:
        scheme = doc.resolve(schemes.get(name))
        if not isinstance(scheme, dict):
            continue
        kind = scheme.get("type")
        http = str(scheme.get("scheme", "")).lower()
        flows = scheme.get("flows") if kind == "oauth2" and isinstance(scheme.get("flows"), dict) else {}
        assert isinstance(flows, dict)
        if isinstance(flows.get("clientCredentials"), dict) and flows["clientCredentials"].get("tokenUrl"):
            # the server gets (and renews) its own token; token_url and scopes default to the flow's
            return ({"type": "oauth2_client_credentials", "client_id": "${" + var + "_CLIENT_ID" + tail,
                     "client_secret": "${" + var + "_CLIENT_SECRET" + tail},
                    f"security scheme {name!r} (oauth2 clientCredentials): a token from "
                    f"{flows['clientCredentials']['tokenUrl']}, renewed before it expires; token_url and scopes "
                    f"default to the flow's{also}{why_optional}")
        if (kind == "http" and http == "bearer") or kind in ("oauth2", "openIdConnect"):
            what = "an access token" if kind != "http" else "a bearer token"
            return ({"type": "bearer", "value": "${" + var + "_TOKEN" + tail},
                    f"security scheme {name!r} ({kind}{' ' + http if http else ''}): {what}{also}{why_optional}")
        if kind == "http" and http == "basic":
            return ({"type": "basic", "username": "${" + var + "_USERNAME" + tail,
                     "password": "${" + var + "_PASSWORD" + tail},
                    f"security scheme {name!r} (http basic){also}{why_optional}")
        if kind == "apiKey" and scheme.get("in") in ("header", "query", "cookie") and scheme.get("name"):
            return ({"type": scheme["in"], "name": str(scheme["name"]), "value": "${" + var + "_API_KEY" + tail},
                    f"security scheme {name!r} (apiKey in {scheme['in']}){also}{why_optional}")
    return None, ""
