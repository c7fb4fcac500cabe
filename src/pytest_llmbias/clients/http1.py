"""A lean HTTP/1.1 client for the direct transport's chat completions to plain-``http://`` endpoints.

A local inference server (vLLM, Ollama, llama.cpp, TGI, LM Studio) answers at ``http://`` on
the same machine or network, often in milliseconds, and a run asks it thousands of calls at high
concurrency: there the client's own CPU sets the pace. aiohttp spends about 0.2-0.3 ms of CPU on a
request (its request and response objects, header multidicts, URL objects, tracing hooks); this
client sends one ``POST`` with a ``Content-Length`` body on a kept-alive connection and reads one
response, for about a third of that. ``https://`` endpoints, requests with query parameters and
HTTP applications stay on aiohttp (TLS, redirects, cookies and the rest of HTTP are its job).

Promises, each tested against the local server:

- a response is framed by ``Content-Length``, by chunked transfer encoding, or by the connection's
  end; a connection is reused only after a complete HTTP/1.1 response that did not ask to close;
- a connection that was idle in the pool and is found closed before any byte of the answer came
  back is replaced once, at once (the server had closed it between requests); any other dropped
  connection, refused connect or cut body is a :class:`ConnectionError` for the caller's retries;
- ``timeout`` bounds the whole exchange, connect included; a timed-out or cancelled exchange's
  connection is closed, never reused (its answer may still arrive);
- header names and values with a line break are refused (no header injection).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmbias.store.kept import IdentityCache

#: statuses whose responses have no body
_NO_BODY = frozenset({204, 304})


@dataclass(frozen=True)
class HTTPResponse:
    status: int
    reason: str
    headers: Mapping[str, str]  # lower-case names; the last of a repeated header
    body: bytes


class _Connection(asyncio.Protocol):
    """One TCP connection: one request at a time, its response parsed as the bytes arrive."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._buf = bytearray()
        self._waiter: asyncio.Future[HTTPResponse] | None = None
        self._head: tuple[int, str, dict[str, str], bool] | None = None  # status, reason, headers, keep-alive
        self._received = False  # any byte of the current response
        self.reusable = False

    # -- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:  # bytes nobody asked for: the connection is not trusted again
            self._fail(ConnectionError("the server sent bytes outside an exchange"))
            return
        self._received = True
        self._buf += data
        try:
            self._parse(eof=False)
        except ValueError as exc:
            self._fail(ConnectionError(f"malformed HTTP response: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._waiter is not None and not self._waiter.done():
            try:
                if self._head is not None and not self._parse(eof=True):
                    raise ValueError("the body was cut short")
                if self._head is None:
                    raise ValueError("no response")
            except ValueError as err:
                self._waiter.set_exception(
                    ConnectionError(f"the server closed the connection: {err}" + (f" ({exc})" if exc else ""))
                )

    # -- one exchange ----------------------------------------------------------------------------

    def send(self, data: bytes) -> asyncio.Future[HTTPResponse]:
        assert self.transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self._head, self._received, self.reusable = None, False, False
        self.transport.write(data)
        return self._waiter

    @property
    def received(self) -> bool:
        return self._received

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _fail(self, exc: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)
        self.close()

    def _parse(self, *, eof: bool) -> bool:
        """Complete the waiter when the buffer holds the whole response; whether it did."""
        buf = self._buf
        while self._head is None:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > 65536:
                    raise ValueError("headers over 64 KiB")
                return False
            lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
            del buf[: end + 4]
            version, _, rest = lines[0].partition(" ")
            code, _, reason = rest.partition(" ")
            if not version.startswith("HTTP/1.") or not code.isdigit():
                raise ValueError(f"status line {lines[0][:80]!r}")
            status = int(code)
            if 100 <= status < 200:  # an interim response: the real one follows
                continue
            headers = {}
            for line in lines[1:]:
                name, sep, value = line.partition(":")
                if not sep:
                    raise ValueError(f"header line {line[:80]!r}")
                headers[name.strip().lower()] = value.strip()
            keep = version != "HTTP/1.0" and "close" not in headers.get("connection", "").lower()
            self._head = (status, reason, headers, keep)
        status, reason, headers, keep = self._head
        if status in _NO_BODY:
            body, rest_ok = b"", True
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            parsed = _chunked(buf)
            if parsed is None:
                return False
            body, used = parsed
            del buf[:used]
            rest_ok = True
        elif "content-length" in headers:
            length = int(headers["content-length"])
            if length < 0:
                raise ValueError("negative Content-Length")
            if len(buf) < length:
                return False
            body = bytes(buf[:length])
            del buf[:length]
            rest_ok = True
        else:  # the body runs to the connection's end
            if not eof:
                return False
            body, rest_ok, keep = bytes(buf), True, False
            buf.clear()
        self.reusable = keep and rest_ok and not buf and not self.closed
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(HTTPResponse(status, reason, headers, body))
        return True


def _chunked(buf: bytearray) -> tuple[bytes, int] | None:
    """(body, bytes used) of a complete chunked body at the start of ``buf``; None until complete."""
    out = bytearray()
    pos = 0
    while True:
        end = buf.find(b"\r\n", pos)
        if end < 0:
            return None
        size_text = bytes(buf[pos:end]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise ValueError(f"chunk size {size_text[:20]!r}") from None
        pos = end + 2
        if size == 0:  # trailers, then the blank line
            while True:
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    return None
                if end == pos:
                    return bytes(out), end + 2
                pos = end + 2
        if len(buf) < pos + size + 2:
            return None
        out += buf[pos : pos + size]
        if buf[pos + size : pos + size + 2] != b"\r\n":
            raise ValueError("a chunk not followed by CRLF")
        pos += size + 2


class HTTP1Pool:
    """Kept-alive connections per (host, port), on the running loop; :meth:`aclose` closes them."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        #: (head before the length, after it), by (host, port, target, id(headers))
        self._heads: IdentityCache[tuple[bytes, bytes]] = IdentityCache(256)

    async def post(
        self, host: str, port: int, target: str, headers: Mapping[str, str], body: bytes, timeout: float
    ) -> HTTPResponse:
        """``POST target`` with ``headers`` and ``body`` to ``host:port``, within ``timeout``
        seconds in all (:class:`asyncio.TimeoutError` past it). Raises :class:`ConnectionError`
        (or an :class:`OSError` of the connect) when no complete response came back."""
        memo = (host, port, target, id(headers))
        kept = self._heads.find(memo)
        if kept is not None and kept[0] is headers:
            opening, closing = kept[2]
        else:
            opening, closing = self._heads.put(memo, _head(host, port, target, headers), headers)
        data = b"".join((opening, b"%d" % len(body), closing, body))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        idle = self._idle.setdefault((host, port), [])
        while idle:
            conn = idle.pop()
            if conn.closed:
                continue
            try:
                return await self._use(loop, conn, idle, data, deadline)
            except ConnectionError:
                if conn.received:
                    raise
                # closed by the server while it was idle, before any byte of an answer: once more,
                # on a new connection
                break
        try:
            _, conn = await asyncio.wait_for(loop.create_connection(_Connection, host, port), deadline - loop.time())
        except asyncio.TimeoutError:  # the whole exchange's time ran out (an OSError too, from 3.11)
            raise
        except OSError as exc:
            raise ConnectionError(f"Cannot connect to host {host}:{port} ({type(exc).__name__}: {exc})") from exc
        return await self._use(loop, conn, idle, data, deadline)

    @staticmethod
    async def _use(
        loop: asyncio.AbstractEventLoop, conn: _Connection, idle: list[_Connection], data: bytes, deadline: float
    ) -> HTTPResponse:
        answer = conn.send(data)
        timer = loop.call_at(deadline, _expire, answer)
        try:
            response = await answer
        except BaseException:  # failed, timed out or cancelled: its answer may still come
            conn.close()
            raise
        finally:
            timer.cancel()
        if conn.reusable:
            idle.append(conn)
        else:
            conn.close()
        return response

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()


def _expire(answer: asyncio.Future[HTTPResponse]) -> None:
    if not answer.done():
        answer.set_exception(asyncio.TimeoutError())


def _head(host: str, port: int, target: str, headers: Mapping[str, str]) -> tuple[bytes, bytes]:
    """A request's head, before and after its ``Content-Length`` value: the request line, ``Host``,
    ``Content-Length``, then ``headers`` (their own ``Host`` and ``Content-Length`` left out);
    ValueError for a header with a line break."""
    lines = []
    for name, value in headers.items():
        line = f"{name}: {value}"
        if "\r" in line or "\n" in line:
            raise ValueError(f"header {name!r} holds a line break")
        if name.lower() not in ("host", "content-length"):
            lines.append(line)
    opening = f"POST {target} HTTP/1.1\r\nHost: {_host_header(host, port)}\r\nContent-Length: "
    closing = "".join("\r\n" + line for line in lines) + "\r\n\r\n"
    return opening.encode("utf-8"), closing.encode("utf-8")


def _host_header(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return shown if port == 80 else f"{shown}:{port}"
