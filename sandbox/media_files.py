"""``/_media/<name>``: images (and a few things that are not) for the DM image tests.

Meta fetches a DM's image from its URL; these stand in for the creator's image host, so the
product's image check and the Send API's fetch meet real HTTP answers. HEAD answers the
headers alone, with the size the body would have:

| name | answer |
|---|---|
| ``cover.png`` | a 1×1 PNG |
| ``cover.gif`` | a 1×1 GIF |
| ``huge.jpg`` | ``image/jpeg`` of 9 MB (past Instagram's 8 MB) |
| ``page.html`` | an HTML page, not an image |
| ``no-head.png`` | the PNG, but HEAD is 405 (the check falls back to a ranged GET) |
| ``slow.png`` | the PNG after 30 seconds (a host that does not answer in time) |
| anything else | 404 |
"""

from __future__ import annotations

import asyncio
import base64

from litestar import asgi
from litestar.types import HTTPResponseBodyEvent, HTTPResponseStartEvent, Receive, Scope, Send

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
GIF = base64.b64decode("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")
HUGE_BYTES = 9 * 1024 * 1024
SLOW_S = 30.0
_CHUNK = b"\0" * 65536


async def _answer(
    send: Send, status: int, content_type: str, size: int, body: bytes | None, *, head: bool
) -> None:
    headers: list[tuple[bytes, bytes]] = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(size).encode()),
    ]
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": status,
        "headers": headers,
    }
    await send(start)
    if head or body is not None:
        whole: HTTPResponseBodyEvent = {
            "type": "http.response.body",
            "body": b"" if head else (body or b""),
            "more_body": False,
        }
        await send(whole)
        return
    sent = 0
    while sent < size:
        part = _CHUNK[: size - sent]
        sent += len(part)
        chunk: HTTPResponseBodyEvent = {
            "type": "http.response.body",
            "body": part,
            "more_body": sent < size,
        }
        await send(chunk)


@asgi("/_media", name="media_file", is_mount=True, include_in_schema=False)
async def media_file(scope: Scope, receive: Receive, send: Send) -> None:
    method = str(scope.get("method", "GET"))
    # Mounted: the path is what follows /_media.
    name = str(scope.get("path", "")).strip("/")
    head = method == "HEAD"
    if method not in ("GET", "HEAD"):
        await _answer(send, 405, "text/plain", 0, b"", head=False)
    elif name == "cover.png":
        await _answer(send, 200, "image/png", len(PNG), PNG, head=head)
    elif name == "cover.gif":
        await _answer(send, 200, "image/gif", len(GIF), GIF, head=head)
    elif name == "huge.jpg":
        await _answer(send, 200, "image/jpeg", HUGE_BYTES, None, head=head)
    elif name == "page.html":
        page = b"<!doctype html><title>Not an image</title>"
        await _answer(send, 200, "text/html; charset=utf-8", len(page), page, head=head)
    elif name == "slow.png":
        await asyncio.sleep(SLOW_S)
        await _answer(send, 200, "image/png", len(PNG), PNG, head=head)
    elif name == "no-head.png":
        if head:
            await _answer(send, 405, "text/plain", 0, b"", head=True)
        else:
            await _answer(send, 200, "image/png", len(PNG), PNG, head=False)
    else:
        await _answer(send, 404, "text/plain", 9, b"not found", head=head)
