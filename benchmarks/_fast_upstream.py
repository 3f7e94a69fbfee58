"""A fast petstore upstream for benchmarks/server_cpu.py: `GET /pets/{id}` of the seeded pets, nothing else.

    python benchmarks/_fast_upstream.py [--port 0]      # prints its base URL, then serves

The example upstream (`python -m examples petstore`) validates every request against its spec
in Starlette and would cost more CPU per call than some of the MCP servers measured; this one
answers from bytes built once (the same JSON as the example's getPet: `_pet_out` of the seeded
store) on a bare asyncio protocol with keep-alive, so it is never what limits the load. Anything
else is answered 404 with the example's error shape. HTTP/1.1 only as far as httpx2 needs:
Content-Length bodies, no chunked requests, no pipelining beyond what arrives in one read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from examples.petstore.app import PetStore, _pet_out


def _response(status: bytes, body: bytes) -> bytes:
    return (b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


PETS = {f"/pets/{pid}".encode(): _response(b"200 OK", json.dumps(_pet_out(pet), separators=(",", ":")).encode())
        for pid, pet in PetStore.seeded().pets.items()}
NOT_FOUND = _response(b"404 Not Found", b'{"error":{"code":"NOT_FOUND","message":"no such path"}}')


class Http(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end]
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length:]
            parts = head.split(b" ", 2)
            target = parts[1].split(b"?", 1)[0] if len(parts) > 1 else b""
            self.transport.write(PETS.get(target, NOT_FOUND) if parts[0] == b"GET" else NOT_FOUND)


async def serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    sock = socket.create_server(("127.0.0.1", port), backlog=1024)
    server = await loop.create_server(Http, sock=sock)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    try:
        import uvloop  # the cheapest loop there is, when installed

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    try:
        run(serve(args.port))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
