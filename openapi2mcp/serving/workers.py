"""`--workers N`: one HTTP port served by N processes on one host (the stateless 2026-07-28 era).

uvicorn's supervisor binds the port once, spawns N workers that accept on that socket (the kernel
spreads connections between them), restarts a worker that dies and stops them all on SIGTERM or
SIGINT. Each worker is a whole server: it imports `worker_app` (uvicorn's import string; a
factory), reads what the parent resolved (the Manifest and the run options, pickled into a file
in a private folder that only this user can read; no secret is in it: the state URL, which may
hold a password, and the signing key reach the workers in their environment) and builds its own
Runtime and app, exactly as one process would (package.http_app_for).

What the workers must share, and how:

* **the signing key** (cursors, confirmations, dry-run tokens, idempotency keys): from
  OPENAPI2MCP_SIGNING_KEY; when it is unset (and there is no --state, which needs it set) `serve`
  makes one for this run and the workers get it in their environment (so a cursor from one
  worker works on the next; not after a restart);
* **the state** (rate limits, single-use confirmations and dry-run tokens, keyed results):
  `--state`, which serve requires when a tool needs it (package._check_workers);
* **nothing else**: `--stateless` is required, because a 2025-11-25 session lives in the worker
  that opened it. The audit log may be one file: each line is one O_APPEND write.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from openapi2mcp.runtime import GuardedHttp
from openapi2mcp.serving.options import RunOptions

if TYPE_CHECKING:
    from openapi2mcp.manifest import Manifest

WORKER_VAR: Final = "_OPENAPI2MCP_WORKER"  # internal: the parent's run file, for each worker (not a setting)


# The request deadlines of httpguard.py in a worker: uvicorn hands its protocol class to the workers by
# import string, so it is this module's class (httptools' protocol when installed, else h11's), given this
# run's deadlines by `worker_app` before it serves.
WorkerHttp: Any = type("WorkerHttp", (GuardedHttp,), {})


def serve_workers(manifest: Manifest, options: RunOptions, env: Mapping[str, str]) -> None:
    """Supervise `options.workers` worker processes on one port until SIGTERM/SIGINT (uvicorn's Multiprocess)."""
    import uvicorn

    from openapi2mcp.runtime import STATE_URL_VAR, uvicorn_settings

    folder = Path(tempfile.mkdtemp(prefix="openapi2mcp-workers-"))  # 0700: this user only
    try:
        run = folder / "run.pickle"
        manifest = manifest if manifest.content_hash else manifest.sealed()  # hashed once, not by every worker
        with run.open("wb") as out:  # the state URL (it may hold a password) goes by environment, not on disk
            pickle.dump((manifest.to_json(), dataclasses.replace(options, state=None)), out)
        # the workers are spawned: they get this process's environment, which must hold `env`
        os.environ.update({k: v for k, v in env.items() if os.environ.get(k) != v})
        if options.state:
            os.environ[STATE_URL_VAR] = options.state
        os.environ[WORKER_VAR] = str(run)
        settings = {**uvicorn_settings(options.http_limits), "http": f"{__name__}:WorkerHttp"}  # a class by name
        uvicorn.run(f"{__name__}:worker_app", factory=True, workers=options.workers, host=options.host,
                    port=options.port, log_level=options.log_level.lower(), lifespan="on",
                    timeout_graceful_shutdown=10, server_header=False, **settings)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def worker_app() -> Any:
    """One worker's app: the Runtime and HTTP app the parent checked, built again in this process."""
    from openapi2mcp.manifest import Manifest
    from openapi2mcp.runtime import configure_logging
    from openapi2mcp.serving.package import http_app_for, runtime_for, tracer_provider

    with open(os.environ[WORKER_VAR], "rb") as run:
        manifest_json, options = pickle.load(run)  # written by serve_workers, in a folder only this user reads
    configure_logging(options.log_level, options.log_format)
    WorkerHttp.header_timeout = options.http_limits.header_timeout
    WorkerHttp.body_timeout = options.http_limits.body_timeout
    env = dict(os.environ)
    manifest = Manifest.from_json(manifest_json)
    provider = tracer_provider(manifest, options, env, "worker")  # each process exports its own spans
    return http_app_for(runtime_for(manifest, options, env, provider), options, env)
