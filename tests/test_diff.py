"""`openapi2mcp diff` over real spec versions: the example specs edited in each breaking way, two
versions of Stripe's spec from the corpus, Manifest pairs; and the spec pin (`spec: {sha256}`):
compile warns with both hashes, `--strict` refuses, lint and diff report it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from openapi2mcp.authoring import DiffReport, ToolDiff, diff_manifests, diff_specs
from openapi2mcp.cli.app import app
from tests.local import EXAMPLES, ROOT

NOTES = EXAMPLES / "notes" / "openapi.yaml"
NOTES_OVERLAY = EXAMPLES / "notes" / "overlay.yaml"
PETS = EXAMPLES / "petstore" / "openapi.yaml"
PETS_OVERLAY = EXAMPLES / "petstore" / "overlay.yaml"


def edited(tmp_path: Path, source: Path, *edits: tuple[str, str], name: str = "new.yaml") -> Path:
    """A copy of a spec with each (old, new) text replaced once; every `old` must be there."""
    text = source.read_text(encoding="utf-8")
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    out = tmp_path / name
    out.write_text(text, encoding="utf-8")
    return out


def tool(report: DiffReport, name: str) -> ToolDiff:
    return next(t for t in report.tools if t.name == name)


def said(t: ToolDiff) -> list[str]:
    return [str(c) for c in t.changes]


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


# ============================================================================ each breaking way


def test_the_same_spec_changes_nothing() -> None:
    report = diff_specs(str(NOTES), str(NOTES), [str(NOTES_OVERLAY)])
    assert report.status == "unchanged" and {t.status for t in report.tools} == {"unchanged"}
    assert report.old.sha256 == report.new.sha256 and report.pin is None


def test_operation_gone(tmp_path: Path) -> None:
    new = edited(tmp_path, NOTES, ("operationId: readNote", "operationId: readNoteV2"))
    report = diff_specs(str(NOTES), str(new), [str(NOTES_OVERLAY)])
    gone = tool(report, "notes_read")
    assert gone.status == "breaking" and gone.location == f"{NOTES_OVERLAY}:41"
    assert "unknown operation 'readNote'; did you mean 'readNoteV2'?" in said(gone)[0]
    assert f"({NOTES_OVERLAY}:46)" in said(gone)[0]  # where the overlay names it
    # the resource on the same operation and the prompt reading it: listed beside the tools
    assert [p.location.pointer for p in report.problems] == ["resources[1](note).operation",
                                                             "prompts[0](study.plan).messages[0].resource"]
    # the tools that do not depend on it are still compared
    assert tool(report, "tasks_list").status == "unchanged" and tool(report, "tasks_create").status == "unchanged"


def test_new_required_argument(tmp_path: Path) -> None:
    new = edited(tmp_path, NOTES, ("""        - name: status
          in: query
          description: Only tasks with this status.""", """        - name: owner
          in: query
          required: true
          description: Whose tasks to list.
          schema: {type: string}
        - name: status
          in: query
          description: Only tasks with this status."""))
    report = diff_specs(str(NOTES), str(new), [str(NOTES_OVERLAY)])
    assert said(tool(report, "tasks_list")) == ["argument 'owner': new required argument"]
    assert tool(report, "tasks_list").status == "breaking"


def test_a_new_optional_argument_is_compatible(tmp_path: Path) -> None:
    new = edited(tmp_path, NOTES, ("""        - name: status
          in: query
          description: Only tasks with this status.""", """        - name: owner
          in: query
          description: Only the tasks of this person.
          schema: {type: string}
        - name: status
          in: query
          description: Only tasks with this status."""))
    report = diff_specs(str(NOTES), str(new), [str(NOTES_OVERLAY)])
    assert report.status == "compatible"
    assert said(tool(report, "tasks_list")) == ["argument 'owner': new optional argument"]
    overlay = ["-O", str(NOTES_OVERLAY)]
    assert invoke("diff", str(NOTES), str(new), *overlay)[0] == 0  # --fail-on breaking (the default)
    assert invoke("diff", str(NOTES), str(new), *overlay, "--fail-on", "any")[0] == 1


def test_type_changed_and_bounds(tmp_path: Path) -> None:
    new = edited(tmp_path, NOTES, ("schema: {type: string, minLength: 2, maxLength: 80}", "schema: {type: integer}"),
                 ("schema: {type: integer, minimum: 1, maximum: 20, default: 5}",
                  "schema: {type: integer, minimum: 2, maximum: 50, default: 5}"),
                 ("title: {type: string, minLength: 1, maxLength: 120", "title: {type: string, minLength: 1, "
                  "maxLength: 200"))
    report = diff_specs(str(NOTES), str(new), [str(NOTES_OVERLAY)])
    search = {str(c): c.severity for c in tool(report, "notes_search").changes}
    assert search == {"argument 'keyword': type string → integer": "breaking",
                      "argument 'keyword': minLength 2 removed": "compatible",
                      "argument 'keyword': maxLength 80 removed": "compatible",
                      "argument 'limit': minimum 1 → 2": "breaking"}  # the overlay's maximum: 20 still holds
    assert tool(report, "notes_search").status == "breaking"
    create = tool(report, "tasks_create")
    assert [(str(c), c.severity) for c in create.changes] == [("argument 'title': maxLength 120 → 200", "compatible")]
    assert create.status == "compatible"


def test_enum_value_removed(tmp_path: Path) -> None:
    new = edited(tmp_path, NOTES, ("schema: {type: string, enum: [open, done]}", "schema: {type: string, enum: "
                                   "[open]}"))
    report = diff_specs(str(NOTES), str(new), [str(NOTES_OVERLAY)])
    assert said(tool(report, "tasks_list")) == ['argument \'status\': enum value removed: "done"']


def test_output_field_removed_or_retyped(tmp_path: Path) -> None:
    new = edited(tmp_path, NOTES, ('        id: {type: string, pattern: "^t-[0-9]+$"}', "        id: {type: integer}"),
                 ("required: [id, title, source_note, due_date, status, created_at]",
                  "required: [id, source_note, due_date, status, created_at]"),
                 ("        title: {type: string}\n        source_note: {type: string}",
                  "        source_note: {type: string}"))
    report = diff_specs(str(NOTES), str(new), [str(NOTES_OVERLAY)])
    listed = said(tool(report, "tasks_list"))
    assert "output field 'items[].title': removed" in listed
    assert "output field 'items[].id': type null | string → integer | null" in listed  # tolerant: nulls kept
    assert tool(report, "tasks_list").status == "breaking"


def test_a_selected_field_gone_is_an_overlay_reference_that_no_longer_resolves(tmp_path: Path) -> None:
    new = edited(tmp_path, NOTES, ("required: [path, title, content, tags, updatedAt",
                                   "required: [path, title, content, updatedAt"),
                 ("        tags: {type: array, items: {type: string}}\n        updatedAt",
                  "        updatedAt"))
    report = diff_specs(str(NOTES), str(new), [str(NOTES_OVERLAY)])
    assert "`select` names field 'tags', which the response schema does not have" in said(tool(report,
                                                                                              "notes_read"))[0]


def test_risk_changed(tmp_path: Path) -> None:
    # getPet becomes a POST: pets_get has no risk of its own, so it follows the method (low -> medium)
    text = PETS.read_text(encoding="utf-8")
    at = text.index("operationId: getPet")
    start = text.rindex("    get:", 0, at)
    new = tmp_path / "pets.yaml"
    new.write_text(text[:start] + "    post:" + text[start + len("    get:"):], encoding="utf-8")
    report = diff_specs(str(PETS), str(new), [str(PETS_OVERLAY)])
    got = tool(report, "pets_get")
    assert got.status == "breaking" and "risk: low → medium" in said(got)
    assert "annotations: no longer read-only (clients that run read-only tools unasked will ask)" in said(got)


def test_an_oai_overlay_that_no_longer_matches(tmp_path: Path) -> None:
    oai = tmp_path / "fix.yaml"
    oai.write_text("overlay: 1.0.0\ninfo: {title: fix, version: '1'}\nactions:\n"
                   "  - target: $.paths['/tasks'].get\n    update: {description: The study tasks, oldest first.}\n",
                   encoding="utf-8")
    new = edited(tmp_path, NOTES, ("  /tasks:\n    get:", "  /study-tasks:\n    get:"))
    report = diff_specs(str(NOTES), str(new), [str(oai), str(NOTES_OVERLAY)])
    assert report.status == "breaking"
    assert any(p.location.file == str(oai) and "matches nothing" in p.message for p in report.problems)
    assert tool(report, "tasks_list").status in ("compatible", "unchanged")  # its operationId is still there


# ============================================================================ two real versions of a third-party spec


def test_two_versions_of_stripe(corpus: Path) -> None:
    old, new = corpus / "stripe" / "spec3.json", corpus / "stripe" / "spec3.yaml"  # 2022 and 2023
    report = diff_specs(str(old), str(new), [str(ROOT / "tests" / "diff" / "stripe.yaml")])
    statuses = {t.name: t.status for t in report.tools}
    assert statuses == {"customers_find": "unchanged", "charges_get": "compatible", "invoices_list": "compatible",
                        "customers_manage": "breaking"}
    manage = said(tool(report, "customers_manage"))
    assert "argument 'trial_end': removed (calls that pass it are refused)" in manage  # Stripe dropped it
    assert "argument 'cash_balance': new optional argument" in manage
    assert any(c.startswith("argument 'tax_id_data[].type': enum values added:") for c in manage)
    assert "argument 'status': maxLength 5000 removed" in said(tool(report, "invoices_list"))


def test_raw_conversions_without_an_overlay(corpus: Path) -> None:
    old, new = corpus / "stripe" / "spec3.json", corpus / "stripe" / "spec3.yaml"
    report = diff_specs(str(old), str(new), [])
    gone = tool(report, "PostAccount")
    assert gone.status == "breaking" and said(gone) == ["tool: gone (its operation PostAccount is gone)"]
    assert report.counts()["breaking"] > 50 and report.counts()["unchanged"] > 10


# ============================================================================ Manifest pairs


def compile_to(tmp_path: Path, name: str, spec: Path, overlay: Path) -> Path:
    out = tmp_path / name
    code, _, err = invoke("compile", str(spec), "-O", str(overlay), "-o", str(out))
    assert code == 0, err
    return out


def test_manifest_pairs(tmp_path: Path) -> None:
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(NOTES_OVERLAY.read_text(encoding="utf-8").replace(
        "    side_effects: [Creates one open study task linked to the note.]",
        "    side_effects: [Creates one open study task linked to the note.]\n    confirmation: required", 1),
        encoding="utf-8")
    before = compile_to(tmp_path, "old.manifest.json", NOTES, NOTES_OVERLAY)
    after = compile_to(tmp_path, "new.manifest.json", NOTES, overlay)
    code, out, _ = invoke("diff", str(before), str(after))
    assert code == 1
    assert "breaking    tasks_create" in out and "    - confirmation: the user is now asked first" in out
    assert "4 unchanged" in out or "unchanged" in out
    code, out, _ = invoke("diff", str(before), str(after), "--json")
    data = json.loads(out)
    assert data["status"] == "breaking" and data["new"]["sha256"].startswith("sha256:")
    created = next(t for t in data["tools"] if t["tool"] == "tasks_create")
    assert {"severity": "breaking", "where": "confirmation", "message": "the user is now asked first"} in \
        created["changes"]
    assert invoke("diff", str(before), str(before))[0] == 0


def test_manifests_read_as_they_are(tmp_path: Path) -> None:
    from openapi2mcp.manifest import Manifest

    a = Manifest.read(compile_to(tmp_path, "a.json", PETS, PETS_OVERLAY))
    b = Manifest.read(compile_to(tmp_path, "b.json", PETS, EXAMPLES / "petstore" / "overlay-tasks.yaml"))
    report = diff_manifests(a, b)
    gone = tool(report, "pets_list")
    assert gone.status == "breaking" and said(gone)[0].startswith("tool: gone")
    assert said(tool(report, "pets_find")) == ["tool: new tool"]


# ============================================================================ the command and bad input


def test_text_report_and_exit_codes(tmp_path: Path) -> None:
    new = edited(tmp_path, NOTES, ("schema: {type: string, enum: [open, done]}", "schema: {type: string, enum: "
                                   "[open]}"))
    code, out, _ = invoke("diff", str(NOTES), str(new), "-O", str(NOTES_OVERLAY))
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith(f"{NOTES} (sha256 ") and "-> " in lines[0]
    assert f"breaking    tasks_list  ({NOTES_OVERLAY}:76)" in lines
    assert lines[-1].startswith("5 tool(s): 1 breaking, 0 compatible, 4 unchanged (unchanged: notes_search, ")
    assert invoke("diff", str(NOTES), str(new), "-O", str(NOTES_OVERLAY), "--fail-on", "never")[0] == 0
    code, out, _ = invoke("diff", str(NOTES), str(new), "-O", str(NOTES_OVERLAY), "--show-unchanged")
    assert "unchanged   notes_read" in out


@pytest.mark.parametrize(("args", "says"), [
    (["diff", "missing.yaml", str(NOTES), "-O", str(NOTES_OVERLAY)], "missing.yaml"),
    (["diff", str(PETS), str(NOTES), "-O", str(NOTES_OVERLAY)], "unknown operation"),  # does not fit OLD
    (["diff", str(NOTES), str(NOTES), "-O", "nope.yaml"], "overlay file not found"),
])
def test_bad_input_exits_2(args: list[str], says: str) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and says in result.stderr and "Traceback" not in result.stderr, result.output


def test_a_manifest_beside_a_spec_is_bad_input(tmp_path: Path) -> None:
    manifest = compile_to(tmp_path, "m.json", NOTES, NOTES_OVERLAY)
    code, _, err = invoke("diff", str(manifest), str(NOTES))
    assert code == 2 and "two specs (with --overlay) or two Manifests" in err
    code, _, err = invoke("diff", str(manifest), str(manifest), "-O", str(NOTES_OVERLAY))
    assert code == 2 and "--overlay does not apply" in err
    broken = tmp_path / "broken.json"
    broken.write_text(manifest.read_text(encoding="utf-8").replace('"tools"', '"tools_"', 1), encoding="utf-8")
    code, _, err = invoke("diff", str(broken), str(manifest))
    assert code == 2 and "not a usable manifest" in err


# ============================================================================ the pin


def pin_line(overlay: Path) -> int:
    return next(n for n, line in enumerate(overlay.read_text(encoding="utf-8").splitlines(), 1)
                if line.startswith("spec:"))


def pinned(tmp_path: Path, sha: str) -> Path:
    overlay = tmp_path / "pinned.yaml"
    overlay.write_text(NOTES_OVERLAY.read_text(encoding="utf-8").replace(
        "openapi2mcp: 1\n", f'openapi2mcp: 1\nspec: {{sha256: "{sha}"}}\n', 1), encoding="utf-8")
    return overlay


def test_the_pin_holds_and_compile_is_quiet(tmp_path: Path) -> None:
    from openapi2mcp.authoring import load_project

    sha = load_project(str(NOTES), [str(NOTES_OVERLAY)]).spec.sha256
    import hashlib

    assert sha == hashlib.sha256(NOTES.read_bytes()).hexdigest()  # one file: `sha256sum spec`
    code, _, err = invoke("compile", str(NOTES), "-O", str(pinned(tmp_path, sha)), "-o", str(tmp_path / "m.json"),
                          "--strict")
    assert code == 0 and "warning" not in err


def test_compile_warns_and_strict_refuses_a_stale_pin(tmp_path: Path) -> None:
    from openapi2mcp.authoring import load_project

    new = edited(tmp_path, NOTES, ("schema: {type: string, enum: [open, done]}", "schema: {type: string, enum: "
                                   "[open]}"))
    old_sha = load_project(str(NOTES), [str(NOTES_OVERLAY)]).spec.sha256
    new_sha = load_project(str(new), [str(NOTES_OVERLAY)]).spec.sha256
    overlay = pinned(tmp_path, old_sha)
    code, _, err = invoke("compile", str(new), "-O", str(overlay), "-o", str(tmp_path / "m.json"))
    assert code == 0
    assert f"{overlay}:{pin_line(overlay)}:" in err and old_sha in err and new_sha in err  # both hashes, located
    assert f'spec: {{sha256: "{new_sha}"}}' in err and "openapi2mcp diff" in err  # and the fix
    code, _, err = invoke("compile", str(new), "-O", str(overlay), "-o", str(tmp_path / "m.json"), "--strict")
    assert code == 2 and "spec changed since the overlay was written" in err
    report = diff_specs(str(NOTES), str(new), [str(overlay)])
    assert report.pin == f'the overlay pins the old spec; after the review set spec: {{sha256: "{new_sha}"}}'
    code, out, _ = invoke("diff", str(NOTES), str(new), "-O", str(overlay))
    assert out.strip().splitlines()[-1].startswith("pin: the overlay pins the old spec")
    assert diff_specs(str(NOTES), str(new), [str(pinned(tmp_path, new_sha))]).pin == \
        "the overlay already pins the new spec"


def test_a_pin_must_be_a_hash(tmp_path: Path) -> None:
    overlay = pinned(tmp_path, "not-a-hash")
    code, _, err = invoke("compile", str(NOTES), "-O", str(overlay), "-o", str(tmp_path / "m.json"))
    assert code == 2 and f"{overlay}:{pin_line(overlay)}:8 at spec.sha256" in err
