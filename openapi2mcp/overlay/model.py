"""What an overlay may say: the pydantic models of the two kinds of documents `--overlay` takes.

* a **tool overlay** (`openapi2mcp: 1`, `ToolOverlay`) names the task-level tools: which
  operation, what the model sees, units, bounds, risk, response trimming; and the server, the
  upstream, resources and prompts. The same models give the JSON Schema that editors use
  (`overlay_json_schema`, `openapi2mcp schema overlay`).
* a standard **OAI Overlay** (`overlay: 1.0.0` / `1.1.0`, `OaiOverlay`) whose JSONPath actions
  patch the spec before tools are compiled (oai.py applies them).

Reading a file into these models, with file:line errors, is reading.py's work.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from openapi2mcp.manifest import NEVER_FORWARDED, OAUTH_AUTH_TYPES, Risk, parse_rate, template_vars

TOOL_NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"

# ============================================================================ the tool overlay, v1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


class ServerDef(_Strict):
    """How the MCP server introduces itself to clients."""

    name: str | None = Field(None, description="Server name shown to clients (default: from the spec title).")
    title: str | None = Field(None, description="Human-readable server title.")
    version: str | None = Field(None, description="Server version (default: the spec's info.version).")
    instructions: str | None = Field(
        None, description="Instructions for the model: when to use these tools, conventions, caveats."
    )
    tool_names: Literal["safe", "as_written"] = Field(
        "safe", description="safe: tools are served with every '.' as '_' (notes.search -> notes_search), the names "
        "every client accepts (^[a-zA-Z0-9_-]{1,64}$); as_written: served exactly as written (clients that accept "
        "dots only).",
    )


class TimeoutDef(_Strict):
    connect: float | None = Field(None, gt=0, description="Seconds to open a connection.")
    read: float | None = Field(None, gt=0, description="Seconds to wait for response data.")
    total: float | None = Field(None, gt=0, description="Deadline for the whole call, retries included.")


class RateLimitDef(_Strict):
    """A token bucket (limits.py): `rate` calls on average, `burst` at once; over it -> RATE_LIMITED."""

    rate: str | float = Field(description="10/s, 100/min, 5000/h, 2/day, or a number (calls per second).")
    burst: int | None = Field(
        None, ge=1, description="Calls allowed at once (default: the count of `rate`, e.g. 100 for 100/min)."
    )
    per_caller: bool = Field(False, description="One bucket per caller (token subject) instead of one for all.")

    @field_validator("rate")
    @classmethod
    def _rate(cls, v: str | float) -> str | float:
        parse_rate(v)  # ValueError names the accepted forms
        return v


def _rate_shorthand(value: Any) -> Any:
    """`rate_limit: 10/s` is short for `rate_limit: {rate: 10/s}`."""
    return {"rate": value} if isinstance(value, str | int | float) and not isinstance(value, bool) else value


RateLimitValue = Annotated[
    RateLimitDef, BeforeValidator(_rate_shorthand, json_schema_input_type=str | float | RateLimitDef)
]
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
_SCOPE = re.compile(r"^[\x21\x23-\x5B\x5D-\x7E]+$")


def _check_scope(scope: str) -> str:
    """Permissions are OAuth scopes (RFC 6749 3.3): no spaces, quotes or backslashes."""
    if not _SCOPE.match(scope):
        raise ValueError(f"{scope!r} is not an OAuth scope (printable ASCII without spaces, \" or \\)")
    if scope == "*":  # a token's "*" is every scope; as a requirement it would read as "any caller"
        raise ValueError("'*' means every scope when granted to a token; a tool cannot require it (name a scope)")
    return scope


Scope = Annotated[str, AfterValidator(_check_scope)]


_OAUTH_FIELDS: Final = ("token_url", "client_id", "client_secret", "audience", "resource")


class AuthDef(_Strict):
    """How openapi2mcp authenticates to the upstream API. Secrets come from ${ENV} templates."""

    type: Literal["none", "bearer", "header", "query", "basic", "cookie",
                  "oauth2_client_credentials", "forward", "token_exchange"] = Field(
        "none", description="bearer: Authorization: Bearer <value>; header/query/cookie: <name>=<value>; basic; "
        "oauth2_client_credentials: a token from token_url, renewed before it expires; forward: the MCP caller's "
        "bearer token (when its aud holds `audience`); token_exchange: the caller's token exchanged (RFC 8693) "
        "at token_url for one for the upstream.",
    )
    name: str | None = Field(None, description="Header, query parameter or cookie name (header/query/cookie).")
    value: str | None = Field(None, description="The token or key, normally a template such as ${API_TOKEN}.")
    username: str | None = Field(None, description="basic: user name (template).")
    password: str | None = Field(None, description="basic: password (template).")
    token_url: str | None = Field(
        None, description="oauth2_client_credentials, token_exchange: the token endpoint (https, or http on "
        "loopback). Default for oauth2_client_credentials: the spec's clientCredentials tokenUrl.")
    client_id: str | None = Field(None, description="oauth2_client_credentials, token_exchange: the client id.")
    client_secret: str | None = Field(
        None, description="oauth2_client_credentials, token_exchange: a ${VAR} template (never the secret itself).")
    scopes: list[Scope] | None = Field(
        None, description="The scopes asked for. Default for oauth2_client_credentials: the spec flow's scopes.")
    audience: str | None = Field(
        None, description="oauth2_client_credentials, token_exchange: the `audience` asked for; forward (required): "
        "the caller's token is sent only when its `aud` holds this value.")
    resource: str | None = Field(None, description="oauth2_client_credentials, token_exchange: the RFC 8707 "
                                 "`resource` asked for (the upstream's URL, for servers that use resource indicators).")
    auth_method: Literal["client_secret_basic", "client_secret_post"] = Field(
        "client_secret_basic", description="How the client authenticates at token_url: HTTP Basic (default) or "
        "client_id and client_secret in the form body.")

    @field_validator("scopes", mode="before")
    @classmethod
    def _scope_words(cls, v: Any) -> Any:
        return v.split() if isinstance(v, str) else v  # `scopes: read write` as OAuth writes them

    @field_validator("token_url")
    @classmethod
    def _token_url(cls, v: str | None) -> str | None:
        if v is not None and not template_vars(v) and not re.match(r"^https?://[^/\s]+", v):
            raise ValueError(f"token_url must be an http(s) URL or a ${{VAR}} template, got {v!r}")
        return v

    @model_validator(mode="after")
    def _complete(self) -> AuthDef:
        needs = {"bearer": ["value"], "header": ["name", "value"], "query": ["name", "value"],
                 "cookie": ["name", "value"], "basic": ["username", "password"], "none": [],
                 "oauth2_client_credentials": ["client_id", "client_secret"], "forward": ["audience"],
                 "token_exchange": ["token_url", "client_id", "client_secret"]}[self.type]
        missing = [k for k in needs if getattr(self, k) is None]
        if missing:
            raise ValueError(f"auth type '{self.type}' needs {' and '.join(missing)}")
        oauth = self.type in ("oauth2_client_credentials", "token_exchange")
        stray = [k for k in ("name", "value", "username", "password") if self.type in OAUTH_AUTH_TYPES
                 and getattr(self, k) is not None]
        stray += [k for k in (*_OAUTH_FIELDS, "scopes") if getattr(self, k) is not None and not oauth
                  and not (k == "audience" and self.type == "forward")]
        if stray:
            raise ValueError(f"auth type '{self.type}' does not use {' and '.join(stray)}; remove it")
        if oauth and self.client_secret is not None and not template_vars(self.client_secret):
            raise ValueError("client_secret must be a ${VAR} template naming an environment variable (e.g. "
                             "client_secret: ${CLIENT_SECRET}), never the secret itself: the overlay and the "
                             "Manifest are not secret")
        return self


class UpstreamDef(_Strict):
    """The REST API that tool calls are forwarded to."""

    base_url: str | None = Field(
        None,
        description="Base URL; ${VAR} and ${VAR:-default} are read from the environment at start-up. "
        "Default: the spec's servers[0].",
    )
    auth: AuthDef | None = None
    timeout: float | TimeoutDef | None = Field(None, description="Seconds (read timeout), or per phase.")
    headers: dict[str, str] = Field(default_factory=dict, description="Extra headers sent on every request.")
    max_response_bytes: int | None = Field(None, gt=0, description="Upstream bodies above this are refused.")
    verify_tls: bool = True
    retries: RetriesDef | None = Field(None, description="Retries of idempotent requests, for every tool.")
    rate_limit: RateLimitValue | None = Field(
        None, description="The server's limit on tool calls, all tools together: 10/s, or {rate, burst, per_caller}."
    )
    forward_headers: list[str] = Field(
        default_factory=list, description="Headers of the inbound MCP HTTP request sent on to the upstream (e.g. "
        "X-Tenant-Id). No other inbound header is ever forwarded; credentials and hop-by-hop headers never.",
    )

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not template_vars(v) and not re.match(r"^https?://[^/\s]+", v):
            raise ValueError(f"base_url must be an http(s) URL or a ${{VAR}} template, got {v!r}")
        return v

    @model_validator(mode="after")
    def _forwardable(self) -> UpstreamDef:
        taken = {h.lower() for h in self.headers}
        if self.auth is not None and self.auth.type == "header" and self.auth.name:
            taken.add(self.auth.name.lower())
        seen: set[str] = set()
        for name in self.forward_headers:
            low = name.lower()
            if not _HEADER_NAME.match(name):
                raise ValueError(f"forward_headers: {name!r} is not a header name")
            if low in NEVER_FORWARDED:
                raise ValueError(f"forward_headers: {name} is never forwarded (credentials, cookies and the HTTP "
                                 "and MCP transport's own headers stay with this server)")
            if low in taken:
                raise ValueError(f"forward_headers: {name} is set by upstream.headers or upstream.auth; a forwarded "
                                 "value would never be sent")
            if low in seen:
                raise ValueError(f"forward_headers: {name} is listed twice")
            seen.add(low)
        return self


class ResponseDef(_Strict):
    """How the upstream response is trimmed before the model sees it."""

    select: str | None = Field(None, description="JMESPath expression applied to the response body.")
    max_items: int | None = Field(None, ge=1, description="Arrays in the result are cut to this many items.")
    max_bytes: int | None = Field(None, ge=256, description="Cap on the serialised result, in bytes.")
    validate_: Literal["tolerant", "strict", "off"] | None = Field(
        None, alias="validate",
        description="tolerant (default): the output schema promises the spec's structure and types, nulls "
        "accepted, and a value that still does not fit is left out of structuredContent (kept in the text, "
        "named in _meta); strict: the output schema is the spec's own, and a response that breaks it is "
        "UPSTREAM_INVALID_RESPONSE; off: no output schema.",
    )


class FailureModeDef(_Strict):
    code: str = Field(description="Stable error code, e.g. NOT_FOUND.", pattern=r"^[A-Z][A-Z0-9_]*$")
    message: str | None = Field(None, description="What the model should know or do.")
    retryable: bool | None = None


class AnnotationsDef(_Strict):
    """Overrides for the MCP tool annotations (derived from risk and method otherwise)."""

    title: str | None = None
    read_only_hint: bool | None = Field(None, alias="readOnlyHint")
    destructive_hint: bool | None = Field(None, alias="destructiveHint")
    idempotent_hint: bool | None = Field(None, alias="idempotentHint")
    open_world_hint: bool | None = Field(None, alias="openWorldHint")


class ParamDef(_Strict):
    """What the model sees of one parameter, top-level body property or nested body field.

    The key is the argument name the model sees. When it differs from the spec's name, `rename`
    links the two, written either way round (`limit: {rename: q_limit}` or
    `q_limit: {rename: limit}`): the model sees whichever of the two names is not in the spec.
    A field of the JSON request body, at any depth, is named `body.<field>[.<field>...]`
    (`name_like: {rename: body.flows.name.like_}`): the model sees a flat argument with that
    field's schema, and the server builds the nested body.
    """

    description: str | None = None
    title: str | None = None
    rename: str | None = Field(
        None, description="The other name: the spec's name (a parameter, a body property, or a nested body field "
        "written body.a.b), or the name the model sees.",
    )
    value: Any = Field(None, description="Fixed value: hidden from the model and always sent.")
    hidden: bool = Field(False, description="Hide an optional parameter: never shown, never sent.")
    required: bool | None = Field(None, description="Make an optional parameter required for the model.")
    default: Any = None
    enum: list[Any] | None = None
    minimum: int | float | None = None
    maximum: int | float | None = None
    exclusive_minimum: int | float | None = Field(None, alias="exclusiveMinimum")
    exclusive_maximum: int | float | None = Field(None, alias="exclusiveMaximum")
    multiple_of: int | float | None = Field(None, alias="multipleOf", gt=0)
    min_length: int | None = Field(None, alias="minLength", ge=0)
    max_length: int | None = Field(None, alias="maxLength", ge=0)
    pattern: str | None = None
    format: str | None = None
    min_items: int | None = Field(None, alias="minItems", ge=0)
    max_items: int | None = Field(None, alias="maxItems", ge=0)
    examples: list[Any] | None = None
    unit: str | None = Field(None, description="Unit of the value, shown to the model (e.g. 'seconds').")
    sensitive: bool = Field(False, description="Redact this argument in logs and audit lines.")
    null_means: Literal["not_given", "clear"] = Field(
        "not_given", description="What the model's null means: not given (the default; models send null for "
        "arguments they do not use), or `clear`: JSON null is sent (a JSON body property whose schema takes "
        "null, e.g. to clear a field in a PATCH).",
    )

    @field_validator("pattern")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as e:
                raise ValueError(f"pattern is not a valid regular expression: {e}") from None
        return v

    def has(self, key: str) -> bool:
        return key in self.model_fields_set

    def schema_keywords(self) -> dict[str, Any]:
        """The JSON Schema keywords this override sets (camelCase, only those given)."""
        out: dict[str, Any] = {}
        for name in _SCHEMA_KEYWORDS:
            if name in self.model_fields_set:
                info = type(self).model_fields[name]
                out[info.alias or name] = getattr(self, name)
        return out


_SCHEMA_KEYWORDS = (
    "title", "default", "enum", "minimum", "maximum", "exclusive_minimum", "exclusive_maximum",
    "multiple_of", "min_length", "max_length", "pattern", "format", "min_items", "max_items", "examples",
)


ACTION_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$"
STEP_ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"


class PaginationDef(_Strict):
    """How the API pages this list, and the budget of one call.

    Whatever the style, the model sees one contract: arguments `limit` and `cursor` (opaque,
    signed by the server, bound to the tool and its other arguments, expiring) and the result
    keys `items`, `next_cursor`, `has_more` (and `total` when the API reports one).
    """

    style: Literal["page", "offset", "body_cursor", "header_cursor", "link", "next_url"] = Field(
        description="page: page number + page size; offset: offset + limit; body_cursor: the next cursor is "
        "in the body; header_cursor: in a response header; link: RFC 8288 Link header rel=next; next_url: the "
        "next page's URL is in a response header (`header`) or a body field (`next`)."
    )
    page_param: str | None = Field(
        None, description="page/link: the page-number parameter (default: page). A field of the JSON request "
        "body is written body.<field>[.<field>...] here and in the other *_param keys.",
    )
    size_param: str | None = Field(
        None, description="The page-size parameter (default: per_page for page/link, limit otherwise), or "
        "body.<path> for a field of the JSON request body.",
    )
    offset_param: str | None = Field(
        None, description="offset: the offset parameter (default: offset), or body.<path>."
    )
    cursor_param: str | None = Field(
        None, description="body_cursor/header_cursor: the upstream cursor parameter (default: cursor), or "
        "body.<path>; next_url: the parameter the next URL carries the position in (optional; hidden).",
    )
    first_page: int = Field(1, ge=0, description="page: the number of the first page.")
    items: str | None = Field(
        None, description="JMESPath of the list in a page body (default: the body when it is an array, else items)."
    )
    next: str | None = Field(
        None, description="body_cursor: JMESPath of the next cursor (default: next_cursor); next_url: JMESPath of "
        "the next page's URL (e.g. links.next, '\"@odata.nextLink\"').",
    )
    header: str | None = Field(
        None, description="header_cursor: the response header with the next cursor (default: X-Next-Cursor); "
        "next_url: the response header with the next page's URL (e.g. Next-Page).",
    )
    total: str | None = Field(None, description="JMESPath of the total number of items, when the API reports it.")
    page_size: int | None = Field(None, ge=1, description="Items per upstream request (default: the spec's default).")
    max_items: int = Field(100, ge=1, le=10_000, description="Most items one call returns (the maximum of `limit`).")
    max_pages: int = Field(10, ge=1, le=100, description="Most upstream requests one call makes.")
    auto: bool = Field(False, description="Follow pages until `limit` items are collected (within max_pages).")
    cursor_ttl: int = Field(3600, ge=60, le=7 * 86400, description="Seconds a cursor stays valid.")


class ConfirmationDef(_Strict):
    """Whether a call needs the user's confirmation, and what the user is asked."""

    mode: Literal["auto", "required", "never"] = Field(
        "auto", description="auto: required for high and critical risk; required; never (needs acknowledge_risk "
        "on a critical tool).",
    )
    message: str | None = Field(
        None, description="What the user is asked; {argument} is replaced by that argument's value. Default: the "
        "tool, its arguments and its side_effects.",
    )
    acknowledge_risk: bool = Field(
        False, description="`mode: never` on a critical tool: say that calls without confirmation are intended.",
    )


class DryRunDef(_Strict):
    """The tool's dry run: `dryRun: true` previews the exact request(s) without a side effect."""

    mode: Literal["supported", "required"] = Field(
        description="supported: the model may preview; required: a real call needs the token of a matching preview."
    )
    upstream_param: str | None = Field(
        None, description="The upstream's own preview switch (a query, header or body parameter of the operation): "
        "a dry run then calls the upstream with it set to `value`, and its answer is the preview.",
    )
    value: Any = Field(True, description="What `upstream_param` is set to on a dry run.")
    preview_status: str | None = Field(
        None, pattern=r"^[1-5]\d\d$",
        description="upstream_param: the status of the preview response (default 200); the tool's result is "
        "another 2xx response.",
    )
    token_ttl: int = Field(900, ge=30, le=86_400, description="Seconds a dry-run token stays valid (required).")


class IdempotencyDef(_Strict):
    """The tool sends a key derived from tool + arguments + caller: a retried create creates once."""

    header: str = Field("Idempotency-Key", pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$",
                        description="The request header that carries the key.")


class RetriesDef(_Strict):
    """Retries of idempotent upstream requests: connection errors, 429, 502, 503, 504."""

    max_attempts: int = Field(ge=1, le=10, description="Attempts in all (1: no retry).")
    backoff: float | None = Field(None, gt=0, le=60, description="Seconds the first retry waits at most (full "
                                  "jitter), doubling each time (default 0.25).")
    max_backoff: float | None = Field(None, gt=0, le=300, description="Cap of one wait (default 5).")
    max_retry_after: float | None = Field(None, ge=0, le=3600, description="A longer Retry-After is not waited for "
                                          "(default 30).")


def _mode_shorthand(value: Any) -> Any:
    """`confirmation: required` is short for `confirmation: {mode: required}` (likewise dry_run)."""
    return {"mode": value} if isinstance(value, str) else value


ConfirmationValue = Annotated[
    ConfirmationDef,
    BeforeValidator(_mode_shorthand, json_schema_input_type=Literal["auto", "required", "never"] | ConfirmationDef),
]
DryRunValue = Annotated[
    DryRunDef, BeforeValidator(_mode_shorthand, json_schema_input_type=Literal["supported", "required"] | DryRunDef)
]


class OperationUse(_Strict):
    """What action and variant definitions share: one operation, re-described."""

    operation: str = Field(description='operationId, or "METHOD /path" when the spec has none.')
    description: str | None = Field(None, description="What this branch does; listed in the tool description.")
    risk: Risk | None = Field(None, description="This branch's risk (default from the method).")
    side_effects: list[str] = Field(default_factory=list)
    params: dict[str, ParamDef] = Field(default_factory=dict)
    response: ResponseDef | None = None
    pagination: PaginationDef | None = None
    confirmation: ConfirmationValue | None = Field(None, description="This branch's confirmation (default: the "
                                                   "tool's).")
    dry_run: DryRunValue | None = Field(None, description="This branch's dry run (default: the tool's).")
    idempotent: bool | None = Field(None, description="This branch sends an Idempotency-Key (default: the tool's).")


class ActionDef(OperationUse):
    """One value of the tool's `action` argument."""


class VariantDef(OperationUse):
    """One operation of a presence-dispatched tool: taken when all `when` arguments are given."""

    name: str | None = Field(None, description="A label for messages (default: the operation).")
    when: list[str] = Field(
        default_factory=list, description="Arguments that select this variant; none: the fallback (exactly one)."
    )


class StepParameterDef(_Strict):
    """One parameter of a chain step (Arazzo Parameter Object)."""

    name: str = Field(description="The parameter name as the spec spells it (or a body property: use requestBody).")
    in_: Literal["path", "query", "header", "cookie"] | None = Field(None, alias="in")
    value: Any = Field(description="A literal, or an expression over $inputs / $steps.<stepId> (JMESPath).")


class StepRequestBodyDef(_Strict):
    """The request body of a chain step (Arazzo Request Body Object)."""

    content_type: str | None = Field(None, alias="contentType")
    payload: Any = Field(
        description="An expression for the whole body, or a mapping of property -> literal or expression."
    )


class StepDef(_Strict):
    """One call of a chain (Arazzo Step Object)."""

    step_id: str = Field(alias="stepId", pattern=STEP_ID_PATTERN,
                         description="Names the step for later expressions ($steps.<stepId>) and error reports.")
    operation_id: str = Field(alias="operationId", description='operationId, or "METHOD /path".')
    description: str | None = None
    parameters: list[StepParameterDef] = Field(default_factory=list)
    request_body: StepRequestBodyDef | None = Field(None, alias="requestBody")
    when: str | None = Field(None, description="Expression; the step runs only when it is truthy (else it is null).")


class LinkDef(_Strict):
    """Resource links a tool adds to its results (seed 000's evidencePaths -> `resource_link` items)."""

    source: str = Field(
        alias="from",
        description="JMESPath over the tool's result giving the values of the resource template's variable: "
        "strings (e.g. evidencePaths[*]), or objects keyed by variable name for templates with several.",
    )
    resource: str = Field(description="The name of the resource template (under `resources`) the values fill.")
    max: int = Field(20, ge=1, le=100, description="Most links one result carries.")


class ToolDef(_Strict):
    """One task-level tool."""

    name: str = Field(
        pattern=TOOL_NAME_PATTERN, description="Stable tool name, 1-64 of A-Za-z0-9_.- (e.g. notes_search); a '.' is "
        "served as '_' unless server.tool_names is as_written."
    )
    title: str | None = None
    description: str | None = Field(
        None, description="For the model: what it does, when to use it, units, formats, limits."
    )
    operation: str | None = Field(
        None, description='One operation: operationId, or "METHOD /path" when the spec has none.'
    )
    actions: dict[str, ActionDef] | None = Field(
        None, description="Several operations, picked by the `action` argument: action name -> operation."
    )
    variants: list[VariantDef] | None = Field(
        None, description="Several operations, picked by which arguments are given (first match; one fallback)."
    )
    steps: list[StepDef] | None = Field(None, description="A chain of calls (Arazzo-shaped steps).")
    inputs: dict[str, Any] | None = Field(
        None, description="steps: the JSON Schema (type: object) of the tool's arguments (default: derived)."
    )
    outputs: dict[str, str] | str | None = Field(
        None, description="steps: the result, name -> expression (or one expression); default: the last step."
    )
    pagination: PaginationDef | None = None
    risk: Risk | None = Field(None, description="low|medium|high|critical|forbidden (default from the method).")
    category: str | None = None
    permissions: list[Scope] = Field(default_factory=list, description="Scopes a caller needs.")
    side_effects: list[str] = Field(default_factory=list, description="State changes beyond the result.")
    audit_event: str | None = Field(None, description="Event name written to the audit log.")
    confirmation: ConfirmationValue | None = Field(
        None, description="required|never|auto (default auto: required for high and critical risk), or "
        "{mode, message, acknowledge_risk}.",
    )
    dry_run: DryRunValue | None = Field(
        None, description="supported|required, or {mode, upstream_param, value, preview_status, token_ttl}: adds "
        "the `dryRun` argument (and `dryRunToken` when required).",
    )
    idempotent: bool = Field(False, description="Send an Idempotency-Key derived from tool + arguments + caller, "
                             "and allow retries of this tool.")
    idempotency: IdempotencyDef | None = Field(None, description="Idempotency settings (implies idempotent).")
    retries: RetriesDef | None = Field(None, description="Retries of this tool's idempotent requests.")
    step_up: bool = Field(False, description="Callers need the step-up scope too (HTTP: 403 insufficient_scope).")
    step_up_scope: Scope | None = Field(None, description='The step-up scope (default "<first permission>:step-up").')
    rate_limit: RateLimitValue | None = Field(
        None, description="This tool's own limit, besides the server's: 10/s, or {rate, burst, per_caller}."
    )
    params: dict[str, ParamDef] = Field(default_factory=dict)
    units: dict[str, str] = Field(
        default_factory=dict, description="Field or argument name -> unit; shown in schemas and description."
    )
    response: ResponseDef | None = None
    failure_modes: dict[str, FailureModeDef] = Field(
        default_factory=dict, description='Upstream status ("404", "4XX", "default") -> stable error.'
    )
    annotations: AnnotationsDef | None = None
    links: list[LinkDef] = Field(
        default_factory=list, description="Resource links added to each result, e.g. [{from: evidencePaths[*], "
        "resource: note}]: the client can load what the result drew from with resources/read.",
    )

    @model_validator(mode="after")
    def _one_kind(self) -> ToolDef:
        kinds = [k for k in ("operation", "actions", "variants", "steps") if getattr(self, k) is not None]
        if not kinds:
            raise PydanticCustomError("tool_kind_missing", "a tool needs operation, actions, variants or steps")
        if len(kinds) > 1:
            raise ValueError(f"a tool has exactly one of operation, actions, variants, steps; this one has "
                             f"{' and '.join(kinds)}")
        if self.operation is None and self.params:
            raise ValueError("`params` belongs to an operation: put it into each action or variant "
                             "(chains set parameters in their steps)")
        if self.steps is None and (self.inputs is not None or self.outputs is not None):
            raise ValueError("`inputs` and `outputs` belong to chains (`steps`)")
        if self.operation is None and self.pagination is not None:
            raise ValueError("`pagination` of a tool with actions or variants goes into the action or variant")
        if self.actions is not None:
            if not self.actions:
                raise ValueError("`actions` is empty")
            for name in self.actions:
                if not re.fullmatch(ACTION_NAME_PATTERN, name):
                    raise ValueError(
                        f"action name {name!r} is invalid: use 1-64 of A-Za-z0-9_.- starting with a letter"
                    )
        if self.variants is not None and len(self.variants) < 2:
            raise ValueError("`variants` needs at least two entries (one operation: use `operation`)")
        if self.steps is not None and not self.steps:
            raise ValueError("`steps` is empty")
        return self

    @field_validator("failure_modes", mode="before")
    @classmethod
    def _status_keys(cls, v: Any) -> Any:
        if isinstance(v, dict):
            out = {}
            for k, mode in v.items():
                key = str(k).upper() if str(k).lower() != "default" else "default"
                if not re.fullmatch(r"[1-5](\d\d|XX)|default", key):
                    raise ValueError(f"failure_modes key {k!r} is not an HTTP status, a range like 4XX, or default")
                out[key] = mode
            return out
        return v


RESOURCE_NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"


class ResourceResponseDef(_Strict):
    """What of the response body becomes the resource's content."""

    select: str | None = Field(
        None, description="JMESPath applied to the JSON body; a string result is the text, anything else is JSON."
    )
    max_bytes: int | None = Field(None, ge=256, description="Cap on the content, in bytes (default 1,000,000).")


class ResourceDef(_Strict):
    """A resource (fixed URI) or resource template: context the application loads, read with one GET."""

    uri: str = Field(
        description="A fixed URI (notes://index), or an RFC 6570 template whose variables are parameters of the "
        "operation: {name} is one segment (`/` is percent-encoded), {+name} may contain `/` (notes://{+path})."
    )
    name: str = Field(pattern=RESOURCE_NAME_PATTERN, description="Unique name (1-64 of A-Za-z0-9_.-).")
    title: str | None = None
    description: str | None = None
    operation: str = Field(description='A GET operation: operationId, or "GET /path".')
    mime_type: str | None = Field(
        None, pattern=r"^[\w.+-]+/[\w.+-]+(\s*;.*)?$",
        description="MIME type of the content (default: text/plain for a selected string, else the response's).",
    )
    params: dict[str, Any] = Field(
        default_factory=dict, description="Fixed values of other parameters of the operation (name -> value)."
    )
    response: ResourceResponseDef | None = None
    permissions: list[Scope] | None = Field(
        None, description="Scopes a caller needs to list and read it. Default: those of the first tool that uses "
        "the same operation ([] when none does). [] makes it readable by every caller.",
    )


class PromptArgumentDef(_Strict):
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$", description="Used as {name} in the templates.")
    title: str | None = None
    description: str | None = None
    required: bool = False


class PromptMessageDef(_Strict):
    """One message: text, an embedded resource, or both (then two messages: the text first)."""

    role: Literal["user", "assistant"] = "user"
    text: str | None = Field(None, description="Template: {argument} is replaced; {{ and }} are literal braces.")
    resource: str | None = Field(
        None, description="URI of a declared resource, with {argument} placeholders (e.g. notes://{path}); its "
        "content is read when the prompt is got and embedded.",
    )
    embed: bool = Field(True, description="false: a resource_link to the URI instead of the content.")

    @model_validator(mode="after")
    def _something(self) -> PromptMessageDef:
        if self.text is None and self.resource is None:
            raise ValueError("a message needs `text`, `resource` or both")
        return self


class PromptDef(_Strict):
    """A prompt template the user picks (seed 001: prompts are user-controlled)."""

    name: str = Field(pattern=TOOL_NAME_PATTERN, description="Unique name (1-64 of A-Za-z0-9_.-).")
    title: str | None = None
    description: str | None = None
    arguments: list[PromptArgumentDef] = Field(default_factory=list)
    messages: list[PromptMessageDef] = Field(min_length=1)
    permissions: list[Scope] = Field(
        default_factory=list, description="Scopes a caller needs to list and get it (embedded resources need theirs)."
    )


class SpecPinDef(_Strict):
    """The spec the overlay was written against; compile warns (`--strict` refuses) when it changes."""

    sha256: str = Field(
        pattern=r"^[0-9a-f]{64}$",
        description="SHA-256 of the spec's bytes as read (a single file: `sha256sum spec.json`; several: the "
        "root, then the others in order), the hash the Manifest's sources record.",
    )


class ToolOverlay(_Strict):
    """An openapi2mcp tool overlay, version 1."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        defer_build=True,
        json_schema_extra={"$id": "https://openapi2mcp.dev/schema/overlay-1.json"},
        title="openapi2mcp tool overlay, version 1",
    )

    openapi2mcp: Literal[1] = Field(description="Overlay format version.")
    spec: SpecPinDef | None = Field(None, description="The spec this overlay was written against: {sha256: ...}.")
    server: ServerDef = Field(default_factory=ServerDef)
    upstream: UpstreamDef = Field(default_factory=UpstreamDef)
    passthrough: bool = Field(False, description="Also expose every operation no tool uses, one tool each.")
    defaults: ToolDefaults | None = None
    tools: list[ToolDef] = Field(default_factory=list)
    resources: list[ResourceDef] = Field(
        default_factory=list, description="Resources and resource templates, in the order clients list them."
    )
    prompts: list[PromptDef] = Field(default_factory=list, description="Prompt templates, in listing order.")


class ToolDefaults(_Strict):
    """Settings every tool gets unless it sets its own."""

    response: ResponseDef | None = None


def overlay_json_schema() -> dict[str, Any]:
    """The published JSON Schema of the tool overlay (for editors: yaml-language-server)."""
    schema = ToolOverlay.model_json_schema(by_alias=True)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


# ============================================================================ OAI Overlay 1.x


class OaiAction(BaseModel):
    model_config = ConfigDict(extra="allow", defer_build=True)

    target: str
    description: str | None = None
    update: Any = None
    remove: bool = False
    copy_from: str | None = Field(None, alias="copy")

    @model_validator(mode="after")
    def _one_kind(self) -> OaiAction:
        kinds = [self.update is not None, self.remove, self.copy_from is not None]
        if sum(kinds) != 1:
            raise ValueError("an action needs exactly one of update, remove: true, copy")
        return self


class OaiOverlay(BaseModel):
    model_config = ConfigDict(extra="allow", defer_build=True)

    overlay: str = Field(pattern=r"^1\.[01]\.\d+$")
    info: dict[str, Any]
    extends: str | None = None
    actions: list[OaiAction] = Field(min_length=1)

    @model_validator(mode="after")
    def _copy_needs_11(self) -> OaiOverlay:
        if self.overlay.startswith("1.0") and any(a.copy_from is not None for a in self.actions):
            raise ValueError("the copy action needs `overlay: 1.1.0`")
        return self
