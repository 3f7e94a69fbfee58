"""The Manifest: the seam between compile time and run time.

Everything the runtime needs to serve a set of MCP tools and forward their calls to a REST API,
as plain pydantic data: tool definitions exactly as clients see them, and per tool the plan of
HTTP calls to make. Nothing of the original spec that the runtime does not need.

A Manifest is frozen and hashed: the same spec and overlays give byte-identical JSON. Loading
one imports pydantic and nothing else from the compile side (no prance, no openapi-core), so a
frozen server package starts fast.

Shape of a tool (one plan serves single-operation tools, collapsed tools and chains):

    ToolSpec
      dispatch: single | action | presence      how a call picks its branch
      branches: [Branch]                        one per action / argument combination
        requires, accepts                       arguments this branch needs / takes (checked)
        steps: [Step]                           the HTTP calls, in order (a chain when > 1)
          operation: OperationSpec              method, path template, where each value goes
            params: [ParamSpec]                 each fed by a tool argument, a fixed value or
            body: BodySpec                      an expression over earlier results
        output: expression                      assembles the result from the steps
        response: ResponseSpec                  this branch's shaping (else the tool's)
        pagination: PaginationSpec              the paging contract (limit/cursor -> items, next_cursor)
        risk, side_effects                      per branch: confirmation and dry run apply per branch
        confirmation, dry_run, idempotency      the safety contract of this branch (policy.py)
      response: ResponseSpec                    projection, truncation, size caps, wrapping
      risk                                      the highest risk of its branches
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field

from openapi2mcp import __version__
from openapi2mcp.manifest.bulk import paused_gc
from openapi2mcp.manifest.sharing import SharingError, share, unshare

if TYPE_CHECKING:
    from openapi2mcp.manifest.contract import ContractContext

MANIFEST_FORMAT = 1

Risk = Literal["low", "medium", "high", "critical", "forbidden"]
RISK_ORDER: dict[str, int] = {"low": 0, "medium": 1, "high": 2, "critical": 3, "forbidden": 4}
Location = Literal["path", "query", "header", "cookie"]
# HTTP method semantics (RFC 9110 9.2): safe methods change nothing; idempotent ones may be repeated.
SAFE_METHODS: frozenset[str] = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
IDEMPOTENT_METHODS: frozenset[str] = SAFE_METHODS | {"PUT", "DELETE"}
Dispatch = Literal["single", "action", "presence"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, defer_build=True)


# ----------------------------------------------------------------------------- request plan


class ParamSpec(_Model):
    """One parameter of an HTTP request and where its value comes from.

    Exactly one source is set: `arg` (a tool argument), `value` (fixed by the overlay, hidden
    from the model) or `expr` (a JMESPath expression over `{inputs, steps}` in a chain).
    """

    name: str  # the wire name, as the spec spells it
    location: Location
    arg: str | None = None
    fixed: bool = False
    value: Any = None
    expr: str | None = None
    required: bool = False
    style: str = "form"  # OpenAPI serialisation style
    explode: bool = True
    allow_reserved: bool = False
    allow_empty: bool = False  # query: the spec's allowEmptyValue (else an empty value is refused)
    content_type: str | None = None  # set when the spec gives `content` instead of `schema`


class BodyField(_Model):
    """A nested field of a JSON request body, fed by a tool argument or fixed (`{"flows": {"name": ...}}`).

    The body's objects on the way to it are created as needed; a value already there (from a
    top-level argument) is merged into, never silently replaced.
    """

    path: list[str]  # the keys from the body's root, e.g. ["flows", "name", "like_"]
    arg: str | None = None  # the tool argument that feeds it (absent or null: not sent)
    value: Any = None  # else: a fixed value


class BodySpec(_Model):
    """The request body: either one argument holds all of it, or arguments map to properties."""

    media_type: str  # application/json, application/x-www-form-urlencoded, multipart/form-data, ...
    required: bool = False
    arg: str | None = None  # whole-body mode: this argument is the body
    base64: bool = False  # whole-body mode: the argument is base64 of the bytes sent (a file, an archive)
    expr: str | None = None  # whole-body mode in a chain: computed body
    value: Any = None  # whole-body mode: a fixed body (when neither arg nor expr is set)
    properties: dict[str, str] = Field(default_factory=dict)  # tool argument -> body property
    fixed: dict[str, Any] = Field(default_factory=dict)  # body property -> fixed value
    exprs: dict[str, str] = Field(default_factory=dict)  # body property -> expression (chains)
    binary: list[str] = Field(default_factory=list)  # multipart properties sent as files (base64 args)
    content_types: dict[str, str] = Field(default_factory=dict)  # multipart property -> part content type
    fields: list[BodyField] = Field(default_factory=list)  # nested fields, set after the properties
    min_properties: int = 0  # the body schema's minProperties: fewer given properties are refused
    nulls: list[str] = Field(default_factory=list)  # arguments whose null is sent as JSON null (null_means: clear)


class OperationSpec(_Model):
    """One HTTP operation as the runtime calls it."""

    id: str  # operationId, or "METHOD /path" when the spec has none
    method: str  # upper case
    path: str  # template relative to the upstream base URL, e.g. /pets/{petId}
    params: list[ParamSpec] = Field(default_factory=list)
    body: BodySpec | None = None
    query: str | None = None  # a raw query string sent as is (a followed next-page URL's; never compiled)
    success: list[str] = Field(default_factory=lambda: ["2XX"])  # documented success statuses
    accept: str | None = None  # the Accept header to send (the success media types)


class Step(_Model):
    """One HTTP call within a tool; `id` names it for later steps and for error reports."""

    id: str
    operation: OperationSpec
    when: str | None = None  # JMESPath; the step runs only when it is truthy


# ----------------------------------------------------------------------------- results


OutputValidation = Literal["tolerant", "strict", "off"]


class ResponseSpec(_Model):
    """How an upstream body becomes the tool result."""

    select: str | None = None  # JMESPath projection applied to the body
    max_items: int | None = None  # arrays in the result are cut to this many items
    max_bytes: int = 64_000  # cap on the serialised result
    wrap: str | None = None  # structuredContent key when the result is not a JSON object
    units: dict[str, str] = Field(default_factory=dict)  # result field -> unit (documentation)
    # tolerant: results are repaired to fit the (tolerant) outputSchema; strict: a misfit is an error
    validate_: OutputValidation = Field("tolerant", alias="validate")


class FailureMode(_Model):
    """An overlay's mapping of an upstream status to a stable error code and message."""

    code: str
    message: str | None = None
    retryable: bool | None = None


PageStyle = Literal["page", "offset", "body_cursor", "header_cursor", "link", "next_url"]
# The longest cursor a paginated tool takes (its `cursor` argument's maxLength) and so issues.
CURSOR_MAX_LENGTH = 8192


class PaginationSpec(_Model):
    """How a list operation pages, and the budget of one tool call.

    The model always sees the same contract: arguments `limit` and `cursor`, result keys
    `items`, `next_cursor`, `has_more` (and `total` when the API reports one). The cursor is a
    signed token (signing.py) holding the upstream position; the parameters below say where
    that position goes on the wire. They are not in the operation's `params`.
    """

    style: PageStyle
    position: ParamSpec | None = None  # page number, offset or upstream cursor parameter
    size: ParamSpec | None = None  # page-size parameter
    position_path: list[str] = Field(default_factory=list)  # ... or its field in the JSON request body
    size_path: list[str] = Field(default_factory=list)  # ... or the page size's field in the JSON body
    first_page: int = 1  # style=page: the number of the first page
    items: str = "items"  # JMESPath: the list in one page's body ("@": the body is the list)
    next: str | None = None  # body_cursor/next_url: JMESPath of the next cursor (or URL) in the body
    header: str | None = None  # header_cursor/next_url: the response header with the next cursor (or URL)
    total: str | None = None  # JMESPath of the total count (page/offset stop early; returned)
    item_select: str | None = None  # JMESPath applied to each item
    page_size: int = 20  # items per upstream request (when the API takes a size)
    max_items: int = 100  # most items one call returns (the maximum of `limit`)
    max_pages: int = 10  # most upstream requests one call makes
    auto: bool = False  # follow pages until `limit` items (within max_pages)
    cursor_ttl: int = 3600  # seconds a cursor stays valid
    limit_arg: str = "limit"
    cursor_arg: str = "cursor"


Confirmation = Literal["auto", "required", "never"]
DRY_RUN_ARG = "dryRun"  # the tool argument of dry-run tools
DRY_RUN_TOKEN_ARG = "dryRunToken"  # dry_run required: the real call's proof of a matching dry run
DRY_RUN_INTERNAL_ARG = "$dryRun"  # feeds the upstream's own preview switch; never a model argument


class DryRunSpec(_Model):
    """A branch's dry run (seed 002): the `dryRun` argument previews the call instead of making it.

    `required`: a real call needs the `dryRunToken` a matching dry run returned (signed, bound to
    the tool, branch, arguments and caller, expiring after `token_ttl` seconds). `native`: the
    upstream has its own preview switch; the operation's plan feeds it from the internal argument
    `$dryRun` (set to `value` on dry runs, absent otherwise), so a dry run IS an upstream call.
    """

    mode: Literal["supported", "required"] = "supported"
    native: bool = False
    value: Any = True  # what `$dryRun` carries to the upstream's preview parameter
    token_ttl: int = 900


class IdempotencySpec(_Model):
    """The branch sends a key derived from tool + arguments + caller, so a retry is not a second effect."""

    header: str = "Idempotency-Key"


class RetrySpec(_Model):
    """Retries of one upstream request (idempotent ones only; see retry.py)."""

    max_attempts: int = Field(2, ge=1, le=10)
    backoff: float = Field(0.25, gt=0)  # seconds: the first retry waits up to this (full jitter), doubling
    max_backoff: float = Field(5.0, gt=0)  # cap of one wait without Retry-After
    max_retry_after: float = Field(30.0, ge=0)  # a longer Retry-After is not waited for (the error says it)


class Branch(_Model):
    """One way a tool can run: a list of steps plus the policy of what they do."""

    key: str  # the action value (dispatch=action) or a label
    when: list[str] = Field(default_factory=list)  # dispatch=presence: taken when all are given
    requires: list[str] = Field(default_factory=list)  # arguments this branch needs (none with a default)
    accepts: list[str] | None = None  # arguments this branch uses (None: any); others are refused
    # what this branch sends for an argument not given (its own `default`s: those of another
    # branch, or a default the merged input schema dropped because the branches disagree, never apply)
    defaults: dict[str, Any] = Field(default_factory=dict)
    steps: list[Step]
    output: str | None = None  # JMESPath over {inputs, steps}; None: the last step's body
    response: ResponseSpec | None = None  # this branch's shaping (None: the tool's `response`)
    # what a strict branch's results are checked against when it is not the tool's outputSchema
    # (a tool whose branches return different shapes advertises their union)
    output_schema: dict[str, Any] | None = None
    pagination: PaginationSpec | None = None  # single-step branches only
    risk: Risk = "low"
    side_effects: list[str] = Field(default_factory=list)
    description: str | None = None  # what this branch does (actions/variants), for people
    confirmation: Confirmation = "auto"  # auto: required when risk is high or critical (policy.py)
    confirmation_message: str | None = None  # template over the arguments: {name}; None: from side_effects
    dry_run: DryRunSpec | None = None
    idempotency: IdempotencySpec | None = None


# ----------------------------------------------------------------------------- resources and prompts


class LinkSpec(_Model):
    """`resource_link` items a tool adds to its results: the values of `from` fill a resource template."""

    source: str = Field(alias="from")  # JMESPath over structuredContent: strings, or objects keyed by variable
    resource: str  # the name of a templated ResourceSpec
    max: int = 20  # most links per result


class ResourceSpec(_Model):
    """A resource (fixed URI) or resource template (RFC 6570, see uritemplate.py), read with one GET.

    The operation's params are fed by the URI variables (`arg` = the variable name) or fixed;
    `variables` holds each variable's JSON Schema (values are checked, and converted from the
    URI's text, before anything is sent).
    """

    name: str
    uri: str  # a fixed URI, or a template: {var} one segment, {+var} may contain `/`
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None  # None: the upstream response's media type
    operation: OperationSpec
    variables: dict[str, dict[str, Any]] = Field(default_factory=dict)
    response: ResponseSpec = Field(default_factory=ResponseSpec)  # select, max_bytes
    meta: dict[str, Any] = Field(default_factory=dict)
    permissions: list[str] = Field(default_factory=list)  # scopes to list and read it

    @property
    def is_template(self) -> bool:
        return bool(self.variables)

    def definition(self) -> dict[str, Any]:
        """The resource as `resources/list` (or `resources/templates/list`) shows it."""
        out: dict[str, Any] = {"name": self.name}
        if self.title:
            out["title"] = self.title
        out["uriTemplate" if self.is_template else "uri"] = self.uri
        if self.description:
            out["description"] = self.description
        if self.mime_type:
            out["mimeType"] = self.mime_type
        if self.meta:
            out["_meta"] = self.meta
        return out


class PromptArgumentSpec(_Model):
    name: str
    title: str | None = None
    description: str | None = None
    required: bool = False


class PromptMessageSpec(_Model):
    """One overlay message: text (a template over the arguments), a resource, or both (text first)."""

    role: Literal["user", "assistant"] = "user"
    text: str | None = None  # {arg} is replaced; {{ and }} are literal braces
    resource: str | None = None  # the name of the ResourceSpec to embed
    resource_args: dict[str, str] = Field(default_factory=dict)  # template variable -> template over arguments
    embed: bool = True  # False: a resource_link instead of the content


class PromptSpec(_Model):
    name: str
    title: str | None = None
    description: str | None = None
    arguments: list[PromptArgumentSpec] = Field(default_factory=list)
    messages: list[PromptMessageSpec]
    permissions: list[str] = Field(default_factory=list)  # scopes to list and get it

    def definition(self) -> dict[str, Any]:
        """The prompt as `prompts/list` shows it."""
        out: dict[str, Any] = {"name": self.name}
        if self.title:
            out["title"] = self.title
        if self.description:
            out["description"] = self.description
        if self.arguments:
            out["arguments"] = [a.model_dump(exclude_none=True) for a in self.arguments]
        return out


# ----------------------------------------------------------------------------- access


class RateLimitSpec(_Model):
    """A token bucket (limits.py): `rate` tokens a second refill up to `burst`; one call takes one."""

    rate: float = Field(gt=0)  # tokens per second
    burst: int = Field(ge=1)  # the bucket's size: calls allowed at once
    per_caller: bool = False  # one bucket per caller instead of one shared by all


# ----------------------------------------------------------------------------- tools


class ToolSpec(_Model):
    """A tool as clients see it (the definition) and as the runtime runs it (the plan)."""

    name: str  # the served name: what tools/list, tools/call, audit, errors and limits use
    written_name: str | None = None  # the overlay's spelling when it differs (names.py), for people
    title: str | None = None
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] = Field(default_factory=dict)  # MCP ToolAnnotations, camelCase
    meta: dict[str, Any] = Field(default_factory=dict)  # tool `_meta` (operation ids, category)

    dispatch: Dispatch = "single"
    action_arg: str = "action"
    branches: list[Branch]
    response: ResponseSpec = Field(default_factory=ResponseSpec)
    failure_modes: dict[str, FailureMode] = Field(default_factory=dict)  # "404", "4XX", "default"

    risk: Risk = "low"
    category: str | None = None
    permissions: list[str] = Field(default_factory=list)
    side_effects: list[str] = Field(default_factory=list)
    audit_event: str | None = None
    sensitive: list[str] = Field(default_factory=list)  # argument names redacted in logs
    links: list[LinkSpec] = Field(default_factory=list)  # resource_link items added to results
    retries: RetrySpec | None = None  # None: the upstream's `retries`, else the defaults (retry.py)
    rate_limit: RateLimitSpec | None = None  # this tool's own bucket (besides the upstream's)
    step_up: bool = False  # the caller's token must also carry the step-up scope (access.step_up_scope)
    step_up_scope: str | None = None  # None: "<first permission>:step-up"

    def definition(self, context: ContractContext | None = None) -> dict[str, Any]:
        """The tool exactly as `tools/list` shows it (MCP wire names), its contract in `_meta` (contract.py).

        `context`: what the serving flags add to the contract (None: a server without flags).
        """
        from openapi2mcp.manifest.contract import CONTRACT_KEY, tool_contract  # it builds on this module

        out: dict[str, Any] = {"name": self.name}
        if self.title:
            out["title"] = self.title
        out["description"] = self.description
        out["inputSchema"] = self.input_schema
        if self.output_schema is not None:
            out["outputSchema"] = self.output_schema
        if self.annotations:
            out["annotations"] = self.annotations
        out["_meta"] = {**self.meta, CONTRACT_KEY: tool_contract(self, context).wire()}
        return out


# ----------------------------------------------------------------------------- upstream


class AuthSpec(_Model):
    """How the server authenticates to the upstream; values are ${VAR} templates."""

    # "env": the spec declares no scheme; bearer from $OPENAPI2MCP_TOKEN or basic from
    # $OPENAPI2MCP_USERNAME/$OPENAPI2MCP_PASSWORD when set at start-up, else none (raw mode only)
    # oauth2_client_credentials: a token from `token_url` for this server (upstream/credentials.py);
    # forward: the MCP caller's own bearer token; token_exchange: RFC 8693 exchange of the caller's token
    type: Literal["none", "env", "bearer", "header", "query", "basic", "cookie",
                  "oauth2_client_credentials", "forward", "token_exchange"] = "none"
    name: str | None = None  # header / query / cookie name
    value: str | None = None  # token or key template, e.g. "${API_TOKEN}"
    username: str | None = None
    password: str | None = None
    token_url: str | None = None  # OAuth token endpoint (template)
    client_id: str | None = None  # template
    client_secret: str | None = None  # template, e.g. "${CLIENT_SECRET}": expanded at start-up, never stored
    scopes: list[str] = Field(default_factory=list)  # asked for (the `scope` parameter)
    audience: str | None = None  # the `audience` parameter; forward: what the caller token's `aud` must hold
    resource: str | None = None  # the RFC 8707 `resource` parameter
    auth_method: Literal["client_secret_basic", "client_secret_post"] = "client_secret_basic"

    @property
    def dynamic(self) -> bool:
        """The credential is obtained while serving (a token endpoint, or the caller's token)."""
        return self.type in OAUTH_AUTH_TYPES

    @property
    def per_caller(self) -> bool:
        """The credential depends on the MCP caller's bearer token."""
        return self.type in ("forward", "token_exchange")


OAUTH_AUTH_TYPES: Final = frozenset({"oauth2_client_credentials", "forward", "token_exchange"})


class TimeoutSpec(_Model):
    connect: float = 5.0
    read: float = 30.0
    total: float = 60.0  # the whole call's deadline, retries included


# The URL requests are sent to, whatever the Manifest says (`serve --base-url` sets it too).
BASE_URL_VAR = "OPENAPI2MCP_BASE_URL"


class UpstreamSpec(_Model):
    base_url: str  # template: "${API_URL:-https://api.example.com/v1}"; $OPENAPI2MCP_BASE_URL wins
    # the spec's servers[0] when it is relative ("/api"): the base URL must be given at start-up
    spec_server: str | None = None
    auth: AuthSpec = Field(default_factory=AuthSpec)
    timeout: TimeoutSpec = Field(default_factory=TimeoutSpec)
    headers: dict[str, str] = Field(default_factory=dict)  # extra static headers (templates)
    max_response_bytes: int = 10_000_000  # bodies above this are refused, never buffered whole
    verify_tls: bool = True
    retries: RetrySpec | None = None  # None: retry.py's defaults
    rate_limit: RateLimitSpec | None = None  # one bucket for every tool call (the server's limit)
    forward_headers: list[str] = Field(default_factory=list)  # inbound MCP request headers sent upstream


class ServerSpec(_Model):
    name: str
    title: str | None = None
    version: str = "0.0.0"
    instructions: str | None = None


class SourceSpec(_Model):
    """Where the Manifest came from (for reproducibility; never the content itself)."""

    name: str
    sha256: str
    kind: str  # "openapi 3.0.3", "swagger 2.0", "openapi2mcp overlay 1", "oai overlay 1.0.0"


class Manifest(_Model):
    format: int = MANIFEST_FORMAT
    generator: str = f"openapi2mcp {__version__}"
    server: ServerSpec
    upstream: UpstreamSpec
    tools: list[ToolSpec]
    resources: list[ResourceSpec] = Field(default_factory=list)
    prompts: list[PromptSpec] = Field(default_factory=list)
    sources: list[SourceSpec] = Field(default_factory=list)
    content_hash: str = ""

    # ------------------------------------------------------------------ serialisation

    def payload(self) -> dict[str, Any]:
        """What the hash covers and the file holds: the format, the generator and every non-default value.

        Leaving defaults out keeps a Manifest's hash (and file) unchanged when a later version
        adds a field with a default, so older Manifests still load and verify. The tool schemas are
        the same objects as in the model, not copies (see `_tool_payload`).
        """
        body = self.model_dump(mode="json", by_alias=True, exclude_defaults=True, exclude=_NOT_DUMPED)
        body["tools"] = [_tool_payload(tool) for tool in self.tools]
        return {"format": self.format, "generator": self.generator,
                **{key: body[key] for key in type(self).model_fields if key in body}}

    def compute_hash(self) -> str:
        try:
            return _digest(self.payload())
        except (TypeError, ValueError):  # a schema value JSON cannot spell as it is: pydantic's dump converts it
            return _digest(self._dumped_payload())

    def _dumped_payload(self) -> dict[str, Any]:
        """`payload()` with every value through pydantic's JSON-mode dump (slower: it copies the schemas)."""
        body = self.model_dump(
            mode="json", by_alias=True, exclude_defaults=True, exclude={"content_hash", "format", "generator"}
        )
        return {"format": self.format, "generator": self.generator, **body}

    def sealed(self) -> Manifest:
        """A copy with `content_hash` set; what `compile` writes."""
        return self.model_copy(update={"content_hash": self.compute_hash()})

    def to_json(self) -> str:
        """The Manifest file: indented JSON, each repeated schema subtree once (sharing.py), and when sealed a
        `file_hash` over its own bytes (see `_seal_file`)."""
        try:
            data = {**share(self.payload()), "content_hash": self.content_hash}
            text = json.dumps(data, indent=1, ensure_ascii=False, sort_keys=False) + "\n"
        except (TypeError, ValueError):
            data = {**share(self._dumped_payload()), "content_hash": self.content_hash}
            text = json.dumps(data, indent=1, ensure_ascii=False, sort_keys=False) + "\n"
        return _seal_file(text) if self.content_hash else text

    @classmethod
    @paused_gc()
    def from_json(cls, text: str | bytes, *, source: str | None = None) -> Manifest:
        """Parse, validate and verify a Manifest file (`source`, the file's name, is for the error messages).

        A file `to_json` wrote since the file hash ends with `file_hash`: one sha256 over the file's
        bytes, so any changed byte (an edit, a re-indent, other line endings) is refused, and the
        `content_hash` it holds is then the one the writer computed, taken as written. A big file is
        hashed by a thread while it is parsed.

        Older files have only `content_hash`, the canonical hash of the payload. It is checked on the
        parsed file itself (the C JSON encoder over plain data): a file `to_json` wrote is exactly its
        payload, so that is the same digest without a second dump of the model. A file that spells out
        default values (hand-written, or from an older writer) hashes differently there and is checked
        against the model's payload instead.
        """
        raw = text.encode() if isinstance(text, str) else text
        name = f"manifest {source}" if source else "manifest"
        digest = _FileDigest(raw)  # a big file is hashed by a thread while it is parsed
        data = _parse(raw)
        file_hash = data.pop(FILE_HASH_KEY, None) if isinstance(data, dict) else None
        if isinstance(data, dict):
            try:
                unshare(data)  # the repeated schema subtrees the file holds once
            except SharingError as e:
                raise ValueError(f"{name} is damaged: {e}; recompile it with `openapi2mcp compile`") from None
        # not a JSON object: pydantic's own error names the problem
        manifest = cls.model_validate(data) if isinstance(data, dict) else cls.model_validate_json(text)
        if manifest.format != MANIFEST_FORMAT:
            raise ValueError(
                f"{name}: format {manifest.format} is not supported by this openapi2mcp "
                f"(it reads format {MANIFEST_FORMAT}); recompile it with `openapi2mcp compile`"
            )
        if file_hash is not None:
            if not isinstance(file_hash, str) or digest.value() != file_hash or not manifest.content_hash:
                raise ValueError(
                    f"{name} does not match its file_hash: the file was edited, reformatted or damaged after "
                    "`openapi2mcp compile` wrote it (its bytes are hashed, so even re-indenting or other line "
                    "endings count); recompile it with `openapi2mcp compile` instead of editing the JSON"
                )
        elif manifest.content_hash and not _file_matches(data, manifest.content_hash) and (
            manifest.content_hash != manifest.compute_hash()
        ):
            raise ValueError(
                f"{name} content does not match its content_hash: the file was edited or damaged; "
                "recompile it with `openapi2mcp compile`"
            )
        return manifest

    @classmethod
    def read(cls, path: str | Path) -> Manifest:
        return cls.from_json(Path(path).read_bytes(), source=str(path))

    def tool(self, name: str) -> ToolSpec | None:
        for t in self.tools:
            if t.name == name:
                return t
        return None


# No circular check (a dict of ids per container: 30% of the encoding): the payload is model dumps
# and compiled schemas, trees that may share parts but never contain themselves.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, check_circular=False)


class _FileDigest:
    """`_file_digest(raw)`; a big file's computed by a thread from the start.

    hashlib lets go of the GIL over a large buffer, so where a second core is free a big Manifest's
    sha256 costs no time beside the parse (an error before it is asked for leaves the thread to end
    on its own); a small one (~1 ms) is hashed when asked for.
    """

    def __init__(self, raw: bytes) -> None:
        self._raw = raw
        self._found: list[str | None] = []
        self._thread: threading.Thread | None = None
        if len(raw) >= _HASH_BESIDE and _FILE_TAIL.search(raw, max(0, len(raw) - 120)):
            self._thread = threading.Thread(target=lambda: self._found.append(_file_digest(raw)),
                                            name="manifest-file-hash", daemon=True)
            self._thread.start()

    def value(self) -> str | None:
        if self._thread is not None:
            self._thread.join()
        return self._found[0] if self._found else _file_digest(self._raw)


_HASH_BESIDE: Final = 1 << 20  # bytes from which a thread hashes the file


# Plain JSON data in the model (compiled schemas): put into the payload as they are. pydantic's
# JSON-mode dump of a dict[str, Any] rebuilds it node by node (GitHub: 0.4 s, Graph: 30 s).
_RAW_TOOL_FIELDS: set[str] = {"input_schema", "output_schema"}
_NOT_DUMPED: set[str] = {"content_hash", "format", "generator", "tools"}


def _tool_payload(tool: ToolSpec) -> dict[str, Any]:
    """One tool's part of `Manifest.payload()`, its keys in field order like pydantic's dump."""
    body = tool.model_dump(mode="json", by_alias=True, exclude_defaults=True, exclude=_RAW_TOOL_FIELDS)
    body["input_schema"] = tool.input_schema
    if tool.output_schema is not None:
        body["output_schema"] = tool.output_schema
    return {key: body[key] for key in ToolSpec.model_fields if key in body}


def _digest(payload: dict[str, Any]) -> str:
    # streamed: the canonical JSON of a big Manifest (GitHub: 60 MB) is never held whole
    digest = hashlib.sha256()
    for chunk in _canonical_chunks(payload, 2):
        digest.update(chunk.encode())
    return "sha256:" + digest.hexdigest()


def _file_matches(data: Any, content_hash: str) -> bool:
    """Whether a parsed Manifest file, less its `content_hash`, hashes to `content_hash`."""
    if not isinstance(data, dict):
        return False
    try:
        return _digest({k: v for k, v in data.items() if k != "content_hash"}) == content_hash
    except (TypeError, ValueError):
        return False


def _parse(raw: bytes) -> Any:
    """The JSON value of a Manifest file, None when it is not JSON.

    pydantic-core's parser (Rust, there with pydantic) first: 35-40% less CPU than `json.loads` on a
    big Manifest, the same values (last duplicate key wins, big integers, correctly rounded floats).
    What it refuses (a lone surrogate escape, UTF-16) goes to `json.loads`, which decides as before.
    """
    try:
        return pydantic_core.from_json(raw)
    except ValueError:
        pass
    try:
        return json.loads(raw)
    except ValueError:
        return None


# The file hash (`to_json` writes it, `from_json` checks it): the sha256 of the file's UTF-8 bytes
# as written with the value of its last member, `"file_hash"`, empty. Checking it is one pass of
# sha256 over the bytes (109 MB: 0.2 s) where the canonical `content_hash` re-encodes the parsed file.
FILE_HASH_KEY: Final = "file_hash"
_FILE_TAIL_BLANK: Final = ',\n "file_hash": ""\n}\n'
_FILE_TAIL: Final = re.compile(rb',\n "file_hash": ("sha256:[0-9a-f]{64}")\n}\n\Z')


def _seal_file(text: str) -> str:
    """`text` (the JSON of one object, indent 1, newline-terminated) with `file_hash` appended as its last member."""
    blank = text[: text.rindex("}")].rstrip() + _FILE_TAIL_BLANK
    digest = "sha256:" + hashlib.sha256(blank.encode()).hexdigest()
    return blank[: -len('""\n}\n')] + f'"{digest}"\n}}\n'


def _file_digest(raw: bytes) -> str | None:
    """The file hash of a Manifest file's bytes, None when its last member is not a `file_hash` as written."""
    match = _FILE_TAIL.search(raw, max(0, len(raw) - 120))
    if match is None:
        return None
    view = memoryview(raw)
    digest = hashlib.sha256(view[: match.start(1)])
    digest.update(b'""')
    digest.update(view[match.end(1):])
    return "sha256:" + digest.hexdigest()


def _canonical_chunks(data: Any, depth: int) -> Iterator[str]:
    """The canonical JSON of `data` in pieces: the C encoder per piece, the top levels split by hand.

    Canonical: sorted keys, no spaces, UTF-8, the one spelling the hash is over. (`JSONEncoder.
    iterencode` gives the same text but runs the pure-Python encoder: 2x slower.)
    """
    if depth > 0 and isinstance(data, dict):
        yield "{"
        for i, key in enumerate(sorted(data)):
            yield ("," if i else "") + _CANONICAL.encode(key) + ":"
            yield from _canonical_chunks(data[key], depth - 1)
        yield "}"
    elif depth > 0 and isinstance(data, list):
        yield "["
        for i, item in enumerate(data):
            if i:
                yield ","
            yield from _canonical_chunks(item, depth - 1)
        yield "]"
    else:
        yield _CANONICAL.encode(data)


# ----------------------------------------------------------------------------- ${VAR} templates

VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$\$")


class MissingVariable(KeyError):
    """A ${VAR} without a default is not set in the environment."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(name)


PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")  # {name} in messages and prompts; {{ and }} are braces


def placeholders(template: str) -> list[str]:
    """The `{name}` placeholders of a confirmation message or prompt template."""
    return [m.group(1) for m in PLACEHOLDER.finditer(template) if m.group(1) is not None]


def template_vars(template: str) -> list[str]:
    """The variable names a template refers to."""
    return [m.group(1) for m in VARIABLE.finditer(template) if m.group(1)]


def optional(template: str) -> bool:
    """True when every variable in the template has a default (`${TOKEN:-}`): may expand to ""."""
    found = list(VARIABLE.finditer(template))
    return bool(found) and all(m.group(0) == "$$" or m.group(2) is not None for m in found)


def expand(template: str, environ: Mapping[str, str] | None = None) -> str:
    """Expand ${VAR} and ${VAR:-default} (shell-like; `$$` is a literal `$`).

    `${VAR:-d}` uses d when VAR is unset or empty; `${VAR-d}` only when unset. A ${VAR} with no
    default that is not set raises MissingVariable, so a missing secret is never sent as "".
    """
    env = os.environ if environ is None else environ

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name, default = m.group(1), m.group(2)
        value = env.get(name)
        colon = m.group(0)[2 + len(name) : 3 + len(name)] == ":"
        if value is None or (colon and value == ""):
            if default is None:
                raise MissingVariable(name)
            return default
        return value

    return VARIABLE.sub(sub, template)
