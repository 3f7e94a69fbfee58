"""The load stage: a spec file or URL in, one self-contained OpenAPI 3.x document out.

`load_spec` reads a spec (a path or an http(s) URL; YAML or JSON; OpenAPI 3.0, 3.1, 3.2 or Swagger
2.0), bundles the files its `$ref`s point to into that one document, converts Swagger 2.0 to
OpenAPI 3.0.3 and reports what looks wrong but does not stop us as located warnings. Anything
unusable raises `InputError` naming the file, the line:column or JSON pointer, and the fix.

Design decisions (timings on the corpus are in docs/loading.md):

* Parsing. JSON with `json`; YAML with libyaml (`CSafeLoader`: 5x faster than pure-Python YAML
  on the 3 MB OpenAI spec) and YAML 1.2 scalars, so `on`/`yes` and dates stay strings and a
  `200:` key is the string "200" as written. The result is plain JSON data. The format is told by
  the content (a leading `{` or `[` is JSON), not only by the extension.
* Internal `#/...` refs are kept. The compiler resolves them lazily per operation with cycle
  detection: inlining everything is what makes raw tool lists huge and recursive schemas infinite.
* External refs (other files, other URLs) are bundled with prance's `RefResolver`, in the spirit
  of its TRANSLATE_EXTERNAL method: a schema from another file moves into `components/schemas`
  and the ref becomes internal (which keeps recursive schemas across files finite); operations,
  parameters, responses and examples from other files are inlined where they are used. prance
  brings the reference graph (discovery result -> cycle detection -> topological resolution ->
  application). We override its hooks for what the stock resolver gets wrong or slow here:
  - reading: prance parses every file with pure-Python ruamel.yaml, 16 of the 20 s DigitalOcean
    (2,850 files) took; our reader parses each file once with libyaml and enforces the policy;
  - refs like `#/x` inside an included file mean *that* file; stock prance skips them as
    "internal" and leaves them dangling in the bundle;
  - translation: stock prance files every external ref, operations included, under
    `components/schemas`, named after the file name alone (collisions across folders).
* Fast path: a regex over the text finds `$ref`s whose value does not start with `#`; when there
  are none (GitHub, Stripe, OpenAI, Kubernetes) the resolver is skipped entirely.
* Kubernetes: prance 26.7 fails on the k8s specs with "'dict' object has no attribute 'decode'":
  its reference iterator treats *every* key named `$ref` as a reference, including the schema
  property named `$ref` in `JSONSchemaProps.properties` (its value is a schema, a dict, which
  urlparse cannot take). Our iterator only takes `$ref`s with string values, so a property named
  `$ref` stays a property; and the k8s specs take the fast path anyway.
* No validation by default: full validation took 24 s on GitHub (DESIGN.md) and rejects real specs
  that are perfectly usable (OpenAI, DigitalOcean). Cheap checks give warnings; `strict=True`
  runs the validator and turns warnings into errors.
* Security: a spec is untrusted input. Remote refs go only to the spec's own host unless allowed;
  file refs may not leave the root spec's folder (`..`, absolute paths, symlinks); a remote spec
  cannot read local files. File sizes, file counts, redirects and YAML alias expansion are capped.
* Swagger 2.0 is converted here: prance's converter calls a web service.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import yaml
from prance.util.resolver import RESOLVE_FILES, RESOLVE_HTTP, TRANSLATE_EXTERNAL, RefResolver

from openapi2mcp import __version__
from openapi2mcp.errors import InputError, Location, Problem, SpecWarning
from openapi2mcp.loader.untrusted import MAX_NESTING, NUMBER_HINT, check_document, number_problem

MAX_FILE_BYTES = 50 * 1024 * 1024  # one file or URL
MAX_TOTAL_BYTES = 200 * 1024 * 1024  # all files of one spec
MAX_FILES = 10_000  # DigitalOcean has 2,850
MAX_REDIRECTS = 5
FETCH_DEADLINE = 120.0  # seconds for all network reads of one load (the spec and its remote refs)
MAX_STRICT_PROBLEMS = 50
SUPPORTED_VERSIONS = "Swagger 2.0 and OpenAPI 3.0, 3.1, 3.2"

JsonPath = tuple[str | int, ...]
_Where = Location | Callable[[], Location]  # where a ref stands; built only for an error message
_Key = tuple[str, tuple[str, ...]]  # (resource: absolute path or URL, JSON pointer parts)

HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace", "query")


@dataclass(frozen=True)
class LoadedSpec:
    """A spec ready for the overlay and compile stages.

    `document` is an OpenAPI 3.x dict of plain JSON data: Swagger 2.0 converted to 3.0.3, the
    content of other files bundled in, internal `#/...` refs kept as they are. It is a tree (no
    shared subtrees), so later stages may patch it in place.
    """

    document: dict[str, Any]
    original_version: str  # "2.0", "3.0.3", "3.1.0", ...
    openapi_version: str  # the version of `document` ("3.0.3" after a 2.0 conversion)
    source: str  # the path or URL as given
    sha256: str  # over the bytes of every file read: the root, then included ones (sorted)
    warnings: list[SpecWarning] = field(default_factory=list)
    patched: bool = False  # the OAI Overlays were applied while loading (load_spec's `patch`)


def load_spec(
    source: str | os.PathLike[str],
    *,
    allow_remote_refs: bool | Sequence[str] = False,
    strict: bool = False,
    timeout: float = 30.0,
    ref_root: str | os.PathLike[str] | None = None,
    fetch_deadline: float = FETCH_DEADLINE,
    patch: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> LoadedSpec:
    """Load, bundle, normalise and check a spec; raise `InputError` when it cannot be used.

    allow_remote_refs: remote `$ref`s (and redirects) may go to the spec's own origin (scheme,
    host and port); True allows any, a list allows those origins (`https://host:8443`), hosts
    with a port (`host:8443`, either scheme) or hosts (`host`: every port of it). strict:
    validate with openapi-spec-validator and treat warnings as errors. timeout: seconds per HTTP
    connect or read. ref_root: the folder that file refs may reach (default: the root spec's
    folder), for specs that share files with siblings. fetch_deadline: seconds all network reads
    of this load may take together (the spec and every remote $ref). patch: applied to the
    bundled document as its author wrote it, before it is validated and before a Swagger 2.0
    conversion (OAI Overlay actions target that document; `patched` is then set).
    """
    given = os.fspath(source)
    allowed = _Allowed.parse(allow_remote_refs)
    reader = _Reader(allowed, timeout, None if ref_root is None else os.fspath(ref_root), fetch_deadline)
    try:
        return _load(given, reader, strict=strict, patch=patch)
    except RecursionError as exc:
        raise InputError.at(
            f"the document is nested too deeply to process (the limit is {MAX_NESTING} levels)",
            file=given,
            hint=_NESTING_HINT,
        ) from exc
    finally:
        reader.close()


def _load(
    source: str, reader: _Reader, *, strict: bool, patch: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> LoadedSpec:
    document, text = reader.read_root(source)
    warnings: list[SpecWarning] = []
    original = _detect_version(document, source, warnings)
    _require_operations(document, source)
    if _has_external_refs(text, document):
        document = _Bundler(document, reader, swagger2=original == "2.0").bundle()
    del text
    if patch is not None:
        document = patch(document)
    problems = _validate(document, original) if strict else []
    if original == "2.0":
        document = _Swagger2(document, reader.root, warnings).convert()
    version = str(document["openapi"])
    warnings += _lint(document)
    if strict and (problems or warnings):
        raise InputError(
            [
                *problems,
                *(Problem(message=w.message, location=w.location, hint=w.hint or _STRICT_HINT) for w in warnings),
            ],
            title=f"{source}: rejected in strict mode",
        )
    return LoadedSpec(
        document=document,
        original_version=original,
        openapi_version=version,
        source=source,
        sha256=reader.digest(),
        warnings=warnings,
        patched=patch is not None,
    )


# ----------------------------------------------------------------------------- small helpers


def _pointer(path: Iterable[str | int]) -> str:
    """A JSON pointer ("/paths/~1pets/get") for a key path."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _pointer_parts(fragment: str) -> tuple[str, ...]:
    """The keys of a `$ref` fragment; lenient about a missing leading slash, like prance."""
    parts = unquote(fragment).split("/")
    while parts and not parts[0]:
        parts = parts[1:]
    return tuple(p.replace("~1", "/").replace("~0", "~") for p in parts)


def _follow(document: Any, parts: Iterable[str]) -> Any:
    """The value at a pointer; LookupError names the first key that is missing."""
    node = document
    done: list[str] = []
    for part in parts:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise LookupError(f"no {part!r} at {_pointer(done) or 'the top'}")
        done.append(part)
    return node


def _copy_json(value: Any) -> Any:
    """A deep copy of JSON data; a json round trip is faster than copy.deepcopy (1.3x on GitHub's spec)."""
    if isinstance(value, (dict, list)):
        return json.loads(json.dumps(value))
    return value


def _is_url(text: str) -> bool:
    return text[:8].lower().startswith(("http://", "https://"))


Origin = tuple[str, str, int]  # scheme, host, port
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(url: str) -> Origin:
    """(scheme, host, port) of an http(s) URL, the default port filled in; ValueError for a bad port."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(scheme, 0)


def _show_origin(origin: Origin) -> str:
    scheme, host, port = origin
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}" + ("" if _DEFAULT_PORTS.get(scheme) == port else f":{port}")


@dataclass(frozen=True)
class _Allowed:
    """The remote origins `allow_remote_refs` opens, besides the spec's own origin."""

    everything: bool = False
    entries: tuple[tuple[str | None, str, int | None], ...] = ()  # scheme/port None: any

    @classmethod
    def parse(cls, given: bool | str | Sequence[str]) -> _Allowed:
        if isinstance(given, bool):
            return cls(everything=given)
        entries = []
        for text in [given] if isinstance(given, str) else list(given):
            entry = text.strip()
            if entry == "*":
                return cls(everything=True)
            entries.append(cls._entry(entry))
        return cls(entries=tuple(entries))

    @staticmethod
    def _entry(text: str) -> tuple[str | None, str, int | None]:
        """`https://host[:port]` (one origin), `host:port` (http or https) or `host` (every port)."""
        problem = None
        try:
            parts = urlsplit(text if "://" in text else "//" + text)
            scheme, host, port = parts.scheme.lower() or None, (parts.hostname or "").lower(), parts.port
        except ValueError as exc:
            scheme, host, port, problem = None, "", None, str(exc)
        if not problem and (not host or parts.path not in ("", "/") or parts.query or parts.username):
            problem = "give an origin, not a URL with a path, query or user"
        if not problem and scheme not in (None, "http", "https"):
            problem = f"the scheme {scheme!r} is not http or https"
        if problem:
            raise InputError.at(
                f"--allow-remote-refs {text!r}: {problem}",
                hint="give an origin (https://specs.example.com:8443), a host with a port (specs.example.com:8443), "
                "a host (specs.example.com: every port), or * for any",
            )
        if scheme is not None and port is None:
            port = _DEFAULT_PORTS[scheme]
        return scheme, host, port

    def allows(self, origin: Origin) -> bool:
        scheme, host, port = origin
        return self.everything or any(
            h == host and s in (None, scheme) and p in (None, port) for s, h, p in self.entries
        )


def _warn(message: str, path: JsonPath, hint: str | None = None) -> SpecWarning:
    return SpecWarning(message=message, location=Location(pointer=_pointer(path) or None), hint=hint)


def _type_name(value: Any) -> str:
    if value is None:
        return "empty"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), f"a {type(value).__name__}"
    )


# ----------------------------------------------------------------------------- parsing


class _YamlLoader(yaml.CSafeLoader):
    """libyaml with YAML 1.2 core-schema scalars and string keys: an OpenAPI document is JSON data.

    YAML 1.1 (PyYAML's default) reads `on`/`yes`/`no` as booleans, `2024-01-01` as a date,
    `12:30` as 750 and `0755` as octal; a spec means strings and decimals by them.
    """

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 - PyYAML's class-level registry

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):
            raise yaml.constructor.ConstructorError(
                None, None, f"expected a mapping, found {type(node).__name__}", node.start_mark
            )
        self.flatten_mapping(node)  # `<<` merge keys
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping", node.start_mark,
                    "found a list or mapping as a key (JSON keys are strings)", key_node.start_mark,
                )  # fmt: skip
            mapping[key_node.value] = self.construct_object(value_node, deep=deep)  # the key as written
        return mapping


def _construct_int(loader: _YamlLoader, node: yaml.ScalarNode) -> int:
    text = loader.construct_scalar(node)
    problem = number_problem(text)
    if problem:
        raise yaml.constructor.ConstructorError(None, None, f"invalid number: {problem}", node.start_mark)
    try:
        return int(text, 10)  # YAML 1.2: a leading zero is decimal
    except ValueError:
        try:
            return int(text, 0)
        except ValueError:
            raise yaml.constructor.ConstructorError(None, None, f"invalid integer {text!r}", node.start_mark) from None


def _construct_float(loader: _YamlLoader, node: yaml.ScalarNode) -> float:
    text = loader.construct_scalar(node)
    problem = number_problem(text)
    if problem:
        raise yaml.constructor.ConstructorError(None, None, f"invalid number: {problem}", node.start_mark)
    try:
        return float(text)
    except ValueError:
        raise yaml.constructor.ConstructorError(None, None, f"invalid number {text!r}", node.start_mark) from None


def _construct_str(loader: _YamlLoader, node: yaml.ScalarNode) -> str:
    return loader.construct_scalar(node)


def _construct_set(loader: _YamlLoader, node: yaml.MappingNode) -> list[Any]:
    return list(loader.construct_mapping(node))


def _construct_pairs(loader: _YamlLoader, node: yaml.SequenceNode) -> list[Any]:
    return loader.construct_sequence(node, deep=True)


for _tag, _pattern, _first in (
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("int", r"^(?:[-+]?[0-9]+|0x[0-9a-fA-F]+)$", list("-+0123456789")),
    ("float", r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$", list("-+.0123456789")),
    ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("merge", r"^(?:<<)$", ["<"]),
):
    _YamlLoader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(_pattern), _first)
_YamlLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_YamlLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)
_YamlLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_str)  # dates stay text
_YamlLoader.add_constructor("tag:yaml.org,2002:binary", _construct_str)  # base64 stays text
_YamlLoader.add_constructor("tag:yaml.org,2002:set", _construct_set)
_YamlLoader.add_constructor("tag:yaml.org,2002:omap", _construct_pairs)
_YamlLoader.add_constructor("tag:yaml.org,2002:pairs", _construct_pairs)

_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_FIRST_CHAR = re.compile(r"\s*+(\S)")


def _decode(data: bytes, display: str) -> str:
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(codec)
            except UnicodeDecodeError:
                break
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError.at(
            "the file is not UTF-8 text",
            file=display,
            line=line,
            column=column,
            hint="save it as UTF-8 (OpenAPI documents are UTF-8 JSON or YAML)",
        ) from exc


def _parse(data: bytes, display: str, content_type: str | None = None) -> tuple[Any, str]:
    """Parse JSON or YAML, told apart by content; returns the data and the decoded text."""
    text = _decode(data, display)
    first = _FIRST_CHAR.match(text)
    if first is None:
        raise InputError.at("the file is empty", file=display, hint="give the path or URL of an OpenAPI document")
    if first.group(1) not in "{[":
        return _parse_yaml(text, display), text
    try:
        document = json.loads(text, parse_int=_json_int, parse_float=_json_float, parse_constant=_json_float)
        check_document(document, size=len(text), file=display, aliases=False)  # JSON shares nothing
        return document, text
    except _BadNumber as exc:
        line, column = _position(text, exc.literal)
        raise InputError.at(
            f"invalid number: {exc}", file=display, line=line, column=column, hint=NUMBER_HINT
        ) from None
    except json.JSONDecodeError as exc:
        json_error = InputError.at(
            f"invalid JSON: {exc.msg}",
            file=display,
            line=exc.lineno,
            column=exc.colno,
            hint="fix the syntax at that position (a JSON linter such as `python -m json.tool` shows it)",
        )
    says_json = display.lower().endswith(".json") or "json" in (content_type or "")
    if says_json:
        raise json_error
    try:  # YAML's flow style is a superset of JSON: a `{...}` YAML document is still fine
        return _parse_yaml(text, display), text
    except InputError:
        raise json_error from None


class _BadNumber(ValueError):
    def __init__(self, literal: str, problem: str) -> None:
        self.literal = literal
        super().__init__(problem)


def _json_int(literal: str) -> int:
    problem = number_problem(literal)
    if problem:
        raise _BadNumber(literal, problem)
    return int(literal)


def _json_float(literal: str) -> float:
    problem = number_problem(literal)
    if problem:
        raise _BadNumber(literal, problem)
    return float(literal)


def _position(text: str, literal: str) -> tuple[int | None, int | None]:
    """Line and column of a number literal in JSON text (first occurrence outside a longer token)."""
    found = re.search(r"(?<![\w.+\-\"])" + re.escape(literal) + r"(?![\w.\"])", text)
    if found is None:
        return None, None
    start = found.start()
    return text.count("\n", 0, start) + 1, start - (text.rfind("\n", 0, start) + 1) + 1


_SYNTAX_HINT = "fix the syntax at that position (often indentation, a tab, or an unquoted ': ')"
_NESTING_HINT = "flatten the structure (move deep inline schemas into components)"


def _parse_yaml(text: str, display: str) -> Any:
    try:
        document = yaml.load(text, Loader=_YamlLoader)  # a CSafeLoader: no arbitrary objects
    except yaml.MarkedYAMLError as exc:
        mark, start = exc.problem_mark or exc.context_mark, exc.context_mark
        what = exc.problem or exc.context or "syntax error"
        if exc.context and exc.problem:  # e.g. "while parsing a flow sequence" that started earlier
            moved = start and mark and (start.line, start.column) != (mark.line, mark.column)
            where = f" at line {start.line + 1}, column {start.column + 1}" if start and moved else ""
            what = f"{exc.problem} ({exc.context}{where})"
        if what.startswith("invalid number"):
            what, hint = what, NUMBER_HINT
        elif "nesting depth" in what:  # libyaml's own limit (1,000 levels)
            what, hint = f"nested too deeply: {what}", _NESTING_HINT
        else:
            what, hint = f"invalid YAML: {what}", _SYNTAX_HINT
        raise InputError.at(
            what,
            file=display,
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
            hint=hint,
        ) from exc
    except yaml.YAMLError as exc:
        raise InputError.at(
            f"invalid YAML: {exc}", file=display, hint="save the file as UTF-8 YAML or JSON text"
        ) from exc
    return _as_tree(document, len(text), display)


def _as_tree(document: Any, size: int, display: str) -> Any:
    """The document as a tree of plain data, once it passes the limits of untrusted.py.

    An alias makes one object appear in several places; later stages patch the document in
    place, so shared parts are copied apart (a bomb or a cycle never gets this far).
    """
    return _copy_json(document) if check_document(document, size=size, file=display) else document


# ----------------------------------------------------------------------------- reading


class _Reader:
    """Reads the root and included files once each, and decides which refs may be followed."""

    def __init__(self, allowed: _Allowed, timeout: float, ref_root: str | None, deadline: float) -> None:
        self._allowed = allowed
        self._timeout = timeout
        self._deadline = deadline
        self._stop_at: float | None = None  # set by the first network read
        self._ref_root = ref_root
        self._client: Any = None
        self._own: set[Origin] = set()
        self._data: dict[str, bytes] = {}
        self._parsed: dict[str, Any] = {}
        self._inside: set[str] = set()  # file targets known to be inside root_dir
        self._displays: dict[str, str] = {}
        self._total = 0
        self.root = ""  # the root resource: an absolute real path, or a URL
        self.root_dir: str | None = None
        self.root_display = ""

    # -- the root

    def read_root(self, source: str) -> tuple[Any, str]:
        self.root_display = source
        if _is_url(source):
            final, data, content_type = self._get(source, source, check=lambda u: self._check_root_redirect(source, u))
            self.root = final
            self._own = {_origin(source), _origin(final)}
        else:
            path = unquote(urlsplit(source).path) if source.startswith("file:") else source
            self._check_root_path(path, source)
            self.root = os.path.realpath(path)
            self.root_dir = os.path.realpath(self._ref_root or os.path.dirname(self.root))
            data, content_type = self._read_file(self.root, source, None), None
        self._data[self.root] = data
        return _parse(data, source, content_type)

    def _check_root_path(self, path: str, source: str) -> None:
        if os.path.isdir(path):
            try:
                names = os.listdir(path)
            except OSError:
                names = []
            found = sorted(n for n in names if re.match(r"(openapi|swagger|api|spec)\S*\.(ya?ml|json)$", n, re.I))
            hint = f"did you mean {os.path.join(source, found[0])!r}?" if found else None
            raise InputError.at(
                "this is a folder; give the root spec file",
                file=source,
                hint=hint or "give the path of the root spec file (e.g. openapi.yaml) in it",
            )
        if not os.path.exists(path):
            raise InputError.at(
                "file not found",
                file=source,
                hint="check the path (a relative path is relative to the current folder)",
            )

    # -- included files

    def resolve(self, base: str, ref: str, site: _Where) -> tuple[str, str]:
        """The resource (absolute path or URL) and fragment a `$ref` in `base` points to."""
        target, _, fragment = ref.partition("#")
        if not target:
            return base, fragment
        try:
            parts = urlsplit(target)
        except ValueError as exc:
            raise _ref_error(f"$ref {ref!r} is not a valid URL: {exc}", site) from exc
        scheme = parts.scheme.lower()
        if scheme in ("http", "https") or (_is_url(base) and not scheme):
            url = urljoin(base, target) if _is_url(base) else target
            self._check_origin(url, ref, site)
            return url, fragment
        if len(scheme) > 1 and scheme != "file":  # one letter: a Windows drive, an absolute path
            raise _ref_error(f"$ref {ref!r} uses the unsupported scheme {scheme!r}", site)
        if _is_url(base):
            raise _ref_error(
                f"$ref {ref!r} in a remote spec points to a local file",
                site,
                hint="a spec loaded from a URL may only refer to URLs; download all its files to load it locally",
            )
        return self._local_target(base, ref, unquote(parts.path), scheme, site), fragment

    def _local_target(self, base: str, ref: str, path: str, scheme: str, site: _Where) -> str:
        if scheme or os.path.isabs(path):
            raise _ref_error(
                f"$ref {ref!r} is an absolute file path",
                site,
                hint="use a path relative to the file that contains the $ref",
            )
        target = os.path.normpath(os.path.join(os.path.dirname(base), path))
        if target in self._inside:  # checked before: realpath costs a syscall per path component
            return target
        root_dir = self.root_dir or "/"
        real = os.path.realpath(target)
        if os.path.commonpath([real, root_dir]) != root_dir:
            how = " (through a symlink)" if os.path.commonpath([target, root_dir]) == root_dir else ""
            raise _ref_error(
                f"$ref {ref!r} leaves the folder {root_dir}{how}",
                site,
                hint="file refs may only reach the root spec's folder and below (a spec is untrusted input); "
                f"if you trust this spec, widen that with --ref-root {os.path.commonpath([real, root_dir])} "
                "(ref_root=...)",
            )
        self._inside.add(target)
        return target

    def _check_origin(self, url: str, ref: str, site: _Where) -> None:
        """A remote ref (or a redirect while fetching one) may reach the spec's own origin, or an allowed one."""
        try:
            origin = _origin(url)
        except ValueError as exc:
            raise _ref_error(f"$ref {ref!r} leads to the invalid URL {url!r}: {exc}", site) from None
        if origin[0] not in ("http", "https"):
            raise _ref_error(f"$ref {ref!r} redirects to the unsupported URL {url!r}", site)
        if origin in self._own or self._allowed.allows(origin):
            return
        own = " or ".join(sorted(_show_origin(o) for o in self._own))
        shown = _show_origin(origin)
        raise _ref_error(
            f"remote $ref {ref!r} to {shown} is not allowed" + (f" (the spec's own origin is {own})" if own else ""),
            site,
            hint="only refs to the spec's own origin (scheme, host and port) are followed; to allow this one pass "
            f"--allow-remote-refs {shown} (allow_remote_refs=[{shown!r}])",
        )

    def _check_root_redirect(self, source: str, url: str) -> None:
        """The spec's URL may redirect within its origin (or from http to https on its host), or to an allowed one."""
        start = _origin(source)
        try:
            origin = _origin(url)
        except ValueError as exc:
            raise InputError.at(f"refused redirect to the invalid URL {url}: {exc}", file=source) from None
        upgrade = start[0] == "http" and start[2] == 80 and origin == ("https", start[1], 443)
        if origin == start or upgrade or self._allowed.allows(origin):
            return
        shown = _show_origin(origin)
        raise InputError.at(
            f"refused redirect to {url}: another origin than {_show_origin(start)}",
            file=source,
            hint=f"give the final URL directly, or allow {shown} with --allow-remote-refs {shown}",
        )

    def load(self, resource: str, site: _Where) -> Any:
        """The parsed content of an included file or URL (each read and parsed once)."""
        if resource in self._parsed:
            return self._parsed[resource]
        if len(self._data) >= MAX_FILES:
            raise _ref_error(f"the spec refers to more than {MAX_FILES} files", site)
        display = self.display(resource)
        content_type = None
        if _is_url(resource):
            _, data, content_type = self._get(resource, display, check=lambda u: self._check_origin(u, display, site))
        else:
            data = self._read_file(resource, display, site)
        self._data[resource] = data
        self._parsed[resource] = _parse(data, display, content_type)[0]
        return self._parsed[resource]

    def display(self, resource: str) -> str:
        """How to name a resource to the user: as given for the root, relative for its files."""
        if resource not in self._displays:
            if resource == self.root:
                self._displays[resource] = self.root_display
            elif self.root_dir and not _is_url(resource):
                self._displays[resource] = os.path.relpath(resource, self.root_dir)
            else:
                self._displays[resource] = resource
        return self._displays[resource]

    def digest(self) -> str:
        sha = hashlib.sha256(self._data[self.root])
        for resource in sorted((r for r in self._data if r != self.root), key=self.display):
            sha.update(self._data[resource])
        return sha.hexdigest()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    # -- the two transports

    def _read_file(self, path: str, display: str, site: _Where | None) -> bytes:
        try:
            size = os.stat(path).st_size
            self._count(size, display)
            with open(path, "rb") as handle:
                return handle.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            if site is None:
                raise InputError.at("file not found", file=display, hint="check the path") from None
            raise _ref_error(
                f"$ref target {display!r} does not exist",
                site,
                hint="check the path (it is relative to the file that contains the $ref)",
            ) from None
        except IsADirectoryError:
            raise InputError.at("this is a folder, not a spec file", file=display) from None
        except OSError as exc:
            raise InputError.at(f"cannot read the file: {exc.strerror or exc}", file=display) from None

    def _count(self, size: int, display: str) -> None:
        self._total += size
        if size > MAX_FILE_BYTES or self._total > MAX_TOTAL_BYTES:
            raise InputError.at(
                f"too large: {size / 1e6:.1f} MB (the limits are {MAX_FILE_BYTES // 2**20} MiB per file, "
                f"{MAX_TOTAL_BYTES // 2**20} MiB per spec)",
                file=display,
                hint="a spec this big is unusual; check that this is the right file",
            )

    def _get(self, url: str, display: str, check: Callable[[str], None] | None) -> tuple[str, bytes, str | None]:
        """GET with timeouts, the load's deadline, a size cap and at most MAX_REDIRECTS redirects.

        Every redirect is checked by `check` (origins) and never goes from https to http. The
        deadline covers all network reads of the load: a server that sends one byte a second
        keeps every single read short, so the clock is checked between the chunks too.
        """
        import httpx2  # only specs given by URL pay for the import

        if self._client is None:
            self._client = httpx2.Client(
                timeout=self._timeout,
                follow_redirects=False,
                headers={
                    "Accept": "application/json, application/yaml, text/yaml, */*;q=0.5",
                    "User-Agent": f"openapi2mcp/{__version__}",
                },
            )
        if self._stop_at is None:
            self._stop_at = time.monotonic() + self._deadline
        hint = "check the URL and the network, or download the spec and give its path"
        try:
            for _ in range(MAX_REDIRECTS + 1):
                left = self._stop_at - time.monotonic()
                if left <= 0:
                    raise self._late(url, display)
                with self._client.stream("GET", url, timeout=min(self._timeout, left)) as response:
                    if response.is_redirect:
                        url = self._redirect(url, response.status_code, response.headers.get("location"), display)
                        if check is not None:
                            check(url)
                        continue
                    if response.status_code >= 300:
                        raise InputError.at(
                            f"HTTP {response.status_code} {response.reason_phrase} for {url}", file=display, hint=hint
                        )
                    return url, self._body(response, url, display), response.headers.get("content-type")
        except httpx2.TimeoutException as exc:
            if time.monotonic() >= self._stop_at - 0.01:
                raise self._late(url, display) from exc
            raise InputError.at(f"timed out after {self._timeout:g} s fetching {url}", file=display, hint=hint) from exc
        except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
            raise InputError.at(f"cannot fetch {url}: {exc}", file=display, hint=hint) from exc
        raise InputError.at(f"more than {MAX_REDIRECTS} redirects", file=display, hint=hint)

    def _late(self, url: str, display: str) -> InputError:
        return InputError.at(
            f"gave up fetching {url}: loading the spec over the network took longer than {self._deadline:g} s "
            "(the spec and its remote $refs together)",
            file=display,
            hint="the server is slow or stalls; raise the limit with --fetch-timeout SECONDS, or download the spec "
            "and give its path",
        )

    @staticmethod
    def _redirect(url: str, status: int, location: str | None, display: str) -> str:
        if not location:
            raise InputError.at(f"HTTP {status} for {url} without a Location to go to", file=display)
        try:
            target = urljoin(url, location)
            scheme = urlsplit(target).scheme.lower()
        except ValueError:
            raise InputError.at(f"{url} redirects to the invalid URL {location[:200]!r}", file=display) from None
        if scheme not in ("http", "https") or (urlsplit(url).scheme == "https" and scheme == "http"):
            raise InputError.at(
                f"refused redirect from {url} to {target}",
                file=display,
                hint="give the final URL of the spec directly",
            )
        return target

    def _body(self, response: Any, url: str, display: str) -> bytes:
        declared = response.headers.get("content-length", "")
        if declared.isdigit():
            self._count(int(declared), display)
            self._total -= int(declared)
        chunks: list[bytes] = []
        size = 0
        stop_at = self._stop_at or 0.0
        for chunk in response.iter_bytes():  # decoded: a gzip bomb hits the cap too
            size += len(chunk)
            if size > MAX_FILE_BYTES:
                self._count(size, display)
            if time.monotonic() > stop_at:
                raise self._late(url, display)
            chunks.append(chunk)
        self._count(size, display)
        return b"".join(chunks)


def _ref_error(message: str, site: _Where, hint: str | None = None) -> InputError:
    return InputError(Problem(message=message, location=site if isinstance(site, Location) else site(), hint=hint))


# ----------------------------------------------------------------------------- version


_OPENAPI3 = re.compile(r"^3\.(\d+)(?:\.\d+)?(?:-[0-9A-Za-z.-]+)?$")
_OPENAPI_HINT = 'an OpenAPI document starts with `openapi: 3.1.0` (or `swagger: "2.0"`)'


def _detect_version(document: Any, display: str, warnings: list[SpecWarning]) -> str:
    """The version the document declares; refuses what is not OpenAPI 2.0/3.0/3.1/3.2."""
    if not isinstance(document, dict):
        raise InputError.at(
            f"not an OpenAPI document: the top level is {_type_name(document)}, not a mapping",
            file=display,
            hint=_OPENAPI_HINT,
        )
    key = "openapi" if "openapi" in document else "swagger"
    if key not in document:
        raise InputError.at(
            "not an OpenAPI document: no 'openapi' or 'swagger' key", file=display, hint=_not_openapi_hint(document)
        )
    version = document[key]
    if isinstance(version, (int, float)) and not isinstance(version, bool):
        document[key] = version = str(version)
        warnings.append(_warn(f"'{key}' should be a string: write {key}: \"{version}\"", (key,)))
    match = _OPENAPI3.match(version) if key == "openapi" and isinstance(version, str) else None
    if (match and int(match.group(1)) <= 2) or (key == "swagger" and version == "2.0"):
        return str(version)
    raise InputError.at(
        f"unsupported version: {key} {version!r} (supported: {SUPPORTED_VERSIONS})",
        file=display,
        pointer=f"/{key}",
        hint="convert the document to OpenAPI 3.x (e.g. with swagger2openapi for Swagger 2.0)"
        if key == "swagger"
        else "use an OpenAPI 3.0, 3.1 or 3.2 document",
    )


def _not_openapi_hint(document: dict[str, Any]) -> str:
    if "swaggerVersion" in document:
        return f"this is Swagger 1.x, which is not supported ({SUPPORTED_VERSIONS})"
    if "asyncapi" in document:
        return "this is an AsyncAPI document; openapi2mcp reads OpenAPI (REST) descriptions"
    if "$schema" in document or "properties" in document:
        return "this looks like a JSON Schema, not an OpenAPI description"
    return _OPENAPI_HINT


def _require_operations(document: dict[str, Any], display: str) -> None:
    paths, hooks = document.get("paths"), document.get("webhooks")
    for key, value in (("paths", paths), ("webhooks", hooks)):
        if value is not None and not isinstance(value, dict):
            raise InputError.at(
                f"'{key}' must be a mapping, found {_type_name(value)}", file=display, pointer=f"/{key}"
            )
    if not paths and not hooks:
        raise InputError.at(
            "the spec has no operations: 'paths' is missing or empty",
            file=display,
            pointer="/paths",
            hint="openapi2mcp turns operations into tools; add them under `paths:` "
            "(a components-only document is a library, not an API)",
        )


# ----------------------------------------------------------------------------- $ref discovery

# Maps whose keys are names (of properties, responses, media types...), not keywords: `default`
# there is a response code, and a `$ref` *name* with a schema as its value is a property (k8s).
_NAME_MAPS = frozenset({
    "properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "paths", "webhooks",
    "responses", "parameters", "schemas", "requestBodies", "headers", "examples", "links", "callbacks",
    "securitySchemes", "securityDefinitions", "pathItems", "content", "encoding", "variables", "scopes",
})  # fmt: skip
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "schemas"})
_LITERALS = frozenset({"example", "default", "enum", "const"})  # data: a `$ref` in there is only "soft"
_EXTERNAL_REF_HINT = re.compile(r"""\$ref['"]?\s*+:\s*+(?!['"]?#)""")


def _is_local(ref: str) -> bool:
    return ref.startswith("#") or not ref


def _iter_refs(node: Any, *, root: bool) -> Iterator[tuple[JsonPath, str, bool]]:
    """(path, ref, soft) of each string `$ref`, in document order.

    `soft` refs stand in example/default/enum data: by the spec they are text, but split specs
    (DigitalOcean) keep examples in files; they are followed when they can be, kept otherwise.
    The siblings of a ref that will be replaced are not searched (only local refs of the root
    document stay in place).
    """
    stack: list[tuple[JsonPath, Any, bool, bool]] = [((), node, False, False)]
    while stack:
        path, value, names, soft = stack.pop()
        if isinstance(value, dict):
            ref = value.get("$ref")
            if isinstance(ref, str):  # in a name map too: `properties: {$ref: file}` refers to the map
                yield path, ref, soft
                if not (root and _is_local(ref)):
                    continue
            items = [
                ((*path, key), item, not names and key in _NAME_MAPS, soft or (not names and _is_literal(key, item)))
                for key, item in value.items()
                if isinstance(item, (dict, list))
            ]
            stack.extend(reversed(items))
        elif isinstance(value, list):
            stack.extend(
                ((*path, i), item, False, soft)
                for i, item in reversed(list(enumerate(value)))
                if isinstance(item, (dict, list))
            )


def _is_literal(key: str, value: Any) -> bool:
    return key in _LITERALS or (key == "examples" and isinstance(value, list))


def _has_external_refs(text: str, document: dict[str, Any]) -> bool:
    """The fast path: a C-speed regex rules most specs out, a walk confirms the rest."""
    if not _EXTERNAL_REF_HINT.search(text):
        return False
    return any(not _is_local(ref) for _, ref, _ in _iter_refs(document, root=True))


# What a ref target is, by where refs to it stand: a schema moves to components/schemas; a map of
# schemas (`properties: {$ref: ...}`) and anything else is inlined where it is used.
OTHER, SCHEMA_MAP, SCHEMA = "other", "schema map", "schema"
_KIND_RANK = {OTHER: 0, SCHEMA_MAP: 1, SCHEMA: 2}


def _site_kind(container: str, path: JsonPath) -> str:
    """The kind of what a `$ref` at `path` inside an object of kind `container` stands for."""
    kind, expect_name = container, container == SCHEMA_MAP
    for key in path:
        if expect_name:  # a property/response/... name, never a keyword
            expect_name = False
            kind = SCHEMA if kind == SCHEMA_MAP else kind
        elif isinstance(key, int):
            continue  # allOf/0, parameters/0
        elif key in _LITERALS or (kind == SCHEMA and key == "examples"):
            return OTHER  # data
        elif kind == SCHEMA:
            if key in _SCHEMA_MAPS:
                kind, expect_name = SCHEMA_MAP, True
        elif key == "schema":
            kind = SCHEMA
        elif key in ("schemas", "definitions", "$defs"):
            kind, expect_name = SCHEMA_MAP, True
        else:
            expect_name = key in _NAME_MAPS
    return kind


# ----------------------------------------------------------------------------- bundling


class _Bundler(RefResolver):  # type: ignore[misc]  # prance is untyped
    """prance's resolver with our discovery, reader, and translation of external refs.

    prance calls, in `resolve_references`: `_discover_refs` (overridden: our reader and policy,
    string refs only, refs local to included files resolved in those files), then
    `_resolve_targets` (prance's topological resolution; it calls `_translate_value` for each
    resolved ref and `_unroll_recursive` for each back edge of a cycle, both overridden), then
    `_apply_to_spec` (overridden: a component defined by a ref keeps its place).
    """

    def __init__(self, document: dict[str, Any], reader: _Reader, *, swagger2: bool) -> None:
        types = RESOLVE_FILES | RESOLVE_HTTP  # the policy of what may be read is the reader's
        super().__init__({}, None, resolve_types=types, resolve_method=TRANSLATE_EXTERNAL)
        self.specs = document  # ours to change: no copy of a big document
        self._reader = reader
        self._swagger2 = swagger2
        self._kinds: dict[_Key, str] = {}
        self._canonical: dict[_Key, JsonPath] = {}  # ref target -> the component it defines
        self._names: dict[_Key, str] = {}  # schema target -> generated component name
        self._origin: dict[_Key, tuple[_Where, bool]] = {}  # where first referred to, and if softly
        self._resolved: dict[_Key, Any] = {}
        try:
            self._taken: set[str] = set(_follow(document, self._schema_prefix()))
        except (LookupError, TypeError):
            self._taken = set()

    def bundle(self) -> dict[str, Any]:
        self.resolve_references()
        if self._names:
            self._schema_section().update((name, self._resolved[key]) for key, name in self._names.items())
        bundled: dict[str, Any] = _copy_json(self.specs)  # inlined objects are shared: make a tree
        return bundled

    # -- discovery

    def _discover_refs(self, base_url: Any, spec: Any) -> tuple[list[Any], dict[_Key, Any], dict[_Key, Any], Any]:
        """Sites are (path, key, soft, None) and edges (path, key, soft): prance passes the third
        item through to our hooks as the "url" it does not need here."""
        root = self._reader.root
        components = _component_paths(spec, self._swagger2)
        sites: list[tuple[JsonPath, _Key, bool, None]] = []
        for path, ref, soft in _iter_refs(spec, root=True):
            key = None if _is_local(ref) else self._key(root, (), path, ref, soft)
            if key is None:
                continue
            if key[0] == root:  # "openapi.yaml#/x" in openapi.yaml itself
                _follow(spec, map(str, path))["$ref"] = "#" + _pointer(key[1])
                continue
            sites.append((path, key, soft, None))
            self._origin.setdefault(key, (self._site(root, (), path), soft))
            if path in components:
                self._canonical.setdefault(key, path)
        targets, edges, failed = self._discover_targets([key for _, key, _, _ in sites])
        sites = _without_failed(sites, failed)
        edges = {key: _without_failed(found, failed) for key, found in edges.items()}
        self._classify(sites, edges)
        return sites, targets, edges, self._find_back_edges(targets, edges)

    def _discover_targets(self, start: list[_Key]) -> tuple[dict[_Key, Any], dict[_Key, Any], dict[_Key, InputError]]:
        """Read every target, breadth first; soft targets that cannot be read are set aside."""
        targets: dict[_Key, Any] = {}
        edges: dict[_Key, list[tuple[JsonPath, _Key, bool]]] = {}
        failed: dict[_Key, InputError] = {}
        queue = list(reversed(dict.fromkeys(start)))
        seen = set(queue)
        while queue:
            key = queue.pop()
            origin, soft_target = self._origin[key]
            try:
                raw = targets[key] = self._value(key, origin)
            except InputError as exc:
                if not soft_target:
                    raise
                failed[key] = exc
                continue
            edges[key] = []
            for path, ref, soft in _iter_refs(raw, root=False):
                dep = self._key(key[0], key[1], path, ref, soft or soft_target)
                if dep is None:
                    continue
                if dep[0] == self._reader.root:  # back into the root document: a local ref there
                    node = raw if not path else _follow(raw, map(str, path))
                    node["$ref"] = "#" + _pointer(dep[1])
                    continue
                edges[key].append((path, dep, soft or soft_target))
                self._origin.setdefault(dep, (self._site(key[0], key[1], path), soft or soft_target))
                if dep not in seen:
                    seen.add(dep)
                    queue.append(dep)
        return targets, edges, failed

    def _key(self, resource: str, fragment: tuple[str, ...], path: JsonPath, ref: str, soft: bool) -> _Key | None:
        """The target of a ref; None for a soft ref that may not or cannot be followed."""
        try:
            target, pointer = self._reader.resolve(resource, ref, self._site(resource, fragment, path))
        except InputError:
            if soft:
                return None
            raise
        return target, _pointer_parts(pointer)

    def _site(self, resource: str, fragment: tuple[str, ...], path: JsonPath) -> Callable[[], Location]:
        return partial(self._location, resource, fragment, path)

    def _location(self, resource: str, fragment: tuple[str, ...], path: JsonPath) -> Location:
        return Location(file=self._reader.display(resource), pointer=_pointer((*fragment, *path)) + "/$ref")

    def _value(self, key: _Key, origin: _Where) -> Any:
        """A private copy of a ref's target (prance's resolution writes into it)."""
        document = self._reader.load(key[0], origin)
        try:
            return _copy_json(_follow(document, key[1]))
        except LookupError as exc:
            ref = f"{self._reader.display(key[0])}#{_pointer(key[1])}"
            raise _ref_error(f"$ref target {ref!r} not found: {exc}", origin) from None

    def _classify(self, sites: list[tuple[JsonPath, _Key, bool, None]], edges: dict[_Key, Any]) -> None:
        """The kind of each target: the highest of the places refs to it stand (a fixed point)."""
        work: list[_Key] = []
        for path, key, _, _ in sites:
            if self._upgrade(key, _site_kind(OTHER, path)):
                work.append(key)
        while work:
            key = work.pop()
            for path, dep, _ in edges.get(key, ()):
                if self._upgrade(dep, _site_kind(self._kinds[key], path)):
                    work.append(dep)

    def _upgrade(self, key: _Key, kind: str) -> bool:
        if key in self._kinds and _KIND_RANK[self._kinds[key]] >= _KIND_RANK[kind]:
            return False
        self._kinds[key] = kind
        return True

    # -- resolution hooks

    def _resolve_targets(self, targets: Any, edges: Any, back_edges: Any) -> dict[_Key, Any]:
        self._resolved = super()._resolve_targets(targets, edges, back_edges)
        return self._resolved

    def _translate_value(self, ref_key: _Key, ref_url: Any, resolved_value: Any) -> Any:
        if ref_key in self._canonical:
            return {"$ref": "#" + _pointer(self._canonical[ref_key])}
        if self._kinds.get(ref_key) == SCHEMA:
            return {"$ref": "#" + _pointer((*self._schema_prefix(), self._name(ref_key)))}
        return resolved_value  # inlined: operations, parameters, responses, examples...

    def _unroll_recursive(self, rk: _Key, raw: Any, recursive_sites: Any, resolved: Any) -> Any:
        """A cycle ends in a ref to the component (prance would unroll it or raise)."""
        changes: dict[JsonPath, Any] = {}
        for path, dep, _ in recursive_sites:
            if dep not in self._canonical and self._kinds.get(dep) != SCHEMA:
                raise _ref_error(
                    "recursive $ref outside a schema (an object that includes itself)",
                    self._site(rk[0], rk[1], path),
                    hint="only schemas may be recursive",
                )
            changes[path] = self._translate_value(dep, None, None)
        return self._apply_changes(raw, changes)

    def _apply_to_spec(self, sites: Any, resolved: Any) -> None:
        changes: dict[JsonPath, Any] = {}
        for path, key, url, _ in sites:
            if self._canonical.get(key) == path:
                changes[path] = resolved[key]  # the component itself: its content goes here
            else:
                changes[path] = self._translate_value(key, url, resolved[key])
        self.specs = self._apply_changes(self.specs, changes)

    # -- names of moved schemas

    def _schema_prefix(self) -> tuple[str, ...]:
        return ("definitions",) if self._swagger2 else ("components", "schemas")

    def _schema_section(self) -> dict[str, Any]:
        node = self.specs
        for key in self._schema_prefix():
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        return node

    def _name(self, key: _Key) -> str:
        """A stable, readable component name: the last pointer key or the file name, qualified by
        its folders only when that name is taken."""
        if key in self._names:
            return self._names[key]
        resource, fragment = key
        where = urlsplit(resource).path if _is_url(resource) else self._reader.display(resource)
        parts = [p for p in re.split(r"[/\\]", where) if p and p != ".."]
        if parts:
            parts[-1] = os.path.splitext(parts[-1])[0]
        parts += fragment
        words = [re.sub(r"[^A-Za-z0-9._-]+", "_", p).strip("_") or "x" for p in parts] or ["schema"]
        candidates = ["_".join(words[-n:]) for n in range(1, len(words) + 1)]
        name = next((c for c in candidates if c not in self._taken), None)
        if name is None:
            name = next(f"{candidates[0]}_{i}" for i in range(2, 10**6) if f"{candidates[0]}_{i}" not in self._taken)
        self._taken.add(name)
        self._names[key] = name
        return name


def _without_failed(refs: list[Any], failed: dict[_Key, InputError]) -> list[Any]:
    """Drop soft refs to targets that could not be read; a hard ref to one fails with its error."""
    kept = []
    for ref in refs:
        if ref[1] in failed:
            if not ref[2]:
                raise failed[ref[1]]
            continue
        kept.append(ref)
    return kept


def _component_paths(document: dict[str, Any], swagger2: bool) -> set[JsonPath]:
    """Where a ref *defines* a reusable component (components/schemas/Pet: {$ref: pet.yaml})."""
    if swagger2:
        sections = {s: document.get(s) for s in ("definitions", "parameters", "responses")}
        return {(s, name) for s, items in sections.items() if isinstance(items, dict) for name in items}
    components = document.get("components")
    if not isinstance(components, dict):
        return set()
    return {("components", s, name) for s, items in components.items() if isinstance(items, dict) for name in items}


# ----------------------------------------------------------------------------- checks


def _lint(document: dict[str, Any]) -> list[SpecWarning]:
    """Cheap checks, located by pointer: what would surprise a user later, not full validation."""
    found: list[SpecWarning] = []
    info = document.get("info")
    if not isinstance(info, dict):
        found.append(_warn("no 'info' object", ("info",), hint="add `info: {title: ..., version: ...}`"))
    else:
        found += [_warn(f"info has no '{k}'", ("info", k)) for k in ("title", "version") if info.get(k) in (None, "")]
        if isinstance(info.get("version"), (int, float)):  # `version: 1.0` in YAML is a number
            info["version"] = str(info["version"])
            found.append(
                _warn(f'info.version should be a string: write version: "{info["version"]}"', ("info", "version"))
            )
    if not document.get("servers"):
        found.append(
            _warn(
                "no servers: the upstream base URL will have to be given when serving",
                ("servers",),
                hint="add `servers: [{url: https://api.example.com}]`",
            )
        )
    first_use: dict[str, str] = {}
    for path, operation in _operations(document, found):
        if not operation.get("responses"):
            found.append(_warn("operation has no responses", (*path, "responses")))
        operation_id = operation.get("operationId")
        if isinstance(operation_id, str):
            if operation_id in first_use:
                found.append(
                    _warn(
                        f"duplicate operationId {operation_id!r} (first used at {first_use[operation_id]})",
                        (*path, "operationId"),
                        hint="operationIds must be unique; refer to this operation as 'METHOD /path' "
                        "or rename it with an overlay",
                    )
                )
            else:
                first_use[operation_id] = _pointer(path)
    return found


def _operations(document: dict[str, Any], found: list[SpecWarning]) -> Iterator[tuple[JsonPath, dict[str, Any]]]:
    for section in ("paths", "webhooks"):
        items = document.get(section)
        if not isinstance(items, dict):
            continue
        for name, item in items.items():
            if section == "paths" and not name.startswith("/"):
                found.append(_warn(f"path {name!r} does not start with '/'", (section, name)))
            if not isinstance(item, dict):
                found.append(_warn(f"path item is {_type_name(item)}, not a mapping", (section, name)))
                continue
            for method in HTTP_METHODS:
                operation = item.get(method)
                if isinstance(operation, dict):
                    yield (section, name, method), operation
                elif operation is not None:
                    found.append(_warn(f"operation is {_type_name(operation)}", (section, name, method)))


_STRICT_HINT = "fix the spec, or load it without strict mode (then this is only a warning)"


def _validate(document: dict[str, Any], version: str) -> list[Problem]:
    """openapi-spec-validator's findings (strict mode only: slow on big specs)."""
    from openapi_spec_validator import (
        OpenAPIV2SpecValidator,
        OpenAPIV30SpecValidator,
        OpenAPIV31SpecValidator,
        OpenAPIV32SpecValidator,
    )

    validators = {"2.0": OpenAPIV2SpecValidator, "3.0": OpenAPIV30SpecValidator, "3.1": OpenAPIV31SpecValidator}
    validator = validators.get(version[:3], OpenAPIV32SpecValidator)
    hint = "fix the spec, or load it without strict mode"
    errors: list[Any] = []
    crash = None
    try:
        errors.extend(islice(validator(document).iter_errors(), MAX_STRICT_PROBLEMS))
    except Exception as exc:  # it crashes on some broken specs (a parameter without `in`: KeyError)
        crash = Problem(message=f"the validator stopped: {type(exc).__name__}: {exc}", hint=hint)
    containers = _containers(document)
    found = {(f"invalid: {error.message}", _locate(error, containers)): None for error in errors}
    problems = [Problem(message=message, location=Location(pointer=pointer), hint=hint) for message, pointer in found]
    return [*problems, crash] if crash else problems


def _containers(document: Any) -> dict[int, tuple[JsonPath, Any]]:
    """Every dict and list of the document by identity, with its path."""
    found: dict[int, tuple[JsonPath, Any]] = {}
    stack: list[tuple[JsonPath, Any]] = [((), document)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, (dict, list)) and id(node) not in found:
            found[id(node)] = (path, node)
            items = node.items() if isinstance(node, dict) else enumerate(node)
            stack.extend(((*path, k), v) for k, v in items)
    return found


def _locate(error: Any, containers: dict[int, tuple[JsonPath, Any]]) -> str | None:
    """The document pointer of a validator error: its paths are relative to the schema that the
    validator was looking at; the objects it reports are the document's own."""
    relative = tuple(getattr(error, "absolute_path", ()))
    if id(error.instance) in containers:
        return _pointer(containers[id(error.instance)][0]) or None
    if relative:
        *parent, last = relative
        for path, node in containers.values():
            if path[len(path) - len(parent) :] == tuple(parent) and _child(node, last) is error.instance:
                return _pointer((*path, last))
    return _pointer(relative) or None


def _child(node: Any, key: Any) -> Any:
    try:
        return node[key]
    except (LookupError, TypeError):
        return _Missing


class _Missing:
    pass


# ----------------------------------------------------------------------------- Swagger 2.0

_SWAGGER_REFS = (
    ("#/definitions/", "#/components/schemas/"),
    ("#/parameters/", "#/components/parameters/"),
    ("#/responses/", "#/components/responses/"),
)
_PARAM_SCHEMA_KEYS = (
    "type", "format", "items", "default", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "enum", "multipleOf",
)  # fmt: skip
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
# collectionFormat -> (style, explode) of a query parameter; tsv has no 3.x equivalent
_QUERY_STYLES = {
    "csv": ("form", False),
    "ssv": ("spaceDelimited", False),
    "pipes": ("pipeDelimited", False),
    "multi": ("form", True),
}
_Param = tuple[JsonPath, Any, dict[str, Any]]  # a Swagger 2.0 parameter: where it stands, as written, resolved
_OAUTH_FLOWS = {
    "implicit": ("implicit", ("authorizationUrl",)),
    "password": ("password", ("tokenUrl",)),
    "application": ("clientCredentials", ("tokenUrl",)),
    "accessCode": ("authorizationCode", ("authorizationUrl", "tokenUrl")),
}


def _rewrite_ref(ref: str) -> str:
    for old, new in _SWAGGER_REFS:
        if ref.startswith(old):
            return new + ref[len(old) :]
    return ref


def _media_types(value: Any, default: list[str]) -> list[str]:
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return list(value)
    return default


def _extensions(node: dict[str, Any]) -> dict[str, Any]:
    """Vendor extensions to carry over (x-nullable is converted, not carried)."""
    return {k: v for k, v in node.items() if isinstance(k, str) and k.startswith("x-") and k != "x-nullable"}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


class _Swagger2:
    """Swagger 2.0 -> OpenAPI 3.0.3, reusing the (private) input's objects where they carry over."""

    def __init__(self, document: dict[str, Any], root: str, warnings: list[SpecWarning]) -> None:
        self.doc = document
        self.root = root
        self.warnings = warnings
        self.consumes = _media_types(document.get("consumes"), ["application/json"])
        self.produces = _media_types(document.get("produces"), ["application/json"])
        self._converted: set[int] = set()

    def convert(self) -> dict[str, Any]:
        doc = self.doc
        out: dict[str, Any] = {"openapi": "3.0.3"}
        out.update((k, doc[k]) for k in ("info", "externalDocs") if k in doc)
        servers = self._servers(doc.get("schemes"))
        if servers:
            out["servers"] = servers
        out.update((k, doc[k]) for k in ("tags", "security") if k in doc)
        paths = doc.get("paths") or {}
        out["paths"] = {p: self._path_item(item, ("paths", p)) for p, item in paths.items()}
        components = self._components()
        if components:
            out["components"] = components
        out.update(_extensions(doc))
        return out

    # -- servers

    def _servers(self, schemes: Any) -> list[dict[str, str]]:
        host, base = self.doc.get("host"), self.doc.get("basePath")
        base = base.rstrip("/") if isinstance(base, str) else ""
        if not isinstance(host, str) or not host:
            if _is_url(self.root):  # 2.0: no host means the host that serves the document
                parts = urlsplit(self.root)
                host, schemes = parts.netloc, schemes or [parts.scheme]
            else:
                return [{"url": base}] if base else []
        names = [s for s in _as_list(schemes) if isinstance(s, str)] or ["https"]
        return [{"url": f"{scheme}://{host}{base}"} for scheme in names]

    # -- paths and operations

    def _path_item(self, item: Any, where: JsonPath) -> Any:
        if not isinstance(item, dict):
            return item
        shared = self._parameters(item, where)
        out: dict[str, Any] = {}
        for key, value in item.items():
            if key == "parameters":
                kept = [self._parameter(p, r, at) for at, p, r in shared if r.get("in") not in ("body", "formData")]
                if kept:
                    out["parameters"] = kept
            elif key in HTTP_METHODS and isinstance(value, dict):
                out[key] = self._operation(value, shared, (*where, key))
            else:
                out[key] = value
        return out

    def _operation(self, op: dict[str, Any], shared: list[_Param], where: JsonPath) -> dict[str, Any]:
        own = self._parameters(op, where)
        own_ids = {(r.get("name"), r.get("in")) for _, _, r in own}
        inherited = [
            (at, p, r)
            for at, p, r in shared
            if r.get("in") in ("body", "formData") and (r.get("name"), r.get("in")) not in own_ids
        ]
        params, bodies, forms = [], [], []
        for at, p, r in [*own, *inherited]:
            location = r.get("in")
            if location == "body":
                bodies.append(r)
            elif location == "formData":
                forms.append((at, r))
            else:
                params.append(self._parameter(p, r, at))
        out: dict[str, Any] = {}
        for key, value in op.items():
            if key == "parameters" and params:
                out["parameters"] = params
            elif key == "responses":
                out["responses"] = self._responses(value, _media_types(op.get("produces"), self.produces))
            elif key not in ("parameters", "consumes", "produces", "schemes"):
                out[key] = value
        consumes = _media_types(op.get("consumes"), self.consumes)
        body = self._request_body(bodies, forms, consumes, where)
        if body:
            out["requestBody"] = body
        if op.get("schemes") and op.get("schemes") != self.doc.get("schemes") and self.doc.get("host"):
            out["servers"] = self._servers(op["schemes"])
        return out

    def _parameters(self, owner: dict[str, Any], where: JsonPath) -> list[_Param]:
        """The parameters of a path item or operation: where each stands, as written, and resolved."""
        found = []
        for i, param in enumerate(_as_list(owner.get("parameters"))):
            at = (*where, "parameters", i)
            resolved = self._deref(param)
            if resolved:
                found.append((at, param, resolved))
            else:
                self.warnings.append(_warn("parameter cannot be resolved; dropped", at))
        return found

    def _deref(self, node: Any) -> dict[str, Any]:
        """A parameter behind its local refs ({} when it cannot be found)."""
        for _ in range(16):
            if not isinstance(node, dict):
                return {}
            ref = node.get("$ref")
            if not isinstance(ref, str):
                return node
            try:
                node = _follow(self.doc, _pointer_parts(ref[1:])) if ref.startswith("#") else None
            except LookupError:
                node = None
        return {}

    # -- parameters

    def _parameter(self, param: Any, resolved: dict[str, Any], where: JsonPath) -> dict[str, Any]:
        ref = param.get("$ref") if isinstance(param, dict) else None
        if isinstance(ref, str) and ref.startswith("#/parameters/"):
            return {"$ref": _rewrite_ref(ref)}
        return self._plain_parameter(resolved, where)

    def _plain_parameter(self, param: dict[str, Any], where: JsonPath) -> dict[str, Any]:
        out: dict[str, Any] = {
            k: param[k] for k in ("name", "in", "description", "required", "allowEmptyValue") if k in param
        }
        if out.get("in") == "path":
            out["required"] = True
        out["schema"] = self._param_schema(param)
        if param.get("type") == "array":
            out.update(self._style(param, where))
        out.update(_extensions(param))
        return out

    def _style(self, param: dict[str, Any], where: JsonPath) -> dict[str, Any]:
        fmt = param.get("collectionFormat", "csv")
        if param.get("in") == "query":
            style = _QUERY_STYLES.get(fmt)
            if style is None:
                self.warnings.append(
                    _warn(
                        f"collectionFormat {fmt!r} has no OpenAPI 3 equivalent; sent as csv",
                        (*where, "collectionFormat"),
                    )
                )
                style = _QUERY_STYLES["csv"]
            return {"style": style[0], "explode": style[1]}
        if fmt != "csv":
            self.warnings.append(
                _warn(
                    f"collectionFormat {fmt!r} is not possible in {param.get('in')}; sent as csv",
                    (*where, "collectionFormat"),
                )
            )
        return {}

    def _param_schema(self, param: dict[str, Any]) -> dict[str, Any]:
        schema = {k: param[k] for k in _PARAM_SCHEMA_KEYS if k in param}
        if isinstance(schema.get("items"), dict):
            schema["items"] = self._items(schema["items"])
        if schema.get("type") == "file":
            schema.update(type="string", format="binary")
        if param.get("x-nullable") is True:
            schema["nullable"] = True
        return schema

    def _items(self, items: dict[str, Any]) -> dict[str, Any]:
        if isinstance(items.get("$ref"), str):  # not 2.0, but common: items of a schema
            self._schema(items)
            return items
        return self._param_schema(items)

    # -- bodies

    def _request_body(
        self,
        bodies: list[dict[str, Any]],
        forms: list[tuple[JsonPath, dict[str, Any]]],
        consumes: list[str],
        where: JsonPath,
    ) -> dict[str, Any] | None:
        if bodies:
            if len(bodies) > 1 or forms:
                self.warnings.append(
                    _warn("more than one body (body and formData parameters); using the first body", where)
                )
            return self._json_body(bodies[0], consumes)
        if forms:
            return self._form_body(forms, consumes)
        return None

    def _json_body(self, param: dict[str, Any], consumes: list[str]) -> dict[str, Any]:
        schema = param.get("schema") if isinstance(param.get("schema"), dict) else {}
        self._schema(schema)
        # a body of "*/*" is JSON in practice (k8s); a concrete type lets later stages serialise it
        types = list(dict.fromkeys("application/json" if t in ("*/*", "application/*") else t for t in consumes))
        body: dict[str, Any] = {}
        if "description" in param:
            body["description"] = param["description"]
        body["content"] = {t: {"schema": schema if i == 0 else _copy_json(schema)} for i, t in enumerate(types)}
        body["required"] = param.get("required") is True
        if isinstance(param.get("name"), str):
            body["x-codegen-request-body-name"] = param["name"]
        body.update(_extensions(param))
        return body

    def _form_body(self, forms: list[tuple[JsonPath, dict[str, Any]]], consumes: list[str]) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        required: list[str] = []
        encoding: dict[str, Any] = {}
        for at, param in forms:
            name = param.get("name")
            if not isinstance(name, str):
                continue
            schema = self._param_schema(param)
            if "description" in param:
                schema["description"] = param["description"]
            properties[name] = schema
            if param.get("required") is True:
                required.append(name)
            if param.get("type") == "array":
                encoding[name] = self._style({**param, "in": "query"}, at)
        has_file = any(p.get("type") == "file" for _, p in forms)
        types = [t for t in consumes if t in _FORM_TYPES]
        if has_file and "multipart/form-data" not in types:
            types = ["multipart/form-data"]  # files only travel in multipart
        types = types or ["application/x-www-form-urlencoded"]
        form: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            form["required"] = required
        content: dict[str, Any] = {}
        for i, media_type in enumerate(types):
            content[media_type] = {"schema": form if i == 0 else _copy_json(form)}
            if encoding:
                content[media_type]["encoding"] = _copy_json(encoding)
        return {"content": content, "required": bool(required)}

    # -- responses

    def _responses(self, responses: Any, produces: list[str]) -> Any:
        if not isinstance(responses, dict):
            return responses
        return {
            code: response if str(code).startswith("x-") else self._response(response, produces)
            for code, response in responses.items()
        }

    def _response(self, response: Any, produces: list[str]) -> Any:
        if not isinstance(response, dict):
            return response
        if isinstance(response.get("$ref"), str):
            return {"$ref": _rewrite_ref(response["$ref"])}
        out = {k: v for k, v in response.items() if k not in ("schema", "examples", "headers")}
        out.setdefault("description", "")
        content: dict[str, Any] = {}
        schema = response.get("schema")
        if isinstance(schema, dict):
            self._schema(schema)
            content = {t: {"schema": schema if i == 0 else _copy_json(schema)} for i, t in enumerate(produces)}
        examples = response.get("examples")
        if isinstance(examples, dict):
            for media_type, example in examples.items():
                content.setdefault(media_type, {})["example"] = example
        if content:
            out["content"] = content
        headers = response.get("headers")
        if isinstance(headers, dict):
            out["headers"] = {name: self._header(h) for name, h in headers.items()}
        return out

    def _header(self, header: Any) -> Any:
        if not isinstance(header, dict):
            return header
        out = {"description": header["description"]} if "description" in header else {}
        out["schema"] = self._param_schema(header)
        out.update(_extensions(header))
        return out

    # -- components

    def _components(self) -> dict[str, Any]:
        doc = self.doc
        components: dict[str, Any] = {}
        definitions = doc.get("definitions")
        if isinstance(definitions, dict) and definitions:
            for schema in definitions.values():
                self._schema(schema)
            components["schemas"] = definitions
        given = doc.get("parameters")
        parameters = {
            name: self._parameter(p, self._deref(p), ("parameters", name))
            for name, p in (given.items() if isinstance(given, dict) else ())
            if self._deref(p).get("in") not in ("body", "formData")  # inlined where they are used
        }
        if parameters:
            components["parameters"] = parameters
        responses = doc.get("responses")
        if isinstance(responses, dict) and responses:
            components["responses"] = {n: self._response(r, self.produces) for n, r in responses.items()}
        security = doc.get("securityDefinitions")
        if isinstance(security, dict) and security:
            components["securitySchemes"] = {
                n: self._security_scheme(s, ("securityDefinitions", n)) for n, s in security.items()
            }
        return components

    def _security_scheme(self, scheme: Any, where: JsonPath) -> Any:
        if not isinstance(scheme, dict):
            return scheme
        kind = scheme.get("type")
        out: dict[str, Any]
        if kind == "basic":
            out = {"type": "http", "scheme": "basic"}
        elif kind == "apiKey":
            out = {"type": "apiKey", **{k: scheme[k] for k in ("name", "in") if k in scheme}}
        elif kind == "oauth2" and scheme.get("flow") in _OAUTH_FLOWS:
            flow, urls = _OAUTH_FLOWS[scheme["flow"]]
            settings = {k: scheme[k] for k in urls if k in scheme}
            out = {"type": "oauth2", "flows": {flow: {**settings, "scopes": scheme.get("scopes") or {}}}}
        else:
            self.warnings.append(_warn(f"unknown security scheme type {kind!r}; kept as is", where))
            return scheme
        if "description" in scheme:
            out["description"] = scheme["description"]
        out.update(_extensions(scheme))
        return out

    # -- schemas

    def _schema(self, schema: Any) -> None:
        """Convert a schema tree in place: refs, x-nullable, type file, a string discriminator."""
        stack = [schema]
        while stack:
            node = stack.pop()
            if not isinstance(node, dict) or id(node) in self._converted:
                continue
            self._converted.add(id(node))
            ref = node.get("$ref")
            if isinstance(ref, str):
                node["$ref"] = _rewrite_ref(ref)
                if node.pop("x-nullable", None) is True:  # 3.0 ignores siblings of $ref
                    node["allOf"] = [{"$ref": node.pop("$ref")}]
                    node["nullable"] = True
                continue
            if node.pop("x-nullable", None) is True:
                node["nullable"] = True
            if node.get("type") == "file":
                node.update(type="string", format="binary")
            if isinstance(node.get("discriminator"), str):
                node["discriminator"] = {"propertyName": node["discriminator"]}
            stack.extend(node[k] for k in ("items", "additionalProperties", "not") if k in node)
            for key in ("allOf", "anyOf", "oneOf", "items"):
                stack.extend(_as_list(node.get(key)))
            for key in ("properties", "patternProperties"):
                if isinstance(node.get(key), dict):
                    stack.extend(node[key].values())
