"""Loading a frozen Manifest: `Manifest.read` (parse, validate, hash check) vs the floor `json.loads` (issue 15).

    python benchmarks/manifest_load.py [--spec github --spec graph] [--repeat 5] [--markdown] [--json FILE]

What a frozen package and `serve --manifest` do first. The Manifests are every operation of a
spec (`openapi2mcp compile SPEC --all-operations`, kept expanded in .cache/bench/manifests/KEY-all.json,
made once), then written again by the checkout measured (`to_json`: its file hash, its shared
subtrees) under manifests/written/WRITER/, so each side reads the file its own writer makes:
GitHub (1,223 tools) and Microsoft Graph v1.0 (11,422 tools, fetched once from APIs-guru's npm
package), and `--spec 10k`: 10,000 tools, GitHub's cycled with new names. The 10k file flatters a
writer that shares repeated subtrees (its tools repeat 8 times); Graph is the real big API. Each
run is a fresh process:

  ours   import openapi2mcp.manifest, then Manifest.read(FILE): json parse, pydantic
         validation, the hash check (the file hash: one sha256 over the bytes)
  floor  json.loads of the same bytes, the garbage collector off: the least any reader does

`--baseline DIR` adds `ours` once more over another checkout's openapi2mcp (`git worktree add DIR
COMMIT`), interleaved, on the same files: before and after in one run.

Reported: the in-process seconds of the load (and of the import), the child's CPU time and peak
RSS (os.wait4) and the ratio to the floor. Sides alternate; medians of --repeat runs.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `benchmarks` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _common as c

MANIFESTS = c.CACHE / "manifests"  # the sources, expanded (every writer's reader takes them), made once ...
# ... and each written again by the checkout measured (`Manifest.read(...).to_json()`), under a folder per
# writer (a digest of its manifest/ code): each side reads the file its own writer makes
WRITTEN = MANIFESTS / "written"

OURS = """
import json, sys, time
t0 = time.perf_counter(); c0 = time.process_time()
from openapi2mcp.manifest import Manifest
t1 = time.perf_counter(); c1 = time.process_time()
m = Manifest.read(sys.argv[1])
t2 = time.perf_counter(); c2 = time.process_time()
assert m.content_hash and m.tools
json.dump({"tools": len(m.tools), "import": t1 - t0, "load": t2 - t1, "load_cpu": c2 - c1},
          open(sys.argv[sys.argv.index("--result") + 1], "w"))
"""

FLOOR = """
import gc, json, sys, time
gc.disable()  # the least: no collector passes over the growing tree either (ours pauses it too)
data = open(sys.argv[1], "rb").read()
t1 = time.perf_counter(); c1 = time.process_time()
doc = json.loads(data)
t2 = time.perf_counter(); c2 = time.process_time()
json.dump({"tools": len(doc["tools"]), "import": 0.0, "load": t2 - t1, "load_cpu": c2 - c1},
          open(sys.argv[sys.argv.index("--result") + 1], "w"))
"""

SIDES = {"ours": ("Manifest.read (parse + validate + hash check)", OURS), "floor": ("floor: json.loads", FLOOR)}


REWRITE = """
import sys
from pathlib import Path
from openapi2mcp.manifest import Manifest
Path(sys.argv[2]).write_bytes(Manifest.read(sys.argv[1]).to_json().encode())
"""

# A file every reader takes: the payload expanded, the canonical content_hash, no file hash or shared subtrees.
EXPANDED = """
import json, sys
from openapi2mcp.manifest import Manifest
m = Manifest.read(sys.argv[1])
if len(sys.argv) > 3:  # --cycle N: N tools cycled from the Manifest's, with new names
    n = int(sys.argv[3])
    tools = [t.model_copy(update={"name": f"{t.name}_{i}"}) for i in range(n) for t in [m.tools[i % len(m.tools)]]]
    m = m.model_copy(update={"tools": tools, "content_hash": ""}).sealed()
data = {**m.payload(), "content_hash": m.content_hash}
open(sys.argv[2], "w").write(json.dumps(data, indent=1, ensure_ascii=False) + "\\n")
"""


def writer_tag(root: Path) -> str:
    """A digest of a checkout's Manifest writer (its manifest/ code): one folder of written files per writer."""
    digest = hashlib.sha256()
    for path in sorted((root / "openapi2mcp" / "manifest").glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def written(source: Path, timeout: float, env: dict[str, str]) -> Path:
    """`source` as the checkout on `env`'s PYTHONPATH writes it (made once per writer)."""
    path = WRITTEN / writer_tag(Path(env["PYTHONPATH"].split(os.pathsep)[0])) / source.name
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        run = c.run_child([sys.executable, "-P", "-c", REWRITE, str(source), str(path)], timeout=timeout, env=env)
        if not run.ok:
            raise RuntimeError(f"writing {path} failed: {run.error}")
    return path


def manifest_for(key: str, spec: Path, timeout: float) -> Path:
    """KEY-all.json: every operation of the spec (`openapi2mcp compile --all-operations`), expanded, made once."""
    path = MANIFESTS / f"{key}-all.json"
    if path.is_file():
        return path
    MANIFESTS.mkdir(parents=True, exist_ok=True)
    c.progress(f"{key}: compiling every operation into {path} (once) ...")
    compiled = path.with_suffix(".compiled.json")
    run = c.run_child([sys.executable, "-m", "openapi2mcp", "compile", str(spec), "--all-operations", "-o",
                       str(compiled)], timeout=timeout, env=c.our_env())
    if run.ok:
        run = c.run_child([sys.executable, "-c", EXPANDED, str(compiled), str(path)], timeout=timeout, env=c.our_env())
    compiled.unlink(missing_ok=True)
    if not run.ok:
        raise RuntimeError(f"compiling {key} failed: {run.error}")
    return path


def synthetic(timeout: float) -> Path:
    """10k-all.json: 10,000 tools cycled from GitHub's every-operation Manifest (made once)."""
    path = MANIFESTS / "10k-all.json"
    if not path.is_file():
        github = dict(c.pick_specs(["github"], False)).get(next(s for s in c.SPECS if s.key == "github"))
        if github is None:
            raise RuntimeError("the 10k Manifest is made from GitHub's spec, which is missing")
        run = c.run_child([sys.executable, "-c", EXPANDED, str(manifest_for("github", github, timeout)), str(path),
                           "10000"], timeout=timeout, env=c.our_env())
        if not run.ok:
            raise RuntimeError(f"making the 10k Manifest failed: {run.error}")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", action="append", metavar="NAME", help="github, 10k, graph (default all three)")
    parser.add_argument("--baseline", metavar="DIR", help="also measure `ours` with the openapi2mcp of this checkout")
    c.common_options(parser, repeat=5)
    args = parser.parse_args(argv)
    sides = dict(SIDES)
    envs = {key: c.our_env() for key in SIDES}
    if args.baseline:
        sides["before"] = (f"Manifest.read, {Path(args.baseline).name}", OURS)
        envs["before"] = {**c.our_env(), "PYTHONPATH": str(Path(args.baseline).resolve())}
    c.check_quiet()
    wanted = args.spec or ["github", "10k", "graph"]
    specs: list[tuple[c.Spec, Path | None]] = []
    for key in wanted:
        if key == "10k":
            specs.append((c.Spec("10k", "10,000 tools (GitHub's, cycled)", ""), None))
        else:
            specs += c.pick_specs([key], False)
    rows, raw = [], {}
    for spec, path in specs:
        source = synthetic(args.timeout) if path is None else manifest_for(spec.key, path, args.timeout)
        files = {key: written(source, args.timeout, envs[key]) for key in sides if key != "floor"}
        files["floor"] = files["ours"]  # the floor parses the bytes ours reads
        for file in files.values():
            file.read_bytes()  # into the page cache
        runs: dict[str, list[c.Run]] = {k: [] for k in sides}
        for i in range(args.repeat):
            for key, (_label, code) in sides.items():
                run = c.run_child([sys.executable, "-P", "-c", code, str(files[key])], timeout=args.timeout,
                                  env=envs[key], result_file=True)
                runs[key].append(run)
                status = "ok" if run.ok else f"FAILED: {run.error}"
                load = run.result.get("load", float("nan"))
                c.progress(f"  {spec.key} {key:<6} #{i + 1}: load {load:6.2f} s, process {run.cpu:6.2f} s CPU, "
                           f"{run.rss_mb:6.0f} MB  {status}")
        raw[spec.key] = {k: [r.__dict__ for r in v] for k, v in runs.items()}
        cells = {k: [r for r in v if r.ok] for k, v in runs.items()}
        floor_load = c.median([r.result["load"] for r in cells["floor"]]) if cells["floor"] else None
        floor_cpu = c.median([r.result["load_cpu"] for r in cells["floor"]]) if cells["floor"] else None
        for key, (label, _) in sides.items():
            ok = cells[key]
            if not ok:
                rows.append([spec.label, label, "", "", "", "", "", "", "", runs[key][0].error or "fails"])
                continue
            load = c.median([r.result["load"] for r in ok])
            load_cpu = c.median([r.result["load_cpu"] for r in ok])
            ours = key != "floor"
            rows.append([spec.label, label, ok[0].result["tools"], c.fmt_bytes(files[key].stat().st_size),
                         c.fmt_s(c.median([r.result["import"] for r in ok])) if ours else "",
                         c.fmt_s(load), c.fmt_s(load_cpu), c.fmt_mb(c.median([r.rss_mb for r in ok])),
                         _pair(c.ratio(load, floor_load), c.ratio(load_cpu, floor_cpu)) if ours and floor_load else "",
                         "ok"])
    print(f"\nManifest load, {c.machine_line()}\nmedian of {args.repeat} fresh processes; load = seconds inside "
          "the process (wall / CPU); peak RSS = the process's ru_maxrss; floor ratio = ours / json.loads\n")
    print(c.table(["spec", "side", "tools", "manifest", "import", "load", "load CPU", "peak RSS",
                   "floor ratio (wall / CPU)", "status"], rows, markdown=args.markdown))
    c.write_json(args.json, {"machine": c.machine_line(), "repeat": args.repeat, "results": raw})
    return 0


def _pair(a: str, b: str) -> str:
    return f"{a} / {b}"


if __name__ == "__main__":
    sys.exit(main())
