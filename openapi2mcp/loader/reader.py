"""Reading a spec and the files and URLs its `$ref`s point to, under the policy for untrusted input.

`Reader` reads every resource (an absolute real path, or a URL) at most once, parses it with
parse.py and keeps its bytes for the digest. It decides which refs may be followed:

* a remote ref (and every redirect while fetching one) goes only to the spec's own origin
  (scheme, host and port), or to an origin `allow_remote_refs` opens (`Allowed`);
* the spec's own URL may redirect within its origin, from http to https on its host, or to an
  allowed origin; never from https down to http;
* a file ref may not leave the root spec's folder (`..`, absolute paths, `file:` URLs,
  symlinks), unless `ref_root` widens it; a spec loaded from a URL cannot read local files;
* file sizes, the total size, the number of files and redirects are capped, and all network
  reads of one load share one deadline, checked between the chunks of a body too (a server
  that drips one byte a second keeps every single read short).

URLs are fetched with httpx2 (the HTTP client the rest of the project and the MCP SDK use).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

from openapi2mcp import __version__
from openapi2mcp.errors import InputError, Location, Problem
from openapi2mcp.loader.parse import parse_document

MAX_FILE_BYTES = 50 * 1024 * 1024  # one file or URL
MAX_TOTAL_BYTES = 200 * 1024 * 1024  # all files of one spec
MAX_FILES = 10_000  # DigitalOcean has 2,850
MAX_REDIRECTS = 5
FETCH_DEADLINE = 120.0  # seconds for all network reads of one load (the spec and its remote refs)
Where = Location | Callable[[], Location]  # where a ref stands; built only for an error message


def is_url(text: str) -> bool:
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
class Allowed:
    """The remote origins `allow_remote_refs` opens, besides the spec's own origin."""

    everything: bool = False
    entries: tuple[tuple[str | None, str, int | None], ...] = ()  # scheme/port None: any

    @classmethod
    def parse(cls, given: bool | str | Sequence[str]) -> Allowed:
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


class Reader:
    """Reads the root and included files once each, and decides which refs may be followed."""

    def __init__(self, allowed: Allowed, timeout: float, ref_root: str | None, deadline: float) -> None:
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

    def read_root(self, source: str) -> tuple[Any, str | bytes]:
        self.root_display = source
        if is_url(source):
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
        return parse_document(data, source, content_type)

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

    def resolve(self, base: str, ref: str, site: Where) -> tuple[str, str]:
        """The resource (absolute path or URL) and fragment a `$ref` in `base` points to."""
        target, _, fragment = ref.partition("#")
        if not target:
            return base, fragment
        try:
            parts = urlsplit(target)
        except ValueError as exc:
            raise ref_error(f"$ref {ref!r} is not a valid URL: {exc}", site) from exc
        scheme = parts.scheme.lower()
        if scheme in ("http", "https") or (is_url(base) and not scheme):
            url = urljoin(base, target) if is_url(base) else target
            self._check_origin(url, ref, site)
            return url, fragment
        if len(scheme) > 1 and scheme != "file":  # one letter: a Windows drive, an absolute path
            raise ref_error(f"$ref {ref!r} uses the unsupported scheme {scheme!r}", site)
        if is_url(base):
            raise ref_error(
                f"$ref {ref!r} in a remote spec points to a local file",
                site,
                hint="a spec loaded from a URL may only refer to URLs; download all its files to load it locally",
            )
        return self._local_target(base, ref, unquote(parts.path), scheme, site), fragment

    def _local_target(self, base: str, ref: str, path: str, scheme: str, site: Where) -> str:
        if scheme or os.path.isabs(path):
            raise ref_error(
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
            raise ref_error(
                f"$ref {ref!r} leaves the folder {root_dir}{how}",
                site,
                hint="file refs may only reach the root spec's folder and below (a spec is untrusted input); "
                f"if you trust this spec, widen that with --ref-root {os.path.commonpath([real, root_dir])} "
                "(ref_root=...)",
            )
        self._inside.add(target)
        return target

    def _check_origin(self, url: str, ref: str, site: Where) -> None:
        """A remote ref (or a redirect while fetching one) may reach the spec's own origin, or an allowed one."""
        try:
            origin = _origin(url)
        except ValueError as exc:
            raise ref_error(f"$ref {ref!r} leads to the invalid URL {url!r}: {exc}", site) from None
        if origin[0] not in ("http", "https"):
            raise ref_error(f"$ref {ref!r} redirects to the unsupported URL {url!r}", site)
        if origin in self._own or self._allowed.allows(origin):
            return
        own = " or ".join(sorted(_show_origin(o) for o in self._own))
        shown = _show_origin(origin)
        raise ref_error(
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

    def load(self, resource: str, site: Where) -> Any:
        """The parsed content of an included file or URL (each read and parsed once)."""
        if resource in self._parsed:
            return self._parsed[resource]
        if len(self._data) >= MAX_FILES:
            raise ref_error(f"the spec refers to more than {MAX_FILES} files", site)
        display = self.display(resource)
        content_type = None
        if is_url(resource):
            _, data, content_type = self._get(resource, display, check=lambda u: self._check_origin(u, display, site))
        else:
            data = self._read_file(resource, display, site)
        self._data[resource] = data
        self._parsed[resource] = parse_document(data, display, content_type)[0]
        return self._parsed[resource]

    def display(self, resource: str) -> str:
        """How to name a resource to the user: as given for the root, relative for its files."""
        if resource not in self._displays:
            if resource == self.root:
                self._displays[resource] = self.root_display
            elif self.root_dir and not is_url(resource):
                self._displays[resource] = os.path.relpath(resource, self.root_dir)
            else:
                self._displays[resource] = resource
        return self._displays[resource]

    def digest(self) -> str:
        sha = hashlib.sha256(self._data[self.root])
        for resource in sorted((r for r in self._data if r != self.root), key=self.display):
            sha.update(self._data[resource])
        return sha.hexdigest()

    def files(self) -> tuple[str, ...]:
        """The local files read (absolute real paths), the root first: what `serve --reload` watches."""
        local = [r for r in self._data if not is_url(r)]
        return tuple(sorted(local, key=lambda r: (r != self.root, r)))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    # -- the two transports

    def _read_file(self, path: str, display: str, site: Where | None) -> bytes:
        try:
            size = os.stat(path).st_size
            self._count(size, display)
            with open(path, "rb") as handle:
                return handle.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            if site is None:
                raise InputError.at("file not found", file=display, hint="check the path") from None
            raise ref_error(
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


def ref_error(message: str, site: Where, hint: str | None = None) -> InputError:
    return InputError(Problem(message=message, location=site if isinstance(site, Location) else site(), hint=hint))
