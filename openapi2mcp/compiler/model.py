"""The compile stage's intermediate model: what the spec and the overlay become on the way to a Manifest.

    Operation   one operation of the spec, path-level parameters merged in   (operations.py)
    RequestBody its request body in the media type that will be sent         (arguments.py)
    Arg         one argument of an operation as the model would see it       (arguments.py)
    Use         one operation compiled for a tool or one of its branches     (single.py)
    Context     what compiling one spec shares: document, converter, index   (compile.py)

Plain dataclasses, mutable while a tool is compiled (the overlay's `params` rename, fix and hide
`Arg`s in place); the Manifest's pydantic models (openapi2mcp.manifest) are what comes out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from openapi2mcp.compiler.schemas import Mode, SchemaConverter, SchemaError, flat_object_schema
from openapi2mcp.errors import SpecWarning
from openapi2mcp.manifest import OperationSpec, PaginationSpec, ParamSpec, ResponseSpec, Risk

if TYPE_CHECKING:
    from openapi2mcp.loader import LoadedSpec

# "json": the success response has a JSON schema; "empty": it documents no body; "other": anything else
OutputKind = Literal["json", "empty", "other"]


@dataclass
class Operation:
    """One operation of the spec, with its path-level parameters merged in."""

    id: str  # the operationId, else "METHOD /path"
    method: str  # upper case
    path: str
    pointer: str  # JSON pointer of the operation object
    node: dict[str, Any]  # the operation object as written
    params: list[tuple[dict[str, Any], str]]  # (resolved parameter object, its pointer)

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}"


@dataclass
class RequestBody:
    """An operation's request body in the media type that will be sent (JSON first, then forms)."""

    media: str
    schema: Any  # the raw OpenAPI schema of that media type
    required: bool
    description: str | None
    encoding: dict[str, Any]  # the media type's `encoding` (multipart content types)


@dataclass
class Arg:
    """A model-visible argument under construction: a parameter, a body property or the whole body."""

    name: str  # what the model sees (renamed by `params`)
    wire: str  # what the upstream sees: the parameter's or property's name, a media type for `body*`
    location: str  # path | query | header | cookie | body | body* (whole body) | input (a chain's)
    schema: dict[str, Any]
    required: bool
    param: ParamSpec | None = None  # for non-body arguments
    fixed: bool = False  # the overlay fixed its `value`: sent, never shown
    value: Any = None
    hidden: bool = False  # never shown, never sent (or set by the server: paging, dry run, idempotency)
    binary: bool = False  # a multipart file, base64 in the arguments
    sensitive: bool = False  # its value is a secret: redacted in logs and audit lines
    unit: str | None = None
    path: list[str] | None = None  # a nested field of the JSON body (bodypath.py); location "body"
    container: bool = False  # hidden because nested fields of it are arguments (or paging fields)
    send_null: bool = False  # null_means: clear (the model's null is sent as JSON null)

    @property
    def shown(self) -> bool:
        """Whether the model gives it (neither fixed nor hidden)."""
        return not self.fixed and not self.hidden


def input_schema(args: list[Arg], extra: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """One flat object schema of the shown arguments (and `extra` ones: paging, dry run).

    No top-level oneOf/anyOf: MCP clients and LLM APIs reject them.
    """
    properties: dict[str, Any] = {}
    required: list[str] = []
    defs: dict[str, Any] = {}
    for a in args:
        if not a.shown:
            continue
        schema = a.schema
        if "$defs" in schema:
            schema = dict(schema)
            defs.update(schema.pop("$defs"))
        properties[a.name] = schema
        if a.required:
            required.append(a.name)
    properties.update(extra or {})
    return flat_object_schema(properties, required, defs)


@dataclass(frozen=True)
class ParamArg:
    """What one parameter object gives every operation that has it (arguments._param_arg): made once."""

    param: dict[str, Any]  # the parameter object (held: its id may be the key)
    name: str
    schema: dict[str, Any]
    required: bool
    spec: ParamSpec
    sensitive: bool


@dataclass
class Use:
    """One operation as a tool, or as one branch of a tool, uses it: compiled."""

    op: Operation
    args: list[Arg]  # every argument, fixed and hidden ones included
    operation: OperationSpec  # the call plan
    output_schema: dict[str, Any] | None  # the result's schema (projected, wrapped)
    output_kind: OutputKind
    response: ResponseSpec
    risk: Risk
    pagination: PaginationSpec | None = None
    extra_inputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # limit / cursor, dryRun

    @property
    def visible(self) -> list[Arg]:
        return [a for a in self.args if a.shown]

    def input_schema(self) -> dict[str, Any]:
        return input_schema(self.args, self.extra_inputs)


@dataclass
class Context:
    """What compiling one spec shares: the document, its converter and operations, the warnings."""

    spec: LoadedSpec
    document: dict[str, Any]  # OAI Overlays applied
    converter: SchemaConverter
    ops: dict[str, Operation]  # by operationId and by "METHOD /path" (operations.index_operations)
    warnings: list[SpecWarning] = field(default_factory=list)
    # parameters the upstream auth supplies, (location, lower-case name): never arguments. Set by
    # upstream.upstream_spec, so it runs before any tool is compiled.
    auth_params: set[tuple[str, str]] = field(default_factory=set)
    bodies: dict[str, RequestBody | None] = field(default_factory=dict)  # arguments.request_body, per pointer
    param_args: dict[str | int, ParamArg] = field(default_factory=dict)  # arguments._param_arg
    fed_params: dict[tuple[int, str, bool], tuple[ParamSpec, ParamSpec]] = field(default_factory=dict)  # ._fed_param

    def warn(self, message: str, pointer: str, hint: str | None = None) -> None:
        self.warnings.append(SpecWarning(message=message, location={"pointer": pointer}, hint=hint))

    def convert(self, schema: Any, mode: Mode, pointer: str, max_depth: int | None = None) -> dict[str, Any]:
        """`schema` as standalone JSON Schema (schemas.py); one that cannot be converted is any value, warned."""
        try:
            return self.converter.convert(schema, mode, max_depth)
        except SchemaError as e:
            self.warn(f"schema replaced by 'any value': {e}", e.pointer or pointer)
            return {}
