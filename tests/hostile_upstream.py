"""A hostile upstream: a raw asyncio HTTP/1.1 server on 127.0.0.1 that reflects its whole request.

What a red team points openapi2mcp at. It is raw asyncio rather than a framework, so that it can
answer what frameworks refuse to produce (a redirect without a `Location`, one that is no URL,
an unknown charset, JSON nested 100,000 deep, `NaN`) and reflect the exact bytes it received.

Routes (`?as=` picks the reflection's form; `ct=` overrides the content type):

* `/reflect`: the whole request (request line, headers, body), answered with `?status=` (200;
  any other status quotes the request in the error's `message`) as
  - `json` (default): one object holding the request in every encoding an ordinary upstream
    uses: raw, percent-decoded, `quote`d, `quote_plus`ed, lower-case hex, JSON with `\\uXXXX`
    and `\\/` escapes, HTML entities, base64 (standard and URL-safe, at every byte alignment);
    plus the headers and decoded query arguments;
  - `octet` (application/octet-stream), `ndjson` (application/x-ndjson, one line per header),
    `png` (a PNG signature, then the request), `text`, `html` (entities);
* `/hop`: a same-origin 302 to `/reflect` (what arrives after a redirect);
* `/paged`: a page of two items whose `X-Next-Cursor` and `Link` echo the request's query;
* `/location?v=...`: a 302 whose `Location` is `v` byte for byte; without `v`, no `Location`;
* `/deep?n=N&kind=array|object`: JSON nested N deep;
* `/charset?cs=NAME`: text/plain (or `ct`) declaring that charset (`latin1=1`: a body not UTF-8);
* `/nan`: JSON with NaN and Infinity, as Python's json module writes them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import html
import json
import re
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, unquote_plus, urlsplit

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def encodings(raw: bytes) -> dict[str, Any]:
    """The request in every form an ordinary upstream might echo it."""
    text = raw.decode("utf-8", "replace")
    return {
        "raw": text,
        "decoded": unquote_plus(text),
        "quoted": quote(text, safe=""),
        "quoted_plus": quote_plus(text, safe=""),
        "quoted_lower": re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), quote(text, safe="")),
        "json_ascii": json.dumps(text).replace("/", "\\/"),
        "html": html.escape(text, quote=True).replace("+", "&#43;").replace("/", "&#x2F;"),
        "b64": [base64.b64encode(b"\0" * k + raw).decode() for k in range(3)],
        "b64url": [base64.urlsafe_b64encode(b"\0" * k + raw).decode() for k in range(3)],
    }


def _parse(head: bytes) -> tuple[str, str, list[tuple[str, str]]]:
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    pairs = [line.split(":", 1) for line in lines[1:] if ":" in line]
    return method, target, [(k.strip(), v.strip()) for k, v in pairs]


def _response(status: int, body: bytes = b"", ct: str | None = "application/json",
              extra: list[tuple[str, bytes]] | None = None) -> bytes:
    reason = {200: b"OK", 302: b"Found", 400: b"Bad Request", 401: b"Unauthorized"}.get(status, b"Status")
    out = [b"HTTP/1.1 %d %s" % (status, reason), b"Content-Length: %d" % len(body), b"Connection: close"]
    if ct is not None:
        out.append(b"Content-Type: " + ct.encode("latin-1"))
    out += [name.encode() + b": " + value for name, value in extra or []]
    return b"\r\n".join(out) + b"\r\n\r\n" + body


def answer(method: str, target: str, headers: list[tuple[str, str]], raw: bytes) -> bytes:
    url = urlsplit(target)
    args = dict(parse_qsl(url.query, keep_blank_values=True))
    ct = args.get("ct")
    path = url.path
    if path.startswith("/reflect"):
        form = args.get("as", "json")
        if form == "octet":
            return _response(200, raw, ct or "application/octet-stream")
        if form == "ndjson":
            lines = [json.dumps({"name": k, "value": v}) for k, v in headers]
            lines.append(json.dumps({"target": target}))
            return _response(200, "\n".join(lines).encode() + b"\n", ct or "application/x-ndjson")
        if form == "png":
            return _response(200, PNG_SIGNATURE + raw, ct or "image/png")
        if form == "text":
            return _response(200, raw, ct or "text/plain; charset=utf-8")
        if form == "html":
            page = f"<html><body><pre>{html.escape(raw.decode('utf-8', 'replace'))}</pre></body></html>"
            return _response(200, page.encode(), ct or "text/html")
        document = {"method": method, "target": target, "headers": dict(headers),
                    "args": dict(parse_qsl(url.query)), **encodings(raw)}
        if "status" in args:  # an error that quotes the request in its message
            document = {"message": f"refused: {raw.decode('utf-8', 'replace')}", "request": document}
        return _response(int(args.get("status", "200")), json.dumps(document).encode(), ct or "application/json")
    if path == "/paged":  # one page; the next-page cursor and link echo the request's query
        items = json.dumps({"items": [1, 2]}).encode()
        link = b"</paged?page=2&" + url.query.encode() + b'>; rel="next"'
        return _response(200, items, "application/json", [("X-Next-Cursor", url.query.encode()), ("Link", link)])
    if path == "/hop":
        return _response(302, b"", None, [("Location", b"/reflect?" + url.query.encode())])
    if path == "/location":
        where = [("Location", args["v"].encode("utf-8", "surrogateescape"))] if "v" in args else []
        return _response(302, b"", None, where)
    if path == "/deep":
        n = int(args.get("n", "1000"))
        body = b'{"a":' * n + b"1" + b"}" * n if args.get("kind") == "object" else b"[" * n + b"]" * n
        return _response(200, body, ct or "application/json")
    if path == "/charset":  # `latin1=1`: a body that is not UTF-8
        body = "caf\u00e9 ok".encode("latin-1" if args.get("latin1") else "utf-8")
        return _response(200, body, ct or f"text/plain; charset={args.get('cs', 'x-unknown')}")
    if path == "/nan":
        return _response(200, b'{"ratio": NaN, "big": Infinity, "small": -Infinity, "ok": 1}', ct or "application/json")
    return _response(404, b'{"message": "no such route"}')


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        method, target, headers = _parse(head[:-4])
        length = next((int(v) for k, v in headers if k.lower() == "content-length"), 0)
        body = await reader.readexactly(length) if length else b""
        writer.write(answer(method, target, headers, head + body))
        await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, ValueError):
        pass
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


@contextlib.contextmanager
def serve_hostile() -> Iterator[str]:
    """Run the hostile upstream on a free port of 127.0.0.1 in a thread; yields its base URL."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def start() -> None:
        holder["server"] = await asyncio.start_server(_handle, "127.0.0.1", 0)
        ready.set()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("the hostile upstream did not start")
    server: asyncio.Server = holder["server"]
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        async def stop() -> None:
            server.close()
            await server.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


if __name__ == "__main__":  # python -m tests.hostile_upstream: serve until interrupted
    with serve_hostile() as base:
        print(base, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
