"""The review catalog (`openapi2mcp docs`): HTML rendered by a real headless Chromium, and Markdown.

Chromium is Debian's (`.ci/chromium.sh` installs it; without it these tests skip, and fail in CI).
It loads each catalog from a file, `--dump-dom` gives the document as the browser parsed it, and
`--screenshot` renders it: the tables hold every tool of the Manifest (on the examples and on the
curated GitHub overlay), the forbidden tools and the operations not exposed; untrusted spec text
(`<script>`, an `onerror` image) is shown as text, never run; the output is deterministic.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from openapi2mcp.authoring import build_catalog, render_html, render_markdown
from openapi2mcp.compiler import compile_files
from tests.e2e_support import no_traceback, run_cli
from tests.helpers import compile_text
from tests.local import EXAMPLES, ROOT, corpus_dir

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
IN_CI = bool(os.environ.get("CI"))
CASES = {
    "petstore": (EXAMPLES / "petstore" / "openapi.yaml", EXAMPLES / "petstore" / "overlay.yaml"),
    "petstore-tasks": (EXAMPLES / "petstore" / "openapi.yaml", EXAMPLES / "petstore" / "overlay-tasks.yaml"),
    "notes": (EXAMPLES / "notes" / "openapi.yaml", EXAMPLES / "notes" / "overlay.yaml"),
    "market": (EXAMPLES / "market" / "openapi.yaml", EXAMPLES / "market" / "overlay.yaml"),
    "mailfiles": (EXAMPLES / "mailfiles" / "openapi.yaml", EXAMPLES / "mailfiles" / "overlay.yaml"),
    "github": (Path("github") / "api.github.com.json", ROOT / "overlays" / "github.yaml"),
}
HOSTILE = '<script>alert("x")</script><img src=x onerror="alert(1)"> | **bold** [link](javascript:alert(2))'


@pytest.fixture(scope="module")
def chromium() -> str:
    if CHROMIUM is None:
        message = "Chromium is not installed: run .ci/chromium.sh (Debian's chromium package)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return CHROMIUM


def _flags(profile: Path) -> list[str]:
    return ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
            "--hide-scrollbars", f"--user-data-dir={profile}", "--disable-extensions", "--mute-audio"]


def dump_dom(chromium: str, page: Path, profile: Path) -> str:
    """The document as the browser parsed it (its DOM serialised again)."""
    proc = subprocess.run([chromium, *_flags(profile), "--dump-dom", page.as_uri()], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0 and "</html>" in proc.stdout, proc.stderr[-2000:]
    return proc.stdout


def screenshot(chromium: str, page: Path, png: Path, profile: Path, size: tuple[int, int] = (1280, 2000)) -> None:
    proc = subprocess.run([chromium, *_flags(profile), f"--window-size={size[0]},{size[1]}", f"--screenshot={png}",
                           page.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and png.is_file(), proc.stderr[-2000:]


def png_size(png: Path) -> tuple[int, int]:
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


class Dom(HTMLParser):
    """Counts what the tests look for in the browser's DOM: rows per table, tool sections, elements by tag."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.rows: dict[str, int] = {}
        self.sections = 0
        self.tags: dict[str, int] = {}
        self._table: list[str] = []
        self._body = False
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if tag == "table":
            self._table.append(a.get("id") or "")
        elif tag == "tbody":
            self._body = True
        elif tag == "tr" and self._body and self._table and self._table[-1]:
            self.rows[self._table[-1]] = self.rows.get(self._table[-1], 0) + 1
        elif tag == "section" and "tool" in (a.get("class") or "").split():
            self.sections += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self._table:
            self._table.pop()
        elif tag == "tbody":
            self._body = False


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, int, int, int]]:
    """Each case's catalog.html written by `openapi2mcp docs`: (file, listed tools, forbidden, not exposed)."""
    out = tmp_path_factory.mktemp("catalogs")
    found: dict[str, tuple[Path, int, int, int]] = {}
    corpus = corpus_dir()
    for name, (spec, overlay) in CASES.items():
        if not spec.is_absolute():
            if corpus is None:
                continue
            spec = corpus / spec
        compiled = compile_files(str(spec), [overlay]).compiled  # what `docs SPEC -O F` renders (the CLI: below)
        page = out / f"{name}.html"
        page.write_text(render_html(build_catalog(compiled.manifest, compiled.unexposed)), encoding="utf-8")
        m = compiled.manifest
        found[name] = (page, sum(t.risk != "forbidden" for t in m.tools), sum(t.risk == "forbidden" for t in m.tools),
                       len(compiled.unexposed))
    return found


@pytest.mark.parametrize("case", list(CASES))
def test_the_browser_shows_every_tool(case: str, chromium: str, rendered: dict[str, tuple[Path, int, int, int]],
                                      tmp_path: Path) -> None:
    if case not in rendered:
        pytest.skip("the corpus (tests/corpus) is not unpacked: .ci/fetch-corpus.sh")
    page, listed, forbidden, unexposed = rendered[case]
    dom = Dom(dump_dom(chromium, page, tmp_path / "profile"))
    assert dom.rows["tools"] == listed and dom.sections == listed
    assert dom.rows.get("forbidden", 0) == forbidden
    assert dom.rows.get("unexposed", 0) == unexposed
    assert dom.tags.get("script", 0) == 0 and dom.tags.get("link", 0) == 0 and dom.tags.get("img", 0) == 0
    if case in ("github", "petstore-tasks"):  # a picture of it, to look at (kept in the test's tmp dir)
        png = tmp_path / f"{case}.png"
        screenshot(chromium, page, png, tmp_path / "profile")
        assert png_size(png) == (1280, 2000)
        assert png.stat().st_size > 50_000  # a rendered page, not a blank one


def test_untrusted_text_is_shown_never_run(chromium: str, tmp_path: Path) -> None:
    spec = f"""
        openapi: 3.0.3
        info: {{title: 'Hostile {HOSTILE}', version: '1'}}
        servers: [{{url: 'http://127.0.0.1:9'}}]
        paths:
          /things/{{id}}:
            get:
              operationId: getThing
              summary: '{HOSTILE}'
              parameters:
                - name: id
                  in: path
                  required: true
                  description: '{HOSTILE}'
                  schema: {{type: string, enum: ['{HOSTILE}', plain]}}
              responses: {{'200': {{description: ok}}}}
          /other:
            get:
              operationId: other
              summary: '{HOSTILE}'
              responses: {{'200': {{description: ok}}}}
    """
    overlay = f"""
        openapi2mcp: 1
        tools:
          - name: thing_get
            operation: getThing
            description: '{HOSTILE}'
            side_effects: ['{HOSTILE}']
            category: '{HOSTILE}'
    """
    compiled = compile_text(tmp_path, spec, overlay)
    catalog = build_catalog(compiled.manifest, compiled.unexposed)
    page = tmp_path / "hostile.html"
    page.write_text(render_html(catalog), encoding="utf-8")
    text = page.read_text(encoding="utf-8")
    assert "<script" not in text and "<img" not in text and "&lt;script&gt;" in text
    dom_text = dump_dom(chromium, page, tmp_path / "profile")
    dom = Dom(dom_text)
    assert dom.tags.get("script", 0) == 0 and dom.tags.get("img", 0) == 0  # the browser saw text, not elements
    assert dom.rows["tools"] == 1 and dom.rows["unexposed"] == 1
    assert "&lt;script&gt;alert(\"x\")&lt;/script&gt;" in dom_text  # shown to the reader as written
    markdown = render_markdown(catalog)
    assert "<script" not in markdown and "<img" not in markdown
    assert "[link](javascript:" not in markdown and "\\[link\\](javascript:" in markdown  # text, not a link
    assert "&lt;script&gt;" in markdown and "\\| \\*\\*bold\\*\\*" in markdown  # a pipe cannot end a table cell


def test_the_catalog_is_deterministic(tmp_path: Path) -> None:
    spec, overlay = CASES["petstore-tasks"]
    compiled = compile_files(str(spec), [overlay]).compiled
    for ext, render in (("html", render_html), ("md", render_markdown)):
        path = tmp_path / f"catalog.{ext}"
        proc = run_cli("docs", str(spec), "-O", str(overlay), "-o", str(path))
        assert proc.returncode == 0, proc.stderr
        assert "wrote" in proc.stderr and "8 operations not exposed" in proc.stderr
        again = render(build_catalog(compiled.manifest, compiled.unexposed))  # another process, the same bytes
        assert path.read_text(encoding="utf-8") == again
    markdown = (tmp_path / "catalog.md").read_text(encoding="utf-8")
    assert markdown.startswith("# Pet store (task tools): what an agent may do\n")
    assert "| high | 1 |" in markdown and "`pets_manage`" in markdown and "action: delete" in markdown
    assert "`DELETE /pets/{petId}`" in markdown


def test_from_a_manifest_the_unexposed_operations_are_not_known(tmp_path: Path) -> None:
    spec, overlay = CASES["notes"]
    manifest = tmp_path / "notes.manifest.json"
    assert run_cli("compile", str(spec), "-O", str(overlay), "-o", str(manifest)).returncode == 0
    proc = run_cli("docs", "--manifest", str(manifest), "--format", "md")
    assert proc.returncode == 0, proc.stderr
    assert "Not known: a Manifest records only what it serves" in proc.stdout
    assert "`admin_run_command`" in proc.stdout  # the forbidden tool is in the Manifest, so it is listed


def test_bad_input_exits_2_without_a_traceback(tmp_path: Path) -> None:
    spec, overlay = CASES["notes"]
    for args, said in [
        ((str(spec), "-O", str(overlay), "-o", str(tmp_path / "catalog.pdf")), "cannot tell the catalog's format"),
        ((str(spec),), "no tool overlay given"),
        (("--manifest", str(tmp_path / "missing.json")), "manifest not found"),
        ((str(spec), "-O", str(overlay), "--manifest", str(tmp_path / "m.json")), "not both"),
        ((str(tmp_path / "nope.yaml"), "-O", str(overlay)), "nope.yaml"),
    ]:
        proc = run_cli("docs", *args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert said in proc.stderr, (args, proc.stderr)
        no_traceback(proc.stderr)
    helped = run_cli("docs", "--help")
    assert helped.returncode == 0 and "openapi2mcp docs openapi.yaml -O overlay.yaml -o catalog.html" in helped.stdout
