"""A real redis-server for the shared-state tests: Debian's package, unpacked by .ci/redis.sh.

`RedisServer.start()` runs it on a free port of 127.0.0.1 with a password, no persistence and its
own folder, and waits until it answers PING. `stop()` and `start_again()` (the same port) let a
test take the store away mid-run and bring it back. Nothing is mocked.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.local import ROOT, free_port

IN_CI = bool(os.environ.get("CI"))
PASSWORD = "redis-test-password-Zx81"  # a secret: the tests check it never shows


def redis_binary() -> tuple[str, dict[str, str]]:
    """(redis-server, its environment): from PATH, or .cache/redis (unpacking it there first when needed)."""
    found = shutil.which("redis-server")
    if found:
        return found, {}
    done = subprocess.run([str(ROOT / ".ci" / "redis.sh")], capture_output=True, text=True, timeout=300, check=False)
    path = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    if done.returncode != 0 or not Path(path).is_file():
        message = f".ci/redis.sh could not provide redis-server: {done.stderr[-500:]}"
        if IN_CI:
            raise RuntimeError(message)
        pytest.skip(message)
    libs = sorted(Path(path).parents[1].glob("lib/*-linux-gnu"))
    return path, {"LD_LIBRARY_PATH": str(libs[0])} if libs else {}


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key (the CA a TLS client is given), made with cryptography."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "redis.crt", folder / "redis.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


class RedisServer:
    def __init__(self, folder: Path, password: str = PASSWORD, *, tls: bool = False) -> None:
        self.folder = folder
        self.password = password
        self.port = free_port()
        self.binary, self.env = redis_binary()
        self.process: subprocess.Popen[bytes] | None = None
        self.tls = self_signed(folder) if tls else None

    @property
    def url(self) -> str:
        if self.tls:
            return f"rediss://:{self.password}@127.0.0.1:{self.port}/0?ssl_ca_certs={self.tls[0]}"
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def _listen(self) -> list[str]:
        if not self.tls:
            return ["--port", str(self.port)]
        cert, key = self.tls
        return ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", str(cert), "--tls-key-file", str(key),
                "--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no"]

    def _connect(self, timeout: float) -> socket.socket:
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        if not self.tls:
            return raw
        import ssl

        return ssl.create_default_context(cafile=str(self.tls[0])).wrap_socket(raw, server_hostname="127.0.0.1")

    def start_again(self, timeout: float = 20) -> None:
        """Start (or restart) on the same port, with an empty data set."""
        assert self.process is None
        log = (self.folder / "redis.log").open("ab")
        self.process = subprocess.Popen(
            [self.binary, *self._listen(), "--bind", "127.0.0.1", "--requirepass", self.password,
             "--save", "", "--appendonly", "no", "--dir", str(self.folder), "--protected-mode", "yes"],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **self.env}, cwd=self.folder)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, (self.folder / "redis.log").read_text()[-2000:]
            if self.ping():
                return
            time.sleep(0.05)
        raise AssertionError(f"redis-server did not answer on {self.port}")

    def ping(self) -> bool:
        """PING over a raw socket (AUTH first): the test's own view, not the client under test."""
        try:
            with self._connect(1) as s:
                s.sendall(f"AUTH {self.password}\r\nPING\r\n".encode())
                data = b""
                while b"PONG" not in data and len(data) < 200:
                    chunk = s.recv(100)
                    if not chunk:
                        break
                    data += chunk
                return b"+PONG" in data
        except OSError:
            return False

    def command(self, *words: str) -> str:
        """One command's raw reply (e.g. FLUSHALL, DBSIZE), through redis-cli-free RESP."""
        request = "".join(f"${len(w.encode())}\r\n{w}\r\n" for w in ("AUTH", self.password))
        request = f"*2\r\n{request}" + f"*{len(words)}\r\n" + "".join(f"${len(w.encode())}\r\n{w}\r\n" for w in words)
        with self._connect(2) as s:
            s.sendall(request.encode())
            time.sleep(0.05)
            return s.recv(65536).decode().split("\r\n", 1)[1]

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None


@contextlib.contextmanager
def redis_server(folder: Path, *, tls: bool = False) -> Iterator[RedisServer]:
    server = RedisServer(folder, tls=tls)
    server.start_again()
    try:
        yield server
    finally:
        server.stop()
