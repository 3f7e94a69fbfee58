"""`openapi2mcp build`: the frozen server package, its files, and the package installed and running.

The installed tier builds a wheel of a generated package, installs it into a fresh venv from
local wheels only (`--no-index`; the third-party wheels are downloaded once into
.cache/build-test/ and reused), starts its console script over stdio and over HTTP against the
real notes example upstream, and calls tools with the SDK client. `PYTHONPROFILEIMPORTTIME`
makes the running server log every module it imports: none may be of the compile side.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from typer.testing import CliRunner

from examples import Upstream
from openapi2mcp import __version__
from openapi2mcp.authoring import catalog_files
from openapi2mcp.build import build_package, client_config
from openapi2mcp.build.build import environment_pins, environment_variables
from openapi2mcp.build.runtime_dist import (
    LOADED_BY_LIBRARIES,
    RUNTIME_EXTRAS,
    RUNTIME_MODULES,
    RUNTIME_REQUIRES,
    build_runtime_wheel,
    runtime_extras,
    runtime_files,
    runtime_requires,
    tools_metadata,
    wheel_name,
)
from openapi2mcp.cli.app import app
from openapi2mcp.errors import InputError
from openapi2mcp.manifest import Manifest
from tests.helpers import compile_example
from tests.runtime_upstream import free_port

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "build-test"
TOKEN = "test-token-0123456789abcdef"
LISTED = {"notes_search", "notes_read", "tasks_create", "tasks_list"}
# modules a frozen package must never load: the compile side and the CLI framework
FORBIDDEN = ("prance", "openapi_core", "openapi_spec_validator", "openapi2mcp.compiler", "openapi2mcp.loader",
             "openapi2mcp.overlay", "openapi2mcp.build", "openapi2mcp.cli", "typer")
# distributions a frozen package must not even install: the compile side's libraries and the CLI's
COMPILE_SIDE_DISTRIBUTIONS = ("prance", "openapi-core", "openapi-spec-validator", "ruamel-yaml", "typer",
                              "jsonpath-rfc9535", "openapi2mcp-tools")


@pytest.fixture(scope="module")
def notes() -> Manifest:
    return compile_example("notes").manifest


@pytest.fixture(scope="module")
def catalog(notes: Manifest) -> dict[str, str]:
    """The review catalog `openapi2mcp build SPEC --overlay F` puts into the package (openapi2mcp docs)."""
    return catalog_files(notes, compile_example("notes").unexposed)


@pytest.fixture(scope="module")
def package(notes: Manifest, catalog: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("build") / "notes-mcp"
    build_package(notes, out, lock="pins", catalog=catalog)
    return out


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def tool_path(name: str) -> str | None:
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else shutil.which(name)


# ============================================================================ the files


def test_package_layout_and_provenance(package: Path, notes: Manifest) -> None:
    files = tree(package)
    wheel = f"wheels/openapi2mcp_runtime-{__version__}-py3-none-any.whl"
    assert sorted(files) == sorted([
        ".dockerignore", "Dockerfile", "README.md", "catalog.html", "catalog.md", "pyproject.toml", "requirements.lock",
        "k8s/deployment.yaml", "k8s/service.yaml", "k8s/hpa.yaml", "server.json",
        "src/notes_mcp/__init__.py", "src/notes_mcp/__main__.py", "src/notes_mcp/manifest.json",
        "src/notes_mcp/build.json", wheel,
    ])
    assert Manifest.from_json(files["src/notes_mcp/manifest.json"]) == notes
    info = json.loads(files["src/notes_mcp/build.json"])
    assert info["openapi2mcp"] == __version__
    assert info["manifest"]["content_hash"] == notes.content_hash
    assert [s["sha256"] for s in info["sources"]] == [s.sha256 for s in notes.sources]
    assert info["wheel"]["sha256"] == hashlib.sha256(files[wheel]).hexdigest()
    pyproject = files["pyproject.toml"].decode()
    assert f'dependencies = ["openapi2mcp-runtime=={__version__}"]' in pyproject
    assert 'notes-mcp = "notes_mcp.__main__:main"' in pyproject
    for rel, data in files.items():
        if not rel.endswith(".whl"):
            assert b"\r" not in data, rel
            assert not re.search(rb"20[0-9]{2}-[01][0-9]-[0-3][0-9]T", data), f"{rel} has a timestamp"
        assert (package / rel).stat().st_mode & 0o777 == 0o644


def test_rebuild_is_byte_identical(package: Path, notes: Manifest, catalog: dict[str, str], tmp_path: Path) -> None:
    again = tmp_path / "again"
    build_package(notes, again, lock="pins", catalog=catalog)
    assert tree(again) == tree(package)
    build_package(notes, again, lock="pins", catalog=catalog)  # over an earlier build: replaced, same bytes
    assert tree(again) == tree(package)


def test_the_package_carries_the_review_catalog(package: Path, notes: Manifest) -> None:
    html_text = (package / "catalog.html").read_text(encoding="utf-8")
    markdown = (package / "catalog.md").read_text(encoding="utf-8")
    for tool in notes.tools:
        assert (f'data-tool="{tool.name}"' in html_text) is (tool.risk != "forbidden")
        assert f"`{tool.name}`" in markdown
    assert "<script" not in html_text
    readme = (package / "README.md").read_text(encoding="utf-8")
    assert "[catalog.html](catalog.html)" in readme and "[catalog.md](catalog.md)" in readme


def test_refuses_to_replace_a_foreign_directory(notes: Manifest, tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(InputError, match="not an earlier openapi2mcp build"):
        build_package(notes, tmp_path / "mine", lock="pins")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left behind


def test_environment_variables_come_from_the_manifest(notes: Manifest, package: Path) -> None:
    found = {v.name: v for v in environment_variables(notes)}
    assert list(found) == ["NOTES_API_URL", "NOTES_API_TOKEN"]
    assert found["NOTES_API_URL"].default == "http://127.0.0.1:8701" and not found["NOTES_API_URL"].secret
    assert found["NOTES_API_TOKEN"].secret and not found["NOTES_API_TOKEN"].required
    readme = (package / "README.md").read_text()
    assert "| `NOTES_API_URL` | no | no | `http://127.0.0.1:8701` | upstream base URL |" in readme
    assert "| `NOTES_API_TOKEN` | no | yes | (empty) |" in readme
    assert "notes_search" in readme and "admin_run_command" not in readme  # forbidden tools stay unnamed


def test_lock_pins_the_installed_closure(package: Path) -> None:
    from importlib import metadata

    lines = [ln.split("#")[0].strip() for ln in (package / "requirements.lock").read_text().splitlines()]
    pins = dict(ln.split("==", 1) for ln in lines if ln)
    assert pins["openapi2mcp-runtime"] == __version__
    for name in ("mcp", "pydantic", "httpx2", "uvicorn", "starlette", "jsonschema", "pyyaml"):
        assert pins[name] == metadata.version(name), name
    for name in COMPILE_SIDE_DISTRIBUTIONS:  # the compiler's libraries stay out of a frozen package
        assert name not in pins, name


def test_lock_with_hashes_by_uv(notes: Manifest, tmp_path: Path) -> None:
    if tool_path("uv") is None:
        pytest.skip("uv is not installed (pip install uv): the lock falls back to pins without hashes")
    out = tmp_path / "notes-mcp"
    result = build_package(notes, out, lock="uv")
    text = (out / "requirements.lock").read_text()
    wheel = next((out / "wheels").glob("*.whl"))
    assert result.lock_method.startswith("uv pip compile")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert f"openapi2mcp-runtime=={__version__} \\\n    --hash=sha256:{digest}" in text
    assert not [n for n in COMPILE_SIDE_DISTRIBUTIONS if re.search(rf"^{n}==", text, re.M)]
    blocks = re.split(r"\n(?=[a-z0-9])", text.split("\n", 4)[4])
    assert blocks and all("--hash=sha256:" in b for b in blocks if "==" in b)
    assert json.loads((out / "src/notes_mcp/build.json").read_text())["lock"]["hashes"] is True


def test_dockerfile(package: Path, notes: Manifest) -> None:
    text = (package / "Dockerfile").read_text()
    assert "# syntax=" not in text
    assert re.search(r"^FROM python:3\.12-slim$", text, re.M)
    lines = text.splitlines()
    first = {key: next(i for i, ln in enumerate(lines) if ln.startswith(key)) for key in
             ("COPY requirements.lock", "COPY wheels/", "COPY src/", "USER ", "HEALTHCHECK", "ENTRYPOINT")}
    assert first["COPY requirements.lock"] < first["COPY wheels/"] < first["COPY src/"] < first["USER "]
    assert 'USER 10001:10001' in text and 'ENTRYPOINT ["notes-mcp"]' in text
    assert "OPENAPI2MCP_HOST=0.0.0.0" in text and "/healthz" in lines[first["HEALTHCHECK"] + 1]
    assert f'io.openapi2mcp.manifest="{notes.content_hash}"' in text
    assert f'io.openapi2mcp.version="{__version__}"' in text
    spec = next(s for s in notes.sources if s.kind.startswith("openapi 3"))
    assert f'io.openapi2mcp.spec.sha256="openapi.yaml=sha256:{spec.sha256}"' in text
    assert "org.opencontainers.image.version=" in text
    hadolint = tool_path("hadolint")
    if hadolint:
        done = subprocess.run([hadolint, "--no-color", str(package / "Dockerfile")], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr


def test_kubernetes(package: Path, notes: Manifest) -> None:
    deployment = yaml.safe_load((package / "k8s/deployment.yaml").read_text())
    service = yaml.safe_load((package / "k8s/service.yaml").read_text())
    hpa = yaml.safe_load((package / "k8s/hpa.yaml").read_text())
    assert (deployment["kind"], service["kind"], hpa["kind"]) == ("Deployment", "Service", "HorizontalPodAutoscaler")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["OPENAPI2MCP_SIGNING_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "notes-mcp",
                                                                           "key": "OPENAPI2MCP_SIGNING_KEY"}
    assert env["OPENAPI2MCP_AUTH_TOKENS"]["valueFrom"]["secretKeyRef"]["name"] == "notes-mcp"
    assert env["NOTES_API_TOKEN"]["valueFrom"]["secretKeyRef"]["optional"] is True
    assert env["OPENAPI2MCP_STATELESS"]["value"] == "true"
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert deployment["spec"]["template"]["metadata"]["annotations"]["io.openapi2mcp/manifest"] == notes.content_hash
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"] == service["metadata"]["name"]
    assert "&id" not in (package / "k8s/deployment.yaml").read_text()


# ============================================================================ replicas: Redis


@pytest.fixture(scope="module")
def redis_package(notes: Manifest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("build-redis") / "notes-mcp"
    build_package(notes, out, lock="pins", extras=["redis"], mcp_name="io.github.acme/notes-mcp",
                  image="ghcr.io/acme/notes-mcp", remote_url="https://mcp.example.com/mcp")
    return out


def test_redis_is_an_extra_included_when_asked(package: Path, redis_package: Path) -> None:
    """`--with redis`: the package depends on openapi2mcp-runtime[redis], its lock pins redis-py, k8s/redis/."""
    with zipfile.ZipFile(package / "wheels" / wheel_name()) as wheel:
        meta = wheel.read(f"openapi2mcp_runtime-{__version__}.dist-info/METADATA").decode()
    assert "Provides-Extra: redis" in meta and re.search(r'Requires-Dist: redis>=[0-9.]+; extra == "redis"', meta)
    plain = (package / "pyproject.toml").read_text()
    assert f'dependencies = ["openapi2mcp-runtime=={__version__}"]' in plain
    assert not re.search(r"^redis==", (package / "requirements.lock").read_text(), re.M)
    assert not (package / "k8s" / "redis").exists()
    assert "OPENAPI2MCP_STATE_URL" not in (package / "k8s/deployment.yaml").read_text()
    assert "--with redis" in (package / "README.md").read_text()  # says when Redis is needed, and how

    assert f'dependencies = ["openapi2mcp-runtime[redis]=={__version__}"]' in (redis_package / "pyproject.toml"
                                                                             ).read_text()
    assert re.search(r"^redis==[0-9.]+$", (redis_package / "requirements.lock").read_text(), re.M)
    info = json.loads((redis_package / "src/notes_mcp/build.json").read_text())
    assert info["extras"] == ["redis"] and info["registry"]["name"] == "io.github.acme/notes-mcp"
    deployment = yaml.safe_load((redis_package / "k8s/deployment.yaml").read_text())
    env = {e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["OPENAPI2MCP_STATE_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "notes-mcp", "key": "OPENAPI2MCP_STATE_URL", "optional": True}  # in-cluster or external: a Secret
    redis = {f.name: yaml.safe_load(f.read_text()) for f in sorted((redis_package / "k8s/redis").iterdir())}
    assert sorted(redis) == ["deployment.yaml", "networkpolicy.yaml", "service.yaml"]
    container = redis["deployment.yaml"]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][:2] == ["--requirepass", "$(REDIS_PASSWORD)"]
    assert container["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "notes-mcp", "key": "REDIS_PASSWORD"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert redis["service.yaml"]["metadata"]["name"] == "notes-mcp-redis"
    ingress = redis["networkpolicy.yaml"]["spec"]["ingress"][0]
    assert ingress["from"][0]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "notes-mcp"}
    readme = (redis_package / "README.md").read_text()
    assert "redis://:$REDIS_PASSWORD@notes-mcp-redis:6379/0" in readme and "STATE_UNAVAILABLE" in readme
    assert "kubectl apply -f k8s/redis/" in readme


def test_unknown_extras_and_bad_registry_names_are_refused(notes: Manifest, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--with postgres: not an extra of openapi2mcp-runtime"):
        build_package(notes, tmp_path / "a", lock="pins", extras=["postgres"])
    for bad in ("notes-mcp", "io.github.acme/notes/mcp", "acme/notes"):
        with pytest.raises(InputError, match="is not a registry name"):
            build_package(notes, tmp_path / "a", lock="pins", mcp_name=bad)
    with pytest.raises(InputError, match="is not an image repository"):
        build_package(notes, tmp_path / "a", lock="pins", image="ghcr.io/acme/notes-mcp:1.0")
    with pytest.raises(InputError, match="is not an https:// URL"):
        build_package(notes, tmp_path / "a", lock="pins", remote_url="http://mcp.example.com/mcp")


# ============================================================================ the MCP Registry


SERVER_SCHEMA = Path(__file__).parent / "mcp-server.schema.json"  # the registry's schema 2025-12-11, as published


def registry_problems(document: Any) -> list[str]:
    from jsonschema import Draft7Validator, FormatChecker

    schema = json.loads(SERVER_SCHEMA.read_text())
    assert schema["$id"] == "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
    validator = Draft7Validator(schema, format_checker=FormatChecker())
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]


def test_server_json_is_valid_for_the_registry(package: Path, redis_package: Path, notes: Manifest) -> None:
    for built in (package, redis_package):
        listing = json.loads((built / "server.json").read_text())
        assert registry_problems(listing) == [], built
        assert listing["$schema"] == json.loads(SERVER_SCHEMA.read_text())["$id"]
        assert listing["version"] == "1.0.0" and len(listing["description"]) <= 100
        (image,) = listing["packages"]
        assert image["registryType"] == "oci" and image["transport"] == {"type": "stdio"}
        inputs = {v["name"]: v for v in image["environmentVariables"]}
        assert inputs["OPENAPI2MCP_TRANSPORT"]["value"] == "stdio"
        token = inputs["NOTES_API_TOKEN"]
        assert token["isSecret"] is True and "upstream auth" in token["description"]
        meta = listing["_meta"]["io.modelcontextprotocol.registry/publisher-provided"]
        assert meta == {"tool": "openapi2mcp", "version": __version__, "manifest": notes.content_hash}
    plain = json.loads((package / "server.json").read_text())
    assert plain["name"] == "io.modelcontextprotocol.anonymous/notes-mcp"  # no --mcp-name: the test namespace
    assert plain["packages"][0]["identifier"] == "notes-mcp:1.0.0" and "remotes" not in plain
    assert "anonymous test namespace" in (package / "README.md").read_text()
    listed = json.loads((redis_package / "server.json").read_text())
    assert listed["name"] == "io.github.acme/notes-mcp"
    assert listed["packages"][0]["identifier"] == "ghcr.io/acme/notes-mcp:1.0.0"
    assert listed["remotes"][0]["url"] == "https://mcp.example.com/mcp"
    assert listed["remotes"][0]["headers"][0]["isSecret"] is True
    # the ownership proofs the registry checks: the README's marker and the image's label, the same name
    readme = (redis_package / "README.md").read_text()
    assert re.search(r"^<!-- mcp-name: io\.github\.acme/notes-mcp -->$", readme, re.M)
    assert "mcp-publisher publish" in readme
    dockerfile = (redis_package / "Dockerfile").read_text()
    assert 'io.modelcontextprotocol.server.name="io.github.acme/notes-mcp"' in dockerfile
    # the checker itself catches what the registry would refuse
    assert registry_problems({**listed, "name": "notes-mcp"})
    assert registry_problems({**listed, "description": "x" * 101})


def runtime_wheel_names(package: Path) -> list[str]:
    return zipfile.ZipFile(package / "wheels" / wheel_name()).namelist()


def test_runtime_wheel_ships_the_run_time_modules_only(package: Path) -> None:
    names = runtime_wheel_names(package)
    for needed in ("openapi2mcp/__init__.py", "openapi2mcp/serving/package.py", "openapi2mcp/serving/options.py",
                   "openapi2mcp/runtime/core.py", "openapi2mcp/upstream/client.py", "openapi2mcp/shape/shaper.py",
                   "openapi2mcp/manifest/model.py", "openapi2mcp/result.py", "openapi2mcp/errors.py",
                   "openapi2mcp/testing.py", f"openapi2mcp_runtime-{__version__}.dist-info/RECORD"):
        assert needed in names, needed
    tops = {n.split("/")[1].removesuffix(".py") for n in names if n.startswith("openapi2mcp/")}
    assert tops == {"__init__", *RUNTIME_MODULES}  # no compiler, loader, overlay, build, cli, _examples
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    with zipfile.ZipFile(package / "wheels" / wheel_name()) as wheel:
        for entry in wheel.infolist():  # reproducible: fixed times and modes
            assert entry.date_time == (1980, 1, 1, 0, 0, 0) and entry.external_attr >> 16 == 0o644, entry.filename
        record = wheel.read(f"openapi2mcp_runtime-{__version__}.dist-info/RECORD").decode()
        for line in record.splitlines()[:-1]:
            name, digest, size = line.rsplit(",", 2)
            data = wheel.read(name)
            assert digest == "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert int(size) == len(data)
        assert set(names) == {ln.split(",")[0] for ln in record.splitlines()}


def test_runtime_modules_are_the_forbidden_contracts_sources() -> None:
    """RUNTIME_MODULES and import-linter's list of the run-time side are one list."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    forbidden = next(c for c in config if c["type"] == "forbidden")
    assert {m.removeprefix("openapi2mcp.") for m in forbidden["source_modules"]} == set(RUNTIME_MODULES)


def test_runtime_requires_are_what_the_runtime_imports() -> None:
    """Every third-party import of the run-time modules comes with RUNTIME_REQUIRES, and each is imported."""
    from importlib import metadata

    from packaging.utils import canonicalize_name

    imported: set[str] = set()
    for _, path in runtime_files(ROOT / "openapi2mcp"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module)
    third_party = {m for m in imported if m.split(".")[0] not in {*sys.stdlib_module_names, "openapi2mcp"}}
    owners = metadata.packages_distributions()
    # `opentelemetry` is a namespace shared by several distributions: the API (mcp depends on it),
    # and the SDK and OTLP exporter of the otel extra (runtime/tracing.py loads them when tracing is on)
    in_extra = {"opentelemetry.sdk": "opentelemetry-sdk",
                "opentelemetry.exporter": "opentelemetry-exporter-otlp-proto-http"}
    extra = {d for m in third_party for prefix, d in in_extra.items() if m.startswith(prefix)}
    direct = {"opentelemetry-api" if m.startswith("opentelemetry") else canonicalize_name(owners[m.split(".")[0]][0])
              for m in third_party if not any(m.startswith(p) for p in in_extra)}
    declared = tools_metadata(ROOT / "openapi2mcp")[0]
    requires = runtime_requires(declared)
    extras = runtime_extras(declared)  # optional imports (redis-py for --state, the OTel SDK), each an extra
    assert set(extras) == set(RUNTIME_EXTRAS) and all(extras.values())
    closure, missing = environment_pins([*requires, *(r for reqs in extras.values() for r in reqs)])
    assert not missing
    assert direct <= set(closure), sorted(direct - set(closure))
    base, _ = environment_pins(requires)
    assert not {name for names in RUNTIME_EXTRAS.values() for name in names} & set(base)  # optional, really
    unused = set(RUNTIME_REQUIRES) - direct - set(LOADED_BY_LIBRARIES)
    assert not unused, sorted(unused)  # no dependency for nothing
    assert not set(COMPILE_SIDE_DISTRIBUTIONS) & set(closure)
    assert extra == set(RUNTIME_EXTRAS["otel"])  # the extra is what tracing.py imports, and all of it is used
    assert "opentelemetry-sdk" not in base  # ... and only the extra brings the SDK
    assert extra <= set(closure)


def test_the_otel_extra_in_the_runtime_wheel_and_in_a_package(notes: Manifest, package: Path, tmp_path: Path) -> None:
    """openapi2mcp-runtime declares [otel]; `build --with otel` depends on it and locks the SDK; a plain build not."""
    with zipfile.ZipFile(package / "wheels" / wheel_name()) as wheel:
        meta = wheel.read(f"openapi2mcp_runtime-{__version__}.dist-info/METADATA").decode()
    assert "Provides-Extra: otel" in meta
    for name in RUNTIME_EXTRAS["otel"]:
        assert re.search(rf'^Requires-Dist: {name}>=[0-9.]+; extra == "otel"$', meta, re.M), name
    plain = (package / "requirements.lock").read_text()
    assert "opentelemetry-sdk==" not in plain and "prometheus-client==" in plain
    out = tmp_path / "notes-otel"
    build_package(notes, out, lock="pins", extras=("otel",))
    assert f'dependencies = ["openapi2mcp-runtime[otel]=={__version__}"]' in (out / "pyproject.toml").read_text()
    lock = (out / "requirements.lock").read_text()
    for name in (*RUNTIME_EXTRAS["otel"], "opentelemetry-api", "opentelemetry-proto"):
        assert f"{name}==" in lock, name
    assert json.loads((out / "src/notes_mcp/build.json").read_text())["extras"] == ["otel"]


def test_runtime_wheel_from_an_installed_openapi2mcp_is_the_same(package: Path, tmp_path: Path) -> None:
    """`build` from a pip-installed openapi2mcp-tools: its files and dist-info give the same wheel, byte for byte."""
    isolation = ["--no-build-isolation"] if _has("hatchling") else []
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", *isolation, "--wheel-dir", tmp_path, ROOT],
         timeout=300)
    site = tmp_path / "site"
    with zipfile.ZipFile(next(tmp_path.glob(f"openapi2mcp_tools-{__version__}-*.whl"))) as tools:
        tools.extractall(site)  # what pip install puts in site-packages
    assert (site / "openapi2mcp" / "compiler").is_dir() and not (site / "pyproject.toml").exists()
    made = build_runtime_wheel(tmp_path / "out", source=site / "openapi2mcp")
    assert made.read_bytes() == (package / "wheels" / wheel_name()).read_bytes()


def test_given_runtime_wheel(notes: Manifest, package: Path, catalog: dict[str, str], tmp_path: Path) -> None:
    wrong = tmp_path / f"openapi2mcp_tools-{__version__}-py3-none-any.whl"
    wrong.write_bytes(b"")
    with pytest.raises(InputError, match="is not the openapi2mcp-runtime"):
        build_package(notes, tmp_path / "a", lock="pins", runtime_wheel_file=wrong)
    with pytest.raises(InputError, match="runtime wheel not found"):
        build_package(notes, tmp_path / "a", lock="pins", runtime_wheel_file=tmp_path / wheel_name())
    build_package(notes, tmp_path / "b", lock="pins", runtime_wheel_file=package / "wheels" / wheel_name(),
                  catalog=catalog)
    assert tree(tmp_path / "b") == tree(package)


# ============================================================================ the CLI


def test_cli_build_from_spec_and_from_manifest(tmp_path: Path, package: Path, notes: Manifest) -> None:
    runner = CliRunner()
    spec, overlay = ROOT / "examples/notes/openapi.yaml", ROOT / "examples/notes/overlay.yaml"
    result = runner.invoke(app, ["build", str(spec), "--overlay", str(overlay), "--out", str(tmp_path / "a"),
                                 "--lock", "pins"])
    assert result.exit_code == 0, result.output
    assert tree(tmp_path / "a") == tree(package)
    (tmp_path / "m.json").write_text(notes.to_json())
    result = runner.invoke(app, ["build", "--manifest", str(tmp_path / "m.json"), "--out", str(tmp_path / "b"),
                                 "--name", "Study Notes", "--version", "2.1.0", "--lock", "pins",
                                 "--base-image", "python:3.13-slim"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "b/src/study_notes/manifest.json").read_bytes() == (package / "src/notes_mcp/manifest.json"
                                                                            ).read_bytes()
    assert "FROM python:3.13-slim\n" in (tmp_path / "b/Dockerfile").read_text()
    assert 'version = "2.1.0"' in (tmp_path / "b/pyproject.toml").read_text()
    bad = runner.invoke(app, ["build", str(spec), "--overlay", str(overlay), "--out", str(tmp_path / "c"),
                              "--version", "next"])
    assert bad.exit_code == 2


def test_client_config_snippets(package: Path) -> None:
    claude = client_config("claude", "notes", command=["notes-mcp"], env={"NOTES_API_URL": "http://api"})
    assert claude == {"mcpServers": {"notes": {"command": "notes-mcp", "args": [],
                                               "env": {"NOTES_API_URL": "http://api"}}}}
    vscode = client_config("vscode", "notes", url="https://mcp.example.com/mcp", token_env="NOTES_MCP_TOKEN")
    assert vscode["servers"]["notes"] == {"type": "http", "url": "https://mcp.example.com/mcp",
                                          "headers": {"Authorization": "Bearer ${input:notes-token}"}}
    assert vscode["inputs"][0]["id"] == "notes-token" and vscode["inputs"][0]["password"] is True
    assert client_config("vscode", "n", command=["x", "-v"])["servers"]["n"] == {"type": "stdio", "command": "x",
                                                                                 "args": ["-v"]}
    cursor = client_config("cursor", "notes", url="https://m/mcp", token_env="T")
    assert cursor == {"mcpServers": {"notes": {"url": "https://m/mcp",
                                               "headers": {"Authorization": "Bearer ${env:T}"}}}}
    remote = client_config("claude", "notes", url="https://m/mcp", token_env="T")["mcpServers"]["notes"]
    assert remote["command"] == "npx" and remote["args"][:3] == ["-y", "mcp-remote", "https://m/mcp"]

    runner = CliRunner()
    out = runner.invoke(app, ["config", "vscode", "--package", str(package)])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["servers"]["notes"]["command"] == "notes-mcp"
    out = runner.invoke(app, ["config", "cursor", "--name", "n", "--command", "notes-mcp --log-level debug",
                              "--env", "A=1", "--", "--stateless"])
    assert json.loads(out.stdout) == {"mcpServers": {"n": {"command": "notes-mcp", "args": [
        "--log-level", "debug", "--stateless"], "env": {"A": "1"}}}}
    assert runner.invoke(app, ["config", "claude", "--command", "x"]).exit_code == 2  # no --name
    assert runner.invoke(app, ["config", "claude", "--name", "n"]).exit_code == 2  # neither command nor URL


# ============================================================================ installed and running


def _run(cmd: Sequence[str | Path], **kw: Any) -> None:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


def _wheelhouse(lock: Path) -> Path:
    """The third-party wheels of the lock, downloaded once (the only step that needs an index)."""
    reqs = [ln for ln in lock.read_text().splitlines() if ln and not ln.startswith(("#", "openapi2mcp-"))]
    key = hashlib.sha256("\n".join(reqs).encode()).hexdigest()[:16]
    house = CACHE / f"wheelhouse-{key}"
    if (house / ".complete").exists():
        return house
    CACHE.mkdir(parents=True, exist_ok=True)
    part = CACHE / f".wheelhouse-{key}-{os.getpid()}"
    shutil.rmtree(part, ignore_errors=True)
    (CACHE / f"requirements-{key}.txt").write_text("\n".join(reqs) + "\n")
    _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "--dest", part,
          "--requirement", CACHE / f"requirements-{key}.txt"], timeout=600)
    (part / ".complete").touch()
    with contextlib.suppress(OSError):  # another worker may have finished first
        part.rename(house)
    shutil.rmtree(part, ignore_errors=True)
    return house


@pytest.fixture(scope="module")
def installed(package: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the package's wheel installed from local wheels only; its bin/ folder."""
    return _install(package, tmp_path_factory.mktemp("installed"))


def _install(package: Path, work: Path) -> Path:
    house = _wheelhouse(package / "requirements.lock")
    venv = work / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    pip: list[str | Path] = [sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--quiet",
                             "--no-index"]
    _run([*pip, "--find-links", house, "--find-links", package / "wheels", "--requirement",
          package / "requirements.lock"], timeout=600)
    isolation = ["--no-build-isolation"] if tool_path("hatchling") or _has("hatchling") else []
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", *isolation, "--wheel-dir", work / "dist",
          package], timeout=300)
    wheel = next((work / "dist").glob("notes_mcp-*.whl"))
    _run([*pip, "--no-deps", wheel])
    return venv / "bin"


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _env(**extra: str) -> dict[str, str]:
    """A clean environment: no PYTHONPATH (the checkout must not leak in), no OPENAPI2MCP_*."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "SSL_CERT_FILE", "TMPDIR")
    return {**{k: v for k, v in os.environ.items() if k in keep}, **extra}


def imported_modules(stderr: str) -> set[str]:
    """Module names from PYTHONPROFILEIMPORTTIME lines ("import time: self | cumulative | name")."""
    return {ln.rsplit("|", 1)[1].strip() for ln in stderr.splitlines() if ln.startswith("import time:") and "|" in ln}


def assert_runtime_only(stderr: str) -> None:
    modules = imported_modules(stderr)
    assert "openapi2mcp.runtime.core" in modules, "import profile missing"
    leaked = sorted(m for m in modules if m.split(".")[0] in FORBIDDEN or m in FORBIDDEN
                    or any(m.startswith(f + ".") for f in FORBIDDEN))
    assert not leaked, f"the frozen package imported compile-side modules: {leaked}"


@pytest.mark.slow
def test_installed_package_is_standalone(installed: Path, tmp_path: Path) -> None:
    probe = subprocess.run([installed / "python", "-c", "import openapi2mcp, notes_mcp; "
                            "print(openapi2mcp.__file__); print(notes_mcp.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, env=_env(), check=True)
    for line in probe.stdout.split():
        assert line.startswith(str(installed.parent)), line  # from the venv, not the checkout
    names = subprocess.run([installed / "python", "-c", "import importlib.metadata as m, json; "
                            "print(json.dumps([d.metadata['Name'] for d in m.distributions()]))"],
                           capture_output=True, text=True, cwd=tmp_path, env=_env(), check=True)
    from packaging.utils import canonicalize_name

    present = {canonicalize_name(n) for n in json.loads(names.stdout)}
    assert "openapi2mcp-runtime" in present and "mcp" in present
    assert not present & set(COMPILE_SIDE_DISTRIBUTIONS), sorted(present & set(COMPILE_SIDE_DISTRIBUTIONS))
    compiler = subprocess.run([installed / "python", "-c", "import openapi2mcp; openapi2mcp.load_spec"],
                              capture_output=True, text=True, cwd=tmp_path, env=_env())
    assert compiler.returncode == 1 and "ImportError: openapi2mcp.load_spec is part of the compiler" in compiler.stderr
    assert "install openapi2mcp-tools" in compiler.stderr
    version = subprocess.run([installed / "notes-mcp", "--version"], capture_output=True, text=True, env=_env())
    assert version.returncode == 0 and version.stdout.startswith(f"notes-mcp 1.0.0 (openapi2mcp {__version__}")
    check = subprocess.run([installed / "notes-mcp", "--transport", "http", "--host", "0.0.0.0",
                            "--allowed-host", "mcp.example.com", "--check"], capture_output=True, text=True,
                           env=_env())
    assert check.returncode == 2 and "OPENAPI2MCP_AUTH_TOKENS" in check.stderr  # auth on by default
    check = subprocess.run([installed / "notes-mcp", "--transport", "http", "--host", "0.0.0.0", "--check"],
                           capture_output=True, text=True, env=_env(OPENAPI2MCP_AUTH_TOKENS=TOKEN))
    assert check.returncode == 2 and "OPENAPI2MCP_ALLOWED_HOSTS" in check.stderr
    check = subprocess.run([installed / "notes-mcp", "--check"], capture_output=True, text=True,
                           env=_env(NOTES_API_URL="not a url"))
    assert check.returncode == 2 and "NOTES_API_URL" in check.stderr + check.stdout


@pytest.mark.slow
def test_installed_package_with_redis_reaches_its_state(
    installed: Path, redis_package: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A package built --with redis serves --state; one built without says what to install."""
    from tests.redis_support import PASSWORD, redis_server

    with_redis = _install(redis_package, tmp_path_factory.mktemp("installed-redis"))
    key = {"OPENAPI2MCP_SIGNING_KEY": "k" * 40, "NOTES_API_URL": "http://127.0.0.1:9/api"}
    with redis_server(tmp_path_factory.mktemp("redis")) as redis:
        check = subprocess.run([with_redis / "notes-mcp", "--check"], capture_output=True, text=True,
                               env=_env(OPENAPI2MCP_STATE_URL=redis.url, **key))
        assert check.returncode == 0, check.stderr
        assert f"state redis://127.0.0.1:{redis.port}/0" in check.stderr and PASSWORD not in check.stderr
        plain = subprocess.run([installed / "notes-mcp", "--check"], capture_output=True, text=True,
                               env=_env(OPENAPI2MCP_STATE_URL=redis.url, **key))
        assert plain.returncode == 2 and "openapi2mcp-runtime[redis]" in plain.stderr and "--with redis" in plain.stderr
        assert PASSWORD not in plain.stderr
        redis.stop()
        down = subprocess.run([with_redis / "notes-mcp", "--check"], capture_output=True, text=True,
                              env=_env(OPENAPI2MCP_STATE_URL=redis.url, **key))
        assert down.returncode == 2 and "cannot be reached" in down.stderr and PASSWORD not in down.stderr


RUNTIME_API_SCRIPT = """
import importlib.resources, anyio
from openapi2mcp import Manifest, testing

manifest = Manifest.from_json(importlib.resources.files("notes_mcp").joinpath("manifest.json").read_bytes())

async def main():
    async with testing.connect(manifest) as client:
        found = await client.call_tool("notes_search", {"keyword": "mcp"})
        print(found.structured_content["evidencePaths"][0])

anyio.run(main)
"""


@pytest.mark.slow
def test_runtime_only_install_has_the_testing_api(installed: Path, tmp_path: Path) -> None:
    """openapi2mcp.testing works where only openapi2mcp-runtime is installed (no compiler)."""
    with Upstream.start("notes") as up:
        done = subprocess.run([installed / "python", "-c", RUNTIME_API_SCRIPT], capture_output=True, text=True,
                              cwd=tmp_path, env=_env(NOTES_API_URL=up.base_url), timeout=60)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.strip() == "ai-agent/mcp-basics.md"
        assert up.count("searchNotes") == 1


async def _exercise(client: Client, up: Upstream) -> None:
    listed = await client.list_tools()
    assert {t.name for t in listed.tools} == LISTED
    found = await client.call_tool("notes_search", {"keyword": "mcp"})
    assert not found.is_error, found
    assert found.structured_content is not None
    assert found.structured_content["evidencePaths"][0] == "ai-agent/mcp-basics.md"
    before = up.count("createStudyTask")
    made = await client.call_tool("tasks_create", {"title": f"Review MCP {time.monotonic_ns()}",
                                                   "source_note": "ai-agent/mcp-basics.md"})
    assert not made.is_error, made
    assert up.count("createStudyTask") == before + 1
    up.assert_no_violations()


@pytest.mark.slow
@pytest.mark.anyio
async def test_installed_package_over_stdio(installed: Path, tmp_path: Path) -> None:
    stderr = tmp_path / "stderr.log"
    with Upstream.start("notes") as up, stderr.open("w") as errlog:
        params = StdioServerParameters(
            command=str(installed / "notes-mcp"),
            args=[],
            env=_env(NOTES_API_URL=up.base_url, PYTHONPROFILEIMPORTTIME="1"),
            cwd=str(tmp_path),
        )
        async with Client(stdio_client(params, errlog=errlog)) as client:
            await _exercise(client, up)
    assert_runtime_only(stderr.read_text())


@contextlib.contextmanager
def http_server(command: Path, tmp_path: Path, env: dict[str, str], name: str = "http") -> Iterator[tuple[str, Path]]:
    """Start an installed package's command over HTTP on a free loopback port; yields (base URL, log)."""
    port = free_port()
    log = tmp_path / f"{name}.log"
    with log.open("w") as out:
        proc = subprocess.Popen([command, "--transport", "http", "--port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, env=_env(**env), cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(httpx2.TransportError):
                if httpx2.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the package's HTTP server did not start"
            time.sleep(0.1)
        yield base, log
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.slow
@pytest.mark.anyio
async def test_installed_package_over_http(installed: Path, tmp_path: Path) -> None:
    with Upstream.start("notes") as up, http_server(installed / "notes-mcp", tmp_path, {
        "NOTES_API_URL": up.base_url, "PYTHONPROFILEIMPORTTIME": "1", "OPENAPI2MCP_AUTH_TOKENS": TOKEN,
    }) as (base, log):
        health = httpx2.get(base + "/healthz").json()
        assert health["status"] == "ok" and health["tools"] == len(LISTED)
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        denied = httpx2.post(base + "/mcp", json=init, headers={"Accept": "application/json, text/event-stream"})
        assert denied.status_code == 401 and denied.headers["www-authenticate"].startswith("Bearer")
        wrong = httpx2.post(base + "/mcp", json=init, headers={"Authorization": "Bearer " + TOKEN[::-1]})
        assert wrong.status_code == 401
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http,
            Client(streamable_http_client(base + "/mcp", http_client=http)) as client,
        ):
            await _exercise(client, up)
    assert_runtime_only(log.read_text())


def install_another_package(installed: Path, tmp_path: Path) -> Path:
    """The petstore task-tools package (it paginates), installed beside notes-mcp; its command."""
    out = tmp_path / "petstore-mcp"
    build_package(compile_example("petstore", overlay="overlay-tasks.yaml").manifest, out, lock="pins")
    isolation = ["--no-build-isolation"] if _has("hatchling") else []
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", *isolation, "--wheel-dir", tmp_path, out])
    _run([sys.executable, "-m", "pip", "--python", installed / "python", "install", "--quiet", "--no-index",
          "--no-deps", next(tmp_path.glob("petstore_tasks_mcp-*.whl"))])
    return installed / "petstore-tasks-mcp"


@pytest.mark.slow
@pytest.mark.anyio
async def test_replicas_share_the_signing_key(installed: Path, tmp_path: Path) -> None:
    """Two replicas of one package with one OPENAPI2MCP_SIGNING_KEY: a cursor from one works on the other."""
    command = install_another_package(installed, tmp_path)
    shared = "replica-key-" + "0123456789" * 4
    with Upstream.start("petstore") as up, contextlib.ExitStack() as stack:
        env = {"PETSTORE_URL": up.base_url, "OPENAPI2MCP_STATELESS": "1", "OPENAPI2MCP_AUTH_TOKENS": TOKEN}
        bases = [stack.enter_context(http_server(command, tmp_path, {**env, "OPENAPI2MCP_SIGNING_KEY": key},
                                                 name=f"replica-{i}"))[0]
                 for i, key in enumerate((shared, shared, "another-key-" + "9876543210" * 4))]

        async def call(base: str, arguments: dict[str, Any]) -> Any:
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http,
                Client(streamable_http_client(base + "/mcp", http_client=http)) as client,
            ):
                return await client.call_tool("pages_offset", arguments)

        first = await call(bases[0], {"limit": 2})
        assert not first.is_error and first.structured_content["has_more"] is True, first
        cursor = first.structured_content["next_cursor"]
        second = await call(bases[1], {"cursor": cursor})  # another replica, same key
        assert not second.is_error, second
        seen = [p["id"] for p in first.structured_content["items"] + second.structured_content["items"]]
        assert len(seen) == len(set(seen)) > 2  # it continued where the first page ended
        foreign = await call(bases[2], {"cursor": cursor})  # a server with another key refuses it
        assert foreign.is_error and error_code(foreign) == "CURSOR_INVALID"


def error_code(result: Any) -> str | None:
    """The stable error code of an isError result, wherever this runtime version puts it."""
    for source in (result.structured_content, (result.meta or {}).get("openapi2mcp/error")):
        if isinstance(source, dict) and "code" in source:
            return str(source["code"])
    for block in result.content:
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            return str(json.loads(block.text)["code"])
    return None
