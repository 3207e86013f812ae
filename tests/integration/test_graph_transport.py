"""The Graph client over real sockets: what it says about a call that got no answer.

Whether the request may have reached Meta decides between retrying a send and holding it as
UNCONFIRMED, so each way a call can end without an answer is provoked on a real connection: a
port nobody listens on, a pool with no free connection, a server that reads the request and
closes, one that never answers. None of them may repeat a token or secret from the URL.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from app.instagram.graph import GraphApiError, GraphClient, GraphTransportError

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
SECRET = "app-secret-that-must-not-leak"


@asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    """A local HTTP server run by `handler`; yields its Graph base URL. Its connections are
    ended with it, so no handler outlives the test."""
    handlers: set[asyncio.Task[None]] = set()

    async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        try:
            await handler(reader, writer)
        except asyncio.CancelledError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(tracked, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v25.0"
    finally:
        server.close()
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    return head + (await reader.readexactly(length) if length else b"")


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_a_refused_connection_was_never_sent() -> None:
    graph = GraphClient.create(f"http://127.0.0.1:{unused_port()}/v25.0", timeout_s=2)
    try:
        with pytest.raises(GraphTransportError) as raised:
            await graph.send_message("token", "1784", {"recipient": {"comment_id": "1"}})
    finally:
        await graph.aclose()
    assert raised.value.request_sent is False


async def test_a_request_read_then_dropped_may_have_been_sent() -> None:
    received: list[bytes] = []

    async def read_and_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await read_request(reader))
        writer.close()

    async with serving(read_and_close) as base:
        graph = GraphClient.create(base, timeout_s=5)
        try:
            with pytest.raises(GraphTransportError) as raised:
                await graph.send_message("token", "1784", {"recipient": {"comment_id": "1"}})
        finally:
            await graph.aclose()
    assert raised.value.request_sent is True
    assert received, "the server got the request"
    assert b"POST /v25.0/1784/messages" in received[0]
    assert len(received) == 1, "a POST is never resent by the client"


async def test_no_answer_in_time_may_have_been_sent_and_says_it_timed_out() -> None:
    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(30)

    async with serving(never_answer) as base:
        graph = GraphClient.create(base, timeout_s=0.5)
        try:
            with pytest.raises(GraphTransportError) as raised:
                await graph.send_message("token", "1784", {"recipient": {"comment_id": "1"}})
        finally:
            await graph.aclose()
    assert raised.value.request_sent is True
    assert "Timeout" in raised.value.kind


async def test_waiting_for_a_free_connection_in_vain_was_never_sent_and_leaks_no_secret() -> None:
    first_in = asyncio.Event()

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        first_in.set()
        await asyncio.sleep(30)

    async with serving(hold) as base:
        graph = GraphClient.create(base, timeout_s=5, max_connections=1)
        try:
            holder = asyncio.create_task(graph.request("GET", "me", token="token"))
            await asyncio.wait_for(first_in.wait(), timeout=30)
            with pytest.raises(GraphTransportError) as raised:
                await graph.request(
                    "GET",
                    "access_token",
                    token=None,
                    params={"client_secret": SECRET, "access_token": SECRET},
                    timeout_s=0.5,
                )
            holder.cancel()
            await asyncio.gather(holder, return_exceptions=True)
        finally:
            await graph.aclose()
    assert raised.value.request_sent is False
    assert SECRET not in str(raised.value)
    assert SECRET not in raised.value.detail


async def test_an_error_answer_keeps_metas_code_and_usage() -> None:
    body = b'{"error":{"code":4,"error_subcode":2534040,"message":"Too many calls"}}'
    usage = b'{"ig-1":[{"type":"messenger","estimated_time_to_regain_access":7}]}'

    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(
            b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
            b"X-Business-Use-Case-Usage: " + usage + b"\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        await writer.drain()
        writer.close()

    async with serving(refuse) as base:
        graph = GraphClient.create(base, timeout_s=5)
        try:
            with pytest.raises(GraphApiError) as raised:
                await graph.send_message("token", "1784", {"recipient": {"comment_id": "1"}})
        finally:
            await graph.aclose()
    assert (raised.value.http_status, raised.value.code, raised.value.subcode) == (400, 4, 2534040)
    assert raised.value.usage.regain_access_minutes == 7


async def test_the_proxy_the_environment_names_carries_the_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    received: list[bytes] = []
    body = b'{"recipient_id":"9","message_id":"m_1"}'

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await read_request(reader))
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        await writer.drain()

    async with serving(proxy) as proxy_base:
        for name in ("http_proxy", "NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy_base.rsplit("/", 1)[0])
        graph = GraphClient.create("http://graph.example.invalid/v25.0", timeout_s=5)
        try:
            sent = await graph.send_message("token", "1784", {"recipient": {"comment_id": "1"}})
        finally:
            await graph.aclose()
    assert sent.message_id == "m_1"
    assert received[0].startswith(b"POST http://graph.example.invalid/v25.0/1784/messages ")
