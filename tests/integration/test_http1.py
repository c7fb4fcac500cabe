"""The lean HTTP/1.1 client of the direct transport, against raw HTTP servers on 127.0.0.1 that
answer as each test scripts them: framing, kept-alive connections, a connection the server
closed while idle, cut answers, timeouts, and the transport's choice of client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest

from pytest_llmbias.clients.http1 import HTTP1Pool
from pytest_llmbias.clients.openai_transport import OpenAITransport
from pytest_llmbias.errors import ProviderError
from pytest_llmbias.store.calls import ModelCall

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[bool]]


async def read_request(reader: asyncio.StreamReader) -> tuple[str, dict[str, str], bytes] | None:
    head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
    if not head:
        return None
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return lines[0], headers, body


class Server:
    """A raw server: ``handler(reader, writer, n)`` answers the n-th request of the process (from
    1) and says whether to keep the connection; ``connections`` counts the connections made."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.connections = 0

    async def __aenter__(self) -> Server:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    request = await read_request(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                if request is None:
                    return
                self.requests.append(request)
                keep = await self.handler(reader, writer, len(self.requests))
                await writer.drain()
                if not keep:
                    return
        finally:
            writer.close()


def reply(body: bytes, *head: str, status: str = "200 OK") -> bytes:
    lines = [f"HTTP/1.1 {status}", *head]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def run(coro: Awaitable[object]) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_framings_and_kept_alive_connections() -> None:
    """Content-Length, chunked (with an extension and a trailer) and an answer that runs to the
    connection's end; an interim 100 is skipped; a connection is reused after a complete
    HTTP/1.1 answer and not after one that asked to close."""

    async def handler(reader, writer, n):
        if n == 1:
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n" + reply(b"plain", "Content-Length: 5"))
            return True
        if n == 2:
            writer.write(reply(b"", "Transfer-Encoding: chunked") + b"3;x=y\r\nchu\r\n4\r\nnked\r\n0\r\nT: 1\r\n\r\n")
            return True
        if n == 3:
            writer.write(reply(b"closing", "Content-Length: 7", "Connection: close"))
            return False
        writer.write(b"HTTP/1.0 200 OK\r\n\r\nto the end")
        return False

    async def main():
        async with Server(handler) as server:
            pool = HTTP1Pool()
            got = [await pool.post("127.0.0.1", server.port, "/v1/x", {"A": "b"}, b"{}", 5) for _ in range(4)]
            await pool.aclose()
            return server, got

    server, got = run(main())
    assert [r.body for r in got] == [b"plain", b"chunked", b"closing", b"to the end"]
    assert [r.status for r in got] == [200] * 4 and got[0].reason == "OK"
    assert server.connections == 2  # the first three on one connection, the last after the close
    line, headers, body = server.requests[0]
    assert line == "POST /v1/x HTTP/1.1" and headers["host"] == f"127.0.0.1:{server.port}"
    assert headers["a"] == "b" and headers["content-length"] == "2" and body == b"{}"


def test_a_connection_closed_while_idle_is_replaced_once_and_a_cut_answer_is_an_error() -> None:
    async def handler(reader, writer, n):
        if n in (1, 3):
            writer.write(reply(f"ok {n}".encode(), "Content-Length: 4"))
            return True
        if n == 4:
            writer.write(reply(b"cut", "Content-Length: 10"))  # 3 of 10 bytes, then the end
            return False
        return False  # 2 and 5: the connection closed instead of an answer

    async def main():
        async with Server(handler) as server:
            pool = HTTP1Pool()
            first = await pool.post("127.0.0.1", server.port, "/", {}, b"", 5)
            # the kept connection is closed by the server instead of answering: asked again at
            # once on a new connection
            second = await pool.post("127.0.0.1", server.port, "/", {}, b"", 5)
            errors = []
            for _ in range(2):  # a cut answer; no answer on a new connection: errors, not asked again
                with pytest.raises(ConnectionError) as info:
                    await pool.post("127.0.0.1", server.port, "/", {}, b"", 5)
                errors.append(str(info.value))
            await pool.aclose()
            return server, first, second, errors

    server, first, second, errors = run(main())
    assert (first.body, second.body) == (b"ok 1", b"ok 3")
    assert "the body was cut short" in errors[0] and "no response" in errors[1]
    assert len(server.requests) == 5 and server.connections == 3


def test_a_timeout_closes_the_connection_and_a_malformed_answer_is_an_error() -> None:
    async def handler(reader, writer, n):
        if n == 1:
            await asyncio.sleep(1.0)  # past the client's timeout
            writer.write(reply(b"late", "Content-Length: 4"))
            return True
        if n == 2:
            writer.write(b"SPDY/3 200 OK\r\n\r\n")
            return True
        writer.write(reply(b"fine", "Content-Length: 4"))
        return True

    async def main():
        async with Server(handler) as server:
            pool = HTTP1Pool()
            with pytest.raises(asyncio.TimeoutError):
                await pool.post("127.0.0.1", server.port, "/", {}, b"", 0.2)
            with pytest.raises(ConnectionError, match="malformed HTTP response: status line"):
                await pool.post("127.0.0.1", server.port, "/", {}, b"", 5)
            with pytest.raises(ValueError, match="line break"):
                await pool.post("127.0.0.1", server.port, "/", {"X": "a\r\nInjected: 1"}, b"", 5)
            fine = await pool.post("127.0.0.1", server.port, "/", {}, b"", 5)
            await pool.aclose()
            return server, fine

    server, fine = run(main())
    assert fine.body == b"fine"
    assert server.connections == 3  # neither the timed-out nor the malformed connection was reused
    assert all("injected" not in h for _, h, _ in server.requests)


def test_the_transport_takes_the_lean_client_for_plain_http_and_aiohttp_otherwise() -> None:
    """Its errors read as aiohttp's path reads them: the status, the server's message, whether a
    retry can help and Retry-After."""
    answer = {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 2}}

    async def handler(reader, writer, n):
        if n == 2:
            body = json.dumps({"error": {"message": "slow down"}}).encode()
            writer.write(reply(body, f"Content-Length: {len(body)}", "Retry-After: 3", status="429 Too Many Requests"))
            return True
        if n == 3:
            writer.write(
                reply(b"", "Location: http://elsewhere/v1", "Content-Length: 0", status="307 Temporary Redirect")
            )
            return True
        body = json.dumps(answer).encode()
        writer.write(reply(body, f"Content-Length: {len(body)}"))
        return True

    call = ModelCall(model="openai/m", api_base=None, messages=(("user", "hello"),), params={"temperature": 0})

    async def main():
        async with Server(handler) as server:
            base = f"http://127.0.0.1:{server.port}/v1"
            transport = OpenAITransport()
            done = await transport.complete(call, {}, api_base=base, api_key="sk-x", timeout=5)
            lean = transport._pool is not None and transport._session is None
            errors = []
            for _ in range(2):
                with pytest.raises(ProviderError) as info:
                    await transport.complete(call, {}, api_base=base, api_key="sk-x", timeout=5)
                errors.append(info.value)
            # with query parameters: aiohttp
            queried = await transport.complete(
                call, {"extra_query": {"v": "1"}}, api_base=base, api_key=None, timeout=5
            )
            await transport.aclose()
            return server, done, lean, errors, queried, transport.open

    server, done, lean, errors, queried, still_open = run(main())
    assert done.text == "hi" and done.prompt_tokens == 2 and lean
    assert errors[0].status == 429 and "slow down" in str(errors[0]) and errors[0].retryable
    assert errors[0].retry_after == 3
    assert errors[1].status == 307 and not errors[1].retryable and "http://elsewhere/v1" in str(errors[1])
    assert queried.text == "hi" and server.requests[-1][0] == "POST /v1/chat/completions?v=1 HTTP/1.1"
    line, headers, body = server.requests[0]
    assert line == "POST /v1/chat/completions HTTP/1.1" and headers["authorization"] == "Bearer sk-x"
    assert json.loads(body) == {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
    assert not still_open


def test_a_lean_request_from_kept_parts_reaches_the_server_whole_in_utf8() -> None:
    """Two calls of one model and parameters, written from the parts the transport keeps: each
    body is the request's JSON, text that is not ASCII sent as UTF-8 (its Content-Length counts
    bytes), the headers the same for both."""
    answer = {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}

    async def handler(reader, writer, n):
        body = json.dumps(answer).encode()
        writer.write(reply(body, f"Content-Length: {len(body)}"))
        return True

    params = {"temperature": 0.0, "seed": 7, "extra_headers": {"X-Team": "bias"}, "extra_body": {"top_k": 5}}
    prompts = ['Grüße, "quoted" \\ and\nnewline \u2028 漢字 🙂', "plain ascii"]
    calls = [ModelCall(model="openai/m", api_base=None, messages=(("user", p),), params={}) for p in prompts]

    async def main():
        async with Server(handler) as server:
            base = f"http://127.0.0.1:{server.port}/v1"
            transport = OpenAITransport()
            done = [await transport.complete(c, params, api_base=base, api_key="sk-x", timeout=5) for c in calls]
            await transport.aclose()
            return server, done

    server, done = run(main())
    assert [d.text for d in done] == ["ok", "ok"]
    for (_, headers, body), prompt in zip(server.requests, prompts, strict=True):
        assert json.loads(body.decode("utf-8")) == {
            "model": "m",
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0.0,
            "seed": 7,
            "top_k": 5,
        }
        assert int(headers["content-length"]) == len(body)
        assert headers["x-team"] == "bias" and headers["authorization"] == "Bearer sk-x"
    assert "漢字".encode() in server.requests[0][2] and b"\\u" not in server.requests[0][2]


def test_nothing_listening_reads_as_an_unreachable_server() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    call = ModelCall(model="openai/m", api_base=None, messages=(("user", "hello"),), params={})

    async def main():
        transport = OpenAITransport()
        try:
            with pytest.raises(ProviderError) as info:
                await transport.complete(call, {}, api_base=f"http://127.0.0.1:{port}/v1", api_key=None, timeout=5)
        finally:
            await transport.aclose()
        return info.value

    error = run(main())
    assert error.retryable and f"Cannot connect to host 127.0.0.1:{port}" in str(error)


def test_the_timeout_covers_the_connect() -> None:
    """A listener whose backlog is full holds a new connect (Linux drops its SYNs): the exchange's
    timeout ends it as a timeout, not as a server that cannot be reached."""
    import socket
    import time

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    filling = []
    for _ in range(4):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        filling.append(s)
    time.sleep(0.1)

    async def main():
        try:
            await HTTP1Pool().post("127.0.0.1", port, "/", {}, b"", 0.5)
        except (asyncio.TimeoutError, ConnectionError) as exc:
            return exc
        return None

    try:
        error = run(main())
    finally:
        for s in (*filling, listener):
            s.close()
    if not isinstance(error, asyncio.TimeoutError) and isinstance(error, ConnectionError):
        pytest.skip("this platform refuses a connect to a full backlog instead of holding it")
    assert isinstance(error, asyncio.TimeoutError)
