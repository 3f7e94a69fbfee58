"""`openapi2mcp serve SPEC --overlay F --reload`: recompile on every saved edit, keep the last good version.

The loop runs beside the server (serving.serve's `beside`) with its Runtime:

    watch the folders of the spec, the overlays and every file the spec includes (watchfiles)
      -> a batch of changes to those files (debounced: quiet for `step` ms, at most `debounce` ms)
      -> rebuild in a worker thread (the server keeps answering while a big spec compiles)
           InputError / ConfigError -> print it as `compile` does; the last good version keeps serving
      -> same content hash: nothing to do
      -> Runtime.reload(manifest) -> Runtime.announce(changed lists) (runtime/changes.py)

Folders, not files, are watched: editors save by writing a new file and renaming it over the old
one, which ends a watch on the file itself. Only changes to the files the last good version was
made from (and to the spec and overlays themselves) count. watchfiles is what `uvicorn --reload`
uses (Rust `notify`: inotify, FSEvents, ...); `WATCHFILES_FORCE_POLLING=1` makes it poll, for
network and container file systems that send no events.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, TextIO

import anyio
import anyio.to_thread

from openapi2mcp.errors import InputError

if TYPE_CHECKING:
    from openapi2mcp.manifest import Manifest
    from openapi2mcp.runtime import Runtime

DEBOUNCE_MS: Final = 1600  # at most this long a batch of changes is gathered
STEP_MS: Final = 100  # a batch ends after this long without a change (an editor's write and rename are one)

Rebuild = Callable[[], tuple["Manifest", Sequence[str]]]
"""Compile the spec and overlays as `serve` did at start-up: the Manifest and the local files it was made from."""


class Reloader:
    """The reload loop of one `serve --reload`: what to rebuild, which files to watch, what to print."""

    def __init__(self, rebuild: Rebuild, *, prog: str = "openapi2mcp", out: TextIO | None = None,
                 debounce_ms: int = DEBOUNCE_MS, step_ms: int = STEP_MS) -> None:
        self.rebuild = rebuild
        self.prog = prog
        self.out = out
        self.debounce_ms = debounce_ms
        self.step_ms = step_ms
        self.files: frozenset[str] = frozenset()
        self.content_hash: str | None = None

    def first(self) -> Manifest:
        """The version served at start-up (an InputError here stops `serve`, as without --reload)."""
        manifest, files = self.rebuild()
        self._adopt(manifest, files)
        return manifest

    def _adopt(self, manifest: Manifest, files: Iterable[str]) -> None:
        self.files = frozenset(os.path.realpath(f) for f in files)
        self.content_hash = manifest.content_hash

    def _say(self, text: str) -> None:
        stream = self.out or sys.stderr
        stream.write(f"{self.prog}: {text}\n")
        stream.flush()

    def folders(self) -> list[str]:
        return sorted({os.path.dirname(f) for f in self.files if os.path.isdir(os.path.dirname(f))})

    async def run(self, runtime: Runtime) -> None:
        """Watch and reload until cancelled (when the server stops)."""
        import watchfiles

        self._say(f"--reload: watching {len(self.files)} file(s) for changes: "
                  + ", ".join(_short(f) for f in sorted(self.files)))
        while True:
            folders = self.folders()
            if not folders:  # nothing local to watch (a spec by URL and no overlay on disk)
                self._say("--reload: no local file to watch; serving as without --reload")
                await anyio.sleep_forever()
            watched = self.files
            async for batch in watchfiles.awatch(
                *folders, watch_filter=lambda _change, path: os.path.realpath(path) in self.files,
                debounce=self.debounce_ms, step=self.step_ms, recursive=False,
            ):
                changed = sorted({path for _, path in batch})
                await self.reload(runtime, changed)
                if self.files != watched:  # the spec now includes other files: watch their folders
                    break

    async def reload(self, runtime: Runtime, changed: Sequence[str] = ()) -> bool:
        """Rebuild and swap; False (and the error printed) when the edit cannot be served."""
        from openapi2mcp.upstream import ConfigError

        what = ", ".join(_short(f) for f in changed) or "a file"
        try:
            manifest, files = await anyio.to_thread.run_sync(self.rebuild)
            if manifest.content_hash == self.content_hash:
                self._adopt(manifest, files)
                self._say(f"{what} changed; the tools are the same (manifest {_hash(manifest)})")
                return True
            lists = runtime.reload(manifest)
        except InputError as e:
            return self._failed(f"error: {e.render()}")
        except ConfigError as e:
            return self._failed(f"error: {e}")
        except Exception as e:  # a bug: say so, and keep serving what works
            detail = traceback.format_exc() if os.environ.get("OPENAPI2MCP_DEBUG") else f"{type(e).__name__}: {e}"
            return self._failed(f"internal error while reloading ({detail}); this is a bug in openapi2mcp, "
                                "please report it (OPENAPI2MCP_DEBUG=1 prints the traceback)")
        self._adopt(manifest, files)
        told = await runtime.announce(lists)
        news = (", ".join(f"{kind} changed" for kind in sorted(lists)) or "the lists are the same") + (
            f"; told {told} session(s)" if told else "")
        self._say(f"reloaded ({what} changed): {len(runtime.tool_names)} tool(s), {news} "
                  f"(manifest {_hash(manifest)})")
        return True

    def _failed(self, message: str) -> bool:
        self._say(message)
        self._say("still serving the last good version; fix the file and save it again")
        return False


def _short(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return relative if not relative.startswith("..") else str(Path(path))


def _hash(manifest: Manifest) -> str:
    return (manifest.content_hash or "unsealed")[:19]
