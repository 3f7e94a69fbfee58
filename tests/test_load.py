"""The load stage: spec file or URL -> one bundled OpenAPI 3.x document, or a clear InputError.

Three tiers: the real-world corpus (skipped when it is not beside the repo), small hand-made specs
in tests/specs/, and URL cases served by a local http.server on 127.0.0.1 (no other network).
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest

from openapi2mcp.errors import InputError
from openapi2mcp.loader import LoadedSpec, load_spec
from openapi2mcp.loader import reader as reader_module
from openapi2mcp.loader.checks import HTTP_METHODS
from tests.conftest import corpus_dir, corpus_file

SPECS = Path(__file__).parent / "specs"


def refused(source: str | Path, **options: Any) -> InputError:
    """The InputError a spec is refused with (fails the test when it loads or fails otherwise)."""
    with pytest.raises(InputError) as info:
        load_spec(str(source), **options)
    assert info.value.problems and all(p.message for p in info.value.problems)
    return info.value


def operations(spec: LoadedSpec) -> list[tuple[str, str]]:
    return [
        (method, path)
        for path, item in spec.document.get("paths", {}).items()
        if isinstance(item, dict)
        for method in HTTP_METHODS
        if isinstance(item.get(method), dict)
    ]


def refs(document: Any) -> Iterator[str]:
    """Every string `$ref` value in a document (property *names* `$ref` have dict values)."""
    stack = [document]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                yield node["$ref"]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def resolve(document: dict[str, Any], ref: str) -> Any:
    node: Any = document
    for part in ref.removeprefix("#/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def assert_self_contained(document: dict[str, Any]) -> None:
    """No external refs left, every internal ref resolves, and it is plain JSON data."""
    json.dumps(document, allow_nan=False)
    for ref in refs(document):
        assert ref.startswith("#/"), f"external ref left: {ref}"
        resolve(document, ref)


# ----------------------------------------------------------------------------- the corpus


def _corpus_roots() -> list[str]:
    """Every file of the corpus that declares an OpenAPI/Swagger version (not the fragments)."""
    root = corpus_dir()
    if root is None:
        return []
    declares = re.compile(r"""(?:^|[{,])\s*["']?(?:openapi|swagger)["']?\s*:""", re.M)
    found = []
    for path in sorted(root.rglob("*")):
        if path.suffix in (".json", ".yaml", ".yml") and declares.search(path.read_text("utf-8", "replace")[:4096]):
            found.append(str(path.relative_to(root)))
    return found


CORPUS_ROOTS = _corpus_roots()
needs_corpus = pytest.mark.skipif(
    corpus_dir() is None, reason="the real-world corpus is not here (../shared/corpus or $OPENAPI2MCP_CORPUS)"
)


@functools.cache
def corpus_spec(rel: str) -> LoadedSpec | InputError:
    """Each corpus spec is loaded once per session (several tests look at the big ones)."""
    path = corpus_file(rel)
    try:
        return load_spec(str(path))
    except InputError as exc:
        return exc


def loaded(rel: str) -> LoadedSpec:
    spec = corpus_spec(rel)
    assert isinstance(spec, LoadedSpec), str(spec)
    return spec


@needs_corpus
def test_the_corpus_is_found() -> None:
    corpus_file("digitalocean/specification/DigitalOcean-public.v2.yaml")  # the full corpus, not CI's part
    assert "github/api.github.com.json" in CORPUS_ROOTS
    assert "digitalocean/specification/DigitalOcean-public.v2.yaml" in CORPUS_ROOTS
    assert not any("petstore-separate/common" in r for r in CORPUS_ROOTS)  # fragments are not roots


# the corpus's big specs (seconds each) run in the slow tier, the rest in every run
BIG: Final = ("openai/", "stripe/", "github/", "digitalocean/", "kubernetes/")


def by_size(rels: list[str]) -> list[Any]:
    return [pytest.param(r, marks=pytest.mark.slow) if r.startswith(BIG) else r for r in rels]


@needs_corpus
@pytest.mark.parametrize("rel", by_size(CORPUS_ROOTS) or ["-"])
def test_every_corpus_spec_loads_or_is_refused_cleanly(rel: str) -> None:
    result = corpus_spec(rel)
    if isinstance(result, InputError):
        assert result.problems and all(p.message and p.hint for p in result.problems)
        return
    assert result.openapi_version.startswith("3.")
    assert re.fullmatch(r"[0-9a-f]{64}", result.sha256)
    assert_self_contained(result.document)


@needs_corpus
@pytest.mark.slow
def test_github_loads_fast_without_the_resolver(monkeypatch: pytest.MonkeyPatch) -> None:
    # the fast path must not need the bundler, nor load prance (speed: benchmarks/): importing it fails here
    monkeypatch.setitem(sys.modules, "openapi2mcp.loader.bundle", None)
    spec = load_spec(str(corpus_file("github/api.github.com.json")))
    assert len(operations(spec)) == 1223
    assert (spec.original_version, spec.openapi_version) == ("3.0.3", "3.0.3")
    assert spec.warnings == []


def test_a_path_ending_in_dollar_ref_takes_the_fast_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Microsoft Graph's `/groups/{id}/owners/$ref` paths are no refs:
    # the regex rules them out, with no walk over the document (Graph: 0.4 s)
    from openapi2mcp.loader import refs as refs_module

    def no_walk(*_: object, **__: object) -> Iterator[Any]:
        raise AssertionError("the fast path walked the document")

    monkeypatch.setattr(refs_module, "iter_refs", no_walk)
    ok = {"responses": {"204": {"description": "done"}}}
    for name, text in {
        "graph.json": json.dumps({"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
                                  "paths": {"/groups/{id}/owners/$ref": {"delete": ok}}}),
        "graph.yaml": "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n"
                      "  /groups/{id}/owners/$ref: {delete: {responses: {'204': {description: done}}}}\n",
    }.items():
        (tmp_path / name).write_text(text)
        assert operations(load_spec(tmp_path / name)) == [("delete", "/groups/{id}/owners/$ref")]


@pytest.mark.parametrize("ref", ['{"$ref": "s.json#/S"}', "{$ref: s.json#/S}", "[{a: 1, $ref: s.json#/S}][0]"])
def test_an_external_ref_in_any_spelling_is_bundled(tmp_path: Path, ref: str) -> None:
    (tmp_path / "s.json").write_text(json.dumps({"S": {"type": "integer", "minimum": 3}}))
    schema = ref.removesuffix("[0]")
    (tmp_path / "api.yaml").write_text(
        "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    get:\n      parameters:\n"
        f"        - {{name: n, in: query, schema: {schema}}}\n"
        "      responses: {'204': {description: done}}\n")
    if ref.endswith("[0]"):  # a flow sequence: the `$ref` follows a `,`; the schema is its one item
        (tmp_path / "api.yaml").write_text((tmp_path / "api.yaml").read_text().replace(
            f"schema: {schema}", f"schema: {{allOf: {schema}}}"))
    text = json.dumps(load_spec(tmp_path / "api.yaml").document)
    assert "s.json" not in text
    assert '"minimum": 3' in text


@needs_corpus
@pytest.mark.slow
def test_digitalocean_is_bundled_into_one_document() -> None:
    spec = loaded("digitalocean/specification/DigitalOcean-public.v2.yaml")
    document = spec.document
    assert len(operations(spec)) == 659
    assert_self_contained(document)  # 2,850 files, no external ref left
    schemas = document["components"]["schemas"]
    assert len(schemas) > 800
    droplets = document["paths"]["/v2/droplets"]["get"]  # `get: {$ref: file}` inlined
    assert droplets["operationId"] == "droplets_list"
    assert {p["name"] for p in droplets["parameters"]} >= {"per_page", "page", "tag_name"}
    # refs to whole `properties` maps are inlined, not filed as schemas
    assert "droplet_ids" in json.dumps(schemas["load_balancer"])


@needs_corpus
@pytest.mark.slow
def test_digitalocean_reads_each_file_once_and_deterministically(monkeypatch: pytest.MonkeyPatch) -> None:
    # stock prance re-reads shared files (20 s here instead of about 1 s); the speed itself is
    # measured by benchmarks/compile_bench.py, this pins its cause: every file is read once
    from openapi2mcp.loader.reader import Reader

    reads: list[str] = []
    read_file = Reader._read_file

    def counted(self: Reader, path: str, display: str, site: object) -> bytes:
        reads.append(path)
        return read_file(self, path, display, site)  # type: ignore[arg-type]

    monkeypatch.setattr(Reader, "_read_file", counted)
    path = str(corpus_file("digitalocean/specification/DigitalOcean-public.v2.yaml"))
    again = load_spec(path)
    assert len(reads) > 2000 and len(reads) == len(set(reads))
    first = loaded("digitalocean/specification/DigitalOcean-public.v2.yaml")
    assert again.sha256 == first.sha256
    assert json.dumps(again.document) == json.dumps(first.document)


@needs_corpus
def test_kubernetes_swagger2_is_converted() -> None:
    spec = loaded("kubernetes/swagger-kubernetes-client-python-8.0.0b1.json")
    document = spec.document
    assert (spec.original_version, spec.openapi_version) == ("2.0", "3.0.3")
    assert len(operations(spec)) == 826
    assert "definitions" not in document and "v1.Pod" in document["components"]["schemas"]
    assert all(r.startswith("#/components/schemas/") for r in refs(document))
    # the schema property *named* $ref that breaks stock prance is still a property
    props = document["components"]["schemas"]["v1beta1.JSONSchemaProps"]["properties"]
    assert props["$ref"] == {"type": "string"}
    create = document["paths"]["/api/v1/namespaces/{namespace}/pods"]["post"]
    assert create["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/v1.Pod"}
    assert document["components"]["securitySchemes"]["BearerToken"]["type"] == "apiKey"
    duplicates = [w for w in spec.warnings if "duplicate operationId" in w.message]
    assert duplicates and all(w.location.pointer for w in duplicates)


@needs_corpus
def test_stock_prance_fails_on_kubernetes_for_the_documented_reason() -> None:
    """The root cause we work around: prance takes the schema property named `$ref` for a ref."""
    from prance.util.resolver import RESOLVE_FILES, RefResolver
    from prance.util.url import ResolutionError

    path = corpus_file("kubernetes/swagger-kubernetes-client-python-8.0.0b1.json")
    resolver = RefResolver(json.loads(path.read_text()), str(path), resolve_types=RESOLVE_FILES)
    try:
        resolver.resolve_references()
    except ResolutionError as exc:
        failure = str(exc)
    else:
        pytest.skip("this prance no longer fails on Kubernetes; the workaround may be simplified")
    assert "'dict' object has no attribute 'decode'" in failure
    assert "Unable to parse url: {'type': 'string'}" in failure  # the value of properties["$ref"]


@needs_corpus
@pytest.mark.parametrize(
    ("rel", "version", "count"),
    [
        pytest.param("openai/openapi.yaml", "3.1.0", 288, marks=pytest.mark.slow),
        pytest.param("stripe/spec3.json", "3.0.0", 417, marks=pytest.mark.slow),
        pytest.param("stripe/spec3.yaml", "3.0.0", 468, marks=pytest.mark.slow),
        ("apis-guru/slack.com.json", "3.0.0", 174),
    ],
)
def test_big_specs_keep_their_operations(rel: str, version: str, count: int) -> None:
    spec = loaded(rel)
    assert spec.openapi_version == version
    assert len(operations(spec)) == count


@needs_corpus
@pytest.mark.parametrize("flavour", ["json", "yaml"])
def test_petstore_separate_needs_a_wider_ref_root(flavour: str) -> None:
    folder = corpus_file(f"oai-learn/v2.0/{flavour}/petstore-separate")
    error = refused(folder / f"spec/swagger.{flavour}")
    assert "leaves the folder" in str(error) and "--ref-root" in str(error)
    spec = load_spec(str(folder / f"spec/swagger.{flavour}"), ref_root=folder)
    assert len(operations(spec)) == 4
    assert_self_contained(spec.document)
    assert spec.document["components"]["schemas"]["Error"]["required"] == ["code", "message"]


# ----------------------------------------------------------------------------- multi-file specs


@pytest.fixture(scope="module")
def multi() -> LoadedSpec:
    return load_spec(str(SPECS / "multi" / "openapi.yaml"))


def test_external_refs_are_bundled(multi: LoadedSpec) -> None:
    document = multi.document
    assert_self_contained(document)
    assert multi.warnings == []
    schemas = document["components"]["schemas"]
    assert schemas["Pet"]["required"] == ["id", "name"]  # `Pet: {$ref: file}` defines Pet in place
    assert document["paths"]["/pets"]["get"]["responses"]["200"]["content"]["application/json"]["schema"] == {
        "type": "array",
        "items": {"$ref": "#/components/schemas/Pet"},  # and other refs to that file point to it
    }
    limit = document["paths"]["/pets"]["get"]["parameters"][0]  # parameters are inlined
    assert limit == {"name": "limit", "in": "query", "schema": {"type": "integer", "maximum": 100}}
    assert document["paths"]["/pets/{id}"]["get"]["operationId"] == "getPet"  # a path item from a file


def test_recursive_schemas_across_files_stay_finite(multi: LoadedSpec) -> None:
    schemas = multi.document["components"]["schemas"]
    assert schemas["node"]["properties"]["children"]["items"] == {"$ref": "#/components/schemas/node"}
    assert schemas["node"]["properties"]["branch"] == {"$ref": "#/components/schemas/branch"}
    assert schemas["branch"]["properties"]["leaves"]["items"] == {"$ref": "#/components/schemas/node"}


def test_local_refs_inside_an_included_file_mean_that_file(multi: LoadedSpec) -> None:
    schemas = multi.document["components"]["schemas"]
    assert schemas["Pet"]["properties"]["owner"] == {"$ref": "#/components/schemas/Owner"}
    assert schemas["Owner"]["properties"]["address"] == {"$ref": "#/components/schemas/Address"}
    get_pet = multi.document["paths"]["/pets/{id}"]["get"]  # `../openapi.yaml#/...` is local again
    assert get_pet["responses"]["default"] == {"$ref": "#/components/responses/Error"}


def test_property_names_are_not_refs(multi: LoadedSpec) -> None:
    properties = multi.document["components"]["schemas"]["Pet"]["properties"]
    assert properties["$ref"] == {"type": "string"}  # like Kubernetes' JSONSchemaProps
    assert properties["default"]["description"] == "a property named default"


def test_examples_in_files_are_inlined(multi: LoadedSpec) -> None:
    media = multi.document["paths"]["/trees"]["get"]["responses"]["200"]["content"]["application/json"]
    assert media["example"]["value"] == "root"


def test_the_bundle_is_a_tree(multi: LoadedSpec) -> None:
    seen: set[int] = set()
    stack: list[Any] = [multi.document]
    while stack:
        node = stack.pop()
        if isinstance(node, (dict, list)):
            assert id(node) not in seen, "a shared subtree: patching one place would change another"
            seen.add(id(node))
            stack.extend(node.values() if isinstance(node, dict) else node)


def test_sha256_covers_every_file_read(tmp_path: Path, multi: LoadedSpec) -> None:
    copy = tmp_path / "multi"
    shutil.copytree(SPECS / "multi", copy)
    assert load_spec(str(copy / "openapi.yaml")).sha256 == multi.sha256
    common = copy / "schemas" / "common.yaml"
    common.write_text(common.read_text() + "\n# a change in an included file\n")
    assert load_spec(str(copy / "openapi.yaml")).sha256 != multi.sha256


def test_sha256_of_a_single_file_is_its_hash() -> None:
    path = SPECS / "swagger2.yaml"
    assert load_spec(str(path)).sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder / next(iter(files))


def spec_with_schema_ref(ref: str, *, example_ref: str | None = None) -> str:
    example = f"\n              example: {{$ref: '{example_ref}'}}" if example_ref else ""
    return f"""openapi: 3.0.3
info: {{title: t, version: "1"}}
servers: [{{url: "https://t.example.com"}}]
paths:
  /x:
    get:
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {{$ref: '{ref}'}}{example}
"""


def test_a_missing_file_is_named_with_the_ref_that_wants_it(tmp_path: Path) -> None:
    root = write(tmp_path, {"openapi.yaml": spec_with_schema_ref("schemas/missing.yaml")})
    error = refused(root)
    assert "schemas/missing.yaml" in str(error) and "does not exist" in str(error)
    assert error.problems[0].location.pointer == "/paths/~1x/get/responses/200/content/application~1json/schema/$ref"


def test_a_missing_key_in_a_file_is_named(tmp_path: Path) -> None:
    root = write(tmp_path, {"openapi.yaml": spec_with_schema_ref("defs.yaml#/Nope"), "defs.yaml": "Pet: {}\n"})
    assert "no 'Nope'" in str(refused(root))


def test_a_broken_included_file_is_located_by_line(tmp_path: Path) -> None:
    root = write(tmp_path, {"openapi.yaml": spec_with_schema_ref("pet.yaml"), "pet.yaml": "type: [object\n"})
    location = refused(root).problems[0].location
    assert location.file == "pet.yaml" and location.line


def test_a_soft_ref_that_cannot_be_followed_stays_as_data(tmp_path: Path) -> None:
    text = spec_with_schema_ref("pet.yaml", example_ref="https://elsewhere.example.com/x.json")
    root = write(tmp_path, {"openapi.yaml": text, "pet.yaml": "type: object\n"})
    media = load_spec(str(root)).document["paths"]["/x"]["get"]["responses"]["200"]["content"]["application/json"]
    assert media["example"] == {"$ref": "https://elsewhere.example.com/x.json"}  # not fetched: only data


def test_a_recursive_non_schema_is_refused(tmp_path: Path) -> None:
    spec = """openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /x: {$ref: 'item.yaml'}
"""
    item = "get:\n  responses:\n    '200': {$ref: 'item.yaml'}\n"
    error = refused(write(tmp_path, {"openapi.yaml": spec, "item.yaml": item}))
    assert "recursive" in str(error)


# ----------------------------------------------------------------------------- security


def test_a_ref_out_of_the_folder_is_refused() -> None:
    error = refused(SPECS / "escape" / "openapi.yaml")
    problem = error.problems[0]
    assert "'../outside.yaml' leaves the folder" in problem.message
    assert problem.location.pointer == "/paths/~1x/get/responses/200/content/application~1json/schema/$ref"
    assert "--ref-root" in (problem.hint or "")
    spec = load_spec(str(SPECS / "escape" / "openapi.yaml"), ref_root=SPECS)
    assert spec.document["components"]["schemas"]["outside"] == {"type": "string"}


def test_an_absolute_file_ref_is_refused(tmp_path: Path) -> None:
    inside = write(tmp_path, {"pet.yaml": "type: object\n"})
    root = write(tmp_path, {"openapi.yaml": spec_with_schema_ref(str(inside))})
    assert "absolute file path" in str(refused(root))
    assert "absolute file path" in str(
        refused(write(tmp_path, {"openapi.yaml": spec_with_schema_ref("file:///etc/passwd")}))
    )


def test_a_symlink_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    secret = write(tmp_path, {"secret/key.yaml": "type: string\n"})
    root = write(tmp_path, {"spec/openapi.yaml": spec_with_schema_ref("link.yaml")})
    os.symlink(secret, root.parent / "link.yaml")
    assert "through a symlink" in str(refused(root))


def test_an_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ["openapi: 3.0.3", "info: {title: t, version: '1'}", "paths: {/x: {get: {responses: {}}}}", "a0: &a0 [lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    error = refused(write(tmp_path, {"bomb.yaml": "\n".join(lines) + "\n"}))
    assert "alias" in str(error)


def test_a_yaml_alias_cycle_is_refused(tmp_path: Path) -> None:
    text = "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths: {/x: {get: {responses: {}}}}\nx-loop: &l [*l]\n"
    assert "cycle" in str(refused(write(tmp_path, {"loop.yaml": text})))


def test_a_file_too_large_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader_module, "MAX_FILE_BYTES", 100)
    assert "too large" in str(refused(SPECS / "swagger2.yaml"))


# ----------------------------------------------------------------------------- URLs


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: dict[str, Callable[[_Handler], None]] = {}  # noqa: RUF012 - filled per test server
    seen: list[str] = []  # noqa: RUF012 - per test server: every path asked for

    def do_GET(self) -> None:
        self.seen.append(self.path)
        route = self.routes.get(self.path.split("?")[0])
        if route is None:
            self.send_error(404)
        else:
            route(self)

    def log_message(self, *args: Any) -> None:
        pass

    def reply(self, body: str | bytes, status: int = 200, headers: dict[str, str] | None = None) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        for name, value in {"Content-Length": str(len(data)), **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


class Server:
    """A tiny HTTP server on 127.0.0.1 whose routes tests set."""

    def __init__(self) -> None:
        self.routes: dict[str, Callable[[_Handler], None]] = {}
        self.seen: list[str] = []
        handler = type("Handler", (_Handler,), {"routes": self.routes, "seen": self.seen})
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def file(self, path: str, body: str, content_type: str = "application/yaml") -> str:
        self.routes[path] = lambda h: h.reply(body, headers={"Content-Type": content_type})
        return self.base + path


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    running = Server()
    yield running
    running.httpd.shutdown()
    running.httpd.server_close()


def test_a_spec_by_url_with_relative_refs(server: Server) -> None:
    server.file("/api/pet.yaml", "type: object\nproperties: {name: {type: string}}\n")
    url = server.file("/api/openapi.yaml", spec_with_schema_ref("pet.yaml"))
    spec = load_spec(url)
    assert spec.source == url
    assert spec.document["components"]["schemas"]["pet"]["properties"]["name"] == {"type": "string"}
    assert_self_contained(spec.document)


def test_a_remote_ref_from_a_local_spec_needs_permission(tmp_path: Path, server: Server) -> None:
    ref = server.file("/shared/pet.yaml", "type: string\n")
    root = write(tmp_path, {"openapi.yaml": spec_with_schema_ref(ref)})
    error = refused(root)
    assert f"to {server.base} is not allowed" in str(error)
    assert f"--allow-remote-refs {server.base}" in (error.problems[0].hint or "")
    for allowed in (["127.0.0.1"], [server.base], [server.base.removeprefix("http://")], ["*"], True):
        spec = load_spec(str(root), allow_remote_refs=allowed)
        assert spec.document["components"]["schemas"]["pet"] == {"type": "string"}


def test_a_remote_spec_cannot_ref_another_host_or_local_files(server: Server) -> None:
    port = server.base.rsplit(":", 1)[1]
    other = server.file("/other/openapi.yaml", spec_with_schema_ref(f"http://localhost:{port}/api/pet.yaml"))
    assert f"to http://localhost:{port} is not allowed" in str(refused(other))
    local = server.file("/local/openapi.yaml", spec_with_schema_ref("file:///etc/hostname"))
    assert "points to a local file" in str(refused(local))


def test_http_errors_are_input_errors(server: Server) -> None:
    assert "HTTP 404" in str(refused(server.base + "/nothing.yaml"))
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert "cannot fetch" in str(refused(f"http://127.0.0.1:{port}/openapi.yaml", timeout=5))


def test_redirects_are_followed_within_reason(server: Server) -> None:
    target = server.file("/moved/openapi.yaml", spec_with_schema_ref("#/components/schemas/X"), "application/json")
    server.routes["/old.yaml"] = lambda h: h.reply("", 301, {"Location": target})
    server.routes["/loop.yaml"] = lambda h: h.reply("", 302, {"Location": "/loop.yaml"})
    assert load_spec(server.base + "/old.yaml").document["openapi"] == "3.0.3"
    assert "redirects" in str(refused(server.base + "/loop.yaml"))


def test_slow_and_large_urls_are_refused(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    def slow(handler: _Handler) -> None:
        time.sleep(1.0)
        try:
            handler.reply("openapi: 3.0.3\n")
        except OSError:  # the client gave up, as it should
            pass

    server.routes["/slow.yaml"] = slow
    assert "timed out" in str(refused(server.base + "/slow.yaml", timeout=0.2))
    url = server.file("/big.yaml", "x" * 1000)
    monkeypatch.setattr(reader_module, "MAX_FILE_BYTES", 100)
    assert "too large" in str(refused(url))


# ----------------------------------------------------------------------------- issue 11 item 11: origins


@pytest.fixture
def other() -> Iterator[Server]:
    """A second server on 127.0.0.1, another port: the internal service a hostile spec wants read."""
    running = Server()
    running.file("/secret.yaml", "type: string\ndescription: INTERNAL-SECRET-7d1c\n")
    yield running
    running.httpd.shutdown()
    running.httpd.server_close()


def test_a_remote_spec_cannot_make_us_fetch_another_port_of_its_host(server: Server, other: Server) -> None:
    """Before the fix only host names were compared: the secret was fetched and put in a tool schema."""
    port = other.base.rsplit(":", 1)[1]
    for name, ref in (("absolute", f"{other.base}/secret.yaml"), ("scheme-relative", f"//127.0.0.1:{port}/secret.yaml"),
                      ("https", f"https://127.0.0.1:{server.base.rsplit(':', 1)[1]}/secret.yaml")):
        url = server.file(f"/{name}/openapi.yaml", spec_with_schema_ref(ref))
        error = refused(url)
        assert "is not allowed" in str(error) and f"the spec's own origin is {server.base}" in str(error)
        assert "--allow-remote-refs http" in (error.problems[0].hint or "")
    assert other.seen == []  # never asked


def test_allow_remote_refs_takes_origins_hosts_with_ports_and_hosts(server: Server, other: Server) -> None:
    url = server.file("/allowed/openapi.yaml", spec_with_schema_ref(f"{other.base}/secret.yaml"))
    port = other.base.rsplit(":", 1)[1]
    for allowed in ([other.base], [other.base + "/"], [f"127.0.0.1:{port}"], ["127.0.0.1"], ["*"]):
        spec = load_spec(url, allow_remote_refs=allowed)
        assert spec.document["components"]["schemas"]["secret"]["description"] == "INTERNAL-SECRET-7d1c"
    for wrong in ([f"https://127.0.0.1:{port}"], ["http://127.0.0.1"], ["127.0.0.1:1"], ["localhost"]):
        assert "is not allowed" in str(refused(url, allow_remote_refs=wrong))
    for bad in ([f"{other.base}/path"], ["ftp://127.0.0.1"], ["127.0.0.1:99999"], ["http://"]):
        error = refused(url, allow_remote_refs=bad)
        assert "--allow-remote-refs" in str(error) and "origin" in (error.problems[0].hint or "")


def test_redirects_of_a_ref_and_of_the_spec_keep_to_the_same_rule(server: Server, other: Server) -> None:
    server.routes["/hop.yaml"] = lambda h: h.reply("", 302, {"Location": f"{other.base}/secret.yaml"})
    url = server.file("/redirected/openapi.yaml", spec_with_schema_ref("/hop.yaml"))
    assert f"to {other.base} is not allowed" in str(refused(url))
    server.routes["/spec-elsewhere.yaml"] = lambda h: h.reply("", 301, {"Location": f"{other.base}/spec.yaml"})
    error = refused(server.base + "/spec-elsewhere.yaml")
    assert f"refused redirect to {other.base}/spec.yaml: another origin" in str(error)
    assert other.seen == []
    other.file("/spec.yaml", spec_with_schema_ref("#/components/schemas/X"))
    assert load_spec(server.base + "/spec-elsewhere.yaml", allow_remote_refs=[other.base]).document
    server.routes["/bad-location.yaml"] = lambda h: h.reply("", 302, {"Location": "http://[::1"})
    server.routes["/no-location.yaml"] = lambda h: h.reply("", 302)
    assert "invalid URL" in str(refused(server.base + "/bad-location.yaml"))
    assert "HTTP 302" in str(refused(server.base + "/no-location.yaml"))


def test_a_hostile_spec_by_url_is_refused_on_the_command_line(server: Server, other: Server) -> None:
    from tests.e2e_support import no_traceback, run_cli

    url = server.file("/cli/openapi.yaml", spec_with_schema_ref(f"{other.base}/secret.yaml"))
    done = run_cli("inspect", url, "--all-operations")
    no_traceback(done.stderr)
    assert done.returncode == 2 and f"to {other.base} is not allowed" in done.stderr, done.stderr
    assert "INTERNAL-SECRET" not in done.stdout + done.stderr
    done = run_cli("inspect", url, "--all-operations", "--allow-remote-refs", other.base, "--json")
    assert done.returncode == 0 and "INTERNAL-SECRET-7d1c" in done.stdout, done.stderr


# ----------------------------------------------------------------------------- issue 11 item 16: a deadline


def _drip(handler: _Handler, head: bytes = b"", seconds: float = 30.0) -> None:
    """Answer 200, then one byte every 0.1 s for `seconds` (a client without a deadline waits it out)."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/yaml")
    handler.end_headers()
    try:
        handler.wfile.write(head)
        for _ in range(int(seconds * 10)):
            handler.wfile.write(b" ")
            handler.wfile.flush()
            time.sleep(0.1)
        handler.wfile.write(b"\n")
    except OSError:  # the client gave up, as it should
        pass


def test_a_spec_that_drips_in_is_given_up_at_the_deadline(server: Server) -> None:
    server.routes["/drip.yaml"] = _drip
    error = refused(server.base + "/drip.yaml", fetch_deadline=1.5)
    assert f"gave up fetching {server.base}/drip.yaml" in str(error) and "1.5 s" in str(error)
    assert "--fetch-timeout" in (error.problems[0].hint or "")


def test_the_deadline_covers_every_remote_ref(server: Server) -> None:
    server.routes["/slow-schema.yaml"] = functools.partial(_drip, head=b"type: string\n")
    url = server.file("/drip-ref/openapi.yaml", spec_with_schema_ref("/slow-schema.yaml"))
    error = refused(url, fetch_deadline=1.5)
    assert f"gave up fetching {server.base}/slow-schema.yaml" in str(error)


def test_fetch_timeout_on_the_command_line(server: Server) -> None:
    from openapi2mcp.cli import app as cli
    from tests.e2e_support import no_traceback, run_cli

    assert cli.FETCH_TIMEOUT == reader_module.FETCH_DEADLINE
    server.routes["/drip-cli.yaml"] = _drip
    done = run_cli("inspect", server.base + "/drip-cli.yaml", "--all-operations", "--fetch-timeout", "2")
    no_traceback(done.stderr)
    assert done.returncode == 2 and f"gave up fetching {server.base}/drip-cli.yaml" in done.stderr, done.stderr
    done = run_cli("inspect", server.base + "/drip-cli.yaml", "--all-operations",
                   env={"OPENAPI2MCP_FETCH_TIMEOUT": "2"})
    assert done.returncode == 2 and "longer than 2 s" in done.stderr, done.stderr


def test_swagger2_by_url_without_host_uses_the_url(server: Server) -> None:
    text = "swagger: '2.0'\ninfo: {title: t, version: '1'}\nbasePath: /v1\n"
    text += "paths: {/x: {get: {responses: {'200': {description: ok}}}}}\n"
    spec = load_spec(server.file("/s2.yaml", text))
    assert spec.document["servers"] == [{"url": server.base + "/v1"}]


# ----------------------------------------------------------------------------- Swagger 2.0


@pytest.fixture(scope="module")
def swagger2() -> LoadedSpec:
    return load_spec(str(SPECS / "swagger2.yaml"))


def test_swagger2_top_level(swagger2: LoadedSpec) -> None:
    document = swagger2.document
    assert (swagger2.original_version, swagger2.openapi_version, document["openapi"]) == ("2.0", "3.0.3", "3.0.3")
    assert document["servers"] == [{"url": "https://api.example.com/v2"}, {"url": "http://api.example.com/v2"}]
    assert not {"swagger", "host", "basePath", "schemes", "definitions", "securityDefinitions"} & set(document)
    assert set(document["components"]) == {"schemas", "parameters", "responses", "securitySchemes"}
    assert_self_contained(document)
    assert all(not r.startswith(("#/definitions", "#/parameters", "#/responses")) for r in refs(document))


def test_swagger2_security_schemes(swagger2: LoadedSpec) -> None:
    schemes = swagger2.document["components"]["securitySchemes"]
    assert schemes["basic"] == {"type": "http", "scheme": "basic"}
    assert schemes["key"] == {"type": "apiKey", "name": "X-Key", "in": "header"}
    flow = schemes["oauth"]["flows"]["authorizationCode"]
    assert flow["tokenUrl"] == "https://auth.example.com/token" and flow["scopes"] == {"read": "read things"}


def test_swagger2_collection_formats(swagger2: LoadedSpec) -> None:
    params = {p.get("name", p.get("$ref")): p for p in swagger2.document["paths"]["/pets"]["get"]["parameters"]}
    assert params["#/components/parameters/limit"] == {"$ref": "#/components/parameters/limit"}
    styles = {name: (params[name]["style"], params[name]["explode"]) for name in ("csv", "multi", "ssv", "pipes")}
    assert styles == {
        "csv": ("form", False),
        "multi": ("form", True),
        "ssv": ("spaceDelimited", False),
        "pipes": ("pipeDelimited", False),
    }
    assert params["pipes"]["schema"] == {"type": "array", "items": {"type": "integer"}}
    assert params["X-Trace"] == {"name": "X-Trace", "in": "header", "schema": {"type": "string", "nullable": True}}
    [tsv] = [w for w in swagger2.warnings if "tsv" in w.message]
    assert tsv.location.pointer == "/paths/~1pets/get/parameters/5/collectionFormat"


def test_swagger2_warnings_point_at_the_parameter_as_written(tmp_path: Path) -> None:
    text = """swagger: "2.0"
info: {title: t, version: "1"}
paths:
  /x:
    post:
      consumes: [application/x-www-form-urlencoded]
      parameters:
        - $ref: '#/parameters/nope'
        - {name: q, in: query, type: array, items: {type: string}, collectionFormat: tsv}
        - {name: f, in: formData, type: array, items: {type: string}, collectionFormat: tsv}
      responses: {"200": {description: ok}}
"""
    spec = load_spec(str(write(tmp_path, {"s2.yaml": text})))
    found = {(w.location.pointer, w.message.split(" ")[0]) for w in spec.warnings}
    assert {
        ("/paths/~1x/post/parameters/0", "parameter"),  # dropped: it resolves to nothing
        ("/paths/~1x/post/parameters/1/collectionFormat", "collectionFormat"),
        ("/paths/~1x/post/parameters/2/collectionFormat", "collectionFormat"),
    } <= found


def test_swagger2_bodies(swagger2: LoadedSpec) -> None:
    paths = swagger2.document["paths"]
    create = paths["/pets"]["post"]  # a global body parameter, by ref
    assert "parameters" not in create
    assert create["requestBody"]["content"] == {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}
    assert create["requestBody"]["required"] is True
    replace = paths["/pets/{id}"]["put"]  # consumes "*/*": JSON in practice
    assert list(replace["requestBody"]["content"]) == ["application/json"]
    assert paths["/pets/{id}"]["parameters"][0]["required"] is True  # path-level parameters stay


def test_swagger2_form_data(swagger2: LoadedSpec) -> None:
    upload = swagger2.document["paths"]["/pets/{id}/photo"]["post"]["requestBody"]
    form = upload["content"]["multipart/form-data"]["schema"]
    assert form["properties"]["file"] == {"type": "string", "format": "binary", "description": "the photo"}
    assert form["required"] == ["file"] and upload["required"] is True
    login = swagger2.document["paths"]["/login"]["post"]["requestBody"]["content"]
    media = login["application/x-www-form-urlencoded"]
    assert media["schema"]["properties"]["scopes"]["type"] == "array"
    assert media["encoding"] == {"scopes": {"style": "form", "explode": True}}


def test_swagger2_responses_and_schemas(swagger2: LoadedSpec) -> None:
    document = swagger2.document
    ok = document["paths"]["/pets"]["get"]["responses"]["200"]
    assert set(ok["content"]) == {"application/json", "application/xml"}  # global produces
    assert ok["content"]["application/json"]["example"] == [{"name": "Rex", "kind": "dog"}]
    assert ok["headers"]["X-Total"] == {"description": "how many", "schema": {"type": "integer"}}
    assert document["paths"]["/pets"]["get"]["responses"]["404"] == {"$ref": "#/components/responses/NotFound"}
    pet = document["components"]["schemas"]["Pet"]
    assert pet["discriminator"] == {"propertyName": "kind"}
    assert pet["properties"]["nickname"] == {"type": "string", "nullable": True}
    assert pet["properties"]["owner"] == {"allOf": [{"$ref": "#/components/schemas/Owner"}], "nullable": True}
    assert pet["properties"]["photo"] == {"type": "string", "format": "binary"}


# ----------------------------------------------------------------------------- parsing


def test_yaml_is_read_as_json_data() -> None:
    spec = load_spec(str(SPECS / "yaml-quirks.yaml"))
    operation = spec.document["paths"]["/switch"]["get"]
    assert list(operation["responses"]) == ["200", "on", "404"]  # keys as written, strings
    assert operation["parameters"][0]["name"] == "on"
    assert operation["parameters"][0]["schema"]["enum"] == ["yes", "no", "on", "off", "y", "n"]
    example = operation["responses"]["200"]["content"]["application/json"]["example"]
    assert example == {"created": "2024-01-01", "time": "12:30", "code": 755}  # YAML 1.2, not 1.1
    assert spec.document["info"]["version"] == "1.0"
    assert any(w.location.pointer == "/info/version" for w in spec.warnings)
    schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema["description"] == "merged from the anchor" and schema["properties"] == {"id": {"type": "string"}}
    spec.document["components"]["schemas"]["Thing"]["type"] = "changed"  # the anchor's uses are copies
    assert spec.document["x-base"]["type"] == "object"


def test_format_is_told_by_content(tmp_path: Path) -> None:
    assert load_spec(str(SPECS / "json-content.yaml")).openapi_version == "3.1.0"
    yaml_in_json = write(tmp_path, {"spec.json": (SPECS / "swagger2.yaml").read_text()})
    assert load_spec(str(yaml_in_json)).original_version == "2.0"


def test_broken_yaml_is_located() -> None:
    problem = refused(SPECS / "broken.yaml").problems[0]
    assert (problem.location.line, problem.location.column) == (12, 1)
    assert "line 11, column 12" in problem.message  # where the unclosed sequence began
    assert str(problem).startswith(f"{SPECS / 'broken.yaml'}:12:1: invalid YAML")


def test_broken_json_is_located() -> None:
    problem = refused(SPECS / "broken.json").problems[0]
    assert (problem.location.line, problem.location.column) == (4, 13)
    assert "invalid JSON" in problem.message


def test_text_that_is_not_utf8_is_located(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"openapi: 3.0.3\ninfo:\n  title: caf\xe9\n")
    problem = refused(path).problems[0]
    assert (problem.location.line, problem.location.column) == (3, 13)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "empty"),
        ("  \n\n", "empty"),
        ("- a\n- b\n", "the top level is a list"),
        ("just text\n", "the top level is a string"),
        ("asyncapi: 2.6.0\n", "AsyncAPI"),
        ('{"swaggerVersion": "1.2", "apis": []}', "Swagger 1.x"),
        ("swagger: '3.0'\n", "unsupported version"),
        ("openapi: true\npaths: {}\n", "unsupported version"),
        ("openapi: 3.0.3\npaths: [a]\n", "'paths' must be a mapping"),
        ("openapi: 3.0.3\npaths: {}\n", "no operations"),
        ("openapi: 3.0.3\n? [a, b]\n: c\n", "JSON keys are strings"),
        ("openapi: 3.0.3\nx: !!python/object:os.system {}\n", "invalid YAML"),
        ("openapi: 3.0.3\nx: !!int 12abc\n", "invalid integer"),
        ("[" * 100_000, "nested too deeply"),
    ],
)
def test_unusable_documents_are_refused(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in str(refused(write(tmp_path, {"spec.yaml": text})))


def test_refusals_name_the_reason_and_the_fix() -> None:
    problem = refused(SPECS / "not-openapi.yaml").problems[0]
    assert "no 'openapi' or 'swagger' key" in problem.message and "JSON Schema" in (problem.hint or "")
    problem = refused(SPECS / "openapi4.yaml").problems[0]
    assert "unsupported version: openapi '4.0.0'" in problem.message and problem.location.pointer == "/openapi"
    assert "no operations" in str(refused(SPECS / "no-paths.yaml"))
    assert "file not found" in str(refused(SPECS / "missing.yaml"))
    assert "multi/openapi.yaml" in (refused(SPECS / "multi").problems[0].hint or "")


def test_numbers_for_versions_are_accepted_with_a_warning(tmp_path: Path) -> None:
    spec = load_spec(
        str(write(tmp_path, {"spec.yaml": "openapi: 3.0\ninfo: {title: t, version: '1'}\npaths: {/x: {}}\n"}))
    )
    assert spec.openapi_version == "3.0"
    assert any(w.location.pointer == "/openapi" for w in spec.warnings)
    webhooks = "openapi: 3.1.0\ninfo: {title: t, version: '1'}\n"
    webhooks += "webhooks: {ping: {post: {responses: {'200': {description: ok}}}}}\n"
    assert load_spec(str(write(tmp_path, {"hooks.yaml": webhooks}))).openapi_version == "3.1.0"


@pytest.mark.parametrize(
    "document",
    [
        {"swagger": "2.0", "paths": {"/x": {"get": {"parameters": "oops", "responses": 5}}}},
        {"swagger": "2.0", "paths": {"/x": {"parameters": [{"$ref": "#/parameters/nope"}], "get": None}}},
        {"swagger": "2.0", "paths": {"/x": {"post": {"parameters": [{"in": "formData"}, {"in": "body"}]}}}},
        {
            "swagger": "2.0",
            "definitions": [],
            "parameters": 3,
            "securityDefinitions": {"a": {"type": "x"}},
            "paths": {"/x": {}},
        },
        {
            "swagger": "2.0",
            "paths": {"/x": {"get": {"responses": {"200": {"schema": {"items": [1, {"type": "file"}]}}}}}},
        },
        {"openapi": "3.1.0", "paths": {"x": [], "/y": {"get": "nope"}}},
        {"openapi": "3.1.0", "paths": {"/x": {"get": {"operationId": ["not", "a", "string"], "responses": {}}}}},
    ],
)
def test_malformed_documents_never_raise_anything_else(tmp_path: Path, document: dict[str, Any]) -> None:
    """Loaded as plain JSON data or refused with an InputError; any other exception fails the test."""
    path = write(tmp_path, {"odd.json": json.dumps(document)})
    try:
        result: LoadedSpec | InputError = load_spec(str(path))
    except InputError as exc:
        result = exc
    if isinstance(result, InputError):
        assert result.problems and all(p.message for p in result.problems)
    else:
        json.dumps(result.document, allow_nan=False)


# ----------------------------------------------------------------------------- warnings and strict mode


def test_warnings_are_located() -> None:
    spec = load_spec(str(SPECS / "warnings.yaml"))
    found = {(w.location.pointer, w.message.split(" (")[0]) for w in spec.warnings}
    assert found == {
        ("/info", "no 'info' object"),
        ("/servers", "no servers: the upstream base URL will have to be given when serving"),
        ("/paths/~1b/get/responses", "operation has no responses"),
        ("/paths/~1b/get/operationId", "duplicate operationId 'same'"),
        ("/paths/c", "path 'c' does not start with '/'"),
    }


def test_strict_mode_turns_warnings_into_errors() -> None:
    error = refused(SPECS / "warnings.yaml", strict=True)
    assert "rejected in strict mode" in str(error)
    assert any(p.location.pointer == "/paths/~1b/get/operationId" for p in error.problems)


def test_strict_mode_validates_with_pointers() -> None:
    error = refused(SPECS / "invalid.yaml", strict=True)
    assert error.problems[0].location.pointer == "/paths/~1x/get/parameters/0"
    assert load_spec(str(SPECS / "multi" / "openapi.yaml"), strict=True).warnings == []


def test_strict_mode_locates_errors_inside_schemas(tmp_path: Path) -> None:
    text = (
        (SPECS / "json-content.yaml")
        .read_text()
        .replace('"paths"', '"components": {"schemas": {"A": {"type": "object", "required": ["a", "a"]}}}, "paths"')
    )
    error = refused(write(tmp_path, {"spec.json": text}), strict=True)
    assert error.problems[0].location.pointer == "/components/schemas/A/required"
