"""Debian's ``redis-server`` for the team store's tests: started on a free port of 127.0.0.1, its
data in a temporary folder (append-only file, fsync on every write, so a restart keeps what it
held), stopped at the end. Nothing stands in for the real server.

``with RedisServer(tmp_path) as r: r.url`` — and ``r.restart()``, ``r.stop()``, ``r.start()``.
``RedisServer(tmp_path, tls=ThrowawayCertificates.make(tmp_path))`` listens for TLS only (``rediss://``).
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.processes import stop


def redis_server_path() -> str:
    path = shutil.which("redis-server")
    if path is None:
        raise RuntimeError(
            "redis-server is not installed: apt-get install redis-server (the README's test command does)"
        )
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class ThrowawayCertificates:
    """A throwaway certificate authority and a server certificate it signed for 127.0.0.1 (PEM
    files), made with the ``openssl`` command line."""

    ca: Path
    cert: Path
    key: Path

    @classmethod
    def make(cls, directory: Path) -> ThrowawayCertificates:
        openssl = shutil.which("openssl")
        if openssl is None:
            raise RuntimeError("the openssl command is not installed")
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

        def run(*args: str) -> None:
            subprocess.run([openssl, *args], check=True, capture_output=True)

        run(
            "req",
            "-x509",
            *ec,
            "-keyout",
            str(d / "ca.key"),
            "-out",
            str(d / "ca.pem"),
            "-days",
            "2",
            "-subj",
            "/CN=llmbias test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        )
        run("req", *ec, "-keyout", str(d / "server.key"), "-out", str(d / "server.csr"), "-subj", "/CN=127.0.0.1")
        (d / "server.ext").write_text(
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
            "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
            "authorityKeyIdentifier=keyid\nsubjectKeyIdentifier=hash\n"
        )
        run(
            "x509",
            "-req",
            "-in",
            str(d / "server.csr"),
            "-CA",
            str(d / "ca.pem"),
            "-CAkey",
            str(d / "ca.key"),
            "-CAcreateserial",
            "-out",
            str(d / "server.pem"),
            "-days",
            "2",
            "-extfile",
            str(d / "server.ext"),
        )
        return cls(ca=d / "ca.pem", cert=d / "server.pem", key=d / "server.key")


class RedisServer:
    """A ``redis-server`` process on 127.0.0.1; ``extra`` are further ``--name value`` settings
    (``{"maxmemory": "2mb"}``); with ``tls``, it takes TLS connections only, on its port."""

    def __init__(
        self, directory: Path, *, extra: dict[str, str] | None = None, tls: ThrowawayCertificates | None = None
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.extra = dict(extra or {})
        self.tls = tls
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{'rediss' if self.tls else 'redis'}://127.0.0.1:{self.port}/0"

    @property
    def log(self) -> Path:
        return self.directory / "redis.log"

    def start(self) -> RedisServer:
        ports = ["--port", str(self.port)]
        if self.tls is not None:
            ports = [
                "--port",
                "0",
                "--tls-port",
                str(self.port),
                "--tls-cert-file",
                str(self.tls.cert),
                "--tls-key-file",
                str(self.tls.key),
                "--tls-ca-cert-file",
                str(self.tls.ca),
                "--tls-auth-clients",
                "no",
            ]
        args = [
            redis_server_path(),
            *ports,
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory),
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--protected-mode",
            "no",
            "--logfile",
            str(self.log),
        ]
        for name, value in self.extra.items():
            args += [f"--{name}", value]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                with self._connect() as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith((b"+PONG", b"-NOAUTH")):  # up (with a password or not)
                        return self
            except OSError:
                time.sleep(0.05)
        why = self.process.stderr.read().decode(errors="replace") if self.process.poll() is not None else ""
        self.stop()
        raise RuntimeError(f"redis-server did not start on port {self.port}: {why.strip()}")

    def _connect(self) -> socket.socket:
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=0.5)
        if self.tls is None:
            return raw
        return ssl.create_default_context(cafile=str(self.tls.ca)).wrap_socket(raw, server_hostname="127.0.0.1")

    def stop(self) -> None:
        stop(self.process)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def client(self):
        import redis

        return redis.Redis.from_url(self.url, **({"ssl_ca_certs": str(self.tls.ca)} if self.tls else {}))

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
